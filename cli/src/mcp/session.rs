//! The state of one client connection: the turn, its latches, and the calls that ran.
//!
//! It is the hooks' [`SessionState`], kept in memory instead of on disk. Calls of one
//! connection may be judged concurrently; the lock is held for one judgement (read the
//! latches, decide, set them) and never across a call to upstream, so two calls cannot both
//! be judged against the latch state from before either.

use super::Config;
use crate::hook::state::SessionState;
use std::sync::Mutex;
use toolgate_engine::{Facts, Latched};

/// One connection's state, behind a lock.
#[derive(Default)]
pub struct Session {
    state: Mutex<SessionState>,
}

impl Session {
    /// Runs `f` on the state with the lock held.
    ///
    /// A lock poisoned by a panic in another judgement leaves state that may have missed an
    /// update, so the turn is taken as latched (fail closed) before `f` sees it.
    pub fn with_state<T>(&self, f: impl FnOnce(&mut SessionState) -> T) -> T {
        let mut guard = self.state.lock().unwrap_or_else(|poisoned| {
            let mut guard = poisoned.into_inner();
            guard.latched = Latched::Flag(true);
            guard
        });
        self.state.clear_poison();
        f(&mut guard)
    }

    /// The facts a `tools/list` is answered with: the configured facts, the stage, and the
    /// latches of the current turn (`turn` starts a new one when it differs from the last).
    pub fn offer_facts(&self, config: &Config, turn: Option<String>) -> Facts {
        let latched = self.with_state(|state| {
            if turn.is_some() && turn != state.turn {
                state.start_turn(turn);
            }
            state.latched.clone()
        });
        Facts {
            stage: Some(config.stage.clone()),
            latched,
            ..config.facts.clone()
        }
    }
}
