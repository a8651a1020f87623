//! End-to-end tests of `toolgate serve`: the real binary on an ephemeral loopback port.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::server_support::*;
use crate::signal_support::{caught_signals, HUP_INT_TERM};

#[test]
fn every_endpoint_and_error_status() {
    let s = start(
        "endpoints",
        &[("gate.gate", POLICY_A)],
        &["--max-calls", "4"],
    );
    let a = &s.addr;
    assert_eq!(get_json(a, "/health").0, 200);

    let (st, v) = post_json(a, "/v1/decide", &batch("send"));
    assert_eq!(st, 200);
    assert_eq!(v["decisions"][0]["allow"], true);
    assert_eq!(v["policy"], "gate");
    assert!(v["decision_id"].as_str().is_some_and(|s| !s.is_empty()));

    let (st, v) = post_json(a, "/v1/data/gate/decide", &json!({"input": batch("nope")}));
    assert_eq!(st, 200);
    assert_eq!(v["result"]["decisions"][0]["kind"], "unclassified");
    assert!(v["decision_id"].is_string());

    // Malformed JSON: 400 with a location.
    let (st, body) = http(a, "POST", "/v1/decide", &[], b"{\"calls\": [");
    assert_eq!(st, 400, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "json");
    assert!(v["error"]["location"].as_str().unwrap().contains("line 1"));

    // Schema: names the field.
    let (st, v) = post_json(
        a,
        "/v1/decide",
        &json!({"facts": {"messages": 5}, "calls": []}),
    );
    assert_eq!(st, 400);
    assert_eq!(v["error"]["location"], "facts.messages");

    // Unknown module, unknown route.
    assert_eq!(
        post_json(a, "/v1/data/other/decide", &json!({"input": batch("send")})).0,
        404
    );
    assert_eq!(
        post_json(a, "/v1/decide", &json!({"policy": "other", "calls": []})).0,
        404
    );
    assert_eq!(get_json(a, "/v1/nothing").0, 404);

    // Over the caps: body size, nesting depth, calls per batch.
    let big = vec![b' '; (1 << 20) + 10];
    assert_eq!(http(a, "POST", "/v1/decide", &[], &big).0, 413);
    let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
    assert_eq!(http(a, "POST", "/v1/decide", &[], deep.as_bytes()).0, 413);
    let calls: Vec<Value> = (0..5)
        .map(|i| json!({"id": format!("c{i}"), "tool": "look"}))
        .collect();
    let (st, v) = post_json(
        a,
        "/v1/decide",
        &json!({"facts": {"stage": "main"}, "calls": calls}),
    );
    assert_eq!(st, 413);
    assert_eq!(v["error"]["location"], "calls");

    // Check: compiles a body, loads nothing.
    let (st, body) = http(
        a,
        "POST",
        "/v1/check",
        &[],
        &check_body("module x\nread a\nread a\n"),
    );
    assert_eq!(st, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["ok"], false);
    let errors: Vec<&Value> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["severity"] == "error")
        .collect();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["line"], 3);
    assert!(errors[0]["message"]
        .as_str()
        .unwrap()
        .contains("classified twice"));
    let (_, body) = http(a, "POST", "/v1/check", &[], &check_body(&coach_source()));
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["ok"], true);

    let (st, v) = get_json(a, "/v1/policies");
    assert_eq!(st, 200);
    assert_eq!(v["policies"][0]["module"], "gate");
    assert!(v["policies"][0]["source"]
        .as_str()
        .unwrap()
        .ends_with("gate.gate"));

    let (st, metrics) = http(a, "GET", "/metrics", &[], b"");
    assert_eq!(st, 200);
    assert!(
        metrics.contains("toolgate_decisions_total{allow=\"true\",kind=\"\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("toolgate_decisions_total{allow=\"false\",kind=\"unclassified\"} 1"));
    assert!(metrics.contains("toolgate_decide_seconds_count 2"));
    assert!(metrics.contains("toolgate_reloads_ok_total 1"));
}

#[test]
fn several_policies_need_a_name_and_health_waits_for_a_policy() {
    let s = start(
        "two",
        &[
            ("a.gate", POLICY_A),
            (
                "b.gate",
                "module other\nread look\nstage main { tools [look] }\n",
            ),
        ],
        &[],
    );
    let (st, v) = post_json(&s.addr, "/v1/decide", &batch("look"));
    assert_eq!(st, 400);
    assert_eq!(v["error"]["location"], "policy");
    let mut req = batch("send");
    req["policy"] = json!("other");
    let (st, v) = post_json(&s.addr, "/v1/decide", &req);
    assert_eq!(st, 200);
    assert_eq!(v["decisions"][0]["kind"], "unclassified");

    let empty = start("empty", &[("broken.gate", BROKEN)], &[]);
    assert_eq!(get_json(&empty.addr, "/health").0, 503);
    std::fs::write(empty.dir.join("broken.gate"), POLICY_A).unwrap();
    assert_eq!(http(&empty.addr, "POST", "/v1/reload", &[], b"").0, 200);
    assert_eq!(get_json(&empty.addr, "/health").0, 200);
}

#[test]
fn session_latch_carries_within_a_turn_and_resets_on_the_next() {
    let s = start("session", &[("coach.gate", &coach_source())], &[]);
    let call = |tool: &str, turn: &str| {
        json!({"session": "s1", "turn": turn, "facts": {"stage": "coach"},
               "calls": [{"id": "c", "tool": tool, "args": {"q": "x"}}]})
    };
    let (_, v) = post_json(&s.addr, "/v1/decide", &call("search_aws_docs", "t1"));
    assert_eq!(v["latched"], true);
    // Second batch of the same turn, no `latched` passed: the server carries it.
    let (_, v) = post_json(&s.addr, "/v1/decide", &call("update_memory", "t1"));
    assert_eq!(v["decisions"][0]["kind"], "latch");
    assert_eq!(v["latched"], true);
    // New user turn: the latch is gone.
    let (_, v) = post_json(&s.addr, "/v1/decide", &call("update_memory", "t2"));
    assert_eq!(v["decisions"][0]["allow"], true);
    assert_eq!(v["latched"], false);
    // Stateless use is unchanged: no session, latched passed in.
    let (_, v) = post_json(
        &s.addr,
        "/v1/decide",
        &json!({"facts": {"stage": "coach", "latched": true}, "calls": [{"id": "c", "tool": "update_memory"}]}),
    );
    assert_eq!(v["decisions"][0]["kind"], "latch");
    // Half a session key is a client error.
    let (st, v) = post_json(
        &s.addr,
        "/v1/decide",
        &json!({"session": "s1", "calls": []}),
    );
    assert_eq!(st, 400);
    assert_eq!(v["error"]["location"], "turn");
}

#[test]
fn reload_success_and_failure_keep_serving() {
    let s = start("reload", &[("gate.gate", POLICY_A)], &["--poll-ms", "0"]);
    let rev_a = post_json(&s.addr, "/v1/decide", &batch("send")).1["revision"].clone();
    std::fs::write(s.dir.join("gate.gate"), BROKEN).unwrap();
    let (st, body) = http(&s.addr, "POST", "/v1/reload", &[], b"");
    assert_eq!(st, 422, "{body}");
    assert!(body.contains("gate.gate:3:"), "{body}");
    let (_, v) = post_json(&s.addr, "/v1/decide", &batch("send"));
    assert_eq!(v["revision"], rev_a, "a failed reload swaps nothing");
    assert_eq!(v["decisions"][0]["allow"], true);
    let (_, p) = get_json(&s.addr, "/v1/policies");
    assert_eq!(p["last_reload"]["ok"], false);

    std::fs::write(s.dir.join("gate.gate"), POLICY_B).unwrap();
    assert_eq!(http(&s.addr, "POST", "/v1/reload", &[], b"").0, 200);
    let (_, v) = post_json(&s.addr, "/v1/decide", &batch("send"));
    assert_ne!(v["revision"], rev_a);
    assert_eq!(v["decisions"][0]["kind"], "stage");
    let (_, metrics) = http(&s.addr, "GET", "/metrics", &[], b"");
    assert!(
        metrics.contains("toolgate_reloads_failed_total 1"),
        "{metrics}"
    );
}

#[test]
fn admin_endpoints_require_the_token_when_set() {
    let s = start(
        "admin",
        &[("gate.gate", POLICY_A)],
        &["--admin-token", "s3cret"],
    );
    assert_eq!(http(&s.addr, "POST", "/v1/reload", &[], b"").0, 401);
    assert_eq!(
        http(
            &s.addr,
            "POST",
            "/v1/reload",
            &[("Authorization", "Bearer wrong")],
            b""
        )
        .0,
        401
    );
    assert_eq!(
        http(
            &s.addr,
            "POST",
            "/v1/reload",
            &[("Authorization", "Bearer s3cret")],
            b""
        )
        .0,
        200
    );
    assert_eq!(
        http(&s.addr, "POST", "/v1/check", &[], &check_body("module x")).0,
        401
    );
    // Decisions never need the token.
    assert_eq!(post_json(&s.addr, "/v1/decide", &batch("send")).0, 200);
}

#[test]
fn hot_swap_under_load_drops_nothing_and_mixes_no_revisions() {
    let s = start("swap", &[("gate.gate", POLICY_A)], &["--poll-ms", "20"]);
    let addr = s.addr.clone();
    let rev = |src: &str| {
        // The revision the server reports is the policy's content hash; learn it via /v1/check.
        let (_, body) = http(&addr, "POST", "/v1/check", &[], &check_body(src));
        serde_json::from_str::<Value>(&body).unwrap()["revision"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (rev_a, rev_b) = (rev(POLICY_A), rev(POLICY_B));
    let stop = Arc::new(AtomicBool::new(false));
    let client = {
        let stop = stop.clone();
        let addr = addr.clone();
        let (rev_a, rev_b) = (rev_a.clone(), rev_b.clone());
        std::thread::spawn(move || {
            let mut seen = (0, 0);
            while !stop.load(Ordering::Relaxed) {
                let (st, v) = post_json(&addr, "/v1/decide", &batch("send"));
                assert_eq!(st, 200, "a request failed during a swap: {v}");
                let allow = v["decisions"][0]["allow"].as_bool().unwrap();
                let r = v["revision"].as_str().unwrap();
                if r == rev_a {
                    assert!(allow, "revision A allows send");
                    seen.0 += 1;
                } else if r == rev_b {
                    assert!(!allow, "revision B denies send");
                    assert_eq!(v["decisions"][0]["kind"], "stage");
                    seen.1 += 1;
                } else {
                    panic!("unknown revision {r}");
                }
            }
            seen
        })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    for i in 0..30 {
        if Instant::now() > deadline {
            break;
        }
        let text = match i % 3 {
            0 => POLICY_B,
            1 => BROKEN,
            _ => POLICY_A,
        };
        std::fs::write(s.dir.join("gate.gate"), text).unwrap();
        if i % 2 == 0 {
            let _ = http(&addr, "POST", "/v1/reload", &[], b"");
        } else {
            std::thread::sleep(Duration::from_millis(60));
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let (a, b) = client.join().expect("client thread failed");
    assert!(a > 0 && b > 0, "both revisions served: {a} A, {b} B");
}

#[test]
fn shutdown_flushes_the_decision_log() {
    let dir = temp_dir("log");
    std::fs::write(dir.join("gate.gate"), POLICY_A).unwrap();
    let log = dir.join("decisions.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("serve")
        .arg(&dir)
        .args(["--addr", "127.0.0.1:0", "--log", "denials", "--log-file"])
        .arg(&log)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().unwrap().unwrap();
        if let Some(rest) = line.strip_prefix("toolgate: listening on http://") {
            break rest.to_string();
        }
    };
    for i in 0..20 {
        let tool = if i % 2 == 0 { "send" } else { "unknown_tool" };
        let mut req = batch(tool);
        req["calls"][0]["args"] = json!({"secret": "do-not-log"});
        if i % 2 == 1 {
            req["session"] = json!("s");
            req["turn"] = json!("t");
        }
        assert_eq!(post_json(&addr, "/v1/decide", &req).0, 200);
    }
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    let entries: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries.len(), 10, "only the 10 denials are logged");
    assert!(entries
        .iter()
        .all(|e| e["decisions"][0]["kind"] == "unclassified"));
    // Where each batch's latch state came from.
    assert_eq!(entries[0]["session_state"], "new");
    assert!(entries[1..].iter().all(|e| e["session_state"] == "carried"));
    assert!(
        !text.contains("do-not-log"),
        "arguments are not logged by default"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn offer_filters_by_stage_carries_the_session_latch_and_reports_errors_like_decide() {
    let s = start(
        "offer",
        &[("coach.gate", &coach_source()), ("gate.gate", POLICY_A)],
        &["--max-tools", "3"],
    );
    let a = &s.addr;
    let tool = |name: &str| json!({"name": name, "description": format!("{name}."), "input_schema": {"type": "object"}});
    let tools = json!([
        tool("grade_attempt"),
        tool("search_aws_docs"),
        tool("delete_all")
    ]);

    let (st, v) = post_json(
        a,
        "/v1/offer",
        &json!({"policy": "coach", "facts": {"stage": "coach"}, "tools": tools}),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["policy"], "coach");
    assert_eq!(v["tools"].as_array().unwrap().len(), 2);
    assert_eq!(v["tools"][1], tool("search_aws_docs"));
    assert_eq!(v["withheld"][0]["name"], "delete_all");
    assert_eq!(v["withheld"][0]["reason"], "unclassified");
    assert_eq!(v["disabled"], json!([]));

    // A batch of the session's turn sets the latch; the next offer of that turn shows it.
    let offer_in = |turn: &str| {
        json!({"policy": "coach", "session": "s", "turn": turn,
               "facts": {"stage": "coach"}, "tools": [tool("grade_attempt")]})
    };
    let (_, v) = post_json(a, "/v1/offer", &offer_in("t1"));
    assert_eq!(v["disabled"], json!([]), "no batch yet");
    let (_, d) = post_json(
        a,
        "/v1/decide",
        &json!({"policy": "coach", "session": "s", "turn": "t1", "facts": {"stage": "coach"},
                "calls": [{"id": "c", "tool": "search_aws_docs", "args": {"q": "x"}}]}),
    );
    assert_eq!(d["latched"], true);
    let (_, v) = post_json(a, "/v1/offer", &offer_in("t1"));
    assert_eq!(v["disabled"][0]["latch"], "documentation_read");
    assert!(v["tools"][0]["description"]
        .as_str()
        .unwrap()
        .starts_with("DISABLED FOR THIS TURN"));
    let (_, v) = post_json(a, "/v1/offer", &offer_in("t2"));
    assert_eq!(v["disabled"], json!([]), "a new user turn drops the latch");

    // Errors: the same codes and locations as /v1/decide.
    let (st, v) = post_json(a, "/v1/offer", &json!({"facts": {}, "tools": []}));
    assert_eq!(st, 400);
    assert_eq!(v["error"]["location"], "policy");
    let (st, v) = post_json(
        a,
        "/v1/offer",
        &json!({"policy": "coach", "tools": [{"description": "x"}]}),
    );
    assert_eq!(st, 400);
    assert_eq!(v["error"]["location"], "tools[0].name");
    let (st, v) = post_json(
        a,
        "/v1/offer",
        &json!({"policy": "coach", "facts": {"stage": 1}, "tools": []}),
    );
    assert_eq!(st, 400);
    assert_eq!(v["error"]["location"], "facts.stage");
    let (st, v) = post_json(
        a,
        "/v1/offer",
        &json!({"policy": "coach", "session": "s", "tools": []}),
    );
    assert_eq!(st, 400);
    assert_eq!(v["error"]["location"], "turn");
    let (st, _) = post_json(a, "/v1/offer", &json!({"policy": "other", "tools": []}));
    assert_eq!(st, 404);
    let four = json!([tool("a"), tool("b"), tool("c"), tool("d")]);
    let (st, v) = post_json(a, "/v1/offer", &json!({"policy": "coach", "tools": four}));
    assert_eq!(st, 413);
    assert_eq!(v["error"]["location"], "tools");
    let (st, body) = http(a, "POST", "/v1/offer", &[], b"{\"tools\": [");
    assert_eq!(st, 400, "{body}");
}

/// Compiles with one warning: a latch with no `set_by` (line 5, col 7).
const WARNS: &str =
    "module gate\nwrite send\nread look\nstage main { tools [look, send] }\nlatch quiet { blocks write }\n";

#[test]
fn policies_lists_each_warning_with_its_location() {
    let s = start("warnings", &[("gate.gate", WARNS)], &[]);
    let (st, v) = get_json(&s.addr, "/v1/policies");
    assert_eq!(st, 200);
    let warnings = v["policies"][0]["warnings"].as_array().expect("a list");
    assert_eq!(warnings.len(), 1, "{v}");
    let w = &warnings[0];
    assert!(
        w["message"].as_str().unwrap().contains("no `set_by`"),
        "{w}"
    );
    assert!(w["file"].as_str().unwrap().ends_with("gate.gate"), "{w}");
    assert_eq!(
        (w["line"].clone(), w["col"].clone()),
        (json!(5), json!(7)),
        "{w}"
    );
    assert!(
        w["location"].as_str().unwrap().ends_with("gate.gate:5:7"),
        "{w}"
    );
    assert!(w["rendered"].as_str().unwrap().contains("warning"), "{w}");
    let (_, v) = get_json(&s.addr, "/v1/policies");
    assert_eq!(
        v["policies"][0]["warnings"].as_array().map(Vec::len),
        Some(1)
    );
}

#[test]
fn deny_warnings_refuses_a_load_or_reload_with_any_warning() {
    // At startup: nothing is served.
    let s = start(
        "denywarn",
        &[("gate.gate", WARNS)],
        &["--deny-warnings", "--poll-ms", "0"],
    );
    assert_eq!(get_json(&s.addr, "/health").0, 503);
    let (_, v) = get_json(&s.addr, "/v1/policies");
    assert_eq!(v["last_reload"]["ok"], false);
    assert!(
        v["last_reload"]["error"]
            .as_str()
            .unwrap()
            .contains("gate.gate:5:7"),
        "{v}"
    );

    // A clean set loads; then a reload where one of two files warns swaps nothing.
    std::fs::write(s.dir.join("gate.gate"), POLICY_A).unwrap();
    assert_eq!(http(&s.addr, "POST", "/v1/reload", &[], b"").0, 200);
    let rev = post_json(&s.addr, "/v1/decide", &batch("send")).1["revision"].clone();
    std::fs::write(s.dir.join("gate.gate"), WARNS).unwrap();
    std::fs::write(
        s.dir.join("other.gate"),
        "module other\nread look\nstage main { tools [look] }\n",
    )
    .unwrap();
    let (st, body) = http(&s.addr, "POST", "/v1/reload", &[], b"");
    assert_eq!(st, 422, "{body}");
    assert!(body.contains("no `set_by`"), "{body}");
    let (_, v) = post_json(&s.addr, "/v1/decide", &batch("send"));
    assert_eq!(v["revision"], rev, "the old set keeps serving");
    let (_, p) = get_json(&s.addr, "/v1/policies");
    assert_eq!(p["policies"].as_array().unwrap().len(), 1, "{p}");

    // Without the flag, the same directory loads.
    drop(s);
    let s = start("denywarn-off", &[("gate.gate", WARNS)], &[]);
    assert_eq!(get_json(&s.addr, "/health").0, 200);
}

#[test]
fn ambiguous_requests_are_400_naming_the_path() {
    const LATCHED: &str = "module gate\nwrite send\ningest fetch\nread look\nstage main { tools [look, send, fetch] }\nlatch untrusted { set_by ingest blocks write }\n";
    let srv = start("ambiguous", &[("gate.gate", LATCHED)], &[]);
    let cases: [(&str, &[u8], &str, &str); 6] = [
        (
            "/v1/decide",
            br#"{"facts": {"stage": "main"}, "calls": [{"id": "1", "tool": "look", "tool": "send"}]}"#,
            "duplicate_key",
            "calls[0].tool",
        ),
        (
            "/v1/decide",
            br#"{"facts": {"stage": "main"}, "calls": [{"id": "1", "tool": "send", "args": {"a": 1, "a": 2}}]}"#,
            "duplicate_key",
            "calls[0].args.a",
        ),
        (
            "/v1/data/gate/decide",
            br#"{"input": {"calls": []}, "input": {"calls": []}}"#,
            "duplicate_key",
            "input",
        ),
        (
            "/v1/offer",
            br#"{"facts": {"stage": "main", "stage": "x"}, "tools": []}"#,
            "duplicate_key",
            "facts.stage",
        ),
        (
            "/v1/decide",
            br#"{"facts": {"stage": "main"}, "calls": [{"id": "1", "tool": "look"}, {"id": "1", "tool": "send"}]}"#,
            "schema",
            "calls[1].id",
        ),
        (
            "/v1/decide",
            br#"{"facts": {"stage": "main", "latched": {"Untrusted": true}}, "calls": [{"id": "1", "tool": "send"}]}"#,
            "schema",
            "facts.latched.Untrusted",
        ),
    ];
    for (path, body, code, location) in cases {
        let (status, text) = http(&srv.addr, "POST", path, &[], body);
        assert_eq!(
            status,
            400,
            "{path} {}: {text}",
            String::from_utf8_lossy(body)
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["code"], code, "{text}");
        assert_eq!(v["error"]["location"], location, "{text}");
    }
    // The same latch name through /v1/offer, with its suggestion.
    let (status, text) = http(
        &srv.addr,
        "POST",
        "/v1/offer",
        &[],
        br#"{"facts": {"stage": "main", "latched": {"untrustd": true}}, "tools": []}"#,
    );
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("did you mean `untrusted`"), "{text}");
}

/// Sends `signal` to `pid` with kill(1).
fn send_signal(signal: &str, pid: u32) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// The handlers for SIGTERM, SIGINT and SIGHUP are in place before the server says it listens: a
/// supervisor (or a test) that signals the moment it reads the line must not kill the
/// process with the default action, which would skip the decision-log flush. The signal
/// mask is read straight after the line, while the server is still starting its tasks.
#[test]
fn signals_sent_the_instant_the_server_listens_are_handled() {
    for round in 0..8 {
        let mut s = start(
            &format!("signal-race-{round}"),
            &[("a.gate", POLICY_A)],
            &[],
        );
        let caught = caught_signals(s.child.id());
        assert_eq!(
            caught & HUP_INT_TERM,
            HUP_INT_TERM,
            "round {round}: the server announced itself before handling its signals"
        );
        send_signal("HUP", s.child.id());
        send_signal("TERM", s.child.id());
        let exit = s.child.wait().unwrap();
        assert!(
            exit.success(),
            "round {round}: the server died of a signal it should handle: {exit:?}"
        );
    }
}
