//! Where the server keeps turn state: in this process (the default, one instance), or in a
//! shared Redis/Valkey store (`--state redis://...`, several replicas).
//!
//! Both are used the same way, once per batch that names a session and turn ([`TurnState::
//! judge`]): the batch is judged first with only its own latch facts, which also gives the
//! latches it sets by itself; one exchange with the store records those and returns what the
//! turn held before; only when that adds a latch is the batch judged again with it. So the
//! shared store costs one round trip per batch, and what is stored never depends on the
//! order in which replicas finish.
//!
//! When the shared store fails, the batch is judged fail-closed ([`fail_closed`]).
//!
//! `/v1/hooks` sessions ([`HookSessions`]) are kept beside them: in memory, or in the same
//! shared store, under the same loss detection.

mod fail_closed;
mod latches;
pub mod redis_store;
mod stats;

use redis_store::{HookKey, RedisStore, Reply, SharedHookError};
use std::sync::Arc;
use std::time::Instant;
use toolgate_engine::{Latched, Policy, Response};
use toolgate_turns::{
    Carried, MapError, Origin, SessionError, SessionStore, SessionTurns, TurnsMap,
};

/// The store of turn state.
pub enum TurnState {
    /// This process's memory (`toolgate_turns::SessionStore`), swept by the server.
    Memory(SessionStore),
    /// A Redis or Valkey store shared by replicas.
    Redis(Arc<RedisStore>),
}

/// What judging a batch against the store gave.
pub enum Judged {
    /// The response, and where the turn's state came from.
    Done(Response, Origin),
    /// The store refused to start or continue the session (503).
    Refused(SessionError),
}

impl TurnState {
    /// Judges one batch of `turn` with the state the store holds for it, and records the
    /// latches the batch sets. `decide` judges the batch with the given latch state carried
    /// in (unioned with the request's own), or with none.
    pub async fn judge(
        &self,
        policy: &Policy,
        (session, turn): (&str, &str),
        now: Instant,
        mut decide: impl FnMut(Option<&Latched>) -> Response,
    ) -> Judged {
        let first = decide(None);
        let carried = match self {
            TurnState::Memory(store) => match store.begin(policy, session, turn, now) {
                Ok(carried) => {
                    store.record(policy, session, turn, &first.latched, now);
                    carried
                }
                Err(e) => return Judged::Refused(e),
            },
            TurnState::Redis(store) => {
                match store.exchange(policy, session, turn, &first.latched).await {
                    Ok(Reply::Carried(carried)) => carried,
                    Ok(Reply::TooManyTurns) => return Judged::Refused(SessionError::TooManyTurns),
                    Err(redis_store::Unavailable) => {
                        let all = decide(Some(&Latched::Flag(true)));
                        return Judged::Done(
                            fail_closed::relabel(policy, &first, all),
                            Origin::Unavailable,
                        );
                    }
                }
            }
        };
        if let Some(latch) = carried.unjudgeable(policy) {
            return Judged::Done(
                fail_closed::undeclared(policy, first, latch),
                carried.origin,
            );
        }
        if latches::covers(&first.latched, &carried.latched) {
            Judged::Done(first, carried.origin)
        } else {
            Judged::Done(decide(Some(&carried.latched)), carried.origin)
        }
    }

    /// The state `turn` would carry, changing nothing (`/v1/offer`). Every latch when the
    /// shared store cannot say.
    pub async fn peek(&self, policy: &Policy, session: &str, turn: &str, now: Instant) -> Carried {
        match self {
            TurnState::Memory(store) => store.peek(policy, session, turn, now),
            TurnState::Redis(store) => store
                .peek(policy, session, turn)
                .await
                .unwrap_or(Carried::every_latch(Origin::Unavailable)),
        }
    }

    /// Drops what the in-memory store no longer needs; the shared store's keys expire by
    /// themselves.
    pub fn expire(&self, now: Instant) {
        if let TurnState::Memory(store) = self {
            store.expire(now);
        }
    }

    /// (sessions, bytes) the in-memory store holds; zero for the shared one, whose size is
    /// the store's own to report.
    pub fn held(&self) -> (usize, usize) {
        match self {
            TurnState::Memory(store) => (store.len(), store.bytes()),
            TurnState::Redis(_) => (0, 0),
        }
    }

    /// The `state` object of `/health`, and whether the store is up.
    pub async fn health(&self) -> (serde_json::Value, bool) {
        match self {
            TurnState::Memory(_) => (serde_json::json!({"store": "memory", "up": true}), true),
            TurnState::Redis(store) => {
                let up = store.ping().await;
                (serde_json::json!({"store": "redis", "up": up}), up)
            }
        }
    }

    /// Says on standard error where turn state is kept, whether a shared store answers and
    /// what its persistence means for latches (the server starts either way, and judges
    /// fail-closed until it answers). Refuses a store whose eviction policy can drop
    /// session keys.
    pub async fn announce(&self) -> Result<(), String> {
        let TurnState::Redis(store) = self else {
            return Ok(());
        };
        match store.inspect().await {
            Ok(found) => {
                if let Some(policy) = &found.evicting {
                    return Err(redis_store::evicting_error(policy));
                }
                // Every slot's marker is read (created, under --state-new) now, not at the
                // first batch: a replica started later then finds them all.
                let markers = match store.ensure_checked().await {
                    Ok(()) => "",
                    Err(_) => " (its slot markers could not all be read yet: judging fail-closed until they are)",
                };
                eprintln!(
                    "toolgate: turn state in redis (up){markers}; {}",
                    found.persistence()
                );
            }
            Err(_) => eprintln!(
                "toolgate: turn state in redis (down: judging fail-closed until it answers and its eviction policy is checked)"
            ),
        }
        Ok(())
    }

    /// The store's metrics, appended to `/metrics`.
    pub fn render_metrics(&self, out: &mut String) {
        if let TurnState::Redis(store) = self {
            store.stats.render(out);
        }
    }
}

/// Where `/v1/hooks` sessions' turn state ([`SessionTurns`]) is kept: this process's memory,
/// or the shared store when the server keeps its turn state there (`--state`), so replicas
/// behind one load balancer judge one hook session alike.
pub enum HookSessions {
    /// Bounded, in this process.
    Memory(TurnsMap),
    /// In the shared store, by compare-and-set ([`RedisStore::with_hook_session`]).
    Shared(Arc<RedisStore>),
}

/// Why a hook session's state could not be reached; the surface denies the call.
#[derive(Debug, thiserror::Error)]
pub enum HookStateError {
    /// The in-memory store refused the session.
    #[error(transparent)]
    Memory(#[from] MapError),
    /// The shared store could not be read or written.
    #[error(transparent)]
    Shared(#[from] SharedHookError),
}

impl HookSessions {
    /// The hook sessions of a server whose batch turn state is `turns`: shared when that
    /// is, else `memory`.
    pub fn beside(turns: &TurnState, memory: impl FnOnce() -> TurnsMap) -> Self {
        match turns {
            TurnState::Redis(store) => HookSessions::Shared(store.clone()),
            TurnState::Memory(_) => HookSessions::Memory(memory()),
        }
    }

    /// Runs `f` on the state of the session `key` and keeps the result. `f` may run more
    /// than once on the shared store (when another replica wrote the session first); only
    /// the run whose state was kept counts.
    pub async fn with<R>(
        &self,
        key: HookKey<'_>,
        now: Instant,
        f: impl FnMut(&mut SessionTurns) -> R,
    ) -> Result<R, HookStateError> {
        match self {
            HookSessions::Memory(map) => {
                let key = format!("{}\0{}\0{}", key.agent, key.module, key.session);
                Ok(map.with(&key, now, f)?)
            }
            HookSessions::Shared(store) => Ok(store.with_hook_session(key, f).await?),
        }
    }

    /// Drops idle sessions of the in-memory store; the shared store's keys expire by
    /// themselves.
    pub fn expire(&self, now: Instant) {
        if let HookSessions::Memory(map) = self {
            map.expire(now);
        }
    }
}
