//! The decision pipeline, without HTTP: one [`Decider`] holds the serving policy set, the
//! turn state (batches' and hook sessions'), the approvals and budget counts kept beside it,
//! the shadow set, and the decision sinks ([`Decisions`]: metrics, the decision log, spans).
//!
//! Every route that judges a batch (`/v1/decide`, `/v1/data/{module}/decide`, AuthZEN) hands
//! it to [`Decider::decide`] or [`Decider::decide_value`], and `/v1/hooks` hands its events to
//! [`Decider::hook_event`]; the routes only read HTTP (bodies, headers, tokens) and write the
//! answer. A program that embeds the server gets the same pipeline from
//! [`crate::Server::decider`] and judges in process, with nothing of axum in the calls.
//!
//! The order of one batch, in one place:
//! 1. read (the one-pass reader, [`one_pass`], or the strict one, [`strict`], which gives
//!    every error with its place), check the caps, pick the policy;
//! 2. the caller's principal in, the executor's own latch names checked, carried approvals
//!    and counts refused;
//! 3. the turn's kept outputs in; judged against the turn state, budgets and approvals
//!    ([`crate::turn_state::TurnState::judge`], fail-closed when a shared store cannot
//!    answer);
//! 4. afterwards ([`after`]): outputs kept and awaited, asks recorded, the shadow set
//!    compared, and the decision recorded in every sink.

mod after;
mod one_pass;
mod strict;

use crate::api_error::ApiError;
use crate::budgets::Book;
use crate::config::AskMode;
use crate::decisions::{Decisions, Record};
use crate::limits::Limits;
use crate::shadow::Shadow;
use crate::turn_state::{ApprovalStore, HookKey, HookSessions, HookStateError, TurnState};
use axum::http::StatusCode;
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;
use toolgate_engine::{Policy, PolicySet, PolicyStore, RequestError, Response};
use toolgate_hooks::Handled;
use toolgate_turns::SessionTurns;
use toolgate_turns::{Origin, SessionError};

/// A judged batch as the pipeline gives it to a route: the engine's response, where its
/// latch state came from, the decision id.
pub(crate) type Judged = (Response, Option<Origin>, String);

/// One batch judged by a [`Decider`].
#[derive(Debug)]
#[non_exhaustive]
pub struct Decided {
    /// The engine's answer, one decision per call.
    pub response: Response,
    /// Where the turn's latch state came from (`None` for a batch with no session).
    pub session: Option<Origin>,
    /// The id the decision log and the response headers carry.
    pub decision_id: String,
}

impl From<Judged> for Decided {
    fn from((response, session, decision_id): Judged) -> Self {
        Decided {
            response,
            session,
            decision_id,
        }
    }
}

/// Who is asking, as the server knows it.
#[derive(Debug, Clone)]
pub enum Caller {
    /// No verified token: the request's own `facts.principal`, as the executor sent it.
    AsSent,
    /// A verified token's principal (`None`: no token); the request may not bring its own.
    Verified(Option<Value>),
}

impl Caller {
    /// Puts the verified principal in a request's `facts.principal`; refuses a request that
    /// brought its own when the caller's was verified.
    pub(crate) fn apply(&self, principal: &mut Option<Value>) -> Result<(), ApiError> {
        if let Caller::Verified(verified) = self {
            if principal.is_some() {
                return Err(carried_principal());
            }
            principal.clone_from(verified);
        }
        Ok(())
    }
}

/// The decision pipeline: policy set, turn state, approvals, budgets, shadow set and
/// sinks; see the module documentation for the order of a batch.
pub struct Decider {
    /// The serving policy set, swapped whole by reloads.
    pub(crate) policies: PolicyStore,
    /// Turn-scoped latch state by session: in memory, or in a shared store.
    pub(crate) turns: TurnState,
    /// Coding-agent hook sessions (`/v1/hooks/{agent}`), in the one turn model: in memory,
    /// or beside `turns` in the shared store.
    pub(crate) hook_sessions: HookSessions,
    /// The asks waiting for a person and the approvals given, kept where the turn state is.
    pub(crate) approvals: ApprovalStore,
    /// The counts of budgets over batches (`per session`, `within 24h per principal`, ...).
    pub(crate) budgets: Book,
    /// Where every judged batch is recorded: metrics, the decision log, spans, ids.
    pub(crate) decisions: Arc<Decisions>,
    /// The shadow policy set (`--shadow`): judged beside the serving set, never answering.
    pub(crate) shadow: Option<Shadow>,
    /// What an ask does when nobody answers it (`--ask`).
    pub(crate) ask: AskMode,
    /// Request caps.
    pub(crate) limits: Limits,
    /// The module a request that names none is judged by when several are loaded.
    pub(crate) default_policy: Option<String>,
}

impl Decider {
    /// The serving policy set.
    pub fn policies(&self) -> &PolicyStore {
        &self.policies
    }

    /// The decision sinks: metrics, the decision log, spans.
    pub fn decisions(&self) -> &Arc<Decisions> {
        &self.decisions
    }

    /// Judges one `/v1/decide` request body (its text, as the client sent it): read in one
    /// pass where it can be, else by the strict reader, which gives the exact error. With a
    /// `module`, the batch is judged by that policy (`/v1/data/{module}/decide`), and a
    /// request naming another is refused.
    ///
    /// A denial is a normal answer; an error is a request that cannot be judged (invalid,
    /// over a cap, naming no loaded policy, a session the store refuses), or no policy
    /// loaded yet.
    pub async fn decide(
        &self,
        text: &str,
        module: Option<&str>,
        caller: &Caller,
    ) -> Result<Decided, ApiError> {
        self.judged(text, module, caller).await.map(Decided::from)
    }

    /// [`Decider::decide`] for a request already read into a JSON tree (the strict path).
    pub async fn decide_value(
        &self,
        value: Value,
        module: Option<&str>,
        caller: &Caller,
    ) -> Result<Decided, ApiError> {
        self.judge(value, module, caller).await.map(Decided::from)
    }

    /// [`Decider::decide`] as the routes use it.
    pub(crate) async fn judged(
        &self,
        text: &str,
        module: Option<&str>,
        caller: &Caller,
    ) -> Result<Judged, ApiError> {
        match self.judge_fast(text, module, caller).await {
            Some(done) => done,
            None => self.judge(self.parse_text(text)?, module, caller).await,
        }
    }

    /// Judges one agent event of a hook session (`/v1/hooks`): `judge` runs on the
    /// session's state under its lock (in memory or in the shared store); a pre-tool event's
    /// decision is compared with the shadow set and recorded in every sink like a batch,
    /// and its id set on `reply` by `attach`.
    pub(crate) async fn hook_event(
        &self,
        policy: &Policy,
        key: HookKey<'_>,
        (session, turn): (&str, Option<&str>),
        judge: impl FnMut(&mut SessionTurns) -> Handled,
    ) -> Result<(Handled, Option<String>), HookStateError> {
        let started = Instant::now();
        let handled = self.hook_sessions.with(key, started, judge).await?;
        let id =
            handled.response.as_ref().map(|response| {
                // The shadow set judges the call as the hook judge built it; nothing of its
                // decision reaches the session or the agent.
                let flips = self.shadow.as_ref().zip(handled.request.as_ref()).and_then(
                    |(shadow, request)| {
                        shadow.compare(policy, response, |p| Some(p.decide(request)))
                    },
                );
                self.decisions.record(
                    Record::new(started, response)
                        .session(Some(session), turn)
                        .shadow(flips.as_ref()),
                )
            });
        Ok((handled, id))
    }

    pub(crate) fn client_error(&self, e: ApiError) -> ApiError {
        self.decisions
            .metrics()
            .client_errors
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        e
    }

    /// The body read by the strict reader into a tree: errors carry a line and column, or
    /// the path of a duplicate key.
    pub(crate) fn parse_text(&self, text: &str) -> Result<Value, ApiError> {
        toolgate_engine::parse_json(text).map_err(|e| {
            self.client_error(match e {
                RequestError::Json {
                    line,
                    column,
                    message,
                } => ApiError::bad_request(
                    "json",
                    format!("body is not valid JSON: {message}"),
                    Some(format!("line {line}, column {column}")),
                ),
                RequestError::DuplicateKey { ref path, .. } => {
                    ApiError::bad_request("duplicate_key", e.to_string(), Some(path.clone()))
                }
                other => schema_error(other),
            })
        })
    }

    /// The policy a request names, or the only one loaded.
    pub(crate) fn pick_policy<'a>(
        &self,
        set: &'a PolicySet,
        name: Option<&str>,
    ) -> Result<&'a Arc<Policy>, ApiError> {
        match name {
            Some(m) => set.get(m).ok_or_else(|| {
                self.client_error(ApiError::not_found(format!(
                    "no policy module `{m}` is loaded; loaded: {}",
                    loaded_names(set)
                )))
            }),
            None => self.unnamed_policy(set).ok_or_else(|| {
                self.client_error(ApiError::bad_request(
                    "schema",
                    format!(
                        "several policies are loaded ({}); name one with `policy`, or start \
                         the server with --default-policy NAME",
                        loaded_names(set)
                    ),
                    Some("policy".into()),
                ))
            }),
        }
    }

    /// The policy for a request that names none: the only one loaded, else the one
    /// `--default-policy` names (when it is loaded).
    pub(crate) fn unnamed_policy<'a>(&self, set: &'a PolicySet) -> Option<&'a Arc<Policy>> {
        set.only()
            .or_else(|| self.default_policy.as_deref().and_then(|m| set.get(m)))
    }

    /// The (session, turn) pair, when both are given; an error when only one is.
    pub(crate) fn session_turn(
        &self,
        session: &Option<String>,
        turn: &Option<String>,
    ) -> Result<Option<(String, String)>, ApiError> {
        match (session, turn) {
            (Some(s), Some(t)) => {
                self.limits
                    .check_id("session", s)
                    .and_then(|()| self.limits.check_id("turn", t))
                    .map_err(|e| self.client_error(e))?;
                Ok(Some((s.clone(), t.clone())))
            }
            (None, None) => Ok(None),
            _ => Err(self.client_error(ApiError::bad_request(
                "schema",
                "`session` and `turn` go together",
                Some(if session.is_some() { "turn" } else { "session" }.into()),
            ))),
        }
    }

    /// A session the store cannot start: 503, counted.
    fn session_refused(&self, e: SessionError) -> ApiError {
        self.decisions
            .metrics()
            .sessions_refused
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "sessions_full",
            e.to_string(),
        )
    }
}

/// A request that carries `facts.approvals` to the server: refused, since the server keeps
/// approvals itself and lets each be used once.
fn carried_approvals() -> ApiError {
    ApiError::bad_request(
        "schema",
        "the server keeps approvals itself: a person records one with `POST /v1/approvals`, and the session's next batch uses it; a request may not carry `facts.approvals`",
        Some("facts.approvals".into()),
    )
}

/// A request that brings its own `facts.principal` to a server that verifies tokens: who is
/// asking is what the bearer token proves, never what the executor says.
fn carried_principal() -> ApiError {
    ApiError::bad_request(
        "schema",
        "this server takes the principal from the verified bearer token (--jwks), so a request may not carry `facts.principal`",
        Some("facts.principal".into()),
    )
}

/// A request that brings its own budget counts (`facts.spent`): the server keeps them, and
/// an executor that could say how much was used could spend any budget again.
fn carried_spent() -> ApiError {
    ApiError::bad_request(
        "schema",
        "the server keeps budget counts itself, so a request may not carry `facts.spent`",
        Some("facts.spent".into()),
    )
}

pub(crate) fn schema_error(e: RequestError) -> ApiError {
    match e {
        RequestError::Schema { path, message } => {
            ApiError::bad_request("schema", message, Some(path))
        }
        other => ApiError::bad_request("schema", other.to_string(), None),
    }
}

/// The loaded module names, sorted and quoted, for errors that must say which exist.
pub(crate) fn loaded_names(set: &PolicySet) -> String {
    let mut names: Vec<String> = set.iter().map(|p| format!("`{}`", p.module())).collect();
    names.sort();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}
