//! Budgets at decision time, and what a keeper of their counts needs to know.
//!
//! A `per batch` budget is judged from the batch alone. A budget over several batches
//! (`per turn`, `session`, `principal`, `tenant`, with an optional `within` window) is judged
//! from `facts.spent.NAME`, what its scope has consumed so far, which whoever keeps the
//! counts supplies (the decision server). The engine keeps no state and reads no clock: the
//! response's `spent` says what the batch's allowed calls consumed, and the keeper adds it
//! to its book. A budget whose count is not given denies: unsure how much is left, the
//! engine assumes nothing is. A leaf: the policy's accessors (`Policy::budgets`,
//! `Policy::keeps_counts`) are in `policy.rs`, so this module imports nothing of the crate.

use std::time::Duration;
pub use toolgate_lang::ast::BudgetScope;

/// The scope and window in words: `in one batch`, `per session within 1h`.
pub(crate) fn per_text(scope: BudgetScope, within: Option<toolgate_lang::ast::Duration>) -> String {
    let base = match scope {
        BudgetScope::Batch => "in one batch".to_string(),
        BudgetScope::Turn => "in one user turn".to_string(),
        other => format!("per {}", other.as_str()),
    };
    match within {
        Some(w) => format!("{base} within {w}"),
        None => base,
    }
}

/// Why a budget over batches cannot be judged: its count was not given.
pub(crate) fn unknown_count(name: &str) -> String {
    format!("how much of it is used is not known (`facts.spent.{name}` is missing)")
}

/// Why a call's amount at `path` (the argument `sum` reads) cannot be counted.
pub(crate) fn bad_amount(path: &str) -> String {
    format!("`{path}` must be a number of at least 0 for the budget to count it")
}

/// Whether `n` can be a budget's count or amount: finite and at least 0.
pub(crate) fn valid_count(n: f64) -> bool {
    n.is_finite() && n >= 0.0
}

/// One budget of a policy, as a keeper of counts sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget<'p> {
    /// The budget's name: the key of `facts.spent` and of a response's `spent`.
    pub name: &'p str,
    /// Whose calls it counts together.
    pub scope: BudgetScope,
    /// `within`: the sliding window the count covers; `None` counts over the whole scope
    /// (a turn, a session).
    pub window: Option<Duration>,
    /// The most its scope may consume in the window.
    pub max: f64,
}

/// Budgets whose batch consumption is kept on the stack; a policy with more spills the rest
/// to the heap, on first use.
const INLINE: usize = 8;

/// What a batch's allowed calls consumed so far, per budget index: no allocation for the
/// first [`INLINE`] budgets.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    inline: [f64; INLINE],
    rest: Vec<f64>,
}

impl Tally {
    /// Budget `index`'s consumption.
    #[inline]
    pub(crate) fn get(&self, index: usize) -> f64 {
        match index.checked_sub(INLINE) {
            None => self.inline[index],
            Some(i) => self.rest.get(i).copied().unwrap_or(0.0),
        }
    }

    /// Adds `amount` to budget `index`'s consumption.
    #[inline]
    pub(crate) fn add(&mut self, index: usize, amount: f64) {
        match index.checked_sub(INLINE) {
            None => self.inline[index] += amount,
            Some(i) => {
                if self.rest.len() <= i {
                    self.rest.resize(i + 1, 0.0);
                }
                self.rest[i] += amount;
            }
        }
    }
}
