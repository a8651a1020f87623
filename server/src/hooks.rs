//! `POST /v1/hooks/{agent}`: coding-agent hook events over HTTP, for agents configured with
//! HTTP hooks (Claude Code's `"type": "http"`). The same judge as `toolgate hook` (the
//! `toolgate-hooks` crate) over the same turn model (`toolgate_turns::SessionTurns`), with each
//! session's state held instead of in a file in memory ([`toolgate_turns::TurnsMap`]), or,
//! under `--state redis://...`, in the shared store beside the batches' turn state, so every
//! replica judges a session alike ([`super::turn_state::HookSessions`]).
//!
//! An agent treats a failed HTTP hook as a non-blocking error, so the tool would run: every
//! answer toolgate can still give is therefore a 200 carrying a decision, and anything that
//! stops a pre-tool event from being judged (no policy, an unreadable or oversized body, a
//! full store, an id over the length cap, a missing token, a full connection table) is
//! answered with a denial in the agent's own format.

use super::state::AppState;
use super::turn_state::HookKey;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use toolgate_engine::Facts;
use toolgate_hooks::agents::Agent;
use toolgate_hooks::{Answer, Event, Judge};
use toolgate_turns::NewIds;
use toolgate_turns::{TurnsMap, TurnsMapLimits};

/// The path prefix of the hook endpoints.
pub const PREFIX: &str = "/v1/hooks/";

/// Longest agent session id taken, in bytes; agents send UUIDs.
pub const MAX_SESSION_ID_BYTES: usize = 256;

/// Marks a hook request whose body was over the hook body limit: the guard passes it on
/// with no body, and the handler answers with a denial.
#[derive(Debug, Clone, Copy)]
pub struct BodyTooLarge(pub usize);

/// Query parameters of a hook endpoint.
#[derive(serde::Deserialize)]
pub struct HookQuery {
    /// The policy module (default: the only one loaded).
    policy: Option<String>,
    /// The stage (default: the policy's only stage).
    stage: Option<String>,
    /// Answer "allow" for allowed calls.
    #[serde(default)]
    approve: bool,
}

/// The hook sessions' store: bounded, ids capped, unlatched sessions expiring after `ttl`.
pub fn sessions(max_sessions: usize, ttl: Duration, keep_latched: Duration) -> TurnsMap {
    TurnsMap::new(TurnsMapLimits {
        max_sessions,
        // agent name, module name (an identifier) and session id (after a verified caller's
        // 32-character scope and a slash), NUL-separated.
        max_key_bytes: 32 + 256 + 33 + MAX_SESSION_ID_BYTES,
        ttl,
        keep_latched,
    })
}

/// `POST /v1/hooks/{agent}`.
pub async fn hook(
    State(state): State<Arc<AppState>>,
    Path(agent): Path<String>,
    Query(query): Query<HookQuery>,
    headers: HeaderMap,
    too_large: Option<Extension<BodyTooLarge>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let Some(agent) = Agent::from_name(&agent) else {
        let known: Vec<&str> = Agent::ALL.iter().map(|a| a.name()).collect();
        return super::api_error::ApiError::not_found(format!(
            "no hook for agent `{agent}`; there are {}",
            known.join(", ")
        ))
        .into_response();
    };
    let deny = |reason: String| answer(agent, &Answer::Deny { reason });
    if let Some(Extension(BodyTooLarge(limit))) = too_large {
        return deny(format!(
            "Blocked: this tool call's hook event is over toolgate's {limit}-byte limit, so it \
             cannot be judged. Split the work into smaller calls."
        ));
    }
    let text = match body {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            return deny(format!(
                "Blocked: toolgate could not read the hook event: {e}."
            ))
        }
    };
    let event = match agent.read(&text) {
        Ok(event) => event,
        Err(e) => return deny(format!("Blocked: toolgate could not judge this call: {e}.")),
    };
    let principal = match state.hook_caller(&headers).await {
        Ok(principal) => principal,
        // Not applied to any session: a forged prompt event cannot end a latched turn.
        Err(why) => {
            return match event {
                Event::BeforeTool { .. } => deny(format!(
                    "Blocked: toolgate's hook endpoint refused this event: {why}. This call was \
                     not judged."
                )),
                _ => answer(agent, &Answer::Nothing),
            }
        }
    };
    let Some(session) = event.session() else {
        return answer(agent, &Answer::Nothing);
    };
    // From here the event is known: what cannot be judged is answered in its own shape. Only
    // a pre-tool event gates anything; a prompt or post-tool event that cannot be recorded is
    // answered with nothing (the session's state then errs towards latched: its turn does not
    // advance, and a call it did not record does not count for `called_before`).
    let gates = matches!(event, Event::BeforeTool { .. });
    let deny = |reason: String| {
        if gates {
            deny(reason)
        } else {
            answer(agent, &Answer::Nothing)
        }
    };
    let set = state.decider.policies.snapshot();
    let policy = match query.policy.as_deref() {
        Some(m) => set.get(m),
        None => state.decider.unnamed_policy(&set),
    };
    let Some(policy) = policy else {
        return deny(format!(
            "Blocked: toolgate has no single policy to judge this call with (name one with \
             ?policy=MODULE; loaded: {}).",
            super::decider::loaded_names(&set)
        ));
    };
    if session.len() > MAX_SESSION_ID_BYTES {
        return deny(format!(
            "Blocked: the agent's session id is {} bytes long, more than toolgate's \
             {MAX_SESSION_ID_BYTES}.",
            session.len()
        ));
    }
    let judge = Judge::new(policy, query.stage, query.approve);
    // A verified caller's sessions are its own: the same session id sent with another
    // principal's token names another session, so one caller's events (a post-tool event
    // that counts for `called_before`, a prompt that starts a turn) never reach another's.
    let scoped = principal.as_ref().map(|p| principal_scope(p, session));
    let key = HookKey {
        agent: agent.name(),
        module: policy.module(),
        session: scoped.as_deref().unwrap_or(session),
    };
    let facts = Facts {
        principal,
        ..Facts::default()
    };
    let judged = state
        .decider
        .hook_event(policy, key, (session, event.turn()), |s| {
            judge.judge(&event, s, &facts, NewIds::NeedSignal)
        })
        .await;
    match judged {
        Ok((handled, id)) => {
            let mut reply = answer(agent, &handled.answer);
            if let (Some(response), Some(id)) = (&handled.response, &id) {
                state.decider.decisions.attach(&mut reply, response, id);
            }
            reply
        }
        Err(e) => deny(format!("Blocked: toolgate cannot track this session: {e}.")),
    }
}

/// The session key of `session` for a verified caller: a digest of the principal's tenant
/// and subject (fixed length, so the key's bound holds), then the agent's session id.
fn principal_scope(principal: &serde_json::Value, session: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in ["tenant", "sub"] {
        let value = principal.get(part).and_then(|v| v.as_str()).unwrap_or("");
        h.update((value.len() as u64).to_be_bytes());
        h.update(value.as_bytes());
    }
    let digest: String = h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{digest}/{session}")
}

/// The agent's answer as a 200; `{}` when there is no decision.
fn answer(agent: Agent, answer: &Answer) -> Response {
    Json(agent.render(answer).unwrap_or_else(|| json!({}))).into_response()
}

/// The raw HTTP answer to a hook request on a connection over the server's cap: a 200
/// denial in `agent`'s format, so the agent blocks the call instead of running it.
pub fn over_capacity(agent: Agent) -> Vec<u8> {
    let reason = "Blocked: toolgate's server is at its connection limit, so this call could \
                  not be judged. Retry shortly.";
    let body = agent
        .render(&Answer::Deny {
            reason: reason.into(),
        })
        .unwrap_or_else(|| json!({}))
        .to_string();
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The agent a request head (`POST /v1/hooks/AGENT...`) names, if it is a hook request.
pub fn agent_of_head(head: &[u8]) -> Option<Agent> {
    let line = head.split(|b| *b == b'\r' || *b == b'\n').next()?;
    let rest = line.strip_prefix(b"POST ")?;
    let path = rest.split(|b| *b == b' ').next()?;
    let path = std::str::from_utf8(path).ok()?;
    let name = path.strip_prefix(PREFIX)?;
    let name = name.split(['?', '/']).next()?;
    Agent::from_name(name)
}
