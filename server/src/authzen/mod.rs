//! AuthZEN 1.0, the OpenID Authorization API (`docs/server.md`, "AuthZEN"): a gateway that
//! speaks it (a PEP) asks toolgate as its PDP.
//!
//! - `POST /access/v1/evaluation`: one evaluation, answered `{"decision", "context"}`.
//! - `POST /access/v1/evaluations`: boxcarred evaluations with top-level defaults and the
//!   three `options.evaluations_semantic`s, answered `{"evaluations": [..]}` in order.
//! - `GET /.well-known/authzen-configuration`: the PDP metadata, under the identifier
//!   `--authzen-pdp` names (404 without one).
//!
//! Each evaluation becomes one `/v1/decide` batch of one call ([`translate`]) and is judged
//! by the same path (`Decider::judge`): the same strict reader, caps, turn state, budgets,
//! approvals, decision log and metrics. So nothing here decides anything; a request that
//! `/v1/decide` would refuse is refused, at the place in the AuthZEN body that caused it.
//! Evaluations run one after another in array order, so with `context.toolgate.session` and
//! `turn` a fetch in one latches the turn for the next, as consecutive batches do.
//!
//! A denial is `200` with `"decision": false` (the spec's rule, and toolgate's: a denial is a
//! normal result). An error in one of several evaluations is that evaluation's
//! `"decision": false` with `context.error`; an error in the payload as a whole is a 4xx.

mod answer;
mod translate;

use super::api_error::ApiError;
use super::decider::Caller;
use super::error::ServerError;
use super::state::AppState;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use translate::{Entities, Semantic};

/// The request-id header the spec recommends, echoed on every answer.
const REQUEST_ID: &str = "x-request-id";

/// `POST /access/v1/evaluation`.
pub async fn evaluation(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = answer(&state, &headers, body, Endpoint::One).await;
    with_request_id(&headers, answer)
}

/// `POST /access/v1/evaluations`.
pub async fn evaluations(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = answer(&state, &headers, body, Endpoint::Many).await;
    with_request_id(&headers, answer)
}

/// Which evaluation endpoint a body came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    /// `/access/v1/evaluation`: one evaluation.
    One,
    /// `/access/v1/evaluations`: a list, or one when the list is absent or empty.
    Many,
}

/// The AuthZEN answer to `body` at `endpoint`.
async fn answer(
    state: &AppState,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    endpoint: Endpoint,
) -> Result<Value, ApiError> {
    let who = state.who(headers).await?;
    let value = state.parse_body(body)?;
    let top = translate::top(&value).map_err(|e| state.decider.client_error(e))?;
    if endpoint == Endpoint::One && top.contains_key("evaluations") {
        return Err(state.decider.client_error(ApiError::bad_request(
            "schema",
            "`evaluations` belongs to `/access/v1/evaluations`; this endpoint answers one \
             evaluation, and judging only the top level would drop the rest",
            Some("evaluations".into()),
        )));
    }
    let list = match endpoint {
        Endpoint::One => None,
        Endpoint::Many => translate::evaluations(top, state.decider.limits.calls)
            .map_err(|e| state.decider.client_error(e))?,
    };
    let Some(list) = list else {
        return judged(state, &Entities::single(top), &who).await;
    };
    let semantic = translate::semantic(top).map_err(|e| state.decider.client_error(e))?;
    let mut out = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let one = match Entities::of(top, item, i) {
            Ok(entities) => judged(state, &entities, &who).await,
            Err(e) => Err(state.decider.client_error(e)),
        };
        let decision = one.unwrap_or_else(|e| answer::failed(&e));
        let allowed = decision["decision"] == true;
        out.push(decision);
        if semantic.stops_after(allowed) {
            break;
        }
    }
    Ok(json!({ "evaluations": out }))
}

/// `GET /.well-known/authzen-configuration`.
pub async fn metadata(State(state): State<Arc<AppState>>) -> Response {
    let Some(pdp) = state.authzen_pdp.as_deref() else {
        return ApiError::not_found(
            "no PDP identifier is configured; start the server with --authzen-pdp URL to \
             publish AuthZEN metadata",
        )
        .into_response();
    };
    let mut meta = Map::new();
    meta.insert("policy_decision_point".into(), pdp.into());
    for (key, path) in [
        ("access_evaluation_endpoint", "/access/v1/evaluation"),
        ("access_evaluations_endpoint", "/access/v1/evaluations"),
    ] {
        meta.insert(key.into(), format!("{pdp}{path}").into());
    }
    Json(Value::Object(meta)).into_response()
}

/// The PDP identifier of `--authzen-pdp` as its metadata names it (no trailing slash), or
/// why it is not one: AuthZEN 1.0 wants an `https` URL with no query or fragment.
pub(crate) fn pdp_identifier(url: &str) -> Result<String, ServerError> {
    let refused = |why| ServerError::AuthzenPdp {
        url: url.to_string(),
        why,
    };
    let Some(rest) = url.strip_prefix("https://") else {
        return Err(refused("the PDP identifier must be an https URL"));
    };
    if rest.contains(['?', '#']) {
        return Err(refused("the PDP identifier has no query or fragment"));
    }
    if rest.trim_end_matches('/').is_empty() || rest.starts_with('/') {
        return Err(refused("the PDP identifier names no host"));
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// One evaluation judged as a `/v1/decide` batch of one call: its AuthZEN decision, or the
/// error `/v1/decide` would give, relocated to the AuthZEN body.
///
/// With `--jwks` the principal is the bearer token's, and an evaluation about another
/// subject than the token's `sub` is refused (403): the subject is the PEP's word, the token
/// is proof.
async fn judged(
    state: &AppState,
    entities: &Entities<'_>,
    who: &Caller,
) -> Result<Value, ApiError> {
    let mut body = entities.decide_body(state.authzen_stage.as_deref())?;
    if let Caller::Verified(verified) = who {
        let said = body["facts"]
            .as_object_mut()
            .and_then(|f| f.remove("principal"));
        let claimed = said.as_ref().and_then(|p| p.get("sub"));
        let proven = verified.as_ref().and_then(|p| p.get("sub"));
        if claimed != proven {
            return Err(entities.relocate(ApiError::forbidden(
                axum::http::StatusCode::FORBIDDEN,
                "the subject is not the bearer token's `sub`; with --jwks an evaluation is about the token's subject",
            )));
        }
    }
    let (response, _, id) = state
        .decider
        .judge(body, None, who)
        .await
        .map_err(|e| entities.relocate(e))?;
    Ok(answer::decision(&response, &id))
}

/// The answer with the request's `X-Request-ID` echoed, as the spec asks.
fn with_request_id(headers: &HeaderMap, answer: Result<Value, ApiError>) -> Response {
    let mut response = match answer {
        Ok(json) => Json(json).into_response(),
        Err(e) => e.into_response(),
    };
    if let Some(id) = headers.get(REQUEST_ID).filter(|v| v.len() <= 256) {
        let id: HeaderValue = id.clone();
        response.headers_mut().insert(REQUEST_ID, id);
    }
    response
}

impl Semantic {
    /// Whether the evaluations after one with this outcome are skipped.
    fn stops_after(self, allowed: bool) -> bool {
        match self {
            Semantic::ExecuteAll => false,
            Semantic::DenyOnFirstDeny => !allowed,
            Semantic::PermitOnFirstPermit => allowed,
        }
    }
}
