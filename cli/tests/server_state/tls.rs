//! `serve --state rediss://`: turn state in a real `redis-server` reached over TLS, with its
//! certificate checked against a private CA (`--state-ca`), and a store that requires a client
//! certificate (`--state-cert`, `--state-key`). A store whose certificate cannot be verified
//! is a store that cannot be reached: calls a latch can block are denied (kind `state`).

use super::{call, decide, pair, verdicts, POLICY};
use crate::redis_support::{redis_available, Redis};
use crate::server_support::*;
use serde_json::json;
use std::path::Path;

fn replica(tag: &str, url: &str, extra: &[&str]) -> Server {
    let mut args = vec!["--state", url, "--state-new", "--state-timeout-ms", "2000"];
    args.extend_from_slice(extra);
    start(tag, &[("gate.gate", POLICY)], &args)
}

/// (allow, kind) of each decision `addr` makes for `tools` in `turn`.
fn judged(addr: &str, turn: &str, tools: &[&str]) -> Vec<(bool, String)> {
    verdicts(&decide(addr, &call(turn, tools)))
}

fn allowed() -> (bool, String) {
    pair(true, "")
}

fn denied(kind: &str) -> (bool, String) {
    pair(false, kind)
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_latch_set_over_tls_through_one_replica_holds_on_the_other() {
    if !redis_available() {
        return;
    }
    let (redis, files) = Redis::start_tls("tls-share", false);
    let url = redis.tls_url();
    let a = replica("tls-share-a", &url, &["--state-ca", path(&files.ca)]);
    let b = replica("tls-share-b", &url, &["--state-ca", path(&files.ca)]);
    assert_eq!(judged(&a.addr, "t1", &["fetch"]), [allowed()]);
    assert_eq!(
        judged(&b.addr, "t1", &["send", "look"]),
        [denied("latch"), allowed()]
    );
    // The state went through the store, not around it: its keys are there.
    let keys = redis.command(&["DBSIZE"]).unwrap();
    assert_ne!(keys, ":0", "nothing was written to the store");
    let (_, health) = get_json(&a.addr, "/health");
    assert_eq!(health["state"], json!({"store": "redis", "up": true}));
}

#[test]
fn a_certificate_that_does_not_chain_to_the_trusted_ca_fails_closed() {
    if !redis_available() {
        return;
    }
    let (redis, files) = Redis::start_tls("tls-untrusted", false);
    let url = redis.tls_url();
    // The system's trust store, and a CA that signed nothing here: neither verifies it.
    for (tag, extra) in [
        ("tls-untrusted-system", vec![]),
        (
            "tls-untrusted-other",
            vec!["--state-ca", path(&files.other_ca)],
        ),
    ] {
        let s = replica(tag, &url, &extra);
        assert_eq!(
            judged(&s.addr, "t1", &["send", "look"]),
            [denied("state"), allowed()],
            "{tag}"
        );
        let (_, health) = get_json(&s.addr, "/health");
        assert_eq!(health["state"]["up"], json!(false), "{tag}: {health}");
    }
    assert_eq!(redis.command(&["DBSIZE"]).unwrap(), ":0");
}

#[test]
fn a_store_that_requires_a_client_certificate_is_reached_only_with_one() {
    if !redis_available() {
        return;
    }
    let (redis, files) = Redis::start_tls("tls-mutual", true);
    let url = redis.tls_url();
    let without = replica("tls-mutual-none", &url, &["--state-ca", path(&files.ca)]);
    assert_eq!(judged(&without.addr, "t1", &["send"]), [denied("state")]);
    let with = replica(
        "tls-mutual-cert",
        &url,
        &[
            "--state-ca",
            path(&files.ca),
            "--state-cert",
            path(&files.client_cert),
            "--state-key",
            path(&files.client_key),
        ],
    );
    assert_eq!(judged(&with.addr, "t1", &["fetch"]), [allowed()]);
    assert_eq!(judged(&with.addr, "t1", &["send"]), [denied("latch")]);
    // A v1 certificate would be refused by the TLS library only at the first connection,
    // which looks like a store that is down: it is refused at start-up instead.
    let dir = temp_dir("state-tls-v1");
    std::fs::write(dir.join("gate.gate"), POLICY).unwrap();
    let key = files.v1_client_cert.with_extension("key");
    let (code, err) = serve_refused(&[
        path(&dir),
        "--addr",
        "127.0.0.1:0",
        "--state",
        &url,
        "--state-cert",
        path(&files.v1_client_cert),
        "--state-key",
        path(&key),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("X.509 v3"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tls_flags_that_cannot_apply_stop_the_server_with_a_clear_error() {
    let dir = temp_dir("state-tls-flags");
    std::fs::write(dir.join("gate.gate"), POLICY).unwrap();
    let missing = dir.join("no-such-ca.pem");
    let not_pem = dir.join("gate.gate");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        // TLS material with a plain URL: the operator meant TLS and would not get it.
        (
            vec![
                "--state",
                "redis://127.0.0.1:1",
                "--state-ca",
                path(&missing),
            ],
            "use a rediss:// URL",
        ),
        (
            vec![
                "--state",
                "rediss://127.0.0.1:1",
                "--state-ca",
                path(&missing),
            ],
            "--state-ca",
        ),
        (
            vec![
                "--state",
                "rediss://127.0.0.1:1",
                "--state-cert",
                path(&missing),
            ],
            "--state-key",
        ),
        (
            vec![
                "--state",
                "rediss://127.0.0.1:1",
                "--state-ca",
                path(&not_pem),
            ],
            "no PEM certificate",
        ),
        // The client library's own switch to skip verification.
        (
            vec!["--state", "rediss://127.0.0.1:1/#insecure"],
            "always verified",
        ),
    ];
    for (args, says) in cases {
        let mut all = vec![path(&dir), "--addr", "127.0.0.1:0"];
        all.extend_from_slice(&args);
        let (code, err) = serve_refused(&all);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
