//! The state of one client connection: its turns, their latches, and the calls that ran.
//!
//! It is the one turn model (`toolgate_turns::SessionTurns`), kept in memory per connection.
//! An id in `_meta` that the connection has never seen is the host's signal of a new turn
//! ([`NewIds::StartTurn`]); an id it has seen goes back to that turn, so two conversations
//! interleaved on one connection each keep their own latches. Calls of one connection may be
//! judged concurrently; the lock is held for one judgement (read the latches, decide, set
//! them) and never across a call to upstream, so two calls cannot both be judged against the
//! latch state from before either.

use super::Config;
use std::sync::Mutex;
use toolgate_engine::{Facts, Latched};
use toolgate_turns::{NewIds, SessionTurns};

/// How the proxy reads a turn id it has not seen on this connection.
pub const NEW_IDS: NewIds = NewIds::StartTurn;

/// One connection's state, behind a lock.
#[derive(Default)]
pub struct Session {
    state: Mutex<SessionTurns>,
}

impl Session {
    /// Runs `f` on the state with the lock held.
    ///
    /// A lock poisoned by a panic in another judgement leaves state that may have missed an
    /// update, so the current turn is taken as latched (fail closed) before `f` sees it.
    pub fn with_state<T>(&self, f: impl FnOnce(&mut SessionTurns) -> T) -> T {
        let mut guard = self.state.lock().unwrap_or_else(|poisoned| {
            let mut guard = poisoned.into_inner();
            guard.latch_current();
            guard
        });
        self.state.clear_poison();
        f(&mut guard)
    }

    /// The facts a `tools/list` is answered with: `base` (the configured facts, with the
    /// request's verified principal), the stage, and the latches of the turn `turn` names (an unseen id starts one). Every latch when the turn
    /// cannot be judged.
    pub fn offer_facts(&self, config: &Config, base: &Facts, turn: Option<&str>) -> Facts {
        let latched = self.with_state(|state| {
            state
                .place(&config.policy, turn, NEW_IDS)
                .map_or(Latched::Flag(true), |placed| placed.latched)
        });
        Facts {
            stage: Some(config.stage.clone()),
            latched,
            ..base.clone()
        }
    }
}
