//! The compose-style example of docs/deploy.md (`examples/deploy/up.sh`) runs as written:
//! Redis and two replicas start, and a latch set through one replica holds on the other.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::redis_support::{free_port, redis_available};

use std::path::Path;
use std::process::Command;

#[test]
fn the_deploy_example_starts_redis_and_two_replicas_that_share_a_latch() {
    if !redis_available() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new("bash")
        .arg(root.join("examples/deploy/up.sh"))
        .arg("--check")
        .env("TOOLGATE", env!("CARGO_BIN_EXE_toolgate"))
        .env("REDIS_PORT", free_port().to_string())
        .env("PORT_A", free_port().to_string())
        .env("PORT_B", free_port().to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("check: a latch set through"), "{stdout}");
}
