//! What every request passes before a handler: the `Origin` check, the JSON content type,
//! the body read within its timeout; and after: every error response has a JSON body.

use super::api_error::ApiError;
use super::metrics::Refusal;
use super::origins::Origins;
use super::state::AppState;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// The middleware.
pub async fn guard(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    // Past the origin check, an `Origin` here is one the server allows: answer its CORS
    // preflight, and let its page read the answers.
    let origin = req.headers().get(header::ORIGIN).cloned();
    let preflight = req.method() == Method::OPTIONS;
    let mut resp = match admit(&state, req).await {
        Ok(_) if preflight && origin.is_some() => preflight_response(),
        Ok(req) => json_errors(next.run(req).await),
        Err(e) => return e.into_response(),
    };
    if let Some(origin) = origin {
        let h = resp.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.append(header::VARY, HeaderValue::from_static("origin"));
    }
    resp
}

/// The answer to an allowed origin's preflight: JSON bodies, the admin token, GET and POST.
fn preflight_response() -> Response {
    (
        StatusCode::NO_CONTENT,
        [
            (header::ACCESS_CONTROL_ALLOW_METHODS, "GET, POST"),
            (
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                "content-type, authorization",
            ),
            (header::ACCESS_CONTROL_MAX_AGE, "600"),
        ],
    )
        .into_response()
}

/// Refuses a request from a foreign origin or with a non-JSON body, and reads the body
/// within the body timeout.
async fn admit(state: &AppState, req: Request) -> Result<Request, ApiError> {
    let refuse = |why: Refusal, e: ApiError| {
        state.decider.decisions.refused(why);
        e
    };
    check_origin(&state.origins, req.headers()).map_err(|e| refuse(Refusal::Origin, e))?;
    if has_body(req.headers()) && !is_json(req.headers()) {
        return Err(refuse(
            Refusal::ContentType,
            ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "a request body must be sent as `Content-Type: application/json`",
            ),
        ));
    }
    let (mut parts, body) = req.into_parts();
    let hook = parts.uri.path().starts_with(super::hooks::PREFIX);
    let limit = if hook {
        state.decider.limits.hook_body_bytes
    } else {
        state.decider.limits.body_bytes
    };
    let limited = Limited::new(body, limit);
    let bytes = match tokio::time::timeout(state.http.body_timeout, limited.collect()).await {
        Err(_) => {
            return Err(refuse(
                Refusal::BodyTimeout,
                ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "timeout",
                    format!(
                        "the request body did not arrive within {} ms",
                        state.http.body_timeout.as_millis()
                    ),
                ),
            ))
        }
        Ok(Err(e)) if hook && e.downcast_ref::<LengthLimitError>().is_some() => {
            // The hook handler answers in the agent's own format: a denial, not a 413 the
            // agent would take as "run the call".
            state
                .decider
                .decisions
                .metrics()
                .client_errors
                .fetch_add(1, Relaxed);
            parts.extensions.insert(super::hooks::BodyTooLarge(limit));
            Bytes::new()
        }
        Ok(Err(e)) => {
            state
                .decider
                .decisions
                .metrics()
                .client_errors
                .fetch_add(1, Relaxed);
            return Err(if e.downcast_ref::<LengthLimitError>().is_some() {
                ApiError::too_large("request body is over the size limit", None)
            } else {
                ApiError::bad_request("body", format!("cannot read the request body: {e}"), None)
            });
        }
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// No `Origin`, or exactly one that is allowed. A browser sends `Origin` on every
/// cross-origin request and on every POST, so a web page the operator visits cannot drive the
/// server; non-browser clients send none.
fn check_origin(origins: &Origins, headers: &HeaderMap) -> Result<(), ApiError> {
    let mut given = headers.get_all(header::ORIGIN).iter();
    let Some(first) = given.next() else {
        return Ok(());
    };
    if given.next().is_none() && origins.allows(first.as_bytes()) {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        "origin",
        format!(
            "requests from origin `{}` are refused; a browser page may call this server only from an origin given with --allow-origin",
            String::from_utf8_lossy(first.as_bytes())
        ),
    ))
}

/// A request that carries a body: a non-zero length, or a chunked one (any method).
fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() != "0")
}

/// `application/json`, any case, with parameters (`; charset=utf-8`) allowed; one header.
fn is_json(headers: &HeaderMap) -> bool {
    let mut all = headers.get_all(header::CONTENT_TYPE).iter();
    let (Some(v), None) = (all.next(), all.next()) else {
        return false;
    };
    let Ok(v) = v.to_str() else {
        return false;
    };
    let essence = v.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// Gives an error response that is not JSON (axum's own 405, say) a JSON body.
fn json_errors(resp: Response) -> Response {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return resp;
    }
    let code = match status {
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        _ => "http_error",
    };
    let message = status
        .canonical_reason()
        .unwrap_or("error")
        .to_ascii_lowercase();
    ApiError::new(status, code, message).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_origins_follow_the_listening_address() {
        let o = Origins::new(
            "127.0.0.1:8181".parse().unwrap_or(([0; 4], 0).into()),
            &["https://Console.example.com/".into()],
        );
        for ok in [
            "http://127.0.0.1:8181",
            "http://localhost:8181",
            "HTTP://LOCALHOST:8181",
            "https://console.example.com",
        ] {
            assert!(o.allows(ok.as_bytes()), "{ok}");
        }
        for no in [
            "http://127.0.0.1:8182",
            "https://127.0.0.1:8181",
            "null",
            "http://localhost:8181.evil.example",
            "",
        ] {
            assert!(!o.allows(no.as_bytes()), "{no}");
        }
        let any = Origins::new(([0, 0, 0, 0], 8181).into(), &[]);
        assert!(!any.allows(b"http://0.0.0.0:8181"));
    }
}
