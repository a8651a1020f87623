//! The counts of budgets that span batches (`per turn`, `session`, `principal`, `tenant`,
//! with an optional `within` window): which count a batch reads ([`Scopes::counted`], the
//! one place for it, used by this process's [`Book`] and by the shared store's,
//! `turn_state::redis_store::budgets`), and the book that keeps them in this process.
//!
//! The engine judges a budget from `facts.spent.NAME` and reports in the response's `spent`
//! what the batch's allowed calls consumed; a keeper sits in between. For one batch,
//! [`Book::judge`] holds the book's lock while it gives the counts, the batch is judged (with
//! its turn state, which in memory needs no await) and the final response's consumption is
//! added, so two concurrent batches can never both spend the same remainder.
//!
//! Fail closed, always in the denying direction: a budget whose scope the request does not
//! identify (no session, no `principal.sub`, no `principal.tenant`), or a book that is full,
//! gives no count, and the engine denies. When a window's history is over its cap, the
//! oldest two entries are merged into one stamped with the later time, which can only keep
//! consumption longer. The book lives in memory: a restart starts every count from zero,
//! which `docs/server.md` says; under `--state redis` the counts live in the store.

use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use toolgate_engine::{Budget, BudgetScope, Policy, Response};

/// The most scopes (budget × session, principal, ...) the book tracks.
pub(crate) const MAX_KEYS: usize = 100_000;
/// The most entries one windowed count keeps before it merges its oldest.
const MAX_ENTRIES: usize = 4_096;

/// Which count: the policy, the budget and the scope's identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    policy: String,
    budget: String,
    scope: String,
}

/// One scope's consumption: a total (no window), or timed entries (a window).
#[derive(Debug)]
struct Count {
    /// The budget's `within`.
    window: Option<Duration>,
    entries: VecDeque<(Instant, f64)>,
    total: f64,
    touched: Instant,
}

impl Count {
    fn new(window: Option<Duration>, now: Instant) -> Self {
        Count {
            window,
            entries: VecDeque::new(),
            total: 0.0,
            touched: now,
        }
    }

    /// The consumption inside the window before `now` (all of it without a window).
    fn used(&mut self, now: Instant) -> f64 {
        if let Some(w) = self.window {
            while let Some(&(at, amount)) = self.entries.front() {
                if now.saturating_duration_since(at) < w {
                    break;
                }
                self.entries.pop_front();
                self.total -= amount;
            }
            if self.entries.is_empty() {
                self.total = 0.0;
            }
        }
        self.total.max(0.0)
    }

    fn add(&mut self, amount: f64, now: Instant) {
        self.total += amount;
        if self.window.is_none() {
            return;
        }
        self.entries.push_back((now, amount));
        if self.entries.len() > MAX_ENTRIES {
            // Merged under the later time: the amount stays counted at least as long.
            if let (Some((_, a)), Some(second)) =
                (self.entries.pop_front(), self.entries.front_mut())
            {
                second.1 += a;
            }
        }
    }
}

/// What identifies a batch's scopes, copied out of the request (only for a policy that
/// keeps counts) so the request can be judged while they are in use.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scopes {
    /// The request's session.
    pub(crate) session: Option<String>,
    /// The request's turn.
    pub(crate) turn: Option<String>,
    /// The request's `facts.principal`.
    pub(crate) principal: Option<Value>,
}

impl Scopes {
    /// The scopes of a request with these ids and principal, or `None` when `policy` has no
    /// budget over batches (nothing is copied then).
    pub(crate) fn of(
        policy: &Policy,
        session: Option<&str>,
        turn: Option<&str>,
        principal: Option<&Value>,
    ) -> Option<Self> {
        policy.keeps_counts().then(|| Scopes {
            session: session.map(str::to_owned),
            turn: turn.map(str::to_owned),
            principal: principal.cloned(),
        })
    }

    /// The identity of `scope` for this batch, `None` when the request does not give it.
    /// It names the scope's kind too, so a reload that moves a budget from one kind of
    /// scope to another never reads an old count of another kind.
    fn key(&self, scope: BudgetScope) -> Option<String> {
        let part = |name: &str| {
            self.principal
                .as_ref()
                .and_then(|p| p.get(name))
                .and_then(Value::as_str)
        };
        let id = match scope {
            BudgetScope::Batch => return None,
            BudgetScope::Turn => {
                format!("{}\u{0}{}", self.session.as_deref()?, self.turn.as_deref()?)
            }
            BudgetScope::Session => self.session.clone()?,
            BudgetScope::Principal => part("sub")?.to_owned(),
            BudgetScope::Tenant => part("tenant")?.to_owned(),
        };
        Some(format!("{}:{id}", scope.as_str()))
    }

    /// The counts `policy`'s budgets over batches need for this batch, in source order: each
    /// budget whose scope the request identifies (the others get no count, so they deny).
    /// The one place that says which count a batch reads, for the book and the shared store.
    pub(crate) fn counted<'p>(&self, policy: &'p Policy) -> Vec<Counted<'p>> {
        policy
            .budgets()
            .filter(|b| b.scope != BudgetScope::Batch)
            .filter_map(|budget| {
                Some(Counted {
                    scope: self.key(budget.scope)?,
                    budget,
                })
            })
            .collect()
    }
}

/// The counts a batch is judged with (`facts.spent`: budget name, count), or `None` to
/// leave the request's own.
pub(crate) type Given = Option<Vec<(String, f64)>>;

/// One count a batch reads: a budget over batches and its scope's identity for the batch.
#[derive(Debug, Clone)]
pub(crate) struct Counted<'p> {
    /// The budget.
    pub(crate) budget: Budget<'p>,
    /// Its scope's identity (`session:ID`, `turn:SESSION\0TURN`, `principal:SUB`,
    /// `tenant:TENANT`).
    pub(crate) scope: String,
}

/// The budget counts of every policy the server serves, when its turn state is in this
/// process (under `--state redis` the store keeps them: `turn_state::redis_store::budgets`).
#[derive(Debug)]
pub struct Book {
    counts: Mutex<HashMap<Key, Count>>,
    /// How long an unwindowed count (a turn's, a session's) is kept after its last use: the
    /// session TTL plus `--session-keep-expired`, the horizon turn state keeps a latched
    /// turn's trace for. A count is as small as such a trace, so it stays exact until then.
    keep: Duration,
}

impl Book {
    /// A book that drops an unwindowed count `keep` after its last use.
    pub(crate) fn new(keep: Duration) -> Self {
        Book {
            counts: Mutex::new(HashMap::new()),
            keep,
        }
    }

    /// Judges one batch with `decide`, giving it the counts of `policy`'s budgets over
    /// batches for `scopes` and adding what the response `spent` finds in its result
    /// consumed, under one lock. Without `scopes` (a policy with no such budget,
    /// [`Scopes::of`]) it is judged as it is, without the lock. `decide` may judge the batch
    /// more than once (turn state carried in): only the response it returns is counted.
    pub(crate) fn judge<R>(
        &self,
        policy: &Policy,
        scopes: Option<Scopes>,
        now: Instant,
        decide: impl FnOnce(Given) -> R,
        spent: impl FnOnce(&R) -> Option<&Response>,
    ) -> R {
        let Some(scopes) = scopes else {
            return decide(None);
        };
        let mut counts = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let module = policy.module();
        let mut given = Vec::new();
        let mut keys = Vec::new();
        for Counted { budget: b, scope } in scopes.counted(policy) {
            let key = Key {
                policy: module.to_string(),
                budget: b.name.to_string(),
                scope,
            };
            // A scope is entered in the book only once it consumes something; a full book
            // gives a new scope no count, so its budget denies.
            let full = counts.len() >= MAX_KEYS;
            let used = match counts.get_mut(&key) {
                Some(count) => {
                    count.touched = now;
                    count.used(now)
                }
                None if full => continue,
                None => 0.0,
            };
            given.push((b.name.to_string(), used));
            keys.push((key, b.window));
        }
        let judged = decide(Some(given));
        let Some(response) = spent(&judged) else {
            return judged;
        };
        for (key, window) in keys {
            let amount = response
                .spent
                .get(key.budget.as_str())
                .copied()
                .unwrap_or(0.0);
            // A scope given a count is in the book or had room for it under the lock.
            if amount > 0.0 {
                counts
                    .entry(key)
                    .or_insert_with(|| Count::new(window, now))
                    .add(amount, now);
            }
        }
        judged
    }

    /// Drops the counts nothing can read any more: a window with no entry left, or an
    /// unwindowed count unused for the keep time.
    pub(crate) fn expire(&self, now: Instant) {
        let keep = self.keep;
        let mut counts = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        counts.retain(|_, c| match c.window {
            Some(_) => {
                c.used(now);
                !c.entries.is_empty()
            }
            None => now.saturating_duration_since(c.touched) < keep,
        });
    }

    /// How many scopes the book tracks (for `/health`).
    pub(crate) fn len(&self) -> usize {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    const POLICY: &str = "module m\nwrite w\nstage main { tools [w] }\nbudget b for w { count <= 1 within 1h per session }\n";

    fn run(book: &Book, policy: &Policy, session: &str, now: Instant) -> bool {
        let scopes = Scopes::of(policy, Some(session), Some("t"), None);
        let text = json!({"session": session, "turn": "t", "facts": {"stage": "main"}, "calls": [{"id": "c", "tool": "w"}]}).to_string();
        let mut request = toolgate_engine::Request::from_json(&text).unwrap();
        let response = book.judge(
            policy,
            scopes,
            now,
            |counts| {
                request.facts.spent = counts.map(|c| c.into_iter().collect());
                policy.decide(&request)
            },
            |r| Some(r),
        );
        response.decisions[0].allow
    }

    #[test]
    fn a_window_lets_consumption_go_and_expire_drops_empty_counts() {
        let policy = Policy::compile("m.gate", POLICY).unwrap();
        let book = Book::new(Duration::from_secs(60));
        let t0 = Instant::now();
        assert!(run(&book, &policy, "s", t0));
        assert!(!run(&book, &policy, "s", t0 + Duration::from_secs(3599)));
        assert!(run(&book, &policy, "s", t0 + Duration::from_secs(3600)));
        book.expire(t0 + Duration::from_secs(7201));
        assert_eq!(book.len(), 0);
    }

    #[test]
    fn a_sessions_count_outlives_the_session_ttl_and_is_dropped_only_past_the_keep_horizon() {
        let policy = Policy::compile(
            "m.gate",
            &POLICY.replace("count <= 1 within 1h per session", "count <= 1 per session"),
        )
        .unwrap();
        let book = Book::new(Duration::from_secs(100));
        let t0 = Instant::now();
        assert!(run(&book, &policy, "s", t0));
        book.expire(t0 + Duration::from_secs(99));
        assert!(!run(&book, &policy, "s", t0 + Duration::from_secs(99)));
        // Each use renews it; past the horizon without use it is dropped.
        book.expire(t0 + Duration::from_secs(200));
        assert_eq!(book.len(), 0);
    }

    #[test]
    fn a_long_history_merges_its_oldest_entries_forward_and_loses_no_amount() {
        let mut c = Count::new(Some(Duration::from_secs(10)), Instant::now());
        let t0 = Instant::now();
        for i in 0..(MAX_ENTRIES as u64 + 10) {
            c.add(1.0, t0 + Duration::from_millis(i));
        }
        assert_eq!(c.entries.len(), MAX_ENTRIES);
        assert_eq!(
            c.used(t0 + Duration::from_secs(5)),
            (MAX_ENTRIES + 10) as f64
        );
    }
}
