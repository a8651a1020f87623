//! An axum app with toolgate's decision server inside it: the app keeps its own routes and
//! mounts toolgate's under `/toolgate`, serving the shipped coach policy
//! (`stdlib-rules/examples/coach.gate`).
//!
//! ```sh
//! cargo run -p toolgate-server --example embed        # 127.0.0.1:3000, or PORT=...
//! curl -s localhost:3000/toolgate/v1/decide -H 'Content-Type: application/json' \
//!   -d '{"facts": {"stage": "coach"}, "calls": [{"id": "c1", "tool": "lookup_lesson", "args": {}}]}'
//! ```
//!
//! `server/tests/router.rs` runs this app's router in-process.

use axum::routing::get;
use axum::Router;
use std::net::SocketAddr;
use std::path::PathBuf;
use toolgate_server::{Config, LogMode, PolicySource, Server};

/// Where the app mounts toolgate's routes.
pub const PREFIX: &str = "/toolgate";

/// The shipped policy this example serves.
pub fn policy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../stdlib-rules/examples/coach.gate")
}

/// toolgate's configuration inside the app: the coach policy, the app's own address (the
/// origin browsers' pages must come from, and loopback for the admin endpoints), and no
/// decision log on standard output, which is the app's.
pub fn config(addr: SocketAddr) -> Config {
    let mut config = Config::new(PolicySource::Path(policy()));
    config.addr = addr;
    config.log.mode = LogMode::Off;
    config
}

/// The app: a route of its own, and toolgate's under [`PREFIX`].
pub fn app(server: &Server) -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { "an agent app; toolgate judges its tool calls\n" }),
        )
        .nest(PREFIX, toolgate_server::router(server))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port: u16 = std::env::var("PORT").map_or(Ok(3000), |p| p.parse())?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    let server = Server::start(config(addr)).await?;
    eprintln!("embed: http://{addr}/, toolgate at http://{addr}{PREFIX}/v1/decide");
    axum::serve(listener, app(&server))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    server.shutdown().await;
    Ok(())
}
