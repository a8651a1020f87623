//! The counts of budgets that span batches (`per turn`, `session`, `principal`, `tenant`,
//! with an optional `within` window), written once for every keeper: which count a batch
//! reads ([`Scopes`], the one place for it, used by the server's book, by its shared store,
//! `toolgate_server`'s `turn_state::redis_store::budgets`, and by [`crate::EmbeddedTurns`]),
//! and the [`Book`] that keeps them in one process.
//!
//! The engine judges a budget from `facts.spent.NAME` and reports in the response's `spent`
//! what the batch's allowed calls consumed; a keeper sits in between. For one batch,
//! [`Book::judge`] holds the book's lock while it gives the counts, the batch is judged (with
//! its turn state, which in memory needs no await) and the final response's consumption is
//! added, so two concurrent batches can never both spend the same remainder. The embedded
//! turn state does the same with two books: its session's own counts (`per turn`,
//! `per session`), under the session's lock, and the process's book ([`Book::process`],
//! `per principal`, `per tenant`), under that book's lock, taken after the session's.
//!
//! Fail closed, always in the denying direction: a budget whose scope the request does not
//! identify (no session, no `principal.sub`, no `principal.tenant`), or a book that is full,
//! gives no count, and the engine denies. When a window's history is over its cap, the
//! oldest two entries are merged into one stamped with the later time, which can only keep
//! consumption longer; an amount is never stamped earlier than one before it. A book lives
//! in memory: a restart starts every count from zero.
//!
//! Judging a batch allocates only what the engine reads (`facts.spent`: the budget's name)
//! and, once per scope, the scope's entry: a count is found by the borrowed parts of its key
//! (policy, budget, scope, identity), never by a key built per batch, and each key is hashed
//! once a batch, for the read and the add.

use serde_json::Value;
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use toolgate_engine::{Budget, BudgetScope, Policy, Response};

/// The most scopes (budget × session, principal, ...) a book tracks; a new scope of a full
/// book gets no count, so its budget denies.
pub const MAX_KEYS: usize = 100_000;
/// The most entries one windowed count keeps before it merges its oldest.
const MAX_ENTRIES: usize = 4_096;
/// How many budgets of a batch keep their key's hash between the read and the add (more
/// are hashed again).
const HASHES: usize = 16;
/// The least time between two sweeps of a full book for windows that emptied.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Which count, borrowed: the policy, the budget, the scope's kind and its identity (two
/// parts: a turn is a session's; the second is empty for the other kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct KeyRef<'a> {
    policy: &'a str,
    budget: &'a str,
    scope: BudgetScope,
    id: (&'a str, &'a str),
}

/// Which count, owned: a [`KeyRef`] kept in a book.
#[derive(Debug)]
struct Key {
    policy: Box<str>,
    budget: Box<str>,
    scope: BudgetScope,
    id: (Box<str>, Box<str>),
}

impl Key {
    fn view(&self) -> KeyRef<'_> {
        KeyRef {
            policy: &self.policy,
            budget: &self.budget,
            scope: self.scope,
            id: (&self.id.0, &self.id.1),
        }
    }
}

impl KeyRef<'_> {
    fn owned(&self) -> Key {
        Key {
            policy: self.policy.into(),
            budget: self.budget.into(),
            scope: self.scope,
            id: (self.id.0.into(), self.id.1.into()),
        }
    }
}

/// The hasher of a map keyed by a hash already taken with a keyed hasher (a [`Counts`]'s
/// own `RandomState`): it passes the hash through, so a key's text is hashed once a batch.
#[derive(Debug, Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; anything else is folded in, never dropped.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
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
        // Never stamped before the newest entry (a `now` read before a lock another batch
        // took first): the amount stays counted at least as long, and the entries in order.
        let at = match self.entries.back() {
            Some(&(last, _)) if last > now => last,
            _ => now,
        };
        self.entries.push_back((at, amount));
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

/// One keeper's counts, without a lock: a [`Book`]'s, or one embedded session's. Counts
/// are found by the keyed hash of their [`KeyRef`] (taken once a batch per budget), then
/// by the key itself among the few that share it.
#[derive(Debug)]
pub(crate) struct Counts {
    map: HashMap<u64, Vec<(Key, Count)>, BuildHasherDefault<Prehashed>>,
    /// The keyed hasher of the keys (SipHash, seeded per book).
    hasher: RandomState,
    /// How many counts the map holds.
    len: usize,
    /// How long an unwindowed count is kept after its last use.
    keep: Duration,
    /// When a full book was last swept for windows that emptied.
    swept: Option<Instant>,
}

impl Counts {
    /// No counts; an unwindowed one is dropped `keep` after its last use.
    pub(crate) fn new(keep: Duration) -> Self {
        Counts {
            map: HashMap::default(),
            hasher: RandomState::new(),
            len: 0,
            keep,
            swept: None,
        }
    }

    /// The hash `key` is filed under in these counts.
    fn hash(&self, key: KeyRef<'_>) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The count of `key`, filed under `hash`.
    fn find(&mut self, hash: u64, key: KeyRef<'_>) -> Option<&mut Count> {
        let bucket = self.map.get_mut(&hash)?;
        let (_, count) = bucket.iter_mut().find(|(k, _)| k.view() == key)?;
        Some(count)
    }

    /// What `key`'s scope (filed under `hash`) consumed inside its window before `now`: 0
    /// for a scope not in the book yet, `None` when it is not and the book is full (so its
    /// budget denies). A scope is entered in the book only once it consumes something.
    fn used(&mut self, hash: u64, key: KeyRef<'_>, now: Instant) -> Option<f64> {
        if let Some(count) = self.find(hash, key) {
            count.touched = now;
            return Some(count.used(now));
        }
        if self.len < MAX_KEYS {
            return Some(0.0);
        }
        // Full: drop what nothing can read any more, at most once a `SWEEP_EVERY`.
        if self
            .swept
            .is_none_or(|at| now.saturating_duration_since(at) >= SWEEP_EVERY)
        {
            self.swept = Some(now);
            self.expire(now);
        }
        (self.len < MAX_KEYS).then_some(0.0)
    }

    /// Adds `amount` to `key`'s scope (filed under `hash`), entering it with `window` if it
    /// is new.
    fn add(
        &mut self,
        (hash, key): (u64, KeyRef<'_>),
        window: Option<Duration>,
        amount: f64,
        now: Instant,
    ) {
        if let Some(count) = self.find(hash, key) {
            count.add(amount, now);
            return;
        }
        let mut count = Count::new(window, now);
        count.add(amount, now);
        self.map.entry(hash).or_default().push((key.owned(), count));
        self.len += 1;
    }

    /// Keeps only the counts `keep` says may still be read.
    fn keep_only(&mut self, mut keep: impl FnMut(&Key, &mut Count) -> bool) {
        self.map.retain(|_, bucket| {
            bucket.retain_mut(|(k, c)| keep(k, c));
            !bucket.is_empty()
        });
        self.len = self.map.values().map(Vec::len).sum();
    }

    /// Drops the counts nothing can read any more: a window with no entry left, or an
    /// unwindowed count unused for the keep time.
    fn expire(&mut self, now: Instant) {
        let keep = self.keep;
        self.keep_only(|_, c| match c.window {
            Some(_) => {
                c.used(now);
                !c.entries.is_empty()
            }
            None => now.saturating_duration_since(c.touched) < keep,
        });
    }

    /// Keeps only the counts of scopes `keep` says may still be read.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(BudgetScope, &str, &str) -> bool) {
        self.keep_only(|k, _| keep(k.scope, &k.id.0, &k.id.1));
    }

    /// How many scopes are counted.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Which [`Counts`] hold each scope's counts for one batch: one book for all, or an
/// embedded session's own and the process's.
pub(crate) trait Ledger {
    /// The counts of `scope`; `None`: this keeper keeps none (the budget denies).
    fn counts(&mut self, scope: BudgetScope) -> Option<&mut Counts>;
}

impl Ledger for Counts {
    fn counts(&mut self, _: BudgetScope) -> Option<&mut Counts> {
        Some(self)
    }
}

/// Judges one batch with `decide`, giving it the counts of `policy`'s budgets over batches
/// for `scopes` from `ledger`, and adds what the response `spent` finds in its result
/// consumed. The caller holds whatever locks `ledger`'s counts need around it.
pub(crate) fn judge_in<R>(
    ledger: &mut impl Ledger,
    policy: &Policy,
    scopes: &ScopeIds<'_>,
    now: Instant,
    decide: impl FnOnce(Given) -> R,
    spent: impl FnOnce(&R) -> Option<&Response>,
) -> R {
    let module = policy.module();
    let mut given = Vec::with_capacity(policy.budgets().size_hint().0);
    // The counted budgets' hashes in their counts, in budget order, so a key is hashed once
    // a batch (the first `HASHES` of them; past those, hashed again to add).
    let mut hashes = [0u64; HASHES];
    let mut counted = 0;
    for budget in policy.budgets() {
        let (Some(key), Some(counts)) = (scopes.count(module, budget), ledger.counts(budget.scope))
        else {
            continue;
        };
        let hash = counts.hash(key);
        if let Some(slot) = hashes.get_mut(counted) {
            *slot = hash;
        }
        counted += 1;
        if let Some(used) = counts.used(hash, key, now) {
            given.push((budget.name.to_string(), used));
        }
    }
    let judged = decide(Some(given));
    let Some(response) = spent(&judged) else {
        return judged;
    };
    let mut counted = 0;
    for budget in policy.budgets() {
        let (Some(key), Some(counts)) = (scopes.count(module, budget), ledger.counts(budget.scope))
        else {
            continue;
        };
        let hash = match hashes.get(counted) {
            Some(&hash) => hash,
            None => counts.hash(key),
        };
        counted += 1;
        // A budget given no count denied every call it governs, so it consumed nothing; one
        // given a count is in the book, or had room for it under the lock.
        let amount = response.spent.get(budget.name).copied().unwrap_or(0.0);
        if amount > 0.0 {
            counts.add((hash, key), budget.window, amount, now);
        }
    }
    judged
}

/// What identifies a batch's scopes, copied out of the request (only for a policy that
/// keeps counts) so the request can be judged while they are in use: [`ScopeIds`] that own
/// their text.
pub type Scopes = ScopeIds<'static>;

/// What identifies a batch's scopes: its session, turn and principal ([`Scopes`] when owned;
/// an embedded session's borrow its turn's number).
#[derive(Debug, Clone, Default)]
pub struct ScopeIds<'a> {
    /// The request's session.
    session: Option<Cow<'a, str>>,
    /// The request's turn.
    turn: Option<Cow<'a, str>>,
    /// The request's `facts.principal.sub`.
    sub: Option<String>,
    /// The request's `facts.principal.tenant`.
    tenant: Option<String>,
}

impl ScopeIds<'_> {
    /// The request's session, if it names one (a shared store keys session and turn counts
    /// under it).
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }
}

impl Scopes {
    /// The scopes of a request with these ids and principal (`facts.principal`), or `None`
    /// when `policy` has no budget over batches (nothing is copied then).
    pub fn of(
        policy: &Policy,
        session: Option<&str>,
        turn: Option<&str>,
        principal: Option<&Value>,
    ) -> Option<Self> {
        policy.keeps_counts().then(|| {
            let owned = |id: Option<&str>| id.map(|id| Cow::Owned(id.to_owned()));
            ScopeIds::in_turn(principal, owned(session), owned(turn))
        })
    }
}

impl<'a> ScopeIds<'a> {
    /// The scopes of session `session`'s turn `turn` (either `None`: unknown) for
    /// `principal` (`facts.principal`: its `sub` and `tenant`, where they are strings).
    pub(crate) fn in_turn(
        principal: Option<&Value>,
        session: Option<Cow<'a, str>>,
        turn: Option<Cow<'a, str>>,
    ) -> Self {
        let part = |name: &str| {
            principal
                .and_then(|p| p.get(name))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        ScopeIds {
            session,
            turn,
            sub: part("sub"),
            tenant: part("tenant"),
        }
    }

    /// The identity of `scope` for this batch (a turn's is its session's and its own), `None`
    /// when the request does not give it.
    fn id(&self, scope: BudgetScope) -> Option<(&str, &str)> {
        Some(match scope {
            BudgetScope::Batch => return None,
            BudgetScope::Turn => (self.session.as_deref()?, self.turn.as_deref()?),
            BudgetScope::Session => (self.session.as_deref()?, ""),
            BudgetScope::Principal => (self.sub.as_deref()?, ""),
            BudgetScope::Tenant => (self.tenant.as_deref()?, ""),
        })
    }

    /// Which count of `module`'s `budget` this batch reads, `None` when the request does not
    /// identify its scope.
    fn count<'k>(&'k self, module: &'k str, budget: Budget<'k>) -> Option<KeyRef<'k>> {
        Some(KeyRef {
            policy: module,
            budget: budget.name,
            scope: budget.scope,
            id: self.id(budget.scope)?,
        })
    }

    /// The identity of `scope` for this batch as text, `None` when the request does not
    /// give it. It names the scope's kind too, so a reload that moves a budget from one kind
    /// of scope to another never reads an old count of another kind.
    fn key(&self, scope: BudgetScope) -> Option<String> {
        let id = match self.id(scope)? {
            (session, turn) if scope == BudgetScope::Turn => format!("{session}\u{0}{turn}"),
            (id, _) => id.to_owned(),
        };
        Some(format!("{}:{id}", scope.as_str()))
    }

    /// The counts `policy`'s budgets over batches need for this batch, in source order: each
    /// budget whose scope the request identifies (the others get no count, so they deny).
    /// Which count a batch reads, for a keeper that stores counts by text (the server's
    /// shared store).
    pub fn counted<'p>(&self, policy: &'p Policy) -> Vec<Counted<'p>> {
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
pub type Given = Option<Vec<(String, f64)>>;

/// One count a batch reads: a budget over batches and its scope's identity for the batch.
#[derive(Debug, Clone)]
pub struct Counted<'p> {
    /// The budget.
    pub budget: Budget<'p>,
    /// Its scope's identity (`session:ID`, `turn:SESSION\0TURN`, `principal:SUB`,
    /// `tenant:TENANT`).
    pub scope: String,
}

/// The budget counts of one process, behind one lock: the server's (with turn state in
/// memory), and the in-process turn states' `per principal` and `per tenant` counts
/// ([`Book::process`]). A restart starts every count from zero.
#[derive(Debug)]
pub struct Book {
    counts: Mutex<Counts>,
}

/// The book every in-process turn state of this process shares.
static PROCESS: LazyLock<Book> = LazyLock::new(|| Book::new(Duration::MAX));

impl Book {
    /// A book that drops an unwindowed count `keep` after its last use (the server: its
    /// session TTL plus `--session-keep-expired`, the horizon turn state keeps a latched
    /// turn's trace for; a count is as small as such a trace, so it stays exact until then).
    pub fn new(keep: Duration) -> Self {
        Book {
            counts: Mutex::new(Counts::new(keep)),
        }
    }

    /// The book of this process's in-process turn states ([`crate::EmbeddedTurns`]): the
    /// counts of `per principal` and `per tenant` budgets, shared by every session of the
    /// process. Its budgets all have windows, so a count goes once its window has passed.
    pub fn process() -> &'static Book {
        &PROCESS
    }

    /// The counts, taken back from a panic mid-judgement as they are: what was added is
    /// kept, which can only deny more.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Judges one batch with `decide`, giving it the counts of `policy`'s budgets over
    /// batches for `scopes` and adding what the response `spent` finds in its result
    /// consumed, under one lock. Without `scopes` (a policy with no such budget,
    /// [`Scopes::of`]) it is judged as it is, without the lock. `decide` may judge the batch
    /// more than once (turn state carried in): only the response it returns is counted.
    pub fn judge<R>(
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
        judge_in(&mut *self.lock(), policy, &scopes, now, decide, spent)
    }

    /// Drops the counts nothing can read any more: a window with no entry left, or an
    /// unwindowed count unused for the keep time.
    pub fn expire(&self, now: Instant) {
        self.lock().expire(now);
    }

    /// How many scopes the book tracks.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the book tracks no scope.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    /// `counts.used` with the key hashed as a batch hashes it.
    fn used(counts: &mut Counts, key: KeyRef<'_>, now: Instant) -> Option<f64> {
        counts.used(counts.hash(key), key, now)
    }

    /// `counts.add` with the key hashed as a batch hashes it.
    fn add(counts: &mut Counts, key: KeyRef<'_>, window: Option<Duration>, amount: f64) {
        let hash = counts.hash(key);
        counts.add((hash, key), window, amount, Instant::now());
    }

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

    #[test]
    fn an_amount_is_never_stamped_before_the_newest_entry() {
        let t0 = Instant::now();
        let mut c = Count::new(Some(Duration::from_secs(10)), t0);
        c.add(1.0, t0 + Duration::from_secs(5));
        // A `now` read before another batch's: counted from the later time, not dropped early.
        c.add(1.0, t0);
        assert_eq!(c.used(t0 + Duration::from_secs(12)), 2.0);
        assert_eq!(c.used(t0 + Duration::from_secs(15)), 0.0);
    }

    #[test]
    fn a_count_is_found_by_its_borrowed_key_and_kinds_never_share_one() {
        let mut counts = Counts::new(Duration::MAX);
        let t0 = Instant::now();
        let key = |scope, id| KeyRef {
            policy: "m",
            budget: "b",
            scope,
            id,
        };
        add(&mut counts, key(BudgetScope::Session, ("s", "")), None, 3.0);
        add(&mut counts, key(BudgetScope::Turn, ("a", "bc")), None, 1.0);
        // The same text under another kind, or split differently, is another count.
        for (scope, id, want) in [
            (BudgetScope::Session, ("s", ""), 3.0),
            (BudgetScope::Principal, ("s", ""), 0.0),
            (BudgetScope::Turn, ("ab", "c"), 0.0),
            (BudgetScope::Turn, ("a", "bc"), 1.0),
        ] {
            assert_eq!(
                used(&mut counts, key(scope, id), t0),
                Some(want),
                "{scope:?} {id:?}"
            );
        }
        assert_eq!(counts.len(), 2);
        // Two keys filed under one hash (a collision) are told apart by the key itself.
        let (x, y) = (
            key(BudgetScope::Session, ("x", "")),
            key(BudgetScope::Session, ("y", "")),
        );
        counts.add((7, x), None, 1.0, t0);
        counts.add((7, y), None, 2.0, t0);
        assert_eq!(counts.used(7, x, t0), Some(1.0));
        assert_eq!(counts.used(7, y, t0), Some(2.0));
        assert_eq!(counts.len(), 4);
        counts.retain(|_, id, _| id != "x");
        assert_eq!((counts.used(7, x, t0), counts.len()), (Some(0.0), 3));
    }

    #[test]
    fn a_full_book_gives_a_new_scope_no_count_until_a_window_empties() {
        let mut counts = Counts::new(Duration::MAX);
        let t0 = Instant::now();
        let hour = Some(Duration::from_secs(3600));
        let ids: Vec<String> = (0..MAX_KEYS).map(|i| i.to_string()).collect();
        for id in &ids {
            let key = KeyRef {
                policy: "m",
                budget: "b",
                scope: BudgetScope::Principal,
                id: (id, ""),
            };
            let hash = counts.hash(key);
            counts.add((hash, key), hour, 1.0, t0);
        }
        let new = KeyRef {
            policy: "m",
            budget: "b",
            scope: BudgetScope::Principal,
            id: ("new", ""),
        };
        assert_eq!(
            used(&mut counts, new, t0),
            None,
            "full: no count, so it denies"
        );
        let old = KeyRef {
            id: ("0", ""),
            ..new
        };
        assert_eq!(
            used(&mut counts, old, t0),
            Some(1.0),
            "a scope it holds still reads"
        );
        // Once the windows have passed, a full book sweeps them out and has room again.
        assert_eq!(
            used(&mut counts, new, t0 + Duration::from_secs(3600)),
            Some(0.0)
        );
        assert_eq!(counts.len(), 0);
    }

    #[test]
    fn the_shared_stores_keys_keep_their_text() {
        let policy = Policy::compile(
            "m.gate",
            "module m\nwrite w\nstage main { tools [w] }\nbudget t for w { count <= 1 per turn }\nbudget p for w { count <= 1 within 1h per principal }\nbudget x for w { count <= 1 within 1h per tenant }\nbudget b for w { count <= 1 per batch }\n",
        )
        .unwrap();
        let principal = json!({"sub": "ana", "tenant": "acme"});
        let scopes = Scopes::of(&policy, Some("s"), Some("t1"), Some(&principal)).unwrap();
        let keys: Vec<(&str, String)> = scopes
            .counted(&policy)
            .into_iter()
            .map(|c| (c.budget.name, c.scope))
            .collect();
        assert_eq!(
            keys,
            [
                ("t", "turn:s\u{0}t1".to_string()),
                ("p", "principal:ana".to_string()),
                ("x", "tenant:acme".to_string()),
            ]
        );
        let none = Scopes::of(&policy, None, None, None).unwrap();
        assert!(none.counted(&policy).is_empty());
    }
}
