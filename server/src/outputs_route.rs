//! `POST /v1/outputs`: the tool outputs of a session's turn, kept by the server so the
//! executor need not send them with every batch (issue 25: argument provenance).
//!
//! `{"policy"?, "session", "turn", "outputs": [{"id", "tool", "output"}]}`, the shape of
//! `facts.outputs` (checked by the engine's own reader, [`toolgate_engine::validate_outputs`]).
//! The outputs settle the calls of that turn whose untrusted output the server awaits (each
//! allowed call of a tool the policy indexes as untrusted), and the turn's next batches are
//! judged with them, while they are complete ([`toolgate_turns::SessionStore::outputs_fact`]).
//! Kept only for the session's newest turn, and only in memory: under `--state redis` the
//! answer is 501 and a batch must bring its own `facts.outputs` (a shared store never holds
//! agent text); checks that read outputs deny without them.

use super::api_error::ApiError;
use super::decider::schema_error;
use super::state::AppState;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

/// The body of `POST /v1/outputs`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Outputs {
    /// The module (default: the only one loaded).
    policy: Option<String>,
    session: String,
    turn: String,
    outputs: Value,
}

/// `POST /v1/outputs`.
pub async fn record(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    // A token that is there must be valid, as for `/v1/decide`.
    state.who(&headers).await?;
    let bytes = state.body_bytes(body)?;
    let text = state.body_text(&bytes)?;
    let value = state.decider.parse_text(text)?;
    let body: Outputs = serde_json::from_value(value).map_err(|e| {
        state.decider.client_error(ApiError::bad_request(
            "schema",
            format!("expected {{\"policy\"?, \"session\", \"turn\", \"outputs\"}}: {e}"),
            None,
        ))
    })?;
    toolgate_engine::validate_outputs(&body.outputs, "outputs")
        .map_err(|e| state.decider.client_error(schema_error(e)))?;
    for (field, id) in [("session", &body.session), ("turn", &body.turn)] {
        state
            .decider
            .limits
            .check_id(field, id)
            .map_err(|e| state.decider.client_error(e))?;
    }
    if !state.decider.turns.keeps_outputs() {
        return Err(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "outputs_not_kept",
            "turn state is in a shared store (--state), which never holds tool outputs: send \
             them with each batch as `facts.outputs`",
        ));
    }
    let set = state.decider.policies.snapshot();
    let policy = state.decider.pick_policy(&set, body.policy.as_deref())?;
    let items = body.outputs.as_array().map_or(&[][..], Vec::as_slice);
    let kept = state.decider.turns.record_outputs(
        policy,
        &body.session,
        &body.turn,
        items,
        Instant::now(),
    );
    let mut answer = json!({
        "session": body.session,
        "turn": body.turn,
        "outputs": items.len(),
        "kept": kept,
    });
    if !kept {
        answer["reason"] = json!(
            "not kept: the session is unknown, the turn is not its newest, or the store is at \
             its bound; batches of the turn get no outputs, and checks that read them deny"
        );
    }
    Ok(Json(answer))
}
