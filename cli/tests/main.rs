//! The integration tests of `toolgate` (the command line), one binary with a module per topic
//! (regex-automata's layout, issue 23): each `tests/*.rs` used to be a binary of its own that
//! linked the server, the MCP proxy and the engine again. Cargo builds only this file
//! (`autotests = false` in `Cargo.toml`); `tests/tests/test_layout.rs` of `toolgate-tests`
//! fails for a `tests/*.rs` file not declared here. Every module runs the real binary
//! (`env!("CARGO_BIN_EXE_toolgate")`) in its own temporary directory. One topic:
//! `cargo test -p toolgate --test it server_http::`.

mod authoring;
mod bundle;
mod cli;
mod deploy_example;
mod hook;
mod log_shipping;
mod mcp;
mod offer;
mod otel;
mod playground;
mod policy_changes;
mod server;
mod server_authoring;
mod server_fast;
mod server_hooks;
mod server_http;
mod server_metrics;
mod server_reload_gate;
mod server_sessions;
mod server_state;
mod shadow;
mod test_command;
mod turn_contract;

// Helpers the modules share, declared once here and used as `crate::NAME`. Each used to be
// declared by every file using it, under that file's `#![allow(...)]` for what it unwraps.
mod binary_support;
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod bundle_support;
// Also reached by `server/tests/main.rs` through `#[path]`: keep it at this path.
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod redis_support;
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod server_support;
mod signal_support;
