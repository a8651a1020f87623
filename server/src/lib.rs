//! The toolgate decision server as a library: the HTTP API of `toolgate serve`
//! (`docs/server.md`), for a Rust program to run, or to mount in an axum app of its own.
//!
//! - [`run`] is `toolgate serve` without the flags: it listens on [`Config::addr`], serves
//!   until the `shutdown` future resolves, drains connections and flushes the decision log.
//! - [`Server::start`] builds the same server without a listener, and [`router`] gives its
//!   routes as an [`axum::Router`] to nest or merge into another app;
//!   [`Server::shutdown`] ends it.
//!
//! ```no_run
//! use toolgate_server::{Config, PolicySource};
//!
//! # async fn serve() -> Result<(), toolgate_server::ServerError> {
//! let mut config = Config::new(PolicySource::Path("policies".into()));
//! config.addr = "127.0.0.1:8181".parse().unwrap();
//! toolgate_server::run(config, async {
//!     let _ = tokio::signal::ctrl_c().await;
//! })
//! .await
//! # }
//! ```
//!
//! Mounting the routes under a prefix of another app (`examples/embed.rs` in full):
//!
//! ```no_run
//! # async fn embed() -> Result<(), toolgate_server::ServerError> {
//! use toolgate_server::{Config, PolicySource, Server};
//!
//! let server = Server::start(Config::new(PolicySource::Path("policies".into()))).await?;
//! let app = axum::Router::new().nest("/toolgate", toolgate_server::router(&server));
//! # drop(app);
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Features
//!
//! All on by default; each adds a part, and a [`Config`] that asks for a part the build
//! lacks is refused when the server starts ([`ServerError::Unsupported`], which names the
//! feature), never ignored:
//!
//! | feature | what it adds | asked for by |
//! |---|---|---|
//! | `redis` | turn state shared by replicas in Redis or Valkey | [`Config::state`] |
//! | `otel` | one OpenTelemetry span per decision request | [`Config::otel_endpoint`] |
//! | `shipper` | the decision log shipped as OPA events | [`LogSink::Ship`] |
//! | `bundles` | signed bundles polled over HTTP(S) | [`PolicySource::Bundle`] |
//! | `playground` | `/playground`, `/v1/playground`, `/v1/policies/{module}/source` | [`Config::announce`] |
//! | `jwt` | principals from bearer tokens verified against a JWKS | [`Config::jwt`] |
//!
//! Without `playground` those routes are absent (404 like any unknown path).
//!
//! # What holds
//!
//! - The server keeps state around `Policy::decide`, never inside it: a decision takes one
//!   snapshot of the serving set and judges the whole batch with it.
//! - A client can never cause a 500; every error body is JSON.
//! - Turn state is never lost in the allowing direction: a store that cannot answer judges
//!   fail-closed.
//! - No policy change widens what is allowed without a person: every swap passes the reload
//!   gate.
//!
//! The server reports its events (loads, reloads, failures) on standard error, and writes
//! the decision log to standard output unless told otherwise ([`LogConfig::sink`]).
#![warn(missing_docs)]

mod api_error;
mod approvals;
mod approvals_routes;
mod authzen;
mod budgets;
mod clock;
mod config;
mod decider;
mod decision_log;
mod decisions;
mod error;
mod guard;
mod hooks;
mod limits;
mod loader;
mod metrics;
mod off;
mod origins;
mod outputs_route;
mod reload_gate;
mod routes;
mod server;
mod shadow;
mod state;
mod turn_state;

#[cfg(feature = "jwt")]
pub mod bearer;
#[cfg(feature = "bundles")]
mod bundle;
#[cfg(any(
    feature = "redis",
    feature = "otel",
    feature = "shipper",
    feature = "bundles",
    feature = "jwt"
))]
mod http_client;
#[cfg(feature = "shipper")]
mod log_shipper;
#[cfg(feature = "playground")]
mod playground;
#[cfg(feature = "otel")]
mod tracing_otel;

#[cfg(not(feature = "jwt"))]
pub use off::bearer;
#[cfg(not(feature = "bundles"))]
use off::bundle;
#[cfg(not(feature = "shipper"))]
use off::log_shipper;
#[cfg(not(feature = "otel"))]
use off::tracing_otel;

pub mod conn;
pub mod signals;

pub use api_error::{challenge_invalid_token, ApiError};
pub use config::{
    AskMode, BundleSource, Config, HttpLimits, JwtConfig, LogConfig, LogMode, LogSink,
    PolicySource, RedisConfig, StoreTls,
};
pub use decider::{Caller, Decided, Decider};
pub use decisions::{Decisions, Record};
pub use error::{Feature, ServerError, StateError};
pub use limits::Limits;
pub use reload_gate::Widening;
pub use server::{router, run, Server};
pub use shadow::{flip as shadow_flip, word as decision_word};
pub use toolgate_turns::SessionLimits;
