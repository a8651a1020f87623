//! The Streamable HTTP side of the proxy: `toolgate mcp --listen ADDR`.
//!
//! Every client gets an MCP session (`Mcp-Session-Id`), and every session its own [`Proxy`],
//! so its latches and earlier calls are its own, as a stdio connection's are. The 2026-07-28
//! protocol has no sessions (SEP-2567), so a request made under it would come with no state
//! to judge it against; the listener therefore offers the versions that have a session, and a
//! 2026-07-28 request is refused with the versions it may use instead (fail closed) rather
//! than judged as the first call of a fresh session.
//!
//! Sessions are bounded ([`Listen`]): at most `--max-sessions` at once (a new one past it is
//! answered with a JSON-RPC error), each closed after `--session-idle` without a request (the
//! SDK's keep-alive, 300 s by default). A session that ends leaves its latched turns behind
//! (`expired.rs`), so re-initialising does not clear a latch.
//!
//! Connections are the decision server's: the same accept loop (`toolgate_server::conn`), with its
//! connection cap (`--max-connections`, a 503 beyond it), header deadline and idle timeout,
//! and every request body is read whole, up to `--max-body` and within `--body-timeout-ms`
//! (413 and 408 otherwise, as JSON-RPC errors), before the SDK sees it.
//!
//! The listener takes the SDK's defence against DNS rebinding (requests whose `Host` is not a
//! loopback name are refused) and checks `Origin` as the Streamable HTTP spec requires: a
//! request that carries one must come from a loopback origin or one `--allow-origin` names.
//! Put a reverse proxy in front to serve other hosts.
//!
//! A request that carries the routing headers SEP-2243 mirrors from its body (`Mcp-Method`,
//! and `Mcp-Name` for the tool, resource or prompt it names) must agree with its body: a
//! gateway in front may route, rate-limit or authorize on the headers while the proxy runs
//! the body, so a request whose headers say `read_file` and whose body calls `write_file` is
//! refused (HTTP 400, JSON-RPC -32020) before anything reads it.

use super::expired::Expired;
use super::upstream::Upstream;
use super::{Config, Proxy, VerifiedPrincipal};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use toolgate_server::bearer::Verifier;
use toolgate_server::conn::{ConnHost, Refusal};
use toolgate_server::{Decisions, HttpLimits};

/// The path the MCP endpoint is served at.
pub const PATH: &str = "/mcp";

/// The path of the proxy's Prometheus metrics.
pub const METRICS_PATH: &str = "/metrics";

/// The JSON-RPC error code of a request whose headers disagree with its body (SEP-2243).
const HEADER_MISMATCH: i64 = -32020;

/// The bounds of the listener.
#[derive(Clone)]
pub struct Listen {
    /// The address.
    pub addr: String,
    /// Most sessions open at once.
    pub max_sessions: usize,
    /// How long a session may go without a request before it is closed.
    pub idle: Duration,
    /// How long an ended session's latched turns are remembered.
    pub keep_expired: Duration,
    /// Origins besides loopback ones that a request may come from.
    pub allow_origins: Vec<String>,
    /// Timeouts and the connection cap of the accept loop.
    pub http: HttpLimits,
    /// Largest request body, in bytes.
    pub max_body: usize,
    /// Verifies each request's `Authorization: Bearer` token (`--jwks`): a valid one's
    /// principal is what the session's calls are judged with, an invalid one is refused
    /// (401), and none means no principal. `None` reads no token.
    pub bearer: Option<Arc<Verifier>>,
}

struct Gate {
    bearer: Option<Arc<Verifier>>,
    sessions: Arc<LocalSessionManager>,
    max_sessions: usize,
    allow_origins: Vec<String>,
    max_body: usize,
    body_timeout: Duration,
}

/// The listener as the accept loop's host: its refusals and connections count in the
/// proxy's metrics, and a connection over the cap gets the JSON 503.
struct Connections {
    limits: HttpLimits,
    decisions: Option<Arc<Decisions>>,
}

impl ConnHost for Connections {
    fn limits(&self) -> HttpLimits {
        self.limits
    }

    fn refused(&self, why: Refusal) {
        if let Some(d) = &self.decisions {
            d.refused(why);
        }
    }

    fn opened(&self) {
        if let Some(d) = &self.decisions {
            d.opened();
        }
    }

    fn closed(&self) {
        if let Some(d) = &self.decisions {
            d.closed();
        }
    }
}

/// Why the listener could not serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The address could not be bound (or its bound address read).
    #[error("cannot listen on `{addr}`: {source}")]
    Listen {
        /// The address asked for.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The stop signals could not be handled.
    #[error(transparent)]
    Signal(#[from] toolgate_server::signals::SignalError),
}

/// Serves MCP over Streamable HTTP on `listen` until SIGINT or SIGTERM.
pub async fn serve(
    config: Arc<Config>,
    upstream: Upstream,
    listen: &Listen,
) -> Result<(), ServeError> {
    let decisions_of_connections = config.decisions.clone();
    let http_config = StreamableHttpServerConfig::default();
    let shutdown = http_config.cancellation_token.clone();
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(listen.idle);
    let manager = Arc::new(manager);
    let expired = Arc::new(Expired::new(
        listen.keep_expired,
        listen.max_sessions,
        listen.idle,
    ));
    let service = StreamableHttpService::new(
        move || {
            Ok(Proxy::for_http_session(
                config.clone(),
                upstream.clone(),
                expired.clone(),
            ))
        },
        manager.clone(),
        http_config.with_legacy_session_mode(true),
    );
    let gate = Arc::new(Gate {
        bearer: listen.bearer.clone(),
        sessions: manager,
        max_sessions: listen.max_sessions.max(1),
        allow_origins: listen
            .allow_origins
            .iter()
            .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
            .collect(),
        max_body: listen.max_body,
        body_timeout: listen.http.body_timeout,
    });
    let metrics = Metrics {
        decisions: decisions_of_connections.clone(),
        sessions: gate.sessions.clone(),
    };
    let router = axum::Router::new()
        .nest_service(PATH, service)
        .route(
            METRICS_PATH,
            axum::routing::get(render_metrics).with_state(Arc::new(metrics)),
        )
        .layer(axum::middleware::from_fn_with_state(gate, admit));
    let addr = &listen.addr;
    let cannot = |source| ServeError::Listen {
        addr: addr.clone(),
        source,
    };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(cannot)?;
    let local = listener.local_addr().map_err(cannot)?;
    // Handlers go in before the announcement, so a signal sent on reading it is handled.
    let stop = toolgate_server::signals::Stop::install()?;
    eprintln!("toolgate mcp: serving MCP at http://{local}{PATH}");
    toolgate_server::conn::serve(
        listener,
        router,
        Arc::new(Connections {
            limits: listen.http,
            decisions: decisions_of_connections,
        }),
        async move {
            stop.recv().await;
            shutdown.cancel();
        },
        DRAIN,
    )
    .await;
    Ok(())
}

/// What `GET /metrics` reads.
struct Metrics {
    decisions: Option<Arc<Decisions>>,
    sessions: Arc<LocalSessionManager>,
}

/// `GET /metrics`: the proxy's decisions, latency, connections and decision log in
/// Prometheus text format, the series `toolgate serve` has (`toolgate_decisions_total`, ...);
/// 404 when the proxy records nothing.
async fn render_metrics(State(m): State<Arc<Metrics>>) -> Response {
    let Some(decisions) = &m.decisions else {
        return (StatusCode::NOT_FOUND, "the proxy records no decisions\n").into_response();
    };
    let sessions = m.sessions.sessions.read().await.len();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        decisions.render_metrics(sessions, 0, 1),
    )
        .into_response()
}

/// How long open connections may take to finish after SIGTERM.
const DRAIN: Duration = Duration::from_secs(10);

/// A JSON-RPC error answer with `status`.
fn rpc_error(status: StatusCode, id: Value, code: i64, message: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            .to_string(),
    )
        .into_response()
}

/// The answer to a request whose bearer token is not valid: 401 with the reason, in the
/// body as a JSON-RPC error and in `WWW-Authenticate` (RFC 6750), as `toolgate serve` answers.
fn invalid_token(reason: &str) -> Response {
    let mut response = rpc_error(
        StatusCode::UNAUTHORIZED,
        Value::Null,
        -32001,
        format!("toolgate mcp: the bearer token is not valid: {reason}"),
    );
    toolgate_server::challenge_invalid_token(&mut response, reason);
    response
}

/// Whether `origin` is a loopback origin (`http://localhost:3000`, `http://127.0.0.1`,
/// `http://[::1]:8080`) or one the operator allowed.
fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    let origin = origin.trim_end_matches('/').to_ascii_lowercase();
    if allowed.contains(&origin) {
        return true;
    }
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = match rest.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((h, port)) if port.is_empty() || port.starts_with(':') => h,
            _ => return false,
        },
        None => rest.split(':').next().unwrap_or(""),
    };
    let port_ok = match rest
        .rsplit_once(']')
        .map_or(rest, |(_, p)| p)
        .split_once(':')
    {
        None => true,
        Some((_, port)) => !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()),
    };
    port_ok && matches!(host, "localhost" | "127.0.0.1" | "::1")
}

/// Checks `Origin` on every request, and refuses a new session past the cap.
async fn admit(State(gate): State<Arc<Gate>>, req: Request, next: Next) -> Response {
    let mut origins = req.headers().get_all(header::ORIGIN).iter();
    if let Some(origin) = origins.next() {
        let ok = origins.next().is_none()
            && origin
                .to_str()
                .is_ok_and(|o| origin_allowed(o, &gate.allow_origins));
        if !ok {
            return rpc_error(
                StatusCode::FORBIDDEN,
                Value::Null,
                -32000,
                "toolgate mcp: the request's Origin is not a loopback origin or one --allow-origin names".into(),
            );
        }
    }
    let mut req = req;
    if let Some(verifier) = &gate.bearer {
        match verifier.principal(req.headers()).await {
            Ok(principal) => {
                req.extensions_mut().insert(VerifiedPrincipal(principal));
            }
            Err(e) => return invalid_token(&e.to_string()),
        }
    }
    let req = match whole_body(req, gate.max_body, gate.body_timeout).await {
        Ok(req) => req,
        Err(refused) => return refused,
    };
    let req = match mirrored_headers_agree(req).await {
        Ok(req) => req,
        Err(refused) => return refused,
    };
    let new_session =
        req.method() == axum::http::Method::POST && !req.headers().contains_key("mcp-session-id");
    if !new_session || gate.sessions.sessions.read().await.len() < gate.max_sessions {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Default::default(),
    };
    let id = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v.get("id").cloned())
        .unwrap_or(Value::Null);
    drop(Request::from_parts(parts, Body::empty()));
    rpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        id,
        -32000,
        format!(
            "toolgate mcp: the proxy holds its most sessions ({}); close one or retry later",
            gate.max_sessions
        ),
    )
}

/// The request with its body read whole into memory, or the refusal of one that is over
/// `max_body` bytes (413) or does not arrive within `timeout` (408), as a JSON-RPC error.
async fn whole_body(req: Request, max_body: usize, timeout: Duration) -> Result<Request, Response> {
    let (parts, body) = req.into_parts();
    let read = tokio::time::timeout(
        timeout,
        http_body_util::Limited::new(body, max_body).collect(),
    );
    match read.await {
        Ok(Ok(b)) => Ok(Request::from_parts(parts, Body::from(b.to_bytes()))),
        Ok(Err(_)) => Err(rpc_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            Value::Null,
            -32000,
            format!("toolgate mcp: the request body is over the proxy's {max_body}-byte limit (--max-body)"),
        )),
        Err(_) => Err(rpc_error(
            StatusCode::REQUEST_TIMEOUT,
            Value::Null,
            -32000,
            format!(
                "toolgate mcp: the request body did not arrive within {} ms",
                timeout.as_millis()
            ),
        )),
    }
}

/// The methods whose target `Mcp-Name` mirrors (`params.name`, or `params.uri`).
const NAMED_METHODS: [&str; 3] = ["tools/call", "resources/read", "prompts/get"];

/// Passes a request on, its body read back in, unless it carries `Mcp-Method` or `Mcp-Name`
/// and they disagree with its body.
async fn mirrored_headers_agree(req: Request) -> Result<Request, Response> {
    // Read in a block of its own: a borrow of the request held across the await below would
    // make this future not `Send`.
    let headers = {
        let header = |name: &str| -> Result<Option<String>, ()> {
            let mut values = req.headers().get_all(name).iter();
            match (values.next(), values.next()) {
                (None, _) => Ok(None),
                (Some(v), None) => v.to_str().map(|v| Some(v.to_string())).map_err(|_| ()),
                (Some(_), Some(_)) => Err(()),
            }
        };
        (header("mcp-method"), header("mcp-name"))
    };
    let refuse = |id: Value, why: String| {
        rpc_error(
            StatusCode::BAD_REQUEST,
            id,
            HEADER_MISMATCH,
            format!("toolgate mcp: {why}"),
        )
    };
    let (method, name) = match headers {
        (Ok(m), Ok(n)) => (m, n),
        _ => {
            return Err(refuse(
                Value::Null,
                "`Mcp-Method` and `Mcp-Name` must each be given once, as text".into(),
            ))
        }
    };
    if req.method() != axum::http::Method::POST || (method.is_none() && name.is_none()) {
        return Ok(req);
    }
    let (parts, body) = req.into_parts();
    // The body is already in memory (`whole_body`).
    let bytes = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return Err(refuse(
                Value::Null,
                "the request body cannot be read".into(),
            ))
        }
    };
    let message: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if let Err(why) = headers_match_body(method.as_deref(), name.as_deref(), &message) {
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        return Err(refuse(id, why));
    }
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// Whether the mirrored headers say what the JSON-RPC message does.
fn headers_match_body(
    method: Option<&str>,
    name: Option<&str>,
    message: &Value,
) -> Result<(), String> {
    let Some(body_method) = message.get("method").and_then(Value::as_str) else {
        return Err(
            "routing headers mirror one JSON-RPC request or notification, and the body is not one"
                .into(),
        );
    };
    match method {
        Some(m) if m == body_method => {}
        Some(m) => {
            return Err(format!(
                "the `Mcp-Method` header says `{m}` and the body's method is `{body_method}`"
            ))
        }
        None => return Err("`Mcp-Name` is given without `Mcp-Method`".into()),
    }
    let params = message.get("params");
    let target = params
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .or_else(|| params.and_then(|p| p.get("uri")).and_then(Value::as_str));
    match (name, target) {
        (Some(n), Some(t)) if n == t => Ok(()),
        (Some(n), Some(t)) => Err(format!(
            "the `Mcp-Name` header says `{n}` and the body names `{t}`"
        )),
        (Some(n), None) => Err(format!(
            "the `Mcp-Name` header says `{n}` and the body names nothing"
        )),
        (None, Some(t)) if NAMED_METHODS.contains(&body_method) => Err(format!(
            "`Mcp-Method` is given and `Mcp-Name` is not, though the body names `{t}`"
        )),
        (None, _) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::{headers_match_body, origin_allowed};
    use serde_json::json;

    #[test]
    fn mirrored_headers_must_say_what_the_body_does() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "write_file", "arguments": {}}});
        assert!(headers_match_body(Some("tools/call"), Some("write_file"), &call).is_ok());
        for (method, name) in [
            (Some("tools/call"), Some("read_file")),
            (Some("tools/list"), Some("write_file")),
            (Some("tools/call"), None),
            (None, Some("write_file")),
        ] {
            assert!(
                headers_match_body(method, name, &call).is_err(),
                "{method:?} {name:?}"
            );
        }
        let read = json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
                          "params": {"uri": "file:///a"}});
        assert!(headers_match_body(Some("resources/read"), Some("file:///a"), &read).is_ok());
        assert!(headers_match_body(Some("resources/read"), Some("file:///b"), &read).is_err());
        let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
        assert!(headers_match_body(Some("tools/list"), None, &list).is_ok());
        assert!(headers_match_body(Some("tools/list"), Some("x"), &list).is_err());
        // A batch cannot be mirrored by one pair of headers.
        assert!(headers_match_body(Some("tools/call"), None, &json!([call])).is_err());
    }

    #[test]
    fn only_loopback_or_allowed_origins_pass() {
        let allowed = vec!["https://app.example.com".to_string()];
        for ok in [
            "http://localhost",
            "http://localhost:3000",
            "http://127.0.0.1:8080/",
            "http://[::1]:9",
            "https://app.example.com",
            "HTTP://LOCALHOST:1",
        ] {
            assert!(origin_allowed(ok, &allowed), "{ok}");
        }
        for bad in [
            "null",
            "http://evil.io",
            "http://localhost.evil.io",
            "http://127.0.0.1.evil.io:80",
            "http://localhost:80@evil.io",
            "http://[::1].evil.io",
            "https://app.example.com.evil.io",
            "file://localhost",
            "http://localhost:",
        ] {
            assert!(!origin_allowed(bad, &allowed), "{bad}");
        }
    }
}
