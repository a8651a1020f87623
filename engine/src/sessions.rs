//! Turn-scoped latch state kept for executors that would rather not carry it themselves.
//!
//! The store never reads a clock: callers pass `now`. Entries are keyed by session; a new
//! turn id for a session forgets the old turn's latches. Idle entries expire after a TTL,
//! and a cap on live entries evicts the least recently used first.

use crate::request::Latched;
use crate::response::LatchState;
use dashmap::DashMap;
use std::time::{Duration, Instant};

/// What the store holds per session.
#[derive(Debug, Clone)]
struct Entry {
    turn: Box<str>,
    latched: Latched,
    last_seen: Instant,
}

/// A concurrent map from session id to the latch state of its current turn.
#[derive(Debug)]
pub struct SessionStore {
    map: DashMap<Box<str>, Entry>,
    ttl: Duration,
    cap: usize,
}

impl SessionStore {
    /// A store whose entries expire after `ttl` idle and which holds at most `cap` sessions.
    pub fn new(ttl: Duration, cap: usize) -> Self {
        SessionStore {
            map: DashMap::new(),
            ttl,
            cap: cap.max(1),
        }
    }

    /// The latch state stored for this session's `turn`, if any. A different turn id means a
    /// new user message: the old turn's state is dropped.
    pub fn carried(&self, session: &str, turn: &str, now: Instant) -> Option<Latched> {
        let mut entry = self.map.get_mut(session)?;
        if &*entry.turn != turn {
            drop(entry);
            self.map.remove_if(session, |_, e| &*e.turn != turn);
            return None;
        }
        entry.last_seen = now;
        Some(entry.latched.clone())
    }

    /// Stores the latch state after a batch of `turn`, ORed with what was stored for it.
    pub fn record(&self, session: &str, turn: &str, state: &LatchState, now: Instant) {
        let new = Latched::from(state);
        if let Some(mut e) = self.map.get_mut(session) {
            if &*e.turn == turn {
                e.latched = e.latched.or(&new);
            } else {
                e.turn = turn.into();
                e.latched = new;
            }
            e.last_seen = now;
            return;
        }
        if self.map.len() >= self.cap {
            self.evict_oldest(now);
        }
        self.map.insert(
            session.into(),
            Entry {
                turn: turn.into(),
                latched: new,
                last_seen: now,
            },
        );
    }

    /// Drops entries idle for longer than the TTL; returns how many.
    pub fn expire(&self, now: Instant) -> usize {
        let before = self.map.len();
        self.map
            .retain(|_, e| now.saturating_duration_since(e.last_seen) <= self.ttl);
        before.saturating_sub(self.map.len())
    }

    /// The number of live sessions.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when no session is stored.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Evicts the least recently seen entries: expired ones first, then the oldest 1/64 of
    /// the cap (at least one), so eviction cost is amortised over many inserts.
    fn evict_oldest(&self, now: Instant) {
        if self.expire(now) > 0 && self.map.len() < self.cap {
            return;
        }
        let mut ages: Vec<(Instant, Box<str>)> = self
            .map
            .iter()
            .map(|e| (e.value().last_seen, e.key().clone()))
            .collect();
        let n = (self.cap / 64).max(1).min(ages.len());
        if n == 0 {
            return;
        }
        ages.select_nth_unstable_by_key(n - 1, |(t, _)| *t);
        for (_, key) in ages.into_iter().take(n) {
            self.map.remove(&key);
        }
    }
}

impl From<&LatchState> for Latched {
    fn from(state: &LatchState) -> Self {
        match state {
            LatchState::Flag(b) => Latched::Flag(*b),
            LatchState::ByName(m) => {
                Latched::ByName(m.iter().map(|(k, v)| (k.to_string(), *v)).collect())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_turn_carries_new_turn_forgets() {
        let s = SessionStore::new(Duration::from_secs(60), 10);
        let t0 = Instant::now();
        s.record("s1", "t1", &LatchState::Flag(true), t0);
        assert_eq!(s.carried("s1", "t1", t0), Some(Latched::Flag(true)));
        // A later batch of the same turn that reports false cannot clear it.
        s.record("s1", "t1", &LatchState::Flag(false), t0);
        assert_eq!(s.carried("s1", "t1", t0), Some(Latched::Flag(true)));
        assert_eq!(s.carried("s1", "t2", t0), None);
        assert!(s.is_empty());
    }

    #[test]
    fn ttl_and_cap_bound_memory() {
        let s = SessionStore::new(Duration::from_secs(10), 3);
        let t0 = Instant::now();
        for i in 0..3 {
            s.record(
                &format!("s{i}"),
                "t",
                &LatchState::Flag(false),
                t0 + Duration::from_secs(i),
            );
        }
        s.record(
            "s3",
            "t",
            &LatchState::Flag(false),
            t0 + Duration::from_secs(5),
        );
        assert_eq!(s.len(), 3);
        assert!(
            s.carried("s0", "t", t0 + Duration::from_secs(5)).is_none(),
            "oldest evicted first"
        );
        assert_eq!(s.expire(t0 + Duration::from_secs(100)), 3);
    }
}
