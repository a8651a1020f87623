//! The Streamable HTTP side of the proxy: `toolgate mcp --listen ADDR`.
//!
//! Every client gets an MCP session (`Mcp-Session-Id`), and every session its own [`Proxy`],
//! so its latches and earlier calls are its own, as a stdio connection's are. The 2026-07-28
//! protocol has no sessions (SEP-2567), so a request made under it would come with no state
//! to judge it against; the listener therefore offers the versions that have a session, and a
//! 2026-07-28 request is refused with the versions it may use instead (fail closed) rather
//! than judged as the first call of a fresh session.
//!
//! The listener takes the SDK's defence against DNS rebinding as it is: requests whose `Host`
//! is not a loopback name are refused. Put a reverse proxy in front to serve other hosts.

use super::upstream::Upstream;
use super::{Config, Proxy};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;

/// The path the MCP endpoint is served at.
pub const PATH: &str = "/mcp";

/// Serves MCP over Streamable HTTP on `listen` until SIGINT or SIGTERM.
pub async fn serve(config: Arc<Config>, upstream: Upstream, listen: &str) -> Result<(), String> {
    let http_config = StreamableHttpServerConfig::default();
    let shutdown = http_config.cancellation_token.clone();
    let service = StreamableHttpService::new(
        move || Ok(Proxy::for_http_session(config.clone(), upstream.clone())),
        Arc::new(LocalSessionManager::default()),
        http_config.with_legacy_session_mode(true),
    );
    let router = axum::Router::new().nest_service(PATH, service);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on `{listen}`: {e}"))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot listen on `{listen}`: {e}"))?;
    // Handlers go in before the announcement, so a signal sent on reading it is handled.
    let stop = crate::signals::Stop::install()?;
    eprintln!("toolgate mcp: serving MCP at http://{local}{PATH}");
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            stop.recv().await;
            shutdown.cancel();
        })
        .await
        .map_err(|e| format!("the HTTP listener failed: {e}"))
}
