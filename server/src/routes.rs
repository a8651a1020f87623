//! The HTTP handlers.

use super::api_error::ApiError;
use super::approvals::batch::Keeper;
use super::budgets::Scopes;
use super::decisions::Record;
use super::reload_gate::ReloadError;
use super::shadow::Seen;
use super::state::AppState;
use super::turn_state::Judged as TurnJudged;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;
use toolgate_engine::{
    OfferRequest, Policy, PolicySet, Request, RequestError, Response as Decided,
};
use toolgate_turns::{Origin, SessionError};

type Shared = State<Arc<AppState>>;

/// A judged batch: the engine's response, where its latch state came from, the decision id.
type Judged = (Decided, Option<Origin>, String);

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
    let (response, session, id) = match state.judge_fast(text, None, &who).await {
        Some(done) => done?,
        None => state.judge(state.parse_text(text)?, None, &who).await?,
    };
    let mut reply = Json(DecideBody {
        response: &response,
        session,
        decision_id: Some(&id),
    })
    .into_response();
    state.decisions.attach(&mut reply, &response, &id);
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
        OfferRequest::from_value(value).map_err(|e| state.client_error(schema_error(e)))?;
    who.apply(&mut request.facts.principal)
        .map_err(|e| state.client_error(e))?;
    state
        .limits
        .check_offer(&request)
        .map_err(|e| state.client_error(e))?;
    let set = state.store.snapshot();
    if set.is_empty() {
        return Err(ApiError::unavailable("no policy is loaded"));
    }
    let policy = state.pick_policy(&set, request.policy.as_deref())?;
    policy
        .check_facts(&request.facts)
        .map_err(|e| state.client_error(schema_error(e)))?;
    let mut facts = request.facts;
    // Read-only: an offer shows the latch the turn has set so far and records nothing.
    if let Some((s, t)) = state.session_turn(&request.session, &request.turn)? {
        let carried = state.sessions.peek(policy, &s, &t, Instant::now()).await;
        facts.latched = facts.latched.or(&carried.latched);
    }
    Ok(Json(policy.offer(&facts, &request.tools)).into_response())
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

/// Who is asking, as the server knows it.
pub(super) enum Who {
    /// No `--jwks`: the request's own `facts.principal`, as the executor sent it.
    AsSent,
    /// `--jwks`: the verified token's principal (`None` without a token); the request may
    /// not bring its own.
    Verified(Option<Value>),
}

impl Who {
    /// Puts the verified principal in a request's `facts.principal`; refuses a request that
    /// brought its own to a server that verifies tokens.
    fn apply(&self, principal: &mut Option<Value>) -> Result<(), ApiError> {
        if let Who::Verified(verified) = self {
            if principal.is_some() {
                return Err(carried_principal());
            }
            principal.clone_from(verified);
        }
        Ok(())
    }
}

impl AppState {
    /// Who is asking: with `--jwks`, the principal of the request's bearer token, or 401
    /// with the reason when the token is not valid.
    pub(super) async fn who(&self, headers: &HeaderMap) -> Result<Who, ApiError> {
        let Some(verifier) = &self.bearer else {
            return Ok(Who::AsSent);
        };
        match verifier.principal(headers).await {
            Ok(principal) => Ok(Who::Verified(principal)),
            Err(e) => Err(self.client_error(ApiError::invalid_token(e.to_string()))),
        }
    }
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

pub(super) fn schema_error(e: RequestError) -> ApiError {
    match e {
        RequestError::Schema { path, message } => {
            ApiError::bad_request("schema", message, Some(path))
        }
        other => ApiError::bad_request("schema", other.to_string(), None),
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
        Ok(b) => state.judge_fast(b.input.get(), Some(&module), &who).await,
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
    state.decisions.attach(&mut reply, &response, &id);
    Ok(reply)
}

/// The OPA-shaped body the one-pass path accepts: `input` and nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OpaBody<'a> {
    #[serde(borrow)]
    input: &'a RawValue,
}

/// The top-level `policy` field, read to pick among several loaded policies before the
/// chosen one reads the whole body. Other fields are skipped unread; the chosen policy's
/// reader then refuses duplicate keys (a second `policy` already fails here).
#[derive(Deserialize)]
struct Route<'a> {
    #[serde(borrow, default)]
    policy: Option<Cow<'a, str>>,
}

impl AppState {
    /// `/v1/data/{module}/decide` on the strict path.
    async fn data_judge_strict(
        &self,
        text: &str,
        module: &str,
        who: &Who,
    ) -> Result<Judged, ApiError> {
        let value = self.parse_text(text)?;
        let Value::Object(mut top) = value else {
            return Err(self.client_error(ApiError::bad_request(
                "schema",
                "expected an object with `input`",
                None,
            )));
        };
        let Some(input) = top.remove("input") else {
            return Err(self.client_error(ApiError::bad_request(
                "schema",
                "missing field",
                Some("input".into()),
            )));
        };
        self.judge(input, Some(module), who).await
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
                return Err(state.client_error(ApiError::bad_request(
                    "schema",
                    "expected the policy source as a string",
                    Some("source".into()),
                )))
            }
        },
        _ => {
            return Err(state.client_error(ApiError::bad_request(
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

/// The loaded module names, sorted and quoted, for errors that must say which exist.
pub(super) fn loaded_names(set: &PolicySet) -> String {
    let mut names: Vec<String> = set.iter().map(|p| format!("`{}`", p.module())).collect();
    names.sort();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// `GET /v1/policies`.
pub async fn policies(State(state): Shared) -> Json<Value> {
    let set = state.store.snapshot();
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
        "shadow": state.shadow.as_ref().map(|s| s.status()),
    }))
}

/// `GET /health`: 200 once a policy is loaded. `degraded` (still 200, still serving) when
/// the last reload failed (with that attempt), while a shared turn-state store is down
/// (every replica shares the store, so taking this one out of rotation would not help, and
/// it still judges fail-closed), while the decision log cannot be written, or when a
/// bundle has not been downloaded whole for two refetch intervals (`bundle.fresh`).
pub async fn health(State(state): Shared) -> Response {
    let set = state.store.snapshot();
    if set.is_empty() {
        let why = state.bundle.as_ref().and_then(|b| b.status().error);
        return ApiError::unavailable(match why {
            Some(e) => format!("no policy is loaded: {e}"),
            None => "no policy is loaded".into(),
        })
        .into_response();
    }
    let (turn_state, up) = state.sessions.health().await;
    let last = state.loads.last_attempt();
    let status = if up { "ok" } else { "degraded" };
    let mut approvals = state.approvals.health(up);
    approvals.insert("ask".into(), json!(state.ask));
    let budgets = json!({"scopes": state.budgets.len(), "kept": state.sessions.keeps_counts()});
    let mut body = json!({"status": status, "policies": set.len(), "generation": set.generation(), "state": turn_state, "approvals": approvals, "budgets": budgets});
    if let Some(b) = &state.bundle {
        let status = b.status();
        if !status.fresh {
            body["status"] = "degraded".into();
        }
        body["bundle"] = json!(status);
    }
    if let Some(error) = state.decisions.log().failing() {
        body["status"] = "degraded".into();
        body["decision_log"] =
            json!({"ok": false, "error": error, "lost": state.decisions.log().lost()});
    }
    if let Some(failed) = last.filter(|r| !r.ok) {
        body["status"] = "degraded".into();
        body["last_reload"] = json!(failed);
    }
    // Reported, but never `degraded` on its own: the shadow set answers nothing, so a
    // shadow that failed to load says nothing about whether this server serves correctly.
    if let Some(shadow) = &state.shadow {
        body["shadow"] = shadow.status();
    }
    Json(body).into_response()
}

/// `GET /metrics`.
pub async fn metrics(State(state): Shared) -> Response {
    let (sessions_live, sessions_bytes) = state.sessions.held();
    let set = state.store.snapshot();
    let mut text = state
        .decisions
        .render_metrics(sessions_live, sessions_bytes, set.len());
    super::metrics::render_policy_info(&set, &mut text);
    state.sessions.render_metrics(&mut text);
    if let Some(b) = &state.bundle {
        text.push_str(&b.render_metrics());
    }
    text.push_str(&state.gate.render_metrics());
    if let Some(shadow) = &state.shadow {
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
    let Query(query) = query
        .map_err(|e| state.client_error(ApiError::bad_request("query", e.body_text(), None)))?;
    let digest = match query.digest {
        Some(d) if d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Some(d.to_ascii_lowercase())
        }
        Some(_) => {
            return Err(state.client_error(ApiError::bad_request(
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
    pub(super) fn client_error(&self, e: ApiError) -> ApiError {
        self.decisions
            .metrics()
            .client_errors
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        e
    }

    pub(super) fn parse_body(
        &self,
        body: Result<Bytes, BytesRejection>,
    ) -> Result<Value, ApiError> {
        let bytes = self.body_bytes(body)?;
        self.parse_text(self.body_text(&bytes)?)
    }

    /// The body, or 413/400 when it could not be read.
    pub(super) fn body_bytes(
        &self,
        body: Result<Bytes, BytesRejection>,
    ) -> Result<Bytes, ApiError> {
        body.map_err(|r| self.client_error(body_rejection(&r)))
    }

    /// The body as text, once it passes the depth cap and is UTF-8.
    pub(super) fn body_text<'b>(&self, bytes: &'b Bytes) -> Result<&'b str, ApiError> {
        self.limits
            .check_depth(bytes)
            .map_err(|e| self.client_error(e))?;
        std::str::from_utf8(bytes).map_err(|e| {
            self.client_error(ApiError::bad_request(
                "json",
                format!("body is not UTF-8: {e}"),
                None,
            ))
        })
    }

    /// The body read by the strict reader into a tree: errors carry a line and column, or
    /// the path of a duplicate key.
    pub(super) fn parse_text(&self, text: &str) -> Result<Value, ApiError> {
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
    pub(super) fn pick_policy<'a>(
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
    pub(super) fn unnamed_policy<'a>(&self, set: &'a PolicySet) -> Option<&'a Arc<Policy>> {
        set.only()
            .or_else(|| self.default_policy.as_deref().and_then(|m| set.get(m)))
    }

    /// The (session, turn) pair, when both are given; an error when only one is.
    fn session_turn(
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

    /// Parses, routes and judges one request; records sessions, metrics and the log.
    pub(super) async fn judge(
        &self,
        value: Value,
        module: Option<&str>,
        who: &Who,
    ) -> Result<Judged, ApiError> {
        let started = Instant::now();
        let mut request =
            Request::from_value(value).map_err(|e| self.client_error(schema_error(e)))?;
        who.apply(&mut request.facts.principal)
            .map_err(|e| self.client_error(e))?;
        self.limits
            .check_request(&request)
            .map_err(|e| self.client_error(e))?;
        let set = self.store.snapshot();
        if set.is_empty() {
            return Err(ApiError::unavailable("no policy is loaded"));
        }
        let policy = self.pick_policy(&set, module.or(request.policy.as_deref()))?;
        if module.is_some() && request.policy.as_deref().is_some_and(|p| Some(p) != module) {
            return Err(self.client_error(ApiError::bad_request(
                "schema",
                "`policy` in the input differs from the module in the URL",
                Some("policy".into()),
            )));
        }
        // Checked before any carried session state is merged in: the executor's own latch
        // names must be declared ones.
        policy
            .check_facts(&request.facts)
            .map_err(|e| self.client_error(schema_error(e)))?;
        if request
            .facts
            .approvals
            .as_ref()
            .is_some_and(|a| !a.is_empty())
        {
            return Err(self.client_error(carried_approvals()));
        }
        if request.facts.spent.is_some() {
            return Err(self.client_error(carried_spent()));
        }
        let ids = self.session_turn(&request.session, &request.turn)?;
        // The turn's tool outputs the server keeps, for provenance checks, unless the request
        // brings its own (then the executor's word, and kept for the turn's next batches).
        let brought = request.facts.outputs.is_some();
        if let (Some((s, t)), false) = (&ids, brought) {
            request.facts.outputs = self.sessions.outputs_fact(policy, s, t, started);
        }
        let mut keeper = Keeper::new(self.ask, ids.as_ref().map(|(s, _)| s.as_str()), started);
        let scopes = Scopes::of(
            policy,
            request.session.as_deref(),
            request.turn.as_deref(),
            request.facts.principal.as_ref(),
        );
        let judged = self
            .sessions
            .judge(
                policy,
                ids.as_ref().map(|(s, t)| (s.as_str(), t.as_str())),
                (scopes, &self.budgets),
                (&self.approvals, &mut keeper),
                started,
                |carried, counts, approvals| {
                    if let Some(c) = carried {
                        request.facts.latched = request.facts.latched.or(c);
                    }
                    if let Some(c) = counts {
                        request.facts.spent = Some(c.into_iter().collect());
                    }
                    request.facts.approvals = approvals.map(<[String]>::to_vec);
                    policy.decide(&request)
                },
            )
            .await;
        let (response, origin) = match self.with_state(judged) {
            Ok(done) => done,
            Err(e) => {
                self.approvals.finish(keeper.refused()).await;
                return Err(e);
            }
        };
        if let Some((s, t)) = &ids {
            let own = request.facts.outputs.as_ref().filter(|_| brought);
            self.keep_outputs(policy, (s, t), own, &response, started, |i| {
                request
                    .calls
                    .get(i)
                    .map(|c| (c.id.as_str(), c.tool.as_str(), &c.args))
            });
        }
        let headless = keeper.headless();
        let left = keeper.finish(policy, &response, request.turn.as_deref(), |i| {
            request.calls.get(i).map(|c| &c.args)
        });
        self.approvals.finish(left).await;
        // The request as the serving policy last judged it: its latch state carried in, the
        // book's approvals granted.
        let flips = self
            .shadowing(origin)
            .and_then(|shadow| shadow.compare(policy, &response, |p| Some(p.decide(&request))));
        let id = self.decisions.record(
            Record::new(started, &response)
                .origin(origin)
                .session(request.session.as_deref(), request.turn.as_deref())
                .request(Some(&request))
                .shadow(flips.as_ref())
                .headless(headless),
        );
        Ok((response, origin, id))
    }

    /// Routes, reads and judges one request in one pass over `text` with the engine's
    /// one-pass reader ([`Policy::read_json`]); records sessions, metrics and the log.
    ///
    /// `None`, before anything is recorded, when this path cannot judge the request: it is
    /// invalid, over a cap, names no loaded policy, or `--log-args` wants the whole request.
    /// The caller then takes the strict path ([`AppState::judge`]), which gives the exact
    /// error (or, for the rare valid request only the one-pass reader refuses, the decision).
    /// So every error a client sees comes from one place, in one order.
    async fn judge_fast(
        &self,
        text: &str,
        module: Option<&str>,
        who: &Who,
    ) -> Option<Result<Judged, ApiError>> {
        let started = Instant::now();
        if self.decisions.log().needs_request() {
            return None;
        }
        let set = self.store.snapshot();
        let policy = match (module, set.only()) {
            (Some(m), _) => set.get(m)?,
            (None, Some(only)) => only,
            (None, None) => {
                let route = serde_json::from_str::<Route<'_>>(text).ok()?;
                match route.policy {
                    Some(m) => set.get(&m)?,
                    None => self.unnamed_policy(&set)?,
                }
            }
        };
        // Checks the module the request names and its own latch names, before any session
        // state is carried in. A request carrying approvals is refused on the strict path.
        let mut request = policy.read_json(text)?;
        if request.has_approvals() || request.has_spent() {
            return None;
        }
        if let Who::Verified(principal) = who {
            // The strict path gives the error for a principal the request brought itself.
            if request.has_principal() {
                return None;
            }
            request.set_principal(principal.clone());
        }
        self.limits
            .check_counts(request.calls(), request.messages())
            .ok()?;
        let ids = match (request.session(), request.turn()) {
            (Some(s), Some(t)) => {
                self.limits.check_id("session", s).ok()?;
                self.limits.check_id("turn", t).ok()?;
                true
            }
            (None, None) => false,
            _ => return None,
        };
        // From here on the request is judged: nothing below falls back.
        let session = match (ids, request.session(), request.turn()) {
            (true, Some(s), Some(t)) => Some((s.to_owned(), t.to_owned())),
            _ => None,
        };
        let mut keeper = Keeper::new(self.ask, session.as_ref().map(|(s, _)| s.as_str()), started);
        // What is carried into the request besides its text, kept only for the shadow set.
        let mut seen = Seen::new(self.shadow.is_some());
        let brought = request.has_outputs();
        if let (Some((s, t)), false) = (&session, brought) {
            if let Some(outputs) = self.sessions.outputs_fact(policy, s, t, started) {
                seen.outputs(&outputs);
                request.set_outputs(outputs);
            }
        }
        let scopes = Scopes::of(
            policy,
            request.session(),
            request.turn(),
            request.principal(),
        );
        let judged = self
            .sessions
            .judge(
                policy,
                session.as_ref().map(|(s, t)| (s.as_str(), t.as_str())),
                (scopes, &self.budgets),
                (&self.approvals, &mut keeper),
                started,
                |carried, counts, approvals| {
                    if let Some(c) = carried {
                        request.carry(c);
                        seen.carried(c);
                    }
                    if let Some(c) = counts {
                        seen.spent(&c);
                        request.set_spent(c);
                    }
                    request.grant(approvals.unwrap_or_default());
                    seen.granted(approvals.unwrap_or_default());
                    policy.decide_read(&request)
                },
            )
            .await;
        let (response, origin) = match self.with_state(judged) {
            Ok(done) => done,
            Err(e) => {
                self.approvals.finish(keeper.refused()).await;
                return Some(Err(e));
            }
        };
        let (s, t) = session
            .as_ref()
            .map(|(s, t)| (s.as_str(), t.as_str()))
            .unzip();
        if let (Some(s), Some(t)) = (s, t) {
            let own = request.outputs().filter(|_| brought);
            self.keep_outputs(policy, (s, t), own, &response, started, |i| request.call(i));
        }
        let headless = keeper.headless();
        let left = keeper.finish(policy, &response, t, |i| request.call_args(i));
        self.approvals.finish(left).await;
        let flips = self
            .shadowing(origin)
            .and_then(|shadow| shadow.compare(policy, &response, |p| seen.judge(p, text)));
        let id = self.decisions.record(
            Record::new(started, &response)
                .origin(origin)
                .session(s, t)
                .shadow(flips.as_ref())
                .headless(headless),
        );
        Some(Ok((response, origin, id)))
    }

    /// After a batch of a session's turn: keeps the outputs the request brought (they settle
    /// the calls awaiting them), then awaits the untrusted outputs of the calls it allowed.
    fn keep_outputs<'c>(
        &self,
        policy: &Policy,
        (session, turn): (&str, &str),
        brought: Option<&Value>,
        response: &Decided,
        now: Instant,
        call: impl Fn(usize) -> Option<(&'c str, &'c str, &'c Value)>,
    ) {
        if let Some(Value::Array(items)) = brought {
            self.sessions
                .record_outputs(policy, session, turn, items, now);
        }
        let allowed = response
            .decisions
            .iter()
            .enumerate()
            .filter(|(_, d)| d.allow)
            .filter_map(|(i, _)| call(i));
        self.sessions
            .expect_outputs(policy, session, turn, allowed, now);
    }

    /// The shadow set to compare a batch with, if any: none for a batch judged while the
    /// shared turn-state store was unavailable, whose answer is the server's fail-closed
    /// one (every latch assumed, `state` denials), not a reading of the policy.
    fn shadowing(&self, origin: Option<Origin>) -> Option<&super::shadow::Shadow> {
        self.shadow
            .as_ref()
            .filter(|_| origin != Some(Origin::Unavailable))
    }

    /// A batch judged against the turn-state store: the response and where its state came
    /// from, or 503 when the store refused the session.
    fn with_state(&self, judged: TurnJudged) -> Result<(Decided, Option<Origin>), ApiError> {
        match judged {
            TurnJudged::Done(response, origin) => Ok((response, origin)),
            TurnJudged::Refused(e) => Err(self.session_refused(e)),
        }
    }
}
