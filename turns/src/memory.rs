//! The memory backend of the per-call surfaces: [`SessionTurns`] by key, for `/v1/hooks` and
//! for the MCP proxy's expired sessions.
//!
//! Bounded three ways, none of which ever loses a latch in the allowing direction:
//!
//! - a key longer than [`TurnsMapLimits::max_key_bytes`] is refused ([`MapError::KeyTooLong`]),
//!   so agent-chosen ids cannot grow the store by their length;
//! - a session idle past the TTL is dropped only when it holds no latch; a latched one is
//!   kept for `keep_latched` longer;
//! - when the store is full, an unlatched session is evicted; if there is none, a new
//!   session is refused ([`MapError::Full`]).

use crate::session::SessionTurns;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The bounds of a [`TurnsMap`].
#[derive(Debug, Clone, Copy)]
pub struct TurnsMapLimits {
    /// Most sessions held.
    pub max_sessions: usize,
    /// Longest key, in bytes.
    pub max_key_bytes: usize,
    /// Idle time after which a session holding no latch is dropped.
    pub ttl: Duration,
    /// How much longer a latched session is kept.
    pub keep_latched: Duration,
}

/// Why a session's state could not be reached; the surface denies the call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MapError {
    /// The key is longer than the store takes.
    #[error("the session id is {len} bytes long, more than the {max} this store takes")]
    KeyTooLong {
        /// Its length.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// Every held session holds a latch and the store is full.
    #[error("the session store is full ({max} sessions, each holding a latch), so this new session cannot be tracked")]
    Full {
        /// The bound.
        max: usize,
    },
}

struct Held {
    turns: SessionTurns,
    last_seen: Instant,
}

/// Sessions' turn state by key, behind one lock (each use is a few microseconds).
pub struct TurnsMap {
    map: Mutex<HashMap<Box<str>, Held>>,
    limits: TurnsMapLimits,
}

impl TurnsMap {
    /// An empty map with these bounds.
    pub fn new(limits: TurnsMapLimits) -> Self {
        TurnsMap {
            map: Mutex::new(HashMap::new()),
            limits: TurnsMapLimits {
                max_sessions: limits.max_sessions.max(1),
                ..limits
            },
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Box<str>, Held>> {
        self.map.lock().unwrap_or_else(|poisoned| {
            // A panic mid-update may have left one session's state behind: every session's
            // current turn is taken as latched rather than trusted.
            let mut map = poisoned.into_inner();
            for held in map.values_mut() {
                held.turns.latch_current();
            }
            map
        })
    }

    /// Runs `f` on the state of `key` (a new session starts empty), with the lock held so
    /// two events of one session never interleave.
    pub fn with<R>(
        &self,
        key: &str,
        now: Instant,
        f: impl FnOnce(&mut SessionTurns) -> R,
    ) -> Result<R, MapError> {
        if key.len() > self.limits.max_key_bytes {
            return Err(MapError::KeyTooLong {
                len: key.len(),
                max: self.limits.max_key_bytes,
            });
        }
        let mut map = self.lock();
        self.map.clear_poison();
        if !map.contains_key(key) && map.len() >= self.limits.max_sessions {
            self.sweep(&mut map, now);
            if map.len() >= self.limits.max_sessions {
                let oldest_unlatched = map
                    .iter()
                    .filter(|(_, h)| !h.turns.holds_latch())
                    .min_by_key(|(_, h)| h.last_seen)
                    .map(|(k, _)| k.clone());
                match oldest_unlatched {
                    Some(k) => {
                        map.remove(&k);
                    }
                    None => {
                        return Err(MapError::Full {
                            max: self.limits.max_sessions,
                        })
                    }
                }
            }
        }
        let held = map.entry(key.into()).or_insert_with(|| Held {
            turns: SessionTurns::default(),
            last_seen: now,
        });
        held.last_seen = now;
        Ok(f(&mut held.turns))
    }

    /// Reads the state of `key`, if one is held, changing nothing.
    pub fn get<R>(&self, key: &str, f: impl FnOnce(&SessionTurns) -> R) -> Option<R> {
        self.lock().get(key).map(|h| f(&h.turns))
    }

    /// The state of `key` if one is held, removed from the map.
    pub fn take(&self, key: &str) -> Option<SessionTurns> {
        self.lock().remove(key).map(|h| h.turns)
    }

    /// Drops sessions idle past the TTL that hold no latch, and latched ones idle past the
    /// TTL and `keep_latched`; returns how many were dropped.
    pub fn expire(&self, now: Instant) -> usize {
        let mut map = self.lock();
        let before = map.len();
        self.sweep(&mut map, now);
        before - map.len()
    }

    fn sweep(&self, map: &mut HashMap<Box<str>, Held>, now: Instant) {
        let l = self.limits;
        map.retain(|_, h| {
            let idle = now.saturating_duration_since(h.last_seen);
            idle <= l.ttl || (h.turns.holds_latch() && idle <= l.ttl.saturating_add(l.keep_latched))
        });
    }

    /// The number of sessions held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no session is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn limits() -> TurnsMapLimits {
        TurnsMapLimits {
            max_sessions: 2,
            max_key_bytes: 16,
            ttl: Duration::from_secs(10),
            keep_latched: Duration::from_secs(100),
        }
    }

    #[test]
    fn long_keys_are_refused_and_a_full_map_evicts_only_unlatched_sessions() {
        let m = TurnsMap::new(limits());
        let t0 = Instant::now();
        assert!(matches!(
            m.with(&"x".repeat(17), t0, |_| ()),
            Err(MapError::KeyTooLong { len: 17, .. })
        ));
        m.with("a", t0, SessionTurns::latch_current).unwrap();
        m.with("b", t0, |_| ()).unwrap();
        m.with("c", t0, SessionTurns::latch_current).unwrap();
        assert_eq!(m.len(), 2);
        assert!(matches!(
            m.with("d", t0, |_| ()),
            Err(MapError::Full { max: 2 })
        ));
        assert!(m.with("a", t0, |s| s.current_latched().any()).unwrap());
    }

    #[test]
    fn idle_unlatched_sessions_expire_and_latched_ones_are_kept_longer() {
        let m = TurnsMap::new(limits());
        let t0 = Instant::now();
        m.with("latched", t0, SessionTurns::latch_current).unwrap();
        m.with("clear", t0, |_| ()).unwrap();
        assert_eq!(m.expire(t0 + Duration::from_secs(11)), 1);
        assert_eq!(m.expire(t0 + Duration::from_secs(50)), 0);
        assert_eq!(m.expire(t0 + Duration::from_secs(111)), 1);
        assert!(m.is_empty());
    }
}
