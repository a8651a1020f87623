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
//! The batch's budget counts over batches are kept beside the turn state: in memory by the
//! [`Book`], whose lock the whole judgement runs under; in the shared store inside the same
//! exchange, checked and added atomically by the script, and in a cluster a principal's or a
//! tenant's count by one more script on its own slot ([`redis_store::budgets`] says why two
//! replicas never spend one remainder, across slots too). A batch with no session is judged
//! here too, for its counts alone.
//!
//! When the shared store fails, the batch is judged fail-closed ([`fail_closed`]).
//!
//! `/v1/hooks` sessions ([`HookSessions`]) are kept beside them: in memory, or in the same
//! shared store, under the same loss detection. So are approvals ([`ApprovalStore`]): a
//! batch's asks take their approvals between its judgements, inside [`TurnState::judge`].

//!
//! Without the `redis` feature only the memory store exists, and a configuration that names
//! a shared one is refused at start-up ([`TurnState::open`]).

mod approval_store;
mod fail_closed;
mod latches;
#[cfg(feature = "redis")]
pub mod redis_store;
#[cfg(feature = "redis")]
mod stats;

pub use approval_store::ApprovalStore;

use crate::approvals::batch::Keeper;
use crate::budgets::{Book, Given, Scopes};
use crate::config::RedisConfig;
#[cfg(not(feature = "redis"))]
use crate::error::Feature;
use crate::error::ServerError;
#[cfg(feature = "redis")]
use redis_store::{BatchCounts, Counted, RedisStore, Reply, SharedHookError};
#[cfg(feature = "redis")]
use std::sync::Arc;
use std::time::Instant;
use toolgate_engine::{Latched, Policy, Response};
use toolgate_turns::{
    Carried, MapError, Origin, SessionError, SessionLimits, SessionStore, SessionTurns, TurnsMap,
};

/// Names one hook session: the agent, the policy module and the agent's session id.
#[derive(Debug, Clone, Copy)]
pub struct HookKey<'a> {
    /// The agent's name (`claude-code`, ...).
    pub agent: &'a str,
    /// The judging policy's module.
    pub module: &'a str,
    /// The agent's session id (length-capped by the caller).
    pub session: &'a str,
}

/// The store of turn state.
pub enum TurnState {
    /// This process's memory (`toolgate_turns::SessionStore`), swept by the server.
    Memory(SessionStore),
    /// A Redis or Valkey store shared by replicas.
    #[cfg(feature = "redis")]
    Redis(Arc<RedisStore>),
}

/// What judging a batch against the store gave.
pub enum Judged {
    /// The response, and where the turn's state came from (`None` for a batch with no
    /// session).
    Done(Response, Option<Origin>),
    /// The store refused to start or continue the session (503).
    Refused(SessionError),
}

impl Judged {
    /// The response, unless the store refused the session.
    fn response(&self) -> Option<&Response> {
        match self {
            Judged::Done(r, _) => Some(r),
            Judged::Refused(_) => None,
        }
    }
}

/// The batch's final response: `first` (judged with only its own latches) when the turn's
/// latches add nothing to them, else judged again by `again` with the turn's; every call
/// denied as `state` when the turn holds a latch the policy does not declare.
fn settle(
    policy: &Policy,
    first: Response,
    carried: &Carried,
    again: impl FnOnce(&Latched) -> Response,
) -> Response {
    if let Some(latch) = carried.unjudgeable(policy) {
        return fail_closed::undeclared(policy, first, latch);
    }
    if latches::covers(&first.latched, &carried.latched) {
        first
    } else {
        again(&carried.latched)
    }
}

/// A judgement of the batch ([`TurnState::judge`]'s `decide`) behind a reference.
#[cfg(feature = "redis")]
type Decide<'d> = dyn FnMut(Option<&Latched>, Given, Option<&[String]>) -> Response + 'd;

/// [`TurnState::judge`] against the shared store: one round trip for the turn state and the
/// counts in the session's slot together, one more per other slot a count is in (a
/// principal's or a tenant's in a cluster), again only when the counts changed under the
/// batch or must wait for the turn's latches ([`redis_store::budgets`]); fail-closed when the
/// store cannot be reached, or the counts kept changing for
/// [`redis_store::budgets::MAX_ATTEMPTS`] judgements. A judgement that asks takes the
/// approvals its asks name in one more round trip ([`approval_store::approved_shared`]).
#[cfg(feature = "redis")]
async fn shared_judge(
    store: &RedisStore,
    policy: &Policy,
    ids: Option<(&str, &str)>,
    scopes: Option<Scopes>,
    keeper: &mut Keeper<'_>,
    mut decide: impl FnMut(Option<&Latched>, Given, Option<&[String]>) -> Response,
) -> Judged {
    let mut counts = scopes.as_ref().map(|s| store.counts(policy, s));
    // Judged with no count and, in a turn, every latch: the store could not say. The
    // approvals taken so far were taken atomically, so they may still be used once.
    let unavailable = |first: &Response, granted: Option<Vec<String>>, decide: &mut Decide<'_>| {
        let none = scopes.as_ref().map(|_| Vec::new());
        let granted = granted.as_deref();
        let response = match ids {
            Some(_) => fail_closed::relabel(
                policy,
                first,
                decide(Some(&Latched::Flag(true)), none, granted),
            ),
            None => fail_closed::counts_unknown(policy, decide(None, none, granted)),
        };
        Judged::Done(response, Some(Origin::Unavailable))
    };
    // The turn's state, once the exchange has recorded the batch's own latches (every latch
    // a call of the batch sets, allowed or not: the same for every judgement of it).
    let mut carried: Option<Carried> = None;
    let mut conflicts = 0;
    let mut last = None;
    let mut pruned = false;
    while conflicts < redis_store::budgets::MAX_ATTEMPTS {
        let given = counts.as_ref().map(BatchCounts::given);
        let first = decide(None, given.clone(), keeper.granted().as_deref());
        let own = approval_store::approved_shared(store, keeper, first, |a| {
            decide(None, given.clone(), Some(a))
        })
        .await;
        if let Some(c) = counts.as_mut().filter(|_| !pruned) {
            c.drop_unread(policy, &own);
        }
        pruned = true;
        if let (Some(ids), None) = (ids, &carried) {
            let reply = store
                .exchange(
                    policy,
                    ids,
                    &own.latched,
                    counts.as_mut().map(|c| (c, &own)),
                )
                .await;
            match reply {
                Ok(Reply::Carried(turn, counted)) => {
                    carried = Some(turn);
                    if counted == Counted::Deferred {
                        // The counts in the session's slot wait for the judgement with the
                        // turn's latches, which must use the counts the store answered.
                        continue;
                    }
                }
                Ok(Reply::TooManyTurns) => return Judged::Refused(SessionError::TooManyTurns),
                Ok(Reply::Conflict) => {
                    conflicts += 1;
                    last = Some(own);
                    continue;
                }
                Err(redis_store::Unavailable) => {
                    return unavailable(&own, keeper.granted(), &mut decide)
                }
            }
        }
        let origin = carried.as_ref().map(|c| c.origin);
        let mut response = match &carried {
            Some(turn) => {
                let settled = settle(policy, own, turn, |l| {
                    decide(Some(l), given.clone(), keeper.granted().as_deref())
                });
                // A latch's `asks` the turn brought: its approvals are taken too.
                approval_store::approved_shared(store, keeper, settled, |a| {
                    decide(Some(&turn.latched), given.clone(), Some(a))
                })
                .await
            }
            None => own,
        };
        let Some(c) = counts.as_mut() else {
            return Judged::Done(response, origin);
        };
        // No call a judgement already written to some count denied: every call allowed is
        // covered by every consumption written ([`redis_store::budgets`]).
        response = c.fence(response);
        match store.add_counts(c, &response).await {
            Ok(true) => return Judged::Done(response, origin),
            Ok(false) => {
                conflicts += 1;
                last = Some(response);
            }
            Err(redis_store::Unavailable) => {
                return unavailable(&response, keeper.granted(), &mut decide)
            }
        }
    }
    let first = match last {
        Some(first) => first,
        None => decide(None, None, keeper.granted().as_deref()),
    };
    unavailable(&first, keeper.granted(), &mut decide)
}

impl TurnState {
    /// The store `shared` names (`--state`), or one in memory; `boot` tells this process's
    /// writes apart in the shared store. A shared store is refused when its settings cannot
    /// work (TLS files, URL), or when this build has no `redis` feature; one that is only
    /// down is not.
    pub fn open(
        shared: Option<&RedisConfig>,
        limits: SessionLimits,
        boot: u64,
    ) -> Result<TurnState, ServerError> {
        let Some(config) = shared else {
            return Ok(TurnState::Memory(SessionStore::new(limits)));
        };
        #[cfg(feature = "redis")]
        return RedisStore::open(config, limits, boot)
            .map(|store| TurnState::Redis(Arc::new(store)))
            .map_err(ServerError::State);
        #[cfg(not(feature = "redis"))]
        return {
            let _ = (config, boot);
            Err(ServerError::Unsupported(Feature::Redis))
        };
    }

    /// Judges one batch with the state the store holds for its turn (`ids`, when it names a
    /// session and turn), and records the latches it sets; with `scopes` (a policy with
    /// budgets over batches, [`Scopes::of`]), with its budget counts too, and adds what it
    /// consumed: in `book` when turn state is in memory, in the store when it is shared
    /// (in the same round trip, and in a cluster one more per slot of a principal's or a
    /// tenant's count, [`redis_store::budgets`]). A judgement that asks has `keeper` take
    /// the approvals its asks name from `approvals` (kept where the turn state is) and is
    /// judged again with them. `decide` judges the batch with the given latch state
    /// carried in (unioned with the request's own), or with none, with the given counts
    /// (`facts.spent`), or the request's own, and with exactly the given approvals
    /// (`facts.approvals`), or none; it may run several times, and only the response
    /// returned counts.
    pub async fn judge(
        &self,
        policy: &Policy,
        ids: Option<(&str, &str)>,
        (scopes, book): (Option<Scopes>, &Book),
        (approvals, keeper): (&ApprovalStore, &mut Keeper<'_>),
        now: Instant,
        mut decide: impl FnMut(Option<&Latched>, Given, Option<&[String]>) -> Response,
    ) -> Judged {
        match self {
            TurnState::Memory(store) => book.judge(
                policy,
                scopes,
                now,
                |counts| {
                    let memory = approvals.memory();
                    let first = decide(None, counts.clone(), keeper.granted().as_deref());
                    let first = approval_store::approved_now(memory, keeper, first, |a| {
                        decide(None, counts.clone(), Some(a))
                    });
                    let Some((session, turn)) = ids else {
                        return Judged::Done(first, None);
                    };
                    let carried = match store.begin(policy, session, turn, now) {
                        Ok(carried) => {
                            store.record(policy, session, turn, &first.latched, now);
                            carried
                        }
                        Err(e) => return Judged::Refused(e),
                    };
                    let response = settle(policy, first, &carried, |l| {
                        let again = decide(Some(l), counts.clone(), keeper.granted().as_deref());
                        approval_store::approved_now(memory, keeper, again, |a| {
                            decide(Some(l), counts.clone(), Some(a))
                        })
                    });
                    Judged::Done(response, Some(carried.origin))
                },
                Judged::response,
            ),
            #[cfg(feature = "redis")]
            TurnState::Redis(store) => {
                shared_judge(store, policy, ids, scopes, keeper, decide).await
            }
        }
    }

    /// Whether this store keeps turns' tool outputs (`facts.outputs`, `POST /v1/outputs`):
    /// memory does; a shared store never holds agent text.
    pub fn keeps_outputs(&self) -> bool {
        matches!(self, TurnState::Memory(_))
    }

    /// The `facts.outputs` to judge a batch of `turn` with (see
    /// [`SessionStore::outputs_fact`]); `None` from a shared store, so checks that read them
    /// deny unless the request brings its own.
    pub fn outputs_fact(
        &self,
        policy: &Policy,
        session: &str,
        turn: &str,
        now: Instant,
    ) -> Option<serde_json::Value> {
        match self {
            TurnState::Memory(store) => store.outputs_fact(policy, session, turn, now),
            #[cfg(feature = "redis")]
            TurnState::Redis(_) => None,
        }
    }

    /// Records outputs of `turn`'s calls; whether they were kept (never by a shared store).
    pub fn record_outputs(
        &self,
        policy: &Policy,
        session: &str,
        turn: &str,
        items: &[serde_json::Value],
        now: Instant,
    ) -> bool {
        match self {
            TurnState::Memory(store) => store.record_outputs(policy, session, turn, items, now),
            #[cfg(feature = "redis")]
            TurnState::Redis(_) => false,
        }
    }

    /// After a batch of `turn`: awaits the untrusted outputs of its allowed calls.
    pub fn expect_outputs<'c>(
        &self,
        policy: &Policy,
        session: &str,
        turn: &str,
        calls: impl IntoIterator<Item = (&'c str, &'c str, &'c serde_json::Value)>,
        now: Instant,
    ) {
        match self {
            TurnState::Memory(store) => store.expect_outputs(policy, session, turn, calls, now),
            #[cfg(feature = "redis")]
            TurnState::Redis(_) => {}
        }
    }

    /// The state `turn` would carry, changing nothing (`/v1/offer`). Every latch when the
    /// shared store cannot say.
    pub async fn peek(&self, policy: &Policy, session: &str, turn: &str, now: Instant) -> Carried {
        match self {
            TurnState::Memory(store) => store.peek(policy, session, turn, now),
            #[cfg(feature = "redis")]
            TurnState::Redis(store) => store
                .peek(policy, session, turn)
                .await
                .unwrap_or(Carried::every_latch(Origin::Unavailable)),
        }
    }

    /// Drops what the in-memory store no longer needs; the shared store's keys expire by
    /// themselves.
    pub fn expire(&self, now: Instant) {
        #[cfg_attr(not(feature = "redis"), allow(irrefutable_let_patterns))]
        if let TurnState::Memory(store) = self {
            store.expire(now);
        }
    }

    /// Whether budget counts over batches are kept (`/health`): by every store, in memory, on
    /// a single shared node and in a cluster ([`redis_store::budgets`]).
    pub fn keeps_counts(&self) -> bool {
        true
    }

    /// (sessions, bytes) the in-memory store holds; zero for the shared one, whose size is
    /// the store's own to report.
    pub fn held(&self) -> (usize, usize) {
        match self {
            TurnState::Memory(store) => (store.len(), store.bytes()),
            #[cfg(feature = "redis")]
            TurnState::Redis(_) => (0, 0),
        }
    }

    /// The `state` object of `/health`, and whether the store is up.
    pub async fn health(&self) -> (serde_json::Value, bool) {
        match self {
            TurnState::Memory(_) => (serde_json::json!({"store": "memory", "up": true}), true),
            #[cfg(feature = "redis")]
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
    pub async fn announce(&self) -> Result<(), ServerError> {
        #[cfg(not(feature = "redis"))]
        return Ok(());
        #[cfg(feature = "redis")]
        {
            let TurnState::Redis(store) = self else {
                return Ok(());
            };
            store.announce().await.map_err(ServerError::State)
        }
    }

    /// The store's metrics, appended to `/metrics`.
    pub fn render_metrics(&self, out: &mut String) {
        #[cfg(feature = "redis")]
        if let TurnState::Redis(store) = self {
            store.stats.render(out);
        }
        #[cfg(not(feature = "redis"))]
        let _ = out;
    }
}

/// Where `/v1/hooks` sessions' turn state ([`SessionTurns`]) is kept: this process's memory,
/// or the shared store when the server keeps its turn state there (`--state`), so replicas
/// behind one load balancer judge one hook session alike.
pub enum HookSessions {
    /// Bounded, in this process.
    Memory(TurnsMap),
    /// In the shared store, by compare-and-set ([`RedisStore::with_hook_session`]).
    #[cfg(feature = "redis")]
    Shared(Arc<RedisStore>),
}

/// Why a hook session's state could not be reached; the surface denies the call.
#[derive(Debug, thiserror::Error)]
pub enum HookStateError {
    /// The in-memory store refused the session.
    #[error(transparent)]
    Memory(#[from] MapError),
    /// The shared store could not be read or written.
    #[cfg(feature = "redis")]
    #[error(transparent)]
    Shared(#[from] SharedHookError),
}

impl HookSessions {
    /// The hook sessions of a server whose batch turn state is `turns`: shared when that
    /// is, else `memory`.
    pub fn beside(turns: &TurnState, memory: impl FnOnce() -> TurnsMap) -> Self {
        match turns {
            #[cfg(feature = "redis")]
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
            #[cfg(feature = "redis")]
            HookSessions::Shared(store) => Ok(store.with_hook_session(key, f).await?),
        }
    }

    /// Drops idle sessions of the in-memory store; the shared store's keys expire by
    /// themselves.
    pub fn expire(&self, now: Instant) {
        #[cfg_attr(not(feature = "redis"), allow(irrefutable_let_patterns))]
        if let HookSessions::Memory(map) = self {
            map.expire(now);
        }
    }
}
