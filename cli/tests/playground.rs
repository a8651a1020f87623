//! The playground page in a real browser: `toolgate serve` on a loopback port, and
//! `tests/playground/playground.mjs` driving Debian's chromium through playwright-core. The
//! screenshot goes to `target/artefacts/playground.png`, which CI keeps.
//!
//! Needs `chromium` (apt) and `npm ci` in `tests/playground`; `.ci/run` installs both. Under
//! `CI=true` a missing one fails the test; elsewhere the test says so and passes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::server_support::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Fails under CI, skips with a message elsewhere.
fn missing(what: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("{what} is missing; .ci/run installs it");
    }
    eprintln!("skipped: {what} is missing (under CI=true this fails)");
}

#[test]
fn the_page_shows_diagnostics_then_decisions_in_chromium() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !Path::new(&chromium).exists() {
        return missing(&format!("chromium (`{chromium}`)"));
    }
    let dir = repo().join("tests/playground");
    if !dir.join("node_modules/playwright-core").is_dir() {
        return missing("playwright-core (run `npm ci` in tests/playground)");
    }
    let s = start("playground", &[("gate.gate", POLICY_A)], &[]);
    let shot = repo().join("target/artefacts/playground.png");
    let _ = std::fs::remove_file(&shot);
    let out = Command::new("node")
        .arg("playground.mjs")
        .arg(format!("http://{}", s.addr))
        .arg(&shot)
        .current_dir(&dir)
        .env("CHROMIUM", &chromium)
        .output()
        .expect("node runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    let png = std::fs::read(&shot).expect("the screenshot is written");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
}
