//! The playground: one page (`GET /playground`, its script and style) shipped inside the
//! binary, and the endpoint it calls, `POST /v1/playground`, which compiles a posted policy
//! source and judges, explains and offers a posted request against it.
//!
//! The page holds no engine and no state beyond its editors: every answer it shows comes from
//! this endpoint, which runs the same `Policy::compile`, `decide`, `explain` and `offer` as the
//! rest of the server. Nothing posted here is loaded or served. The endpoint is an admin one
//! (like `/v1/check`: compiling arbitrary text is not for every client), and the page is
//! served from the server's own origin, so the `Origin` and `Content-Type` guards admit its
//! calls unchanged.

use super::api_error::ApiError;
use super::routes::diagnostics;
use super::state::AppState;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use toolgate_engine::{Policy, Request, RequestError, ToolDef};

/// The page, its script and its style: every asset the playground needs, from the binary.
const PAGE: &str = include_str!("playground/index.html");
const SCRIPT: &str = include_str!("playground/app.js");
const STYLE: &str = include_str!("playground/app.css");
const ICON: &str = include_str!("playground/icon.svg");

/// The file name diagnostics of a posted source carry.
const SOURCE_NAME: &str = "playground.gate";

/// Only the page's own script, style and calls back to this server; no framing, no inline
/// script, nothing from elsewhere (the page must work with no network beyond this server).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// `GET /playground`.
pub async fn page() -> Response {
    asset("text/html; charset=utf-8", PAGE)
}

/// `GET /playground/app.js`.
pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /playground/app.css`.
pub async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

/// `GET /playground/icon.svg`: the page's icon, so the browser asks for no `/favicon.ico`.
pub async fn icon() -> Response {
    asset("image/svg+xml", ICON)
}

/// `GET /v1/policies/{module}/source` (admin): a loaded policy's own source text, which the
/// playground puts in its editor.
pub async fn source(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(module): Path<String>,
) -> Result<Response, ApiError> {
    state.admin(&headers)?;
    let set = state.decider.policies.snapshot();
    let policy = set.get(&module).ok_or_else(|| {
        ApiError::not_found(format!(
            "no policy module `{module}` is loaded; loaded: {}",
            super::decider::loaded_names(&set)
        ))
    })?;
    Ok(Json(json!({
        "module": policy.module(),
        "revision": policy.revision(),
        "file": policy.source().name(),
        "source": policy.source().own_text(),
    }))
    .into_response())
}

/// `GET /v1/playground/file` (admin): the text of the one file `toolgate playground FILE`
/// serves, read now, so the page opens on it even when it does not compile (which is when
/// an author most wants to see its diagnostics).
pub async fn file(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.admin(&headers)?;
    if !state.dir.is_file() {
        return Err(ApiError::not_found(
            "this server serves a directory; open a policy with /playground?policy=MODULE",
        ));
    }
    let text = std::fs::read_to_string(&state.dir).map_err(|e| {
        ApiError::unprocessable("unreadable", format!("cannot read the policy file: {e}"))
    })?;
    Ok(Json(json!({"file": state.dir.display().to_string(), "source": text})).into_response())
}

/// `POST /v1/playground` (admin):
/// `{"source": POLICY_TEXT, "request": REQUEST_TEXT?, "tools": TOOLS_TEXT?}`.
///
/// The request and the tools are posted as text, so the server's strict JSON reader reports
/// a mistake in them with its line and column (and a key given twice), as `/v1/decide` would.
pub async fn run(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    state.admin(&headers)?;
    let body = state.parse_body(body)?;
    let input = Input::read(body).map_err(|e| state.decider.client_error(e))?;
    let answer = tokio::task::spawn_blocking(move || input.answer())
        .await
        .map_err(|_| ApiError::unprocessable("playground_failed", "the playground task stopped"))?;
    Ok(Json(answer).into_response())
}

/// What the page posts.
struct Input {
    source: String,
    request: Option<String>,
    tools: Option<String>,
}

impl Input {
    fn read(body: Value) -> Result<Input, ApiError> {
        let Value::Object(mut top) = body else {
            return Err(ApiError::bad_request(
                "schema",
                "expected an object with `source` and optionally `request` and `tools`",
                None,
            ));
        };
        let mut text = |key: &str, required: bool| match top.remove(key) {
            Some(Value::String(s)) => Ok(Some(s)),
            None | Some(Value::Null) if !required => Ok(None),
            _ => Err(ApiError::bad_request(
                "schema",
                format!("expected the {key} as a string of text"),
                Some(key.into()),
            )),
        };
        let source = text("source", true)?.unwrap_or_default();
        let request = text("request", false)?.filter(|s| !s.trim().is_empty());
        let tools = text("tools", false)?.filter(|s| !s.trim().is_empty());
        if let Some(extra) = top.keys().next() {
            return Err(ApiError::bad_request(
                "schema",
                "unknown field; the playground takes `source`, `request` and `tools`",
                Some(extra.clone()),
            ));
        }
        Ok(Input {
            source,
            request,
            tools,
        })
    }

    /// Compiles the source; when it compiles, judges, explains and offers the request.
    fn answer(self) -> Value {
        let policy = match Policy::compile(SOURCE_NAME, &self.source) {
            Ok(p) => p,
            Err(e) => {
                return json!({
                    "ok": false,
                    "diagnostics": diagnostics(&e.diagnostics, &e.source_file),
                })
            }
        };
        let mut out = Map::new();
        out.insert("ok".into(), true.into());
        out.insert("module".into(), policy.module().into());
        out.insert("revision".into(), policy.revision().into());
        out.insert(
            "diagnostics".into(),
            diagnostics(policy.warnings(), policy.source()).into(),
        );
        if let Some(text) = &self.request {
            match read_request(&policy, text) {
                Ok(request) => {
                    out.insert("response".into(), json!(policy.decide(&request)));
                    out.insert("explain".into(), json!(policy.explain(&request)));
                    let tools = match &self.tools {
                        Some(t) => read_tools(t),
                        None => Ok(classified_tools(&policy)),
                    };
                    match tools {
                        Ok(tools) => {
                            out.insert("offer".into(), json!(policy.offer(&request.facts, &tools)))
                        }
                        Err(e) => out.insert("tools_error".into(), e),
                    };
                }
                Err(e) => {
                    out.insert("request_error".into(), e);
                }
            }
        }
        Value::Object(out)
    }
}

/// The request text read by the strict reader and checked against the policy, as
/// `/v1/decide`'s strict path reads it; an error as `{message, location?}`.
fn read_request(policy: &Policy, text: &str) -> Result<Request, Value> {
    let request = toolgate_engine::parse_json(text)
        .and_then(Request::from_value)
        .map_err(request_error)?;
    policy.check_request(&request).map_err(request_error)?;
    Ok(request)
}

/// A tool list as the executor has it, read by the same reader as `/v1/offer`'s `tools`.
fn read_tools(text: &str) -> Result<Vec<ToolDef>, Value> {
    ToolDef::list_from_json(text).map_err(request_error)
}

/// With no tool list posted, the offer is made over every tool the policy classifies, so
/// the page shows which of them the model would see with the request's facts.
fn classified_tools(policy: &Policy) -> Vec<ToolDef> {
    policy
        .tools()
        .map(|(name, _)| ToolDef {
            name: name.to_string(),
            description: None,
            input_schema: None,
            extra: Map::new(),
        })
        .collect()
}

fn request_error(e: RequestError) -> Value {
    let location = match &e {
        RequestError::Json { line, column, .. }
        | RequestError::DuplicateKey { line, column, .. } => {
            Some(format!("line {line}, column {column}"))
        }
        RequestError::Schema { path, .. } => Some(path.clone()),
        _ => None,
    };
    json!({"message": e.to_string(), "location": location})
}
