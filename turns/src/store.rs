//! The memory backend of `/v1/decide`: turn-scoped latch state kept for executors that
//! would rather not carry it themselves, keyed by (policy, session, turn) with the turn ids
//! the executor names.
//!
//! The store never reads a clock: callers pass `now`. Its one rule is that no sequence of
//! calls makes a batch of a latched turn be judged unlatched; everything below follows from
//! it (the reasons are in `docs/server.md`):
//!
//! - State is keyed by (policy module, session id), so two policies never share it.
//! - Each session holds the exact state of its [`RECENT_TURNS`] most recent turns. A latched
//!   turn pushed out by newer ones leaves a hash of its id; a batch of it later is judged with
//!   every latch set ([`Origin::Expired`]). A turn that never latched anything may be
//!   forgotten: judging it afresh gives exactly what it had.
//! - A session idle past the TTL keeps only the hashes of its latched turns, for
//!   `keep_expired` more; a session that never latched is dropped.
//! - When the store is full (sessions or bytes), sessions holding no latch are evicted; if
//!   none can be, a new session is refused ([`SessionError::Full`]). Latched state is never
//!   evicted.
//! - The newest turn of a session also keeps its tool outputs, for `facts.outputs`
//!   (argument provenance; memory only, never in a shared store): recorded from a request's
//!   own `facts.outputs` or apart (a server's `POST /v1/outputs`), awaited for each allowed
//!   call whose output the policy indexes as untrusted, and given to a batch of that turn only
//!   while complete ([`SessionStore::outputs_fact`]). A session holding any is kept like a
//!   latched one (never evicted, its turn remembered when it expires), so a turn that read
//!   untrusted text is never judged afresh with none.
//! - State is stored by latch name. Carried into a policy that no longer declares a stored
//!   name (a reload renamed or removed it, or a policy file was read half-written), the turn
//!   cannot be judged: [`Carried::undeclared`] names the latch, and the surface denies every
//!   call of the turn. Setting every latch instead would fail open under a policy that
//!   declares none.

use dashmap::mapref::entry::Entry as MapEntry;
use dashmap::DashMap;
use std::collections::hash_map::RandomState;
use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolgate_engine::{LatchState, Latched, Policy};

/// Turns per session whose exact latch state is kept.
pub const RECENT_TURNS: usize = 4;
/// Most latched turns one session may have pushed out of its recent turns; past it a new turn
/// of that session is refused rather than a latched one forgotten.
pub const MAX_LATCHED_TURNS: usize = 4096;

/// Bytes counted per heap allocation beyond its payload (allocator header and rounding).
const ALLOC_OVERHEAD: usize = 16;
/// A session's fixed cost: its map slot, counted twice for the table's load factor, control
/// bytes and shard slack; the key's allocation; and its recent-turns array, allocated once.
const ENTRY_OVERHEAD: usize = 2 * std::mem::size_of::<(Box<str>, Entry)>()
    + ALLOC_OVERHEAD
    + RECENT_TURNS * std::mem::size_of::<Turn>()
    + ALLOC_OVERHEAD;
/// Stores at least this large scan for evictable sessions at most once per [`SCAN_EVERY`], so
/// a flood of new sessions against a store of latched ones cannot buy a full scan per request.
const SCAN_FREELY_BELOW: usize = 1024;
/// See [`SCAN_FREELY_BELOW`].
const SCAN_EVERY: Duration = Duration::from_millis(10);

/// The bounds of a [`SessionStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Idle time after which a session's exact state is dropped.
    pub ttl: Duration,
    /// How long after that the hashes of its latched turns are kept.
    pub keep_expired: Duration,
    /// Most sessions held.
    pub max_sessions: usize,
    /// Most bytes held (ids, turns, latch names, bookkeeping).
    pub max_bytes: usize,
}

/// Where a batch's carried latch state came from (the response's `"session"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Origin {
    /// The server held nothing for this turn: it starts unlatched.
    New,
    /// The turn's own stored state.
    Carried,
    /// The server no longer held this turn's exact state (idle past the TTL, or pushed out by
    /// newer turns) but knew it had latched: every latch is set.
    Expired,
    /// A shared store (`toolgate serve --state`) could not be reached in time: the batch was
    /// judged with every latch set, and calls turn state decides were denied. Never given by
    /// [`SessionStore`] itself.
    Unavailable,
}

/// The latch state to OR into a batch's facts, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carried {
    /// Where it came from.
    pub origin: Origin,
    /// The state, in the judging policy's latch names.
    pub latched: Latched,
    /// A latch set earlier in this turn that the judging policy does not declare (a reload
    /// removed or renamed it). No call of the turn can be judged against such a policy: the
    /// surface denies each one, until a new turn (`latched` is then every latch, for callers
    /// that only advise, like `/v1/offer`).
    pub undeclared: Option<Box<str>>,
}

impl Carried {
    /// A turn the store held nothing for.
    pub fn new_turn() -> Carried {
        Carried {
            origin: Origin::New,
            latched: Latched::Flag(false),
            undeclared: None,
        }
    }

    /// A turn known to have latched whose exact state is gone (`origin` says why): every
    /// latch.
    pub fn every_latch(origin: Origin) -> Carried {
        Carried {
            origin,
            latched: Latched::Flag(true),
            undeclared: None,
        }
    }

    /// Why no call of this turn can be judged by `policy`, if none can: a latch set in the
    /// turn that `policy` does not declare ([`Carried::undeclared`]), or `"*"` when the turn
    /// holds every latch (it latched, and its exact state is gone) and `policy` declares none,
    /// so that "every latch" would block nothing.
    pub fn unjudgeable(&self, policy: &Policy) -> Option<&str> {
        match &self.undeclared {
            Some(name) => Some(name),
            None if self.latched == Latched::Flag(true) && policy.latches().next().is_none() => {
                Some("*")
            }
            None => None,
        }
    }

    /// The stored state of a held turn, or its undeclared latch.
    pub fn held(origin: Origin, latched: Result<Latched, Box<str>>) -> Carried {
        match latched {
            Ok(latched) => Carried {
                origin,
                latched,
                undeclared: None,
            },
            Err(name) => Carried {
                origin,
                latched: Latched::Flag(true),
                undeclared: Some(name),
            },
        }
    }
}

/// Why a batch's session could not be started or continued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The store holds its most sessions or bytes, all of them latched.
    #[error("the session store is full ({held}); no new session or turn can start until held state expires")]
    Full {
        /// Which bound was hit, in words.
        held: String,
    },
    /// One session has pushed out too many latched turns.
    #[error("this session has {MAX_LATCHED_TURNS} earlier latched turns, the most one session may hold; start a new session")]
    TooManyTurns,
}

/// The latches a turn has set, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TurnLatches {
    /// These latches (sorted, no duplicates); empty when none.
    Names(Vec<Box<str>>),
    /// Every latch of the policy, whatever it declares now.
    All,
}

impl TurnLatches {
    fn none() -> Self {
        TurnLatches::Names(Vec::new())
    }

    fn is_set(&self) -> bool {
        !matches!(self, TurnLatches::Names(v) if v.is_empty())
    }

    /// Heap bytes: the name array and each name.
    fn bytes(&self) -> usize {
        match self {
            TurnLatches::Names(v) if v.capacity() == 0 => 0,
            TurnLatches::Names(v) => {
                v.capacity() * std::mem::size_of::<Box<str>>()
                    + ALLOC_OVERHEAD
                    + v.iter().map(|n| n.len() + ALLOC_OVERHEAD).sum::<usize>()
            }
            TurnLatches::All => 0,
        }
    }

    /// The state a response reports, in names.
    fn from_state(policy: &Policy, state: &LatchState) -> Self {
        match state {
            LatchState::Flag(false) => TurnLatches::none(),
            // Under a policy that declares no latch there is nothing to set.
            LatchState::Flag(true) => {
                TurnLatches::Names(sorted(policy.latches().map(Box::from).collect()))
            }
            LatchState::ByName(m) => TurnLatches::Names(
                m.iter()
                    .filter(|(_, set)| **set)
                    .map(|(name, _)| Box::from(&**name))
                    .collect(),
            ),
        }
    }

    fn union(&mut self, other: TurnLatches) {
        match (&mut *self, other) {
            (TurnLatches::All, _) => {}
            (_, TurnLatches::All) => *self = TurnLatches::All,
            (TurnLatches::Names(a), TurnLatches::Names(b)) => {
                a.extend(b);
                let merged = sorted(std::mem::take(a));
                *a = merged;
            }
        }
    }

    /// The state in `policy`'s names; the first stored name not declared there as the error.
    fn in_policy(&self, policy: &Policy) -> Result<Latched, Box<str>> {
        match self {
            TurnLatches::All => Ok(Latched::Flag(true)),
            TurnLatches::Names(v) if v.is_empty() => Ok(Latched::Flag(false)),
            TurnLatches::Names(v) => {
                let mut map = BTreeMap::new();
                for name in v {
                    if !policy.latches().any(|l| l == &**name) {
                        return Err(name.clone());
                    }
                    map.insert(Arc::from(&**name), true);
                }
                Ok(Latched::ByName(map))
            }
        }
    }
}

fn sorted(mut v: Vec<Box<str>>) -> Vec<Box<str>> {
    v.sort();
    v.dedup();
    v
}

/// One held turn.
#[derive(Debug)]
struct Turn {
    id: Box<str>,
    latches: TurnLatches,
}

impl Turn {
    /// Heap bytes beyond its slot in the recent-turns array.
    fn bytes(&self) -> usize {
        self.id.len() + ALLOC_OVERHEAD + self.latches.bytes()
    }
}

/// A session's recent turns, allocated once at their bound.
fn recent_turns(first: Turn) -> Vec<Turn> {
    let mut v = Vec::with_capacity(RECENT_TURNS);
    v.push(first);
    v
}

/// What the store holds per (policy, session).
#[derive(Debug)]
struct Entry {
    /// The most recent turns, oldest first.
    recent: Vec<Turn>,
    /// The outputs of the newest of `recent` (its last); `None` while it has none (boxed,
    /// so a session without outputs costs a pointer).
    outputs: Option<Box<crate::outputs::TurnOutputs>>,
    /// The newest turn's outputs are not all here (dropped past the bound, or the turn came
    /// back from expiry): no batch of it gets any. Costs no allocation, so marking them lost
    /// never takes the store past its bound.
    outputs_lost: bool,
    /// Hashes of latched turns whose exact state is no longer held.
    latched_old: Vec<u64>,
    last_seen: Instant,
}

impl Entry {
    /// Whether the session holds state that must not be lost: a latch, or outputs of its
    /// newest turn (which a fresh start would judge as none).
    fn holds_latch(&self) -> bool {
        !self.latched_old.is_empty()
            || self.recent.iter().any(|t| t.latches.is_set())
            || !self.outputs_fresh()
    }

    /// Whether the newest turn has recorded or awaited nothing, and lost nothing.
    fn outputs_fresh(&self) -> bool {
        !self.outputs_lost && self.outputs.as_ref().is_none_or(|o| o.is_fresh())
    }

    /// Sets the newest turn's outputs: none yet (`lost` false), or not all here.
    fn reset_outputs(&mut self, lost: bool) {
        self.outputs = None;
        self.outputs_lost = lost;
    }

    /// The newest turn's outputs, to change.
    fn outputs_mut(&mut self) -> &mut crate::outputs::TurnOutputs {
        self.outputs.get_or_insert_with(Box::default)
    }

    /// The bytes counted against the store's bound: the fixed cost, the key, each held turn's
    /// id and latch names, and the hashes of pushed-out latched turns.
    fn bytes(&self, key: &str) -> usize {
        let old = match self.latched_old.capacity() {
            0 => 0,
            n => n * 8 + ALLOC_OVERHEAD,
        };
        ENTRY_OVERHEAD
            + key.len()
            + self.recent.iter().map(Turn::bytes).sum::<usize>()
            + old
            + self.outputs.as_ref().map_or(0, |o| {
                std::mem::size_of_val(&**o) + ALLOC_OVERHEAD + o.held_bytes()
            })
    }

    /// Idle past the TTL: keep only the hashes of latched turns (and of the newest turn, when
    /// it held outputs: it comes back with every latch set and its outputs incomplete).
    fn collapse(&mut self, hash: impl Fn(&str) -> u64) {
        let newest_had_outputs = !self.outputs_fresh();
        let n = self.recent.len();
        for (i, t) in self.recent.drain(..).enumerate() {
            if t.latches.is_set() || (newest_had_outputs && i + 1 == n) {
                self.latched_old.push(hash(&t.id));
            }
        }
        self.reset_outputs(false);
    }

    /// Whether `turn` is the session's newest held turn.
    fn is_newest(&self, turn: &str) -> bool {
        self.recent.last().is_some_and(|t| &*t.id == turn)
    }

    fn position(&self, turn: &str) -> Option<usize> {
        self.recent.iter().position(|t| &*t.id == turn)
    }
}

/// A concurrent map from (policy, session) to the latch state of its turns.
#[derive(Debug)]
pub struct SessionStore {
    map: DashMap<Box<str>, Entry>,
    limits: SessionLimits,
    hasher: RandomState,
    entries: AtomicUsize,
    latched_entries: AtomicUsize,
    bytes: AtomicUsize,
    last_scan: Mutex<Option<Instant>>,
}

/// The map key: module names are identifiers, so a NUL cannot occur in one.
fn key(policy: &Policy, session: &str) -> Box<str> {
    format!("{}\0{session}", policy.module()).into()
}

impl SessionStore {
    /// An empty store with these bounds.
    pub fn new(limits: SessionLimits) -> Self {
        SessionStore {
            map: DashMap::new(),
            limits: SessionLimits {
                max_sessions: limits.max_sessions.max(1),
                ..limits
            },
            hasher: RandomState::new(),
            entries: AtomicUsize::new(0),
            latched_entries: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            last_scan: Mutex::new(None),
        }
    }

    fn hash(&self, turn: &str) -> u64 {
        self.hasher.hash_one(turn)
    }

    fn idle(&self, e: &Entry, now: Instant) -> bool {
        now.saturating_duration_since(e.last_seen) > self.limits.ttl
    }

    /// Starts or continues `turn` of `session` under `policy`: the state to OR into the
    /// batch's facts. Refuses a new session (or a new turn) rather than drop latched state.
    pub fn begin(
        &self,
        policy: &Policy,
        session: &str,
        turn: &str,
        now: Instant,
    ) -> Result<Carried, SessionError> {
        let key = key(policy, session);
        let hash = self.hash(turn);
        if self.near_full() {
            self.make_room(now);
        }
        if let Some(mut e) = self.map.get_mut(&key) {
            let before = (e.bytes(&key), e.holds_latch());
            if self.idle(&e, now) {
                e.collapse(|t| self.hash(t));
            }
            let result = self.continue_turn(&mut e, policy, turn, hash);
            e.last_seen = now;
            self.account(before, (e.bytes(&key), e.holds_latch()));
            return result;
        }
        let entry = Entry {
            recent: recent_turns(Turn {
                id: turn.into(),
                latches: TurnLatches::none(),
            }),
            latched_old: Vec::new(),
            last_seen: now,
            outputs: None,
            outputs_lost: false,
        };
        let size = entry.bytes(&key);
        self.reserve(size)?;
        match self.map.entry(key) {
            MapEntry::Vacant(v) => {
                v.insert(entry);
                Ok(Carried::new_turn())
            }
            MapEntry::Occupied(mut o) => {
                // Another batch started this session meanwhile.
                self.entries.fetch_sub(1, Relaxed);
                self.bytes.fetch_sub(size, Relaxed);
                let k = o.key().clone();
                let e = o.get_mut();
                let before = (e.bytes(&k), e.holds_latch());
                let result = self.continue_turn(e, policy, turn, hash);
                e.last_seen = now;
                self.account(before, (e.bytes(&k), e.holds_latch()));
                result
            }
        }
    }

    /// The state `turn` would carry, without starting anything (for `/v1/offer`).
    pub fn peek(&self, policy: &Policy, session: &str, turn: &str, now: Instant) -> Carried {
        let new = Carried::new_turn();
        let expired = Carried::every_latch(Origin::Expired);
        let Some(e) = self.map.get(&key(policy, session)) else {
            return new;
        };
        if e.latched_old.contains(&self.hash(turn)) {
            return expired;
        }
        match e.position(turn).map(|i| &e.recent[i].latches) {
            None => new,
            Some(l) if self.idle(&e, now) => {
                if l.is_set() {
                    expired
                } else {
                    new
                }
            }
            Some(l) => Carried::held(Origin::Carried, l.in_policy(policy)),
        }
    }

    /// Stores the latch state after a batch of `turn`, ORed with what is held for it. Latched
    /// state is always stored, even past the bounds.
    pub fn record(
        &self,
        policy: &Policy,
        session: &str,
        turn: &str,
        state: &LatchState,
        now: Instant,
    ) {
        let latches = TurnLatches::from_state(policy, state);
        if !latches.is_set() {
            return;
        }
        let key = key(policy, session);
        let hash = self.hash(turn);
        match self.map.entry(key) {
            MapEntry::Occupied(mut o) => {
                let k = o.key().clone();
                let e = o.get_mut();
                let before = (e.bytes(&k), e.holds_latch());
                match e.position(turn) {
                    Some(i) => e.recent[i].latches.union(latches),
                    // Pushed out or expired meanwhile: remembered as latched.
                    None if !e.latched_old.contains(&hash) => e.latched_old.push(hash),
                    None => {}
                }
                e.last_seen = now;
                self.account(before, (e.bytes(&k), e.holds_latch()));
            }
            MapEntry::Vacant(v) => {
                // Evicted meanwhile (it held no latch then): it does now.
                let entry = Entry {
                    recent: recent_turns(Turn {
                        id: turn.into(),
                        latches,
                    }),
                    latched_old: Vec::new(),
                    last_seen: now,
                    // What the turn had is gone with the session.
                    outputs: None,
                    outputs_lost: true,
                };
                self.entries.fetch_add(1, Relaxed);
                self.account((0, false), (entry.bytes(v.key()), true));
                v.insert(entry);
            }
        }
    }

    /// The `facts.outputs` to judge a batch of `turn` with: the turn's outputs while it is
    /// the session's newest and they are complete; none recorded yet (`[]`) for a turn the
    /// store has not seen (it starts with this batch); `None` otherwise (an earlier turn, one
    /// that expired, outputs still awaited or dropped), so a check that reads them denies.
    pub fn outputs_fact(
        &self,
        policy: &Policy,
        session: &str,
        turn: &str,
        now: Instant,
    ) -> Option<serde_json::Value> {
        let fresh = || Some(serde_json::Value::Array(Vec::new()));
        let Some(e) = self.map.get(&key(policy, session)) else {
            return fresh();
        };
        if e.latched_old.contains(&self.hash(turn)) {
            return None;
        }
        match e.position(turn) {
            None if self.idle(&e, now) && !e.outputs_fresh() => None,
            None => fresh(),
            Some(_) if self.idle(&e, now) || !e.is_newest(turn) => None,
            Some(_) if e.outputs_lost => None,
            Some(_) => match &e.outputs {
                None => fresh(),
                Some(o) => o.fact(),
            },
        }
    }

    /// Records outputs of calls of `turn` (`{id, tool, output}` items, the shape of
    /// `facts.outputs`; an item of another shape is skipped): kept only while `turn` is the
    /// session's newest. Past half the store's byte bound the turn's outputs are dropped instead
    /// (incomplete: checks that read them deny). Returns whether they were kept.
    pub fn record_outputs(
        &self,
        policy: &Policy,
        session: &str,
        turn: &str,
        items: &[serde_json::Value],
        now: Instant,
    ) -> bool {
        self.with_newest(policy, session, turn, now, |outputs| {
            for item in items {
                let (Some(id), Some(tool), Some(output)) = (
                    item.get("id").and_then(serde_json::Value::as_str),
                    item.get("tool").and_then(serde_json::Value::as_str),
                    item.get("output"),
                ) else {
                    continue;
                };
                outputs.record(id, tool, output.clone(), policy.indexes_as_untrusted(tool));
            }
        })
    }

    /// Awaits the outputs of `calls` (id, tool, arguments), allowed in a batch of `turn`,
    /// whose output `policy` indexes as untrusted: until each is recorded, the turn's outputs
    /// are incomplete. Does nothing unless `turn` is the session's newest.
    pub fn expect_outputs<'c>(
        &self,
        policy: &Policy,
        session: &str,
        turn: &str,
        calls: impl IntoIterator<Item = (&'c str, &'c str, &'c serde_json::Value)>,
        now: Instant,
    ) {
        let calls: Vec<_> = calls
            .into_iter()
            .filter(|(_, tool, _)| policy.indexes_as_untrusted(tool))
            .collect();
        if calls.is_empty() {
            return;
        }
        self.with_newest(policy, session, turn, now, |outputs| {
            for (id, tool, args) in calls {
                outputs.expect(crate::outputs::AwaitedCall::new(id, tool, args));
            }
        });
    }

    /// Runs `change` on the outputs of `turn` when it is the session's newest, with the
    /// byte accounting around it; drops them past the byte bound. Whether it ran and kept.
    fn with_newest(
        &self,
        policy: &Policy,
        session: &str,
        turn: &str,
        now: Instant,
        change: impl FnOnce(&mut crate::outputs::TurnOutputs),
    ) -> bool {
        let key = key(policy, session);
        let Some(mut e) = self.map.get_mut(&key) else {
            return false;
        };
        if self.idle(&e, now) || !e.is_newest(turn) || e.outputs_lost {
            return false;
        }
        let before = (e.bytes(&key), e.holds_latch());
        change(e.outputs_mut());
        let grown = e.bytes(&key).saturating_sub(before.0);
        // Outputs may fill at most half the store, so latch state always has room.
        let kept = self.bytes().saturating_add(grown) <= self.limits.max_bytes / 2;
        if !kept {
            e.reset_outputs(true);
        }
        e.last_seen = now;
        self.account(before, (e.bytes(&key), e.holds_latch()));
        kept
    }

    /// Collapses sessions idle past the TTL and drops those with nothing left to keep, or
    /// idle past the TTL and `keep_expired`; returns how many were dropped.
    pub fn expire(&self, now: Instant) -> usize {
        let mut dropped = 0;
        let forget_after = self.limits.ttl.saturating_add(self.limits.keep_expired);
        self.map.retain(|k, e| {
            let idle = now.saturating_duration_since(e.last_seen);
            if idle <= self.limits.ttl {
                return true;
            }
            let before = (e.bytes(k), e.holds_latch());
            e.collapse(|t| self.hash(t));
            let keep = e.holds_latch() && idle <= forget_after;
            if keep {
                self.account(before, (e.bytes(k), e.holds_latch()));
            } else {
                self.account(before, (0, false));
                self.entries.fetch_sub(1, Relaxed);
                dropped += 1;
            }
            keep
        });
        dropped
    }

    /// The number of sessions held.
    pub fn len(&self) -> usize {
        self.entries.load(Relaxed)
    }

    /// True when no session is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes held, as counted against the byte bound.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Relaxed)
    }

    /// The state of an existing session's `turn`, adding the turn when it is new.
    fn continue_turn(
        &self,
        e: &mut Entry,
        policy: &Policy,
        turn: &str,
        hash: u64,
    ) -> Result<Carried, SessionError> {
        if let Some(i) = e.position(turn) {
            // A stored latch the policy no longer declares stays stored, so every batch of
            // the turn under that policy finds it.
            return Ok(Carried::held(
                Origin::Carried,
                e.recent[i].latches.in_policy(policy),
            ));
        }
        let (origin, latches) = match e.latched_old.iter().position(|h| *h == hash) {
            Some(i) => {
                e.latched_old.swap_remove(i);
                (Origin::Expired, TurnLatches::All)
            }
            None => (Origin::New, TurnLatches::none()),
        };
        let pushes_out_latched = e.recent.len() >= RECENT_TURNS && e.recent[0].latches.is_set();
        if origin == Origin::New {
            if pushes_out_latched && e.latched_old.len() >= MAX_LATCHED_TURNS {
                return Err(SessionError::TooManyTurns);
            }
            let growth = turn.len() + ALLOC_OVERHEAD + if pushes_out_latched { 8 } else { 0 };
            let shrink = if e.recent.len() >= RECENT_TURNS {
                e.recent[0].bytes()
            } else {
                0
            };
            if growth > shrink
                && self.bytes.load(Relaxed) + (growth - shrink) > self.limits.max_bytes
            {
                return Err(self.full());
            }
        }
        if e.recent.len() >= RECENT_TURNS {
            let out = e.recent.remove(0);
            if out.latches.is_set() {
                e.latched_old.push(self.hash(&out.id));
            }
        }
        let carried = match &latches {
            TurnLatches::All => Carried::every_latch(origin),
            TurnLatches::Names(_) => Carried::new_turn(),
        };
        e.recent.push(Turn {
            id: turn.into(),
            latches,
        });
        // The new newest turn's outputs: none yet; or, for a latched turn that comes back,
        // unknown (incomplete).
        e.reset_outputs(origin != Origin::New);
        Ok(carried)
    }

    fn full(&self) -> SessionError {
        SessionError::Full {
            held: format!(
                "{} sessions of at most {}, {} bytes of at most {}",
                self.len(),
                self.limits.max_sessions,
                self.bytes(),
                self.limits.max_bytes
            ),
        }
    }

    /// Counts one new session of `size` bytes, or refuses it.
    fn reserve(&self, size: usize) -> Result<(), SessionError> {
        let cap = self.limits.max_sessions;
        if self
            .entries
            .fetch_update(Relaxed, Relaxed, |n| (n < cap).then_some(n + 1))
            .is_err()
        {
            return Err(self.full());
        }
        let max = self.limits.max_bytes;
        if self
            .bytes
            .fetch_update(Relaxed, Relaxed, |b| {
                (b.saturating_add(size) <= max).then_some(b + size)
            })
            .is_err()
        {
            self.entries.fetch_sub(1, Relaxed);
            return Err(self.full());
        }
        Ok(())
    }

    /// Moves the byte and latched-session counts from `before` to `after`.
    fn account(&self, before: (usize, bool), after: (usize, bool)) {
        if after.0 >= before.0 {
            self.bytes.fetch_add(after.0 - before.0, Relaxed);
        } else {
            self.bytes.fetch_sub(before.0 - after.0, Relaxed);
        }
        match (before.1, after.1) {
            (false, true) => {
                self.latched_entries.fetch_add(1, Relaxed);
            }
            (true, false) => {
                self.latched_entries.fetch_sub(1, Relaxed);
            }
            _ => {}
        }
    }

    /// Within 1/16 of a bound.
    fn near_full(&self) -> bool {
        let l = &self.limits;
        self.len() + (l.max_sessions / 16).max(1) > l.max_sessions
            || self.bytes() + l.max_bytes / 16 > l.max_bytes
    }

    /// Evicts the least recently seen sessions that hold no latch (1/16 of those held, at
    /// least one). Skipped when every session holds a latch, so a flood against a store full
    /// of latched state costs no scan, and in a large store when another scan ran within
    /// [`SCAN_EVERY`]; idle sessions are the sweeper's (`expire`).
    fn make_room(&self, now: Instant) {
        let unlatched = self
            .len()
            .saturating_sub(self.latched_entries.load(Relaxed));
        if unlatched == 0 {
            return;
        }
        if self.len() >= SCAN_FREELY_BELOW {
            let Ok(mut last) = self.last_scan.try_lock() else {
                return;
            };
            if last.is_some_and(|t| now.saturating_duration_since(t) < SCAN_EVERY) {
                return;
            }
            *last = Some(now);
        }
        let mut ages: Vec<(Instant, Box<str>)> = self
            .map
            .iter()
            .filter(|e| !e.value().holds_latch())
            .map(|e| (e.value().last_seen, e.key().clone()))
            .collect();
        let n = (self.len() / 16).max(1).min(ages.len());
        if n == 0 {
            return;
        }
        ages.select_nth_unstable_by_key(n - 1, |(t, _)| *t);
        for (_, key) in ages.into_iter().take(n) {
            if let Some((k, e)) = self.map.remove_if(&key, |_, e| !e.holds_latch()) {
                self.account((e.bytes(&k), false), (0, false));
                self.entries.fetch_sub(1, Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const TWO: &str = "module two\nwrite x, y\ningest a, b\nstage main { tools [a, b, x, y] }\nlatch l1 { set_by [a] blocks [x] }\nlatch l2 { set_by [b] blocks [y] }\n";

    fn store(max_sessions: usize) -> SessionStore {
        SessionStore::new(SessionLimits {
            ttl: Duration::from_secs(10),
            keep_expired: Duration::from_secs(100),
            max_sessions,
            max_bytes: 1 << 20,
        })
    }

    fn l1() -> LatchState {
        LatchState::ByName([("l1".into(), true), ("l2".into(), false)].into())
    }

    #[test]
    fn the_newest_turn_keeps_its_outputs_and_gives_them_only_while_complete() {
        let p = Policy::compile("two.gate", TWO).unwrap();
        let s = store(10);
        let t0 = Instant::now();
        let none = serde_json::json!([]);
        // A turn the store has not seen starts with none.
        assert_eq!(s.outputs_fact(&p, "s", "t1", t0), Some(none.clone()));
        s.begin(&p, "s", "t1", t0).unwrap();
        let args = serde_json::json!({"q": 1});
        s.expect_outputs(&p, "s", "t1", [("c1", "a", &args), ("c2", "x", &args)], t0);
        // `a` (ingest) is awaited; `x` (a write) is not.
        assert_eq!(s.outputs_fact(&p, "s", "t1", t0), None);
        let item = serde_json::json!({"id": "c1", "tool": "a", "output": "mail eve@evil.test"});
        assert!(s.record_outputs(&p, "s", "t1", std::slice::from_ref(&item), t0));
        assert_eq!(
            s.outputs_fact(&p, "s", "t1", t0),
            Some(serde_json::json!([item]))
        );
        // A newer turn starts afresh; the earlier one gets none any more, and takes none.
        s.begin(&p, "s", "t2", t0).unwrap();
        assert_eq!(s.outputs_fact(&p, "s", "t2", t0), Some(none));
        assert_eq!(s.outputs_fact(&p, "s", "t1", t0), None);
        assert!(!s.record_outputs(&p, "s", "t1", &[item], t0));
    }

    #[test]
    fn outputs_never_take_the_store_past_its_byte_bound() {
        let p = Policy::compile("two.gate", TWO).unwrap();
        let s = SessionStore::new(SessionLimits {
            ttl: Duration::from_secs(10),
            keep_expired: Duration::from_secs(100),
            max_sessions: 1000,
            max_bytes: 8192,
        });
        let t0 = Instant::now();
        let big = serde_json::json!({"text": "x".repeat(1500)});
        let mut dropped = 0;
        for i in 0..100 {
            let session = format!("session-{i}");
            if s.begin(&p, &session, "t1", t0).is_err() {
                break;
            }
            s.expect_outputs(&p, &session, "t1", [("c1", "a", &big)], t0);
            let item = serde_json::json!({"id": "c1", "tool": "a", "output": big});
            if !s.record_outputs(&p, &session, "t1", &[item], t0) {
                dropped += 1;
                // Dropped outputs are never given: the turn's checks deny.
                assert_eq!(s.outputs_fact(&p, &session, "t1", t0), None);
            }
            assert!(s.bytes() <= 8192, "{} bytes held", s.bytes());
        }
        assert!(dropped > 0, "the bound was never reached");
    }

    #[test]
    fn a_session_with_outputs_is_neither_evicted_nor_forgotten_when_idle() {
        let p = Policy::compile("two.gate", TWO).unwrap();
        let s = store(10);
        let t0 = Instant::now();
        s.begin(&p, "s", "t1", t0).unwrap();
        let item = serde_json::json!({"id": "c1", "tool": "a", "output": "text"});
        s.record_outputs(&p, "s", "t1", &[item], t0);
        // Idle past the TTL: the session is kept, and its turn comes back with every latch
        // and no outputs, never afresh with none.
        let later = t0 + Duration::from_secs(11);
        assert_eq!(s.expire(later), 0);
        assert_eq!(s.outputs_fact(&p, "s", "t1", later), None);
        let c = s.begin(&p, "s", "t1", later).unwrap();
        assert_eq!(c.origin, Origin::Expired);
        assert_eq!(s.outputs_fact(&p, "s", "t1", later), None);
    }

    #[test]
    fn a_turn_keeps_its_state_and_a_new_turn_starts_clear() {
        let p = Policy::compile("two.gate", TWO).unwrap();
        let s = store(10);
        let t0 = Instant::now();
        assert_eq!(s.begin(&p, "s", "t1", t0).unwrap().origin, Origin::New);
        s.record(&p, "s", "t1", &l1(), t0);
        // A later batch that reports nothing set cannot clear it.
        s.record(&p, "s", "t1", &LatchState::Flag(false), t0);
        let c = s.begin(&p, "s", "t1", t0).unwrap();
        assert_eq!(c.origin, Origin::Carried);
        assert_eq!(c.latched, Latched::ByName([("l1".into(), true)].into()));
        assert_eq!(
            s.begin(&p, "s", "t2", t0).unwrap().latched,
            Latched::Flag(false)
        );
        assert_eq!(s.begin(&p, "s", "t1", t0).unwrap().origin, Origin::Carried);
    }

    #[test]
    fn idle_sessions_keep_latched_turns_as_hashes_and_drop_the_rest() {
        let p = Policy::compile("two.gate", TWO).unwrap();
        let s = store(10);
        let t0 = Instant::now();
        s.begin(&p, "latched", "t", t0).unwrap();
        s.record(&p, "latched", "t", &l1(), t0);
        s.begin(&p, "clear", "t", t0).unwrap();
        assert_eq!(s.expire(t0 + Duration::from_secs(11)), 1);
        assert_eq!(s.len(), 1);
        assert!(s.bytes() > 0);
        let later = t0 + Duration::from_secs(12);
        assert_eq!(s.peek(&p, "latched", "t", later).origin, Origin::Expired);
        let c = s.begin(&p, "latched", "t", later).unwrap();
        assert_eq!(
            (c.origin, c.latched),
            (Origin::Expired, Latched::Flag(true))
        );
        assert_eq!(
            s.begin(&p, "clear", "t", later).unwrap().origin,
            Origin::New
        );
        // Past TTL + keep_expired, everything goes, and the byte count returns to zero.
        assert_eq!(s.expire(later + Duration::from_secs(200)), 2);
        assert_eq!((s.len(), s.bytes()), (0, 0));
    }

    #[test]
    fn a_full_store_evicts_only_unlatched_sessions() {
        let p = Policy::compile("two.gate", TWO).unwrap();
        let s = store(2);
        let t0 = Instant::now();
        s.begin(&p, "a", "t", t0).unwrap();
        s.record(&p, "a", "t", &l1(), t0);
        for i in 0..10 {
            s.begin(&p, &format!("u{i}"), "t", t0).unwrap();
        }
        s.begin(&p, "b", "t", t0).unwrap();
        s.record(&p, "b", "t", &l1(), t0);
        assert!(matches!(
            s.begin(&p, "c", "t", t0),
            Err(SessionError::Full { .. })
        ));
        assert_eq!(s.begin(&p, "a", "t", t0).unwrap().origin, Origin::Carried);
    }

    #[test]
    fn a_stored_name_the_policy_no_longer_declares_is_named_for_the_rest_of_the_turn() {
        let p = Policy::compile("two.gate", TWO).unwrap();
        let renamed = Policy::compile("two.gate", &TWO.replace("l1", "first")).unwrap();
        let none = Policy::compile("two.gate", "module two\nread look\n").unwrap();
        let s = store(10);
        let t0 = Instant::now();
        s.begin(&p, "s", "t", t0).unwrap();
        s.record(&p, "s", "t", &l1(), t0);
        let peeked = s.peek(&renamed, "s", "t", t0);
        assert_eq!(
            (peeked.latched, peeked.undeclared.as_deref()),
            (Latched::Flag(true), Some("l1"))
        );
        for policy in [&renamed, &none, &renamed] {
            let c = s.begin(policy, "s", "t", t0).unwrap();
            assert_eq!(c.undeclared.as_deref(), Some("l1"));
        }
        // The stored names are kept: back under the policy that declares them, the turn is
        // judged with exactly its own latch again.
        let back = s.begin(&p, "s", "t", t0).unwrap();
        assert_eq!(
            (back.latched, back.undeclared),
            (Latched::ByName([("l1".into(), true)].into()), None)
        );
        // A new turn under the policy without latches starts clean.
        assert_eq!(s.begin(&none, "s", "t2", t0).unwrap(), Carried::new_turn());
    }

    #[test]
    fn a_session_that_pushed_out_too_many_latched_turns_is_refused_a_new_one() {
        let p = Policy::compile("two.gate", TWO).unwrap();
        let s = store(10);
        let t0 = Instant::now();
        for i in 0..MAX_LATCHED_TURNS + RECENT_TURNS {
            let turn = format!("t{i}");
            s.begin(&p, "s", &turn, t0).unwrap();
            s.record(&p, "s", &turn, &l1(), t0);
        }
        assert_eq!(
            s.begin(&p, "s", "next", t0),
            Err(SessionError::TooManyTurns)
        );
        let c = s.begin(&p, "s", "t0", t0).unwrap();
        assert_eq!(
            (c.origin, c.latched),
            (Origin::Expired, Latched::Flag(true))
        );
    }

    #[test]
    fn a_large_store_full_of_latched_sessions_scans_for_room_at_most_once_per_interval() {
        let p = Policy::compile("two.gate", TWO).unwrap();
        let s = store(2048);
        let t0 = Instant::now();
        for i in 0..2040 {
            let id = format!("l{i}");
            s.begin(&p, &id, "t", t0).unwrap();
            s.record(&p, &id, "t", &l1(), t0);
        }
        for i in 0..6 {
            s.begin(&p, &format!("u{i}"), "t", t0).unwrap();
        }
        // One scan at t0 (it evicted `u0`); the rest of t0 scanned nothing.
        assert_eq!(s.len(), 2040 + 5);
        s.begin(&p, "v", "t", t0 + SCAN_EVERY).unwrap();
        assert_eq!(
            s.len(),
            2040 + 1,
            "the next interval's scan evicts every unlatched one"
        );
        // With room scanned away and only latched sessions left, a new one past the cap is
        // refused.
        for i in 0..7 {
            let id = format!("m{i}");
            s.begin(&p, &id, "t", t0 + SCAN_EVERY).unwrap();
            s.record(&p, &id, "t", &l1(), t0 + SCAN_EVERY);
        }
        s.record(&p, "v", "t", &l1(), t0 + SCAN_EVERY);
        assert_eq!(s.len(), 2048);
        let later = t0 + SCAN_EVERY * 3;
        assert!(matches!(
            s.begin(&p, "w", "t", later),
            Err(SessionError::Full { .. })
        ));
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;
        use std::collections::HashMap;

        #[derive(Debug, Clone)]
        enum Op {
            /// A batch of (policy, session, turn); `sets` sets latch `l1`.
            Batch(usize, usize, usize, bool),
            Advance(u64),
            Sweep,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                6 => (0..2usize, 0..4usize, 0..8usize, any::<bool>())
                    .prop_map(|(p, s, t, l)| Op::Batch(p, s, t, l)),
                1 => (0..15u64).prop_map(Op::Advance),
                1 => Just(Op::Sweep),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(500))]

            /// Whatever the order of batches, sweeps, clock steps and a store too small for
            /// them: a turn that latched is never carried unlatched while the store could
            /// still know it (a refusal is allowed; it is not an allow).
            #[test]
            fn a_latched_turn_is_never_carried_unlatched(ops in proptest::collection::vec(op(), 1..120)) {
                let policies = [
                    Policy::compile("two.gate", TWO).unwrap(),
                    Policy::compile("other.gate", &TWO.replace("module two", "module other")).unwrap(),
                ];
                let s = SessionStore::new(SessionLimits {
                    ttl: Duration::from_secs(10),
                    keep_expired: Duration::from_secs(40),
                    max_sessions: 3,
                    max_bytes: 2048,
                });
                let t0 = Instant::now();
                let mut now = t0;
                // (policy, session) -> last batch time; (policy, session, turn) latched.
                let mut seen: HashMap<(usize, usize), Instant> = HashMap::new();
                let mut latched: HashMap<(usize, usize, usize), bool> = HashMap::new();
                let mut ever = std::collections::HashSet::new();
                for op in ops {
                    match op {
                        Op::Advance(secs) => now += Duration::from_secs(secs),
                        Op::Sweep => { s.expire(now); }
                        Op::Batch(pi, si, ti, sets) => {
                            let p = &policies[pi];
                            let (session, turn) = (format!("s{si}"), format!("t{ti}"));
                            let Ok(carried) = s.begin(p, &session, &turn, now) else { continue };
                            let knowable = seen.get(&(pi, si)).is_some_and(|last| {
                                now.saturating_duration_since(*last) <= Duration::from_secs(50)
                            });
                            if !knowable {
                                // Past the horizon the store may have forgotten the session.
                                latched.retain(|k, _| (k.0, k.1) != (pi, si));
                            }
                            let set = match &carried.latched {
                                Latched::Flag(b) => *b,
                                Latched::ByName(m) => m.get("l1").copied().unwrap_or(false),
                            };
                            if latched.get(&(pi, si, ti)).copied().unwrap_or(false) {
                                prop_assert!(set, "turn {ti} of s{si} under policy {pi} carried {carried:?}");
                            } else if !ever.contains(&(pi, si, ti)) {
                                // And it does not over-deny: a turn that never latched is clear.
                                prop_assert!(!set, "turn {ti} of s{si} never latched: {carried:?}");
                            }
                            seen.insert((pi, si), now);
                            let state = if sets { l1() } else { LatchState::Flag(false) };
                            let after = match (&carried.latched, sets) {
                                (Latched::Flag(true), _) | (_, true) => l1(),
                                (Latched::ByName(m), false) if m.get("l1") == Some(&true) => l1(),
                                _ => state,
                            };
                            s.record(p, &session, &turn, &after, now);
                            if after.any() {
                                latched.insert((pi, si, ti), true);
                                ever.insert((pi, si, ti));
                            }
                        }
                    }
                }
                // The byte count is the sum of what is held.
                s.expire(now + Duration::from_secs(1000));
                prop_assert_eq!((s.len(), s.bytes()), (0, 0));
            }
        }
    }
}
