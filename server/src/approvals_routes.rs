//! `GET /v1/approvals?session=S` (the asks waiting in a session, for approval UIs) and
//! `POST /v1/approvals` (a person's answer to one). Both need the approver token
//! (`--approver-token`) or the admin token; with neither set they answer on loopback only.
//! Under `--state redis://...` both read and write the shared store, so any replica answers;
//! when it cannot be reached they answer 503 (`approvals_unavailable`) and record nothing.

use crate::api_error::ApiError;
use crate::approvals::{GrantError, Pending};
use crate::state::AppState;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

/// 503 `approvals_unavailable`: the shared store that keeps approvals (`--state`) cannot
/// be reached, so nothing was listed or recorded.
fn unavailable(message: String) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "approvals_unavailable",
        message,
    )
}

/// The most bytes of an approver's name.
const MAX_APPROVER_BYTES: usize = 256;

/// `GET /v1/approvals`'s query.
#[derive(Deserialize)]
pub struct WaitingQuery {
    session: String,
}

#[derive(Serialize)]
struct WaitingAsk<'a> {
    #[serde(flatten)]
    ask: &'a Pending,
    expires_in_ms: u128,
}

/// `GET /v1/approvals?session=S`: the asks waiting in session `S`, oldest first.
pub async fn waiting(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    query: Result<Query<WaitingQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    state.approver(&headers)?;
    let Query(query) = query
        .map_err(|e| ApiError::bad_request("schema", e.body_text(), Some("session".into())))?;
    state
        .decider
        .limits
        .check_id("session", &query.session)
        .map_err(|e| state.decider.client_error(e))?;
    let waiting = state
        .decider
        .approvals
        .waiting(&query.session, Instant::now())
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    let asks: Vec<WaitingAsk<'_>> = waiting
        .iter()
        .map(|(ask, left)| WaitingAsk {
            ask,
            expires_in_ms: *left,
        })
        .collect();
    Ok(Json(serde_json::json!({"session": query.session, "asks": asks})).into_response())
}

/// `POST /v1/approvals`'s body.
struct Answer {
    session: String,
    approval: String,
    granted: bool,
    approver: Option<String>,
}

/// Reads the body strictly: every field known, each of its type, with its path on error.
fn answer(value: Value) -> Result<Answer, ApiError> {
    let bad =
        |path: &str, message: String| ApiError::bad_request("schema", message, Some(path.into()));
    let Value::Object(mut map) = value else {
        return Err(bad("", "expected an object".into()));
    };
    let mut text = |key: &str, required: bool| -> Result<Option<String>, ApiError> {
        match map.remove(key) {
            Some(Value::String(s)) => Ok(Some(s)),
            None if !required => Ok(None),
            None => Err(bad(key, format!("`{key}` is required"))),
            Some(other) => Err(bad(key, format!("expected a string, found {other}"))),
        }
    };
    let session = text("session", true)?.unwrap_or_default();
    let approval = text("approval", true)?.unwrap_or_default();
    let approver = text("approver", false)?;
    let decision = text("decision", true)?.unwrap_or_default();
    let granted = match decision.as_str() {
        "approve" => true,
        "reject" => false,
        _ => {
            return Err(bad(
                "decision",
                format!("expected \"approve\" or \"reject\", found {decision:?}"),
            ))
        }
    };
    if let Some(extra) = map.keys().next() {
        return Err(bad(
            extra,
            format!(
                "unknown field `{extra}`; the fields are session, approval, decision and approver"
            ),
        ));
    }
    if !toolgate_engine::is_approval_digest(&approval) {
        return Err(bad(
            "approval",
            format!(
                "expected an approval digest (`{}` and 64 lowercase hex digits, as an ask's `approval` gives it)",
                toolgate_engine::APPROVAL_PREFIX
            ),
        ));
    }
    if approver
        .as_ref()
        .is_some_and(|a| a.len() > MAX_APPROVER_BYTES)
    {
        return Err(bad(
            "approver",
            format!("longer than {MAX_APPROVER_BYTES} bytes"),
        ));
    }
    Ok(Answer {
        session,
        approval,
        granted,
        approver,
    })
}

/// `POST /v1/approvals`: `{"session", "approval", "decision": "approve"|"reject",
/// "approver"?}`. Approved, the call the ask was for may run once, within its policy's
/// window; either way the answer is a decision-log event.
pub async fn answer_ask(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    state.approver(&headers)?;
    let value = state.parse_body(body)?;
    let a = answer(value).map_err(|e| state.decider.client_error(e))?;
    state
        .decider
        .limits
        .check_id("session", &a.session)
        .map_err(|e| state.decider.client_error(e))?;
    let answered = state
        .decider
        .approvals
        .answer(&a.session, &a.approval, a.granted, Instant::now())
        .await
        .map_err(|e| match e {
            GrantError::NotPending(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "not_pending", e.to_string())
            }
            GrantError::Unavailable => unavailable(e.to_string()),
        })?;
    state.decider.decisions.log().record_answer(
        &a.session,
        &answered,
        a.approver.as_deref(),
        state.decider.decisions.metrics(),
    );
    Ok(Json(answered).into_response())
}
