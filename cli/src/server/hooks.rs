//! `POST /v1/hooks/{agent}`: coding-agent hook events over HTTP, for agents configured with
//! HTTP hooks (Claude Code's `"type": "http"`). The same judge as `toolgate hook` (the
//! `hook` module), with each session's state held in memory here instead of a file.
//!
//! An agent treats a failed HTTP hook as a non-blocking error, so the tool would run: every
//! answer toolgate can still give is therefore a 200 carrying a decision, and anything that
//! stops a pre-tool event from being judged (no policy, an unreadable body, a full store)
//! is answered with a denial in the agent's own format.

use super::api_error::ApiError;
use super::state::AppState;
use crate::hook::agents::Agent;
use crate::hook::state::SessionState;
use crate::hook::{Answer, Judge};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use toolgate_engine::Latched;

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

/// Hook sessions by (agent, policy module, session id).
pub struct HookSessions {
    map: Mutex<HashMap<(Agent, String, String), SessionState>>,
    max: usize,
}

impl HookSessions {
    /// A store holding at most `max` sessions.
    pub fn new(max: usize) -> Self {
        HookSessions {
            map: Mutex::new(HashMap::new()),
            max: max.max(1),
        }
    }

    /// Runs `f` on the session's state under the store's lock, so two events of one session
    /// never interleave. `None` when the session is new and the store is full of sessions
    /// holding a latch: those are never dropped (one with no latch is, and loses only its
    /// `called_before` history, which then denies).
    fn with<R>(
        &self,
        key: (Agent, String, String),
        f: impl FnOnce(&mut SessionState) -> R,
    ) -> Option<R> {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if !map.contains_key(&key) && map.len() >= self.max {
            let unlatched = map
                .iter()
                .find(|(_, s)| !latched(&s.latched))
                .map(|(k, _)| k.clone());
            map.remove(&unlatched?);
        }
        Some(f(map.entry(key).or_default()))
    }
}

fn latched(l: &Latched) -> bool {
    match l {
        Latched::Flag(b) => *b,
        Latched::ByName(m) => m.values().any(|b| *b),
    }
}

/// `POST /v1/hooks/{agent}`.
pub async fn hook(
    State(state): State<Arc<AppState>>,
    Path(agent): Path<String>,
    Query(query): Query<HookQuery>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let Some(agent) = Agent::from_name(&agent) else {
        let known: Vec<&str> = Agent::ALL.iter().map(|a| a.name()).collect();
        return Err(ApiError::not_found(format!(
            "no hook for agent `{agent}`; there are {}",
            known.join(", ")
        )));
    };
    let deny = |reason: String| Ok(answer(agent, &Answer::Deny { reason }));
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
    let Some(session) = event.session() else {
        return Ok(answer(agent, &Answer::Nothing));
    };
    let set = state.store.snapshot();
    let policy = match query.policy.as_deref() {
        Some(m) => set.get(m),
        None => state.unnamed_policy(&set),
    };
    let Some(policy) = policy else {
        return deny(format!(
            "Blocked: toolgate has no single policy to judge this call with (name one with \
             ?policy=MODULE; loaded: {}).",
            super::routes::loaded_names(&set)
        ));
    };
    let judge = Judge::new(policy, query.stage, query.approve);
    let key = (agent, policy.module().to_string(), session.to_string());
    match state.hook_sessions.with(key, |s| judge.handle(&event, s)) {
        Some(a) => Ok(answer(agent, &a)),
        None => deny(
            "Blocked: toolgate's hook session store is full of sessions holding a latch, so \
             this new session cannot be tracked."
                .into(),
        ),
    }
}

/// The agent's answer as a 200; `{}` when there is no decision.
fn answer(agent: Agent, answer: &Answer) -> Response {
    Json(agent.render(answer).unwrap_or_else(|| json!({}))).into_response()
}
