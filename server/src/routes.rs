//! The HTTP handlers.

use super::api_error::ApiError;
use super::decider::{schema_error, Caller, Judged};
use super::reload_gate::ReloadError;
use super::state::AppState;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;
use toolgate_engine::{OfferRequest, Policy, Response as Decided};
use toolgate_turns::Origin;

type Shared = State<Arc<AppState>>;

#[derive(Serialize)]
/// `/v1/decide`'s answer: the engine response, where its latch state came from, and the
/// decision id. `session` lives here, not in the engine's response, because the engine keeps
/// no state: only the server knows where the state came from.
struct DecideBody<'a> {
    #[serde(flatten)]
    response: &'a Decided,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<Origin>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decision_id: Option<&'a str>,
}

/// `POST /v1/decide`.
pub async fn decide(
    State(state): Shared,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let who = state.who(&headers).await?;
    let bytes = state.body_bytes(body)?;
    let text = state.body_text(&bytes)?;
    let (response, session, id) = state.decider.judged(text, None, &who).await?;
    let mut reply = Json(DecideBody {
        response: &response,
        session,
        decision_id: Some(&id),
    })
    .into_response();
    state.decider.decisions.attach(&mut reply, &response, &id);
    Ok(reply)
}

/// `POST /v1/offer`: the executor's tool definitions as the model may see them this turn.
pub async fn offer(
    State(state): Shared,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let who = state.who(&headers).await?;
    let value = state.parse_body(body)?;
    let mut request =
        OfferRequest::from_value(value).map_err(|e| state.decider.client_error(schema_error(e)))?;
    who.apply(&mut request.facts.principal)
        .map_err(|e| state.decider.client_error(e))?;
    state
        .decider
        .limits
        .check_offer(&request)
        .map_err(|e| state.decider.client_error(e))?;
    let set = state.decider.policies.snapshot();
    if set.is_empty() {
        return Err(ApiError::unavailable("no policy is loaded"));
    }
    let policy = state.decider.pick_policy(&set, request.policy.as_deref())?;
    policy
        .check_facts(&request.facts)
        .map_err(|e| state.decider.client_error(schema_error(e)))?;
    let mut facts = request.facts;
    // Read-only: an offer shows the latch the turn has set so far and records nothing.
    if let Some((s, t)) = state
        .decider
        .session_turn(&request.session, &request.turn)?
    {
        let carried = state
            .decider
            .turns
            .peek(policy, &s, &t, Instant::now())
            .await;
        facts.latched = facts.latched.or(&carried.latched);
    }
    Ok(Json(policy.offer(&facts, &request.tools)).into_response())
}

impl AppState {
    /// Who is asking: with `--jwks`, the principal of the request's bearer token, or 401
    /// with the reason when the token is not valid.
    pub(super) async fn who(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        let Some(verifier) = &self.bearer else {
            return Ok(Caller::AsSent);
        };
        match verifier.principal(headers).await {
            Ok(principal) => Ok(Caller::Verified(principal)),
            Err(e) => Err(self
                .decider
                .client_error(ApiError::invalid_token(e.to_string()))),
        }
    }
}

/// `POST /v1/data/{module}/decide`: the OPA shape, `{"input": ..}` in, `{"result": ..}` out.
pub async fn data_decide(
    State(state): Shared,
    Path(module): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let who = state.who(&headers).await?;
    let bytes = state.body_bytes(body)?;
    let text = state.body_text(&bytes)?;
    // One pass when the body is exactly `{"input": ..}`: the input is judged from its own
    // text. Any other shape (more keys, `input` twice, invalid JSON) takes the strict path,
    // which refuses duplicate keys anywhere in the body and says what is wrong.
    let fast = match serde_json::from_str::<OpaBody<'_>>(text) {
        Ok(b) => {
            state
                .decider
                .judge_fast(b.input.get(), Some(&module), &who)
                .await
        }
        Err(_) => None,
    };
    let (response, session, id) = match fast {
        Some(done) => done?,
        None => state.data_judge_strict(text, &module, &who).await?,
    };
    let result = DecideBody {
        response: &response,
        session,
        decision_id: None,
    };
    let mut reply = Json(json!({"result": result, "decision_id": id})).into_response();
    state.decider.decisions.attach(&mut reply, &response, &id);
    Ok(reply)
}

/// The OPA-shaped body the one-pass path accepts: `input` and nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OpaBody<'a> {
    #[serde(borrow)]
    input: &'a RawValue,
}

impl AppState {
    /// `/v1/data/{module}/decide` on the strict path.
    async fn data_judge_strict(
        &self,
        text: &str,
        module: &str,
        who: &Caller,
    ) -> Result<Judged, ApiError> {
        let value = self.decider.parse_text(text)?;
        let Value::Object(mut top) = value else {
            return Err(self.decider.client_error(ApiError::bad_request(
                "schema",
                "expected an object with `input`",
                None,
            )));
        };
        let Some(input) = top.remove("input") else {
            return Err(self.decider.client_error(ApiError::bad_request(
                "schema",
                "missing field",
                Some("input".into()),
            )));
        };
        self.decider.judge(input, Some(module), who).await
    }
}

/// `POST /v1/check`: compile the policy source in `{"source": ..}`; nothing is loaded.
pub async fn check(
    State(state): Shared,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    state.admin(&headers)?;
    let text = match state.parse_body(body)? {
        Value::Object(mut m) => match m.remove("source") {
            Some(Value::String(text)) => text,
            _ => {
                return Err(state.decider.client_error(ApiError::bad_request(
                    "schema",
                    "expected the policy source as a string",
                    Some("source".into()),
                )))
            }
        },
        _ => {
            return Err(state.decider.client_error(ApiError::bad_request(
                "schema",
                "expected an object with `source`",
                None,
            )))
        }
    };
    let result = tokio::task::spawn_blocking(move || match Policy::compile("<request>", &text) {
        Ok(p) => json!({
            "ok": true,
            "module": p.module(),
            "revision": p.revision(),
            "diagnostics": diagnostics(p.warnings(), p.source()),
        }),
        Err(e) => json!({
            "ok": false,
            "diagnostics": diagnostics(&e.diagnostics, &e.source_file),
            "rendered": e.render(),
        }),
    })
    .await
    .map_err(|_| ApiError::unprocessable("check_failed", "the check task stopped"))?;
    Ok(Json(result).into_response())
}

/// Diagnostics as JSON: severity, message, where (`file`, `line`, `col`, and the end of the
/// span, `end_line`, `end_col`, for the playground's highlight), hint and rendering.
pub(super) fn diagnostics(
    ds: &[toolgate_engine::Diagnostic],
    src: &toolgate_engine::SourceFile,
) -> Vec<Value> {
    ds.iter()
        .map(|d| {
            let at = src.line_col(d.span.start);
            let end = src.line_col(d.span.end);
            let file = src.name_at(d.span.start);
            json!({
                "severity": if d.is_error() { "error" } else { "warning" },
                "message": d.message,
                "file": file,
                "line": at.line,
                "col": at.col,
                "end_line": end.line,
                "end_col": end.col,
                "location": format!("{file}:{}:{}", at.line, at.col),
                "help": d.help,
                "rendered": d.render(src),
            })
        })
        .collect()
}

/// `GET /v1/policies`.
pub async fn policies(State(state): Shared) -> Json<Value> {
    let set = state.decider.policies.snapshot();
    let loaded = state.loads.last_ok();
    let last = state.loads.last_attempt();
    let list: Vec<Value> = set
        .iter()
        .map(|p| {
            json!({
                "module": p.module(),
                "revision": p.revision(),
                "source": p.source().name(),
                "loaded_at_ms": loaded.as_ref().map(|r| r.at_ms),
                "tools": p.tools().count(),
                "stages": p.stages().count(),
                "warnings": diagnostics(p.warnings(), p.source()),
            })
        })
        .collect();
    Json(json!({
        "generation": set.generation(),
        "policies": list,
        "last_reload": last,
        "bundle": state.bundle.as_ref().map(|b| b.status()),
        "pending": state.gate.pending_json(),
        "shadow": state.decider.shadow.as_ref().map(|s| s.status()),
    }))
}

/// `GET /health`: 200 once a policy is loaded. `degraded` (still 200, still serving) when
/// the last reload failed (with that attempt), while a shared turn-state store is down
/// (every replica shares the store, so taking this one out of rotation would not help, and
/// it still judges fail-closed), while the decision log cannot be written, or when a
/// bundle has not been downloaded whole for two refetch intervals (`bundle.fresh`).
pub async fn health(State(state): Shared) -> Response {
    let set = state.decider.policies.snapshot();
    if set.is_empty() {
        let why = state.bundle.as_ref().and_then(|b| b.status().error);
        return ApiError::unavailable(match why {
            Some(e) => format!("no policy is loaded: {e}"),
            None => "no policy is loaded".into(),
        })
        .into_response();
    }
    let (turn_state, up) = state.decider.turns.health().await;
    let last = state.loads.last_attempt();
    let status = if up { "ok" } else { "degraded" };
    let mut approvals = state.decider.approvals.health(up);
    approvals.insert("ask".into(), json!(state.decider.ask));
    let budgets =
        json!({"scopes": state.decider.budgets.len(), "kept": state.decider.turns.keeps_counts()});
    let mut body = json!({"status": status, "policies": set.len(), "generation": set.generation(), "state": turn_state, "approvals": approvals, "budgets": budgets});
    if let Some(b) = &state.bundle {
        let status = b.status();
        if !status.fresh {
            body["status"] = "degraded".into();
        }
        body["bundle"] = json!(status);
    }
    if let Some(error) = state.decider.decisions.log().failing() {
        body["status"] = "degraded".into();
        body["decision_log"] =
            json!({"ok": false, "error": error, "lost": state.decider.decisions.log().lost()});
    }
    if let Some(failed) = last.filter(|r| !r.ok) {
        body["status"] = "degraded".into();
        body["last_reload"] = json!(failed);
    }
    // Reported, but never `degraded` on its own: the shadow set answers nothing, so a
    // shadow that failed to load says nothing about whether this server serves correctly.
    if let Some(shadow) = &state.decider.shadow {
        body["shadow"] = shadow.status();
    }
    Json(body).into_response()
}

/// `GET /metrics`.
pub async fn metrics(State(state): Shared) -> Response {
    let (sessions_live, sessions_bytes) = state.decider.turns.held();
    let set = state.decider.policies.snapshot();
    let mut text = state
        .decider
        .decisions
        .render_metrics(sessions_live, sessions_bytes, set.len());
    super::metrics::render_policy_info(&set, &mut text);
    state.decider.turns.render_metrics(&mut text);
    if let Some(b) = &state.bundle {
        text.push_str(&b.render_metrics());
    }
    text.push_str(&state.gate.render_metrics());
    if let Some(shadow) = &state.decider.shadow {
        shadow.render_metrics(&mut text);
    }
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        text,
    )
        .into_response()
}

/// The query of `POST /v1/reload`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReloadQuery {
    /// The digest of the held change to apply, as `pending.digest` reported it: a bundle's
    /// SHA-256, or a directory's set digest.
    digest: Option<String>,
}

/// `POST /v1/reload[?digest=HEX]`: 200 when applied; 409 when the bundle or directory is not
/// the one reported (`bundle_changed`, `policies_changed`) or was held back as a widening
/// (`reload_held`); 422 when the new policies are refused.
pub async fn reload(
    State(state): Shared,
    headers: HeaderMap,
    query: Result<Query<ReloadQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    state.admin(&headers)?;
    let Query(query) = query.map_err(|e| {
        state
            .decider
            .client_error(ApiError::bad_request("query", e.body_text(), None))
    })?;
    let digest = match query.digest {
        Some(d) if d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Some(d.to_ascii_lowercase())
        }
        Some(_) => {
            return Err(state.decider.client_error(ApiError::bad_request(
                "query",
                "`digest` is 64 hex digits, as `pending.digest` shows it",
                Some("digest".into()),
            )))
        }
        None => None,
    };
    // The shadow set reloads on every explicit reload, whatever becomes of the serving set.
    let shadow = state.reload_shadow("api").await.map(|r| match r {
        Ok(generation) => json!({"ok": true, "generation": generation}),
        Err(error) => json!({"ok": false, "error": error.to_string()}),
    });
    match state.clone().reload("api", digest).await {
        Ok(generation) => {
            let mut body = json!({"ok": true, "generation": generation});
            if let Some(shadow) = shadow {
                body["shadow"] = shadow;
            }
            Ok(Json(body).into_response())
        }
        Err(ReloadError::Failed(diagnostics)) => {
            Err(ApiError::unprocessable("reload_failed", diagnostics))
        }
        Err(ReloadError::Held(why)) => Err(ApiError::new(StatusCode::CONFLICT, "reload_held", why)),
        Err(ReloadError::Changed(why)) => Err(ApiError::new(
            StatusCode::CONFLICT,
            if state.bundle.is_some() {
                "bundle_changed"
            } else {
                "policies_changed"
            },
            why,
        )),
    }
}

/// Any other route.
pub async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint; see docs/server.md")
}

/// Maps a body-reading failure to 413 or 400.
pub fn body_rejection(r: &BytesRejection) -> ApiError {
    if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::too_large("request body is over the size limit", None)
    } else {
        ApiError::bad_request("body", r.body_text(), None)
    }
}

impl AppState {
    pub(super) fn parse_body(
        &self,
        body: Result<Bytes, BytesRejection>,
    ) -> Result<Value, ApiError> {
        let bytes = self.body_bytes(body)?;
        self.decider.parse_text(self.body_text(&bytes)?)
    }

    /// The body, or 413/400 when it could not be read.
    pub(super) fn body_bytes(
        &self,
        body: Result<Bytes, BytesRejection>,
    ) -> Result<Bytes, ApiError> {
        body.map_err(|r| self.decider.client_error(body_rejection(&r)))
    }

    /// The body as text, once it passes the depth cap and is UTF-8.
    pub(super) fn body_text<'b>(&self, bytes: &'b Bytes) -> Result<&'b str, ApiError> {
        self.decider
            .limits
            .check_depth(bytes)
            .map_err(|e| self.decider.client_error(e))?;
        std::str::from_utf8(bytes).map_err(|e| {
            self.decider.client_error(ApiError::bad_request(
                "json",
                format!("body is not UTF-8: {e}"),
                None,
            ))
        })
    }
}
