//! `--decision-log-url`: the decision log shipped as gzip batches of OPA decision-log events
//! to a real HTTP receiver on loopback (Python's http.server), with retries while the
//! receiver is down and counted drops when the buffer is full.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};

use crate::bundle_support::*;
use crate::server_support::{batch, get_json, http, metric, post_json, POLICY_A};

/// `toolgate serve DIR --decision-log-url URL --log all EXTRA`.
fn shipping(dir: &std::path::Path, url: &str, extra: &[&str]) -> Toolgate {
    let mut args = vec![
        dir.to_str().unwrap(),
        "--decision-log-url",
        url,
        "--log",
        "all",
    ];
    args.extend_from_slice(extra);
    serve(&args)
}

fn counter(addr: &str, name: &str) -> f64 {
    let text = http(addr, "GET", "/metrics", &[], b"").1;
    metric(&text, name).unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
}

fn received(services: &str) -> Value {
    get_json(services, "/__logs").1
}

#[test]
fn events_reach_the_collector_in_opa_format_after_it_comes_up() {
    let (dir, www) = policy_and_www("ship-updown", POLICY_A);
    let down = Down::new();
    let url = format!("http://127.0.0.1:{}/logs", down.port());
    let tg = shipping(&dir, &url, &[]);
    let a = &tg.addr;
    let mut responses = Vec::new();
    for i in 0..3 {
        let mut b = batch("send");
        b["session"] = json!("s1");
        b["turn"] = json!(format!("t{i}"));
        b["calls"][0]["args"] = json!({"secret": "do-not-log"});
        let (st, v) = post_json(a, "/v1/decide", &b);
        assert_eq!(st, 200, "{v}");
        responses.push(v);
    }
    // The receiver is down: failed POSTs are counted and retried, decisions go on.
    wait_for("two failed POSTs", || {
        counter(a, "toolgate_decision_log_send_errors_total") >= 2.0
    });
    assert_eq!(counter(a, "toolgate_decision_log_shipped_total"), 0.0);

    let services = down.up(&www);
    wait_for("three events at the receiver", || {
        received(&services.addr)["events"].as_array().unwrap().len() >= 3
    });
    let got = received(&services.addr);
    let events = got["events"].as_array().unwrap();
    assert_eq!(events.len(), 3, "each entry once: {got}");
    for batch in got["batches"].as_array().unwrap() {
        assert_eq!(batch["encoding"], "gzip");
        assert_eq!(batch["type"], "application/json");
    }
    for (event, response) in events.iter().zip(&responses) {
        assert_eq!(event["decision_id"], response["decision_id"]);
        let ts = event["timestamp"].as_str().unwrap();
        assert!(
            ts.len() >= 20 && ts.ends_with('Z') && ts.contains('T'),
            "{ts}"
        );
        assert_eq!(event["labels"]["version"], env!("CARGO_PKG_VERSION"));
        assert!(!event["labels"]["id"].as_str().unwrap().is_empty());
        assert_eq!(event["path"], "toolgate/gate/decide");
        assert_eq!(event["input"]["session"], "s1");
        assert_eq!(event["input"]["calls"][0]["tool"], "send");
        assert_eq!(event["result"]["decisions"][0]["allow"], true);
        assert_eq!(event["result"]["revision"], response["revision"]);
        assert_eq!(event["bundles"]["gate"]["revision"], response["revision"]);
        // Masked by default: no arguments, and the event says what was erased.
        assert!(event["input"]["calls"][0].get("args").is_none(), "{event}");
        assert!(!event.to_string().contains("do-not-log"), "{event}");
        let erased: Vec<&str> = event["erased"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        assert!(erased.contains(&"/input/calls/0/args"), "{erased:?}");
    }
    assert_eq!(counter(a, "toolgate_decision_log_shipped_total"), 3.0);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&www);
}

#[test]
fn a_full_buffer_drops_and_counts_entries_and_never_blocks_a_decision() {
    let (dir, www) = policy_and_www("ship-full", POLICY_A);
    let services = Services::start(&www, 0);
    let url = services.url("logs");
    // Every POST fails until told otherwise, so the one batch in flight is retried and the
    // queue (4 entries) fills up.
    assert_eq!(
        http(&services.addr, "POST", "/__fail?n=1000000", &[], b"").0,
        204
    );
    let tg = shipping(&dir, &url, &["--log-queue", "4"]);
    let a = &tg.addr;
    let sent = 60;
    for _ in 0..sent {
        assert_eq!(post_json(a, "/v1/decide", &batch("send")).0, 200);
    }
    // The batch in flight holds at most 1 + 4 entries (what the queue held when it was
    // taken), the queue 4 more: every other entry was dropped.
    let dropped = counter(a, "toolgate_log_dropped_total");
    assert!(dropped >= (sent - 5 - 4) as f64, "{dropped}");
    // The receiver recovers: everything not dropped arrives, and nothing is lost unseen.
    assert_eq!(http(&services.addr, "POST", "/__fail?n=0", &[], b"").0, 204);
    wait_for("every kept entry delivered", || {
        let delivered = received(&services.addr)["events"].as_array().unwrap().len();
        delivered as f64 + counter(a, "toolgate_log_dropped_total") == sent as f64
    });
    assert!(counter(a, "toolgate_decision_log_send_errors_total") >= 1.0);
    assert_eq!(counter(a, "toolgate_decision_log_abandoned_total"), 0.0);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&www);
}

#[test]
fn sigterm_drains_the_queue_to_the_collector() {
    let (dir, www) = policy_and_www("ship-drain", POLICY_A);
    let services = Services::start(&www, 0);
    let mut tg = shipping(&dir, &services.url("logs"), &[]);
    let mut ids = Vec::new();
    for _ in 0..20 {
        let (st, v) = post_json(&tg.addr, "/v1/decide", &batch("send"));
        assert_eq!(st, 200);
        ids.push(v["decision_id"].as_str().unwrap().to_string());
    }
    tg.terminate();
    // Everything decided before SIGTERM reached the collector before the process ended.
    let got: Vec<String> = received(&services.addr)["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["decision_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(got, ids);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&www);
}

/// A decision log that cannot be written (`/dev/full`: every write fails with ENOSPC) is not
/// lost in silence: the lost entries count in `toolgate_log_dropped_total`, the failure is
/// said once on stderr, and `/health` says `degraded` until a write succeeds.
#[test]
fn a_decision_log_that_cannot_be_written_is_counted_said_once_and_degrades_health() {
    let (dir, _www) = policy_and_www("log-full", POLICY_A);
    let tg = serve(&[
        dir.to_str().unwrap(),
        "--log",
        "all",
        "--log-file",
        "/dev/full",
    ]);
    let a = &tg.addr;
    let (_, health) = get_json(a, "/health");
    assert_eq!(health["status"], "ok", "{health}");
    for _ in 0..5 {
        let (st, v) = post_json(a, "/v1/decide", &batch("send"));
        assert_eq!(st, 200, "{v}");
        // Apart, so they are written in several batches.
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
    wait_for("five lost entries", || {
        counter(a, "toolgate_log_dropped_total") >= 5.0
    });
    assert!(counter(a, "toolgate_log_write_errors_total") >= 2.0);
    let (st, health) = get_json(a, "/health");
    assert_eq!(st, 200, "still serving");
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["decision_log"]["ok"], false, "{health}");
    assert!(
        health["decision_log"]["error"]
            .as_str()
            .unwrap()
            .contains("No space left"),
        "{health}"
    );
    let said: Vec<String> = tg
        .stderr
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("cannot write the decision log"))
        .cloned()
        .collect();
    assert_eq!(said.len(), 1, "said once: {said:#?}");
    assert!(said[0].contains("`/dev/full`"), "{said:?}");
}
