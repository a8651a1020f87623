//! `/v1/decide` and `/v1/data/{module}/decide` on the one-pass reader: the same answers and
//! the same errors as the strict path, the security checks still ahead of any session state,
//! and the decision log written from what was read.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use std::process::Command;

use crate::server_support::*;

const LATCHED: &str = "module gate\nwrite send\ningest fetch\nread look\nstage main { tools [look, send, fetch] }\nlatch untrusted { set_by ingest blocks write }\nlatch manual { set_by look blocks fetch }\n";
const OTHER: &str = "module other\nread look\nstage main { tools [look] }\n";

/// The answer without the per-request decision id.
fn answer(mut v: Value) -> Value {
    if let Value::Object(m) = &mut v {
        m.remove("decision_id");
        if let Some(Value::Object(r)) = m.get_mut("result") {
            r.remove("decision_id");
        }
    }
    v
}

/// Requests that exercise routing, escapes, sessions and every latch form, on both endpoints.
fn corpus() -> Vec<(&'static str, Vec<u8>)> {
    let calls = json!([{"id": "c\"1", "tool": "fetch", "args": {"u": "\u{e9}"}},
                       {"id": "c2", "tool": "send"}, {"id": "c3", "tool": "look"}]);
    let mut out = Vec::new();
    for latched in [json!(null), json!(true), json!({"manual": true}), json!({})] {
        let facts = json!({"stage": "main", "latched": latched, "custom": [1, {"k": "v"}]});
        // `policy` after `facts`: the router must find it without building a tree.
        let body = json!({"facts": facts, "calls": calls, "policy": "gate"});
        out.push(("/v1/decide", body.to_string().into_bytes()));
        let input = json!({"calls": calls, "facts": facts});
        out.push((
            "/v1/data/gate/decide",
            json!({ "input": input }).to_string().into_bytes(),
        ));
    }
    for (turn, tool) in [
        ("t1", "look"),
        ("t1", "fetch"),
        ("t1", "send"),
        ("t2", "send"),
    ] {
        let body = json!({"policy": "gate", "session": "s1", "turn": turn,
            "facts": {"stage": "main"}, "calls": [{"id": "x", "tool": tool}]});
        out.push(("/v1/decide", body.to_string().into_bytes()));
    }
    // Errors: each must come out exactly as the strict path words it.
    for body in [
        &br#"{"calls": [], "policy": "gate", "calls": []}"#[..],
        br#"{"calls": [{"id": "1", "tool": "look"}], "facts": {"x": {"a": 1, "a": 2}}, "policy": "gate"}"#,
        br#"{"policy": "gate", "facts": {"stage": "main", "latched": {"Manual": true}}, "calls": []}"#,
        br#"{"policy": "nope", "calls": []}"#,
        br#"{"calls": []}"#,
        br#"{"policy": "gate", "session": "", "turn": "t", "calls": []}"#,
        br#"{"policy": "gate", "session": "s", "calls": []}"#,
        br#"{"policy": "gate", "calls": [{"id": "1", "tool": "look"}, {"id": "1", "tool": "look"}]}"#,
        br#"{"policy": "gate", "calls": ["#,
        br#"{"policy": "gate", "facts": {"stage": "main"}, "calls": [{"id": "1", "tool": "send", "arguments": {"to": "x"}}]}"#,
        br#"{"policy": "gate", "facts": {"messages": [{"from": "client", "role": "user"}]}, "calls": []}"#,
    ] {
        out.push(("/v1/decide", body.to_vec()));
    }
    for body in [
        &br#"{"input": {"calls": []}, "extra": {"a": 1, "a": 2}}"#[..],
        br#"{"input": {"calls": []}, "input": {"calls": []}}"#,
        br#"{"input": {"policy": "other", "calls": []}}"#,
        br#"{"input": 3}"#,
        br#"{"input": {"calls": []}, "extra": 1}"#,
        br#"{"input": {"calls": [{"id": "1", "name": "look"}]}}"#,
    ] {
        out.push(("/v1/data/gate/decide", body.to_vec()));
    }
    out
}

#[test]
fn one_pass_and_strict_paths_answer_alike() {
    let files = [("gate.gate", LATCHED), ("other.gate", OTHER)];
    let fast = start("fast-path", &files, &[]);
    // `--log-args` needs the whole request, so every request there takes the strict path.
    let log_dir = temp_dir("fast-path-log");
    let log = log_dir.join("log.jsonl");
    let strict = start(
        "strict-path",
        &files,
        &[
            "--log",
            "all",
            "--log-args",
            "--log-file",
            log.to_str().unwrap(),
        ],
    );
    let mut statuses = Vec::new();
    for (path, body) in corpus() {
        let (st_fast, text_fast) = http(&fast.addr, "POST", path, &[], &body);
        let (st_strict, text_strict) = http(&strict.addr, "POST", path, &[], &body);
        let shown = String::from_utf8_lossy(&body);
        assert_eq!(
            st_fast, st_strict,
            "{path} {shown}: {text_fast} / {text_strict}"
        );
        let (f, s): (Value, Value) = (
            serde_json::from_str(&text_fast).unwrap(),
            serde_json::from_str(&text_strict).unwrap(),
        );
        assert_eq!(answer(f), answer(s), "{path} {shown}");
        statuses.push(st_fast);
    }
    // The corpus reaches both outcomes, and the session carried its latch on both servers.
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 13);
    assert!(statuses.iter().all(|s| *s == 200 || *s == 400 || *s == 404));
    drop(strict);
    let _ = std::fs::remove_dir_all(&log_dir);
}

#[test]
fn an_undeclared_latch_name_is_refused_before_the_session_starts() {
    let s = start("fast-latch", &[("gate.gate", LATCHED)], &[]);
    let (st, v) = post_json(
        &s.addr,
        "/v1/decide",
        &json!({"session": "s", "turn": "t", "facts": {"stage": "main", "latched": {"untrustd": true}},
                "calls": [{"id": "1", "tool": "fetch"}]}),
    );
    assert_eq!(st, 400, "{v}");
    assert_eq!(v["error"]["location"], "facts.latched.untrustd");
    // Had the refused batch begun the session, this would be `carried`.
    let (st, v) = post_json(
        &s.addr,
        "/v1/decide",
        &json!({"session": "s", "turn": "t", "facts": {"stage": "main"},
                "calls": [{"id": "1", "tool": "send"}]}),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["session"], "new");
    assert_eq!(v["decisions"][0]["allow"], true);
    // A carried latch is ORed in: the ingest of this batch blocks the next batch's write.
    post_json(
        &s.addr,
        "/v1/decide",
        &json!({"session": "s", "turn": "t", "facts": {"stage": "main"},
                "calls": [{"id": "2", "tool": "fetch"}]}),
    );
    let (_, v) = post_json(
        &s.addr,
        "/v1/decide",
        &json!({"session": "s", "turn": "t", "facts": {"stage": "main", "latched": {"manual": false}},
                "calls": [{"id": "3", "tool": "send"}]}),
    );
    assert_eq!(v["session"], "carried");
    assert_eq!(v["decisions"][0]["kind"], "latch");
    assert_eq!(v["latched"]["untrusted"], true);
}

/// A call sent with OpenAI's `arguments` used to be judged with no arguments; now both
/// endpoints answer 400 naming the key and what it meant, before any session starts.
#[test]
fn an_unknown_key_in_a_call_is_a_400_naming_its_path() {
    const MAIL: &str = "module mail\nwrite send_email\nstage main { tools [send_email] }\nrule no_bcc for send_email { require not args.bcc exists }\n";
    let s = start("fast-closed", &[("mail.gate", MAIL)], &[]);
    let call = json!({"id": "1", "tool": "send_email", "arguments": {"bcc": "spy@evil.io"}});
    let body = json!({"session": "s", "turn": "t", "facts": {"stage": "main"}, "calls": [call]});
    let (st, v) = post_json(&s.addr, "/v1/decide", &body);
    assert_eq!(st, 400, "{v}");
    assert_eq!(v["error"]["code"], "schema", "{v}");
    assert_eq!(v["error"]["location"], "calls[0].arguments", "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("did you mean `args`?"), "{v}");
    let (st, v) = post_json(
        &s.addr,
        "/v1/data/mail/decide",
        &json!({"input": {"facts": {"stage": "main"}, "calls": [{"id": "1", "name": "send_email"}]}}),
    );
    assert_eq!(st, 400, "{v}");
    assert_eq!(v["error"]["location"], "calls[0].name", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("did you mean `tool`?"),
        "{v}"
    );
    // The refused batch began no session, and the same call with `args` is judged: denied.
    let call = json!({"id": "1", "tool": "send_email", "args": {"bcc": "spy@evil.io"}});
    let body = json!({"session": "s", "turn": "t", "facts": {"stage": "main"}, "calls": [call]});
    let (st, v) = post_json(&s.addr, "/v1/decide", &body);
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["session"], "new", "{v}");
    assert_eq!(v["decisions"][0]["allow"], false, "{v}");
}

#[test]
fn the_log_is_written_from_what_the_one_pass_reader_read() {
    let dir = temp_dir("fast-log-out");
    let log = dir.join("log.jsonl");
    let mut s = start(
        "fast-log",
        &[("gate.gate", LATCHED)],
        &["--log", "all", "--log-file", log.to_str().unwrap()],
    );
    let body = json!({"session": "s\"q", "turn": "t9", "facts": {"stage": "main"},
        "calls": [{"id": "1", "tool": "send", "args": {"secret": "do-not-log"}}]});
    let (st, v) = post_json(&s.addr, "/v1/decide", &body);
    assert_eq!(st, 200);
    let id = v["decision_id"].as_str().unwrap().to_owned();
    let pid = s.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    assert!(s.child.wait().unwrap().success());
    drop(s);
    let text = std::fs::read_to_string(&log).unwrap();
    let entry: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(entry["decision_id"], id.as_str());
    assert_eq!(entry["session"], "s\"q");
    assert_eq!(entry["turn"], "t9");
    assert_eq!(entry["session_state"], "new");
    assert_eq!(entry["decisions"][0]["tool"], "send");
    assert!(!text.contains("do-not-log"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts a logging server, posts `body`, stops it cleanly and returns the log's text.
fn logged(tag: &str, extra: &[&str], body: &Value) -> String {
    let dir = temp_dir(&format!("{tag}-out"));
    let log = dir.join("log.jsonl");
    let mut args = vec!["--log", "all", "--log-file", log.to_str().unwrap()];
    args.extend_from_slice(extra);
    let mut s = start(tag, &[("gate.gate", LATCHED)], &args);
    assert_eq!(post_json(&s.addr, "/v1/decide", body).0, 200);
    let pid = s.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    assert!(s.child.wait().unwrap().success());
    drop(s);
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    text
}

#[test]
fn log_entries_keep_their_fields_and_log_args_logs_the_request_as_sent() {
    let body = json!({"facts": {"stage": "main", "unread": {"k": [1, 2]},
        "messages": [{"from": "client", "text": "my card is 4111"}]},
        "calls": [{"id": "1", "tool": "fetch", "args": {"url": "https://x.test"}},
                  {"id": "2", "tool": "nope", "args": {"n": 7}}]});
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };

    let plain: Value = serde_json::from_str(logged("log-plain", &[], &body).trim()).unwrap();
    assert_eq!(
        keys(&plain),
        [
            "decision_id",
            "decisions",
            "latched",
            "policy",
            "revision",
            "session",
            "session_state",
            "ts_ms",
            "turn"
        ]
    );
    assert_eq!(
        keys(&plain["decisions"][1]),
        ["allow", "id", "kind", "rule", "tool"]
    );
    assert_eq!(plain["decisions"][0]["kind"], Value::Null);
    assert_eq!(plain["decisions"][1]["kind"], "unclassified");
    assert_eq!(plain["session"], Value::Null);
    assert!(plain["ts_ms"].as_u64().is_some_and(|t| t > 0));

    let text = logged("log-args", &["--log-args"], &body);
    let full: Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(full["args"], json!([{"url": "https://x.test"}, {"n": 7}]));
    // The facts as the request holds them, including a fact the policy never reads (message
    // texts are not part of a request: the engine never reads them).
    assert_eq!(full["facts"]["unread"], json!({"k": [1, 2]}));
    assert_eq!(full["facts"]["messages"][0]["from"], "client");
    assert!(!text.contains("my card is 4111"), "{text}");
    assert_eq!(full["decisions"], plain["decisions"]);
}
