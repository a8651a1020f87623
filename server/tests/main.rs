//! The integration tests of `toolgate-server`, one binary with a module per topic
//! (regex-automata's layout, issue 23): each `tests/*.rs` used to be a binary of its own that
//! linked the server and the engine again. Cargo builds only this file (`autotests = false`
//! in `Cargo.toml`); `tests/tests/test_layout.rs` of `toolgate-tests` fails for a
//! `tests/*.rs` file not declared here. One topic:
//! `cargo test -p toolgate-server --test it shadow::`.

mod approvals;
#[cfg(feature = "redis")]
mod approvals_redis;
mod authzen;
#[cfg(feature = "jwt")]
mod bearer;
mod budgets;
#[cfg(feature = "redis")]
mod budgets_cluster;
#[cfg(feature = "redis")]
mod budgets_redis;
mod decider;
mod outputs;
mod router;
mod shadow;

// Helpers the modules share, declared once here and used as `crate::NAME`.
#[allow(dead_code)]
#[path = "../examples/embed.rs"]
mod embed;
// Shared with cli/tests/, which allows what it unwraps at the top of the files using it.
#[cfg(feature = "redis")]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "../../cli/tests/redis_support/mod.rs"]
mod redis_support;
mod support;
