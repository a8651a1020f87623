//! JSON errors: `{"error": {"code", "message", "location"?}}` with the right status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The code of a refused bearer token, which also names the RFC 6750 challenge.
const INVALID_TOKEN: &str = "invalid_token";

/// A request refused: an error the client caused (or a server state it should know about),
/// with the HTTP status it is answered with, a stable code and, where there is one, the
/// place in the request (a JSON path, or a line and column). Never a 500.
///
/// The routes answer it as `{"error": {"code", "message", "location"?}}`; a program that
/// calls the [`crate::Decider`] itself reads it with [`ApiError::code`],
/// [`ApiError::message`] and [`ApiError::location`].
#[derive(Debug, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    location: Option<String>,
}

#[derive(Serialize)]
struct Body<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct Inner<'a> {
    code: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<&'a str>,
}

impl ApiError {
    /// Any status, with a stable code.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            location: None,
        }
    }

    /// 400: the body is not JSON or does not fit the schema.
    pub fn bad_request(
        code: &'static str,
        message: impl Into<String>,
        location: Option<String>,
    ) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code,
            message: message.into(),
            location,
        }
    }

    /// 404: no such module or route.
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::NOT_FOUND,
            code: "not_found",
            message: message.into(),
            location: None,
        }
    }

    /// 413: over a size cap.
    pub fn too_large(message: impl Into<String>, location: Option<String>) -> Self {
        ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: "too_large",
            message: message.into(),
            location,
        }
    }

    /// 401/403: admin endpoints.
    pub fn forbidden(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code: "forbidden",
            message: message.into(),
            location: None,
        }
    }

    /// 401: a bearer token that is present but not valid (`--jwks`); the answer carries
    /// `WWW-Authenticate: Bearer error="invalid_token"` with the reason (RFC 6750).
    pub fn invalid_token(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            code: INVALID_TOKEN,
            message: message.into(),
            location: None,
        }
    }

    /// 503: no policy loaded yet.
    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: "no_policy",
            message: message.into(),
            location: None,
        }
    }

    /// 422: a reload or check whose policies do not compile.
    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code,
            message: message.into(),
            location: None,
        }
    }
}

impl ApiError {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The stable code (`schema`, `json`, `duplicate_key`, `too_large`, `sessions_full`,
    /// ...), as docs/server.md lists them.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// What is wrong, for a person.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Where in the request, when the error has a place: a JSON path or a line and column.
    pub fn location(&self) -> Option<&str> {
        self.location.as_deref()
    }

    /// The same error with its location rewritten by `relocate`: a route that judges a
    /// request translated from another shape names the place in the client's own body.
    pub fn relocated(mut self, relocate: impl FnOnce(Option<String>) -> Option<String>) -> Self {
        self.location = relocate(self.location.take());
        self
    }

    /// The error as a JSON object inside a successful answer (AuthZEN's per-evaluation
    /// errors): `{"status", "code", "message", "location"?}`.
    pub fn as_value(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "status": self.status.as_u16(),
            "code": self.code,
            "message": self.message,
        });
        if let Some(at) = &self.location {
            v["location"] = at.as_str().into();
        }
        v
    }

    /// The JSON body, for writers below the router (the accept loop).
    pub fn body_json(&self) -> String {
        serde_json::to_string(&Body {
            error: Inner {
                code: self.code,
                message: &self.message,
                location: self.location.as_deref(),
            },
        })
        .unwrap_or_default()
    }

    /// A whole HTTP/1.1 response that closes the connection, for writers below the router.
    pub fn raw_response(&self) -> Vec<u8> {
        let body = self.body_json();
        format!(
            "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            self.status.as_u16(),
            self.status.canonical_reason().unwrap_or(""),
            body.len()
        )
        .into_bytes()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Body {
            error: Inner {
                code: self.code,
                message: &self.message,
                location: self.location.as_deref(),
            },
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.code == INVALID_TOKEN {
            challenge_invalid_token(&mut response, &self.message);
        }
        response
    }
}

/// Adds the RFC 6750 challenge of a refused bearer token to `response`:
/// `WWW-Authenticate: Bearer error="invalid_token", error_description="REASON"`. Every HTTP
/// listener that verifies tokens (the server, `toolgate mcp --listen`) answers with it.
pub fn challenge_invalid_token(response: &mut Response, reason: &str) {
    let challenge = format!(
        "Bearer error=\"invalid_token\", error_description=\"{}\"",
        reason.replace(['"', '\\'], "'")
    );
    if let Ok(v) = axum::http::HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(axum::http::header::WWW_AUTHENTICATE, v);
    }
}
