//! The counts of budgets that span batches (`per turn`, `session`, `principal`, `tenant`,
//! with an optional `within` window), kept in this process.
//!
//! The engine judges a budget from `facts.spent.NAME` and reports in the response's `spent`
//! what the batch's allowed calls consumed; this book is the keeper in between. For one
//! batch, [`Book::judge`] holds the book's lock while it gives the counts, the batch is
//! judged and the response's consumption is added, so two concurrent batches can never both
//! spend the same remainder.
//!
//! Fail closed, always in the denying direction: a budget whose scope the request does not
//! identify (no session, no `principal.sub`, no `principal.tenant`), a book that is full, or
//! a server whose turn state is shared between replicas (`--state redis`, where one
//! process's count is not the deployment's) gives no count, and the engine denies. When a
//! window's history is over its cap, the oldest two entries are merged into one stamped with
//! the later time, which can only keep consumption longer. The book lives in memory: a
//! restart starts every count from zero, which `docs/server.md` says.

use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use toolgate_engine::{BudgetScope, Policy, Response};

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
    fn key(&self, scope: BudgetScope) -> Option<String> {
        let part = |name: &str| {
            self.principal
                .as_ref()
                .and_then(|p| p.get(name))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        match scope {
            BudgetScope::Batch => None,
            BudgetScope::Turn => Some(format!(
                "{}\u{0}{}",
                self.session.as_deref()?,
                self.turn.as_deref()?
            )),
            BudgetScope::Session => self.session.clone(),
            BudgetScope::Principal => part("sub"),
            BudgetScope::Tenant => part("tenant"),
        }
    }
}

/// The budget counts of every policy the server serves.
#[derive(Debug)]
pub struct Book {
    counts: Mutex<HashMap<Key, Count>>,
    /// False when turn state is shared between replicas: this process's counts are then not
    /// the deployment's, so none is given and every budget over batches denies.
    local_only: bool,
    /// How long an unwindowed count (a turn's, a session's) is kept after its last use: the
    /// session TTL plus `--session-keep-expired`, the horizon turn state keeps a latched
    /// turn's trace for. A count is as small as such a trace, so it stays exact until then.
    keep: Duration,
}

impl Book {
    /// A book for a server whose turn state is in this process (`shared: false`) or shared
    /// between replicas (`shared: true`: counts are not kept), dropping an unwindowed count
    /// `keep` after its last use.
    pub(crate) fn new(shared: bool, keep: Duration) -> Self {
        Book {
            counts: Mutex::new(HashMap::new()),
            local_only: !shared,
            keep,
        }
    }

    /// Judges one batch with `decide`, giving it the counts of `policy`'s budgets over
    /// batches for `scopes` and adding what its response consumed, under one lock. Without
    /// `scopes` (a policy with no such budget, [`Scopes::of`]) it is judged as it is,
    /// without the lock.
    pub(crate) fn judge<F>(
        &self,
        policy: &Policy,
        scopes: Option<Scopes>,
        now: Instant,
        decide: F,
    ) -> Response
    where
        F: FnOnce(Option<Vec<(String, f64)>>) -> Response,
    {
        let Some(scopes) = scopes else {
            return decide(None);
        };
        if !self.local_only {
            return decide(Some(Vec::new()));
        }
        let mut counts = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let module = policy.module();
        let mut given = Vec::new();
        let mut keys = Vec::new();
        for b in policy.budgets().filter(|b| b.scope != BudgetScope::Batch) {
            let Some(scope) = scopes.key(b.scope) else {
                continue;
            };
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
        let response = decide(Some(given));
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
        response
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

    /// Whether this process keeps counts at all (false under a shared turn-state store, where
    /// every budget over batches denies).
    pub(crate) fn kept(&self) -> bool {
        self.local_only
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
        let response = book.judge(policy, scopes, now, |counts| {
            request.facts.spent = counts.map(|c| c.into_iter().collect());
            policy.decide(&request)
        });
        response.decisions[0].allow
    }

    #[test]
    fn a_book_of_a_shared_store_gives_no_count_so_the_budget_denies() {
        let policy = Policy::compile("m.gate", POLICY).unwrap();
        let now = Instant::now();
        let local = Book::new(false, Duration::from_secs(60));
        assert!(run(&local, &policy, "s", now));
        assert!(!run(&local, &policy, "s", now));
        let shared = Book::new(true, Duration::from_secs(60));
        assert!(!run(&shared, &policy, "s", now));
        assert!(!shared.kept());
    }

    #[test]
    fn a_window_lets_consumption_go_and_expire_drops_empty_counts() {
        let policy = Policy::compile("m.gate", POLICY).unwrap();
        let book = Book::new(false, Duration::from_secs(60));
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
        let book = Book::new(false, Duration::from_secs(100));
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
