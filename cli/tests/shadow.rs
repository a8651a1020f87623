//! Shadow mode through the real binary (issue 26): `toolgate eval --shadow NEW` prints both
//! policies' decisions and the flips, with the exit status of the live policy alone; `toolgate
//! serve DIR --shadow DIR2` judges with both, answers from DIR, counts flips in `/metrics`,
//! reloads the shadow from its watcher and on SIGHUP, and refuses to start when the shadow
//! does not load.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::server_support::{get_json, http, post_json, serve_refused, start, temp_dir};
use serde_json::{json, Value};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const LIVE: &str = "module shop\nwrite refund\nstage main { tools [refund] }\nrule refunds for refund {\n  require args.amount is number and args.amount <= 500\n}\n";
const STRICT: &str = "module shop\nwrite refund\nstage main { tools [refund] }\nrule small_refunds for refund {\n  require args.amount is number and args.amount <= 100\n}\n";

/// Refunds of these amounts, as calls `c1`, `c2`, ...
fn refunds(amounts: &[u32]) -> Value {
    let calls: Vec<Value> = amounts
        .iter()
        .enumerate()
        .map(|(i, a)| json!({"id": format!("c{}", i + 1), "tool": "refund", "args": {"amount": a}}))
        .collect();
    json!({"facts": {"stage": "main"}, "calls": calls})
}

/// `LIVE`, `STRICT` and a request in a fresh directory.
fn files(tag: &str) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let dir = temp_dir(tag);
    let (live, strict, request) = (
        dir.join("live.gate"),
        dir.join("strict.gate"),
        dir.join("request.json"),
    );
    std::fs::write(&live, LIVE).unwrap();
    std::fs::write(&strict, STRICT).unwrap();
    std::fs::write(&request, refunds(&[300, 50, 900]).to_string()).unwrap();
    (dir, live, strict, request)
}

/// `toolgate eval --policy LIVE --input REQUEST EXTRA...`.
fn eval(live: &Path, request: &Path, extra: &[&OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("eval")
        .arg("--policy")
        .arg(live)
        .arg("--input")
        .arg(request)
        .args(extra)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn eval_shadow_prints_both_responses_and_the_flips() {
    let (dir, live, strict, request) = files("eval-shadow-json");
    let out = eval(&live, &request, &["--shadow".as_ref(), strict.as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The response as without --shadow: `decisions` is the live policy's.
    let plain = eval(&live, &request, &[]);
    let plain: Value = serde_json::from_slice(&plain.stdout).unwrap();
    for key in ["decisions", "policy", "revision", "latched"] {
        assert_eq!(v[key], plain[key], "{key}");
    }
    assert_eq!(v["shadow"]["decisions"][0]["rule"], "small_refunds");
    assert_ne!(v["shadow"]["revision"], v["revision"]);
    assert_eq!(
        v["flips"],
        json!([{"id": "c1", "tool": "refund", "from": "allow", "to": "deny", "rule": "small_refunds"}])
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn eval_shadow_text_marks_the_flipped_calls() {
    let (dir, live, strict, request) = files("eval-shadow-text");
    let out = eval(
        &live,
        &request,
        &[
            "--shadow".as_ref(),
            strict.as_os_str(),
            "--format".as_ref(),
            "text".as_ref(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(
        lines[0].starts_with("c1 `refund`: allow; shadow: deny (args) by `small_refunds`")
            && lines[0].ends_with("FLIP allow -> deny (`small_refunds`)"),
        "{stdout}"
    );
    assert_eq!(lines[1], "c2 `refund`: allow; shadow: allow");
    assert!(!lines[2].contains("FLIP"), "{stdout}");
    assert!(
        lines[3].starts_with("1 of 3 calls flip: `shop` rev "),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn eval_shadow_that_does_not_compile_exits_2() {
    let (dir, live, _, request) = files("eval-shadow-broken");
    let broken = dir.join("broken.gate");
    std::fs::write(&broken, "module shop\nstage {").unwrap();
    let out = eval(&live, &request, &["--shadow".as_ref(), broken.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("error: shadow policy does not compile"),
        "{stderr}"
    );
    assert!(stderr.contains("broken.gate"), "{stderr}");
    assert!(out.stdout.is_empty());
    let _ = std::fs::remove_dir_all(dir);
}

/// The `toolgate_shadow_flips_total` lines of `/metrics`.
fn flips(addr: &str) -> Vec<String> {
    let (_, metrics) = http(addr, "GET", "/metrics", &[], b"");
    metrics
        .lines()
        .filter(|l| l.starts_with("toolgate_shadow_flips_total{"))
        .map(str::to_string)
        .collect()
}

fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn serve_shadow_answers_from_dir_and_reloads_the_shadow_by_watch_and_sighup() {
    let shadow = temp_dir("serve-shadow-set");
    std::fs::write(shadow.join("shop.gate"), LIVE).unwrap();
    let server = start(
        "serve-shadow",
        &[("shop.gate", LIVE)],
        &["--shadow", shadow.to_str().unwrap(), "--poll-ms", "50"],
    );
    assert!(
        server
            .startup
            .iter()
            .any(|l| l.starts_with("toolgate: shadow: loaded generation 1 (startup): shop rev")),
        "{:?}",
        server.startup
    );
    let a = &server.addr;
    let (status, v) = post_json(a, "/v1/decide", &refunds(&[300]));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["decisions"][0]["allow"], true);
    assert!(flips(a).is_empty());

    // The watcher picks up a stricter shadow; the answer stays the live one.
    std::fs::write(shadow.join("shop.gate"), STRICT).unwrap();
    wait_for("the shadow watcher", || {
        get_json(a, "/health").1["shadow"]["generation"] == 2
    });
    let (_, v) = post_json(a, "/v1/decide", &refunds(&[300]));
    assert_eq!(v["decisions"][0]["allow"], true, "{v}");
    assert_eq!(
        flips(a),
        vec![
            r#"toolgate_shadow_flips_total{policy="shop",rule="small_refunds",from="allow",to="deny"} 1"#
        ]
    );

    // SIGHUP reloads the shadow too, changed or not.
    let status = Command::new("kill")
        .args(["-HUP", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    wait_for("SIGHUP to reload the shadow", || {
        get_json(a, "/health").1["shadow"]["generation"] == 3
    });
    let _ = std::fs::remove_dir_all(shadow);
}

#[test]
fn serve_refuses_a_shadow_that_does_not_load() {
    let dir = temp_dir("serve-shadow-refused");
    std::fs::write(dir.join("shop.gate"), LIVE).unwrap();
    let shadow = dir.join("shadow");
    std::fs::create_dir(&shadow).unwrap();
    std::fs::write(shadow.join("shop.gate"), "module shop\nstage {").unwrap();
    let (code, stderr) = serve_refused(&[
        dir.to_str().unwrap(),
        "--addr",
        "127.0.0.1:0",
        "--log",
        "off",
        "--shadow",
        shadow.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("error: --shadow `{}`", shadow.display())),
        "{stderr}"
    );
    assert!(stderr.contains("shop.gate"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_batch_judged_while_the_state_store_is_down_is_not_compared() {
    let shadow = temp_dir("serve-shadow-down-set");
    std::fs::write(shadow.join("shop.gate"), STRICT).unwrap();
    // Nothing listens on port 9: the store is down, and the server judges fail-closed.
    let server = start(
        "serve-shadow-down",
        &[("shop.gate", LIVE)],
        &[
            "--shadow",
            shadow.to_str().unwrap(),
            "--poll-ms",
            "0",
            "--state",
            "redis://127.0.0.1:9",
        ],
    );
    let mut body = refunds(&[300]);
    body["session"] = json!("s1");
    body["turn"] = json!("t1");
    let (status, v) = post_json(&server.addr, "/v1/decide", &body);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["session"], "unavailable", "{v}");
    let (_, metrics) = http(&server.addr, "GET", "/metrics", &[], b"");
    assert!(
        metrics.contains("\ntoolgate_shadow_batches_total 0\n"),
        "{metrics}"
    );
    // Without a session the store is not asked: compared as usual.
    post_json(&server.addr, "/v1/decide", &refunds(&[300]));
    assert_eq!(flips(&server.addr).len(), 1);
    let _ = std::fs::remove_dir_all(shadow);
}
