//! What a `--listen` session leaves behind when it ends: the fingerprints of its latched
//! turns (whether the client deleted it or it was idle past `--session-idle`), and, when it
//! expired by idleness with a latched turn that had no id, its client's identity. A session
//! the client closes itself ends its conversation, as a closed stdio connection does.
//!
//! A client that re-initialises after its session expired (the Streamable HTTP spec's answer
//! to a 404) gets a new session. Without this, that session would start unlatched and the
//! write the old session had blocked would run. With it, a turn id the old session had
//! latched stays latched in every new session, and a new session of the same client identity
//! (`clientInfo` name and version) starts latched until the host names a new turn. Both are
//! kept for `--keep-expired`.

use super::session::Session;
use std::time::{Duration, Instant};
use toolgate_turns::{SessionTurns, TurnsMap, TurnsMapLimits};

/// The key of the latched turn ids of every ended session.
const TURN_IDS: &str = "\0turn-ids";

/// The fingerprints of ended sessions.
pub struct Expired {
    map: TurnsMap,
    /// `--session-idle`: a session dropped this long after its last request expired.
    idle: Duration,
}

impl Expired {
    /// A store keeping what it is given for `keep`, for at most `max_clients` identities, of
    /// sessions closed after `idle` without a request.
    pub fn new(keep: Duration, max_clients: usize, idle: Duration) -> Self {
        Expired {
            map: TurnsMap::new(TurnsMapLimits {
                max_sessions: max_clients.saturating_add(1),
                max_key_bytes: 1024,
                ttl: Duration::ZERO,
                keep_latched: keep,
            }),
            idle,
        }
    }

    /// Records what `session` of client `identity` held, if it held a latch; `last_request`
    /// tells an expired session from one its client closed.
    pub fn bury(&self, identity: &str, session: &Session, last_request: Instant) {
        let expired = last_request.elapsed() + Duration::from_millis(250) >= self.idle;
        let (keys, latched_without_id) = session.with_state(|s| {
            let unnamed = expired && s.current_latched().any() && s.fingerprints().is_empty();
            (s.fingerprints(), unnamed)
        });
        let now = Instant::now();
        if !keys.is_empty() {
            let _ = self.map.with(TURN_IDS, now, |g| g.remember_forgotten(keys));
        }
        if latched_without_id {
            // A key too long or a full store: the client's next session is not marked, but
            // the turn ids above still are. Identities are short; the cap is generous.
            let _ = self.map.with(identity, now, |g| g.latch_current());
        }
    }

    /// Gives a new session of client `identity` what ended sessions left.
    pub fn inherit(&self, identity: &str, session: &Session) {
        let now = Instant::now();
        self.map.expire(now);
        let keys = self
            .map
            .get(TURN_IDS, SessionTurns::fingerprints)
            .unwrap_or_default();
        let latched = identity != TURN_IDS
            && self
                .map
                .get(identity, |g| g.current_latched().any())
                .unwrap_or(false);
        session.with_state(|s| {
            s.remember_forgotten(keys);
            if latched {
                s.latch_current();
            }
        });
    }
}
