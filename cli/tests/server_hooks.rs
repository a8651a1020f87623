//! `POST /v1/hooks/{agent}`: coding-agent hook events over HTTP, against the real server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};

use crate::server_support::*;

const CODING: &str = "module coding\nwrite Write, Bash\ningest WebFetch\nread Read\nstage work { tools [Write, Bash, WebFetch, Read] }\nlatch untrusted { set_by ingest blocks write }\nrule pr_after_read for Bash { require called_before(Read) on_missing deny }\n";

fn pre(session: &str, tool: &str) -> Value {
    json!({"session_id": session, "hook_event_name": "PreToolUse", "tool_name": tool,
           "tool_input": {"url": "https://docs.rs/"}, "tool_use_id": "t1"})
}

fn decision(v: &Value) -> Option<&str> {
    v["hookSpecificOutput"]["permissionDecision"].as_str()
}

#[test]
fn claude_code_http_hooks_keep_the_latch_and_called_before_per_session() {
    let s = start("hooks", &[("coding.gate", CODING)], &[]);
    let url = "/v1/hooks/claude-code";
    let (st, v) = post_json(&s.addr, url, &pre("s1", "Write"));
    assert_eq!(st, 200, "{v}");
    assert_eq!(v, json!({}), "an allowed call gets no decision");
    let (_, v) = post_json(
        &s.addr,
        "/v1/hooks/claude-code?approve=true",
        &pre("s1", "Read"),
    );
    assert_eq!(decision(&v), Some("allow"));
    // A fetch latches the turn: the next write is denied with the latch's refusal.
    assert_eq!(post_json(&s.addr, url, &pre("s1", "WebFetch")).1, json!({}));
    let (_, v) = post_json(&s.addr, url, &pre("s1", "Write"));
    assert_eq!(decision(&v), Some("deny"), "{v}");
    assert!(v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .is_some_and(|r| !r.is_empty()));
    // Another session is its own.
    assert_eq!(post_json(&s.addr, url, &pre("s2", "Write")).1, json!({}));
    // A new prompt clears the latch.
    let prompt = json!({"session_id": "s1", "hook_event_name": "UserPromptSubmit"});
    assert_eq!(post_json(&s.addr, url, &prompt).1, json!({}));
    assert_eq!(post_json(&s.addr, url, &pre("s1", "Write")).1, json!({}));
    // called_before learns from PostToolUse.
    assert_eq!(
        decision(&post_json(&s.addr, url, &pre("s3", "Bash")).1),
        Some("deny")
    );
    let post = json!({"session_id": "s3", "hook_event_name": "PostToolUse", "tool_name": "Read"});
    post_json(&s.addr, url, &post);
    assert_eq!(post_json(&s.addr, url, &pre("s3", "Bash")).1, json!({}));
}

#[test]
fn what_cannot_be_judged_is_denied_not_failed() {
    // An agent treats a failed HTTP hook as non-blocking, so these must be 200 denials.
    let s = start(
        "hooks-deny",
        &[
            ("coding.gate", CODING),
            (
                "other.gate",
                "module other\nread Read\nstage s { tools [Read] }\n",
            ),
        ],
        &[],
    );
    for (path, body) in [
        ("/v1/hooks/claude-code", pre("s1", "Read").to_string()),
        ("/v1/hooks/claude-code?policy=coding", "{not json".to_string()),
        (
            "/v1/hooks/claude-code?policy=coding",
            r#"{"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Read", "tool_name": "Write"}"#.to_string(),
        ),
        ("/v1/hooks/claude-code?policy=nope", pre("s1", "Read").to_string()),
    ] {
        let (st, text) = http(&s.addr, "POST", path, &[], body.as_bytes());
        assert_eq!(st, 200, "{path}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(decision(&v), Some("deny"), "{path} {body}: {v}");
    }
    // Naming the policy works; unknown agents are a 404; events toolgate ignores get {}.
    let (_, v) = post_json(
        &s.addr,
        "/v1/hooks/claude-code?policy=coding",
        &pre("s1", "Read"),
    );
    assert_eq!(v, json!({}));
    assert_eq!(
        post_json(&s.addr, "/v1/hooks/copilot", &pre("s1", "Read")).0,
        404
    );
    let (_, v) = post_json(
        &s.addr,
        "/v1/hooks/gemini-cli?policy=coding",
        &json!({"session_id": "g", "hook_event_name": "Notification"}),
    );
    assert_eq!(v, json!({}));
    let (_, v) = post_json(
        &s.addr,
        "/v1/hooks/gemini-cli?policy=coding",
        &json!({"session_id": "g", "hook_event_name": "BeforeTool", "tool_name": "Delete"}),
    );
    assert_eq!(v["decision"], "deny", "{v}");
}

#[test]
fn a_full_hook_store_never_drops_a_latched_session() {
    let s = start(
        "hooks-full",
        &[("coding.gate", CODING)],
        &["--max-sessions", "2"],
    );
    let url = "/v1/hooks/claude-code";
    for session in ["a", "b"] {
        post_json(&s.addr, url, &pre(session, "WebFetch"));
    }
    // Both held sessions are latched: a third is refused, as a denial.
    let (st, v) = post_json(&s.addr, url, &pre("c", "Read"));
    assert_eq!(st, 200);
    assert_eq!(decision(&v), Some("deny"), "{v}");
    // "a" is still latched.
    assert_eq!(
        decision(&post_json(&s.addr, url, &pre("a", "Write")).1),
        Some("deny")
    );
    // "a" starts a new turn: its writes run again, but it still holds the older turn's
    // latch for that turn's late calls, so it makes no room.
    post_json(
        &s.addr,
        url,
        &json!({"session_id": "a", "hook_event_name": "UserPromptSubmit"}),
    );
    assert_eq!(post_json(&s.addr, url, &pre("a", "Write")).1, json!({}));
    assert_eq!(
        decision(&post_json(&s.addr, url, &pre("c", "Read")).1),
        Some("deny")
    );
    assert_eq!(
        decision(&post_json(&s.addr, url, &pre("b", "Write")).1),
        Some("deny")
    );
}

/// Everything `/v1/hooks` cannot judge is a 200 denial in the agent's format: an event
/// over the body limit, an over-long session id, a missing token (issue 20, item 9).
#[test]
fn oversized_events_long_ids_and_missing_tokens_are_denials() {
    let s = start(
        "hooks-limits",
        &[("coding.gate", CODING)],
        &["--max-hook-body", "4096", "--admin-token", "sekret"],
    );
    let url = "/v1/hooks/claude-code";
    let auth = [("authorization", "Bearer sekret")];
    let send = |headers: &[(&str, &str)], body: &Value| {
        let mut h = vec![("content-type", "application/json")];
        h.extend_from_slice(headers);
        let (st, text) = http(&s.addr, "POST", url, &h, body.to_string().as_bytes());
        (
            st,
            serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
        )
    };
    // Latch session s1, then a forged prompt without the token does not end the turn.
    assert_eq!(send(&auth, &pre("s1", "WebFetch")), (200, json!({})));
    let prompt = json!({"session_id": "s1", "hook_event_name": "UserPromptSubmit"});
    assert_eq!(send(&[], &prompt), (200, json!({})));
    assert_eq!(decision(&send(&auth, &pre("s1", "Write")).1), Some("deny"));
    let (_, v) = send(&[], &pre("s2", "Read"));
    assert_eq!(decision(&v), Some("deny"), "{v}");
    // A write of a large file: over the hook body limit, a denial, not a 413.
    let mut big = pre("s1", "Write");
    big["tool_input"] = json!({"content": "x".repeat(8192)});
    let (st, v) = send(&auth, &big);
    assert_eq!(st, 200);
    assert!(
        v["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .is_some_and(|r| r.contains("limit")),
        "{v}"
    );
    // A session id over the cap.
    let (st, v) = send(&auth, &pre(&"s".repeat(300), "Read"));
    assert_eq!(st, 200);
    assert_eq!(decision(&v), Some("deny"), "{v}");
}

/// A hook request on a connection over the server's cap is answered with a 200 denial in
/// the agent's format, not the 503 an agent reads as "run the call".
#[test]
fn a_full_connection_table_denies_hook_calls() {
    use std::io::{Read, Write};
    let s = start(
        "hooks-conns",
        &[("coding.gate", CODING)],
        &["--max-connections", "1"],
    );
    // Hold the only connection open.
    let _held = std::net::TcpStream::connect(&s.addr).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let body = pre("s1", "Write").to_string();
    let mut c = std::net::TcpStream::connect(&s.addr).unwrap();
    write!(
        c,
        "POST /v1/hooks/claude-code HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains("\"permissionDecision\":\"deny\""),
        "{answer}"
    );
    // Any other request still gets the 503.
    let mut c = std::net::TcpStream::connect(&s.addr).unwrap();
    write!(c, "GET /health HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
}

/// A prompt or post-tool event that cannot be judged is answered in its own shape (nothing),
/// not with a `PreToolUse` denial (issue 22, item 8).
#[test]
fn events_that_cannot_be_judged_are_answered_in_their_own_shape() {
    let s = start(
        "hooks-shape",
        &[
            ("coding.gate", CODING),
            (
                "other.gate",
                "module other\nread Read\nstage s { tools [Read] }\n",
            ),
        ],
        &[],
    );
    // No single policy: a pre-tool event is denied, the others get nothing.
    let url = "/v1/hooks/claude-code";
    assert_eq!(
        decision(&post_json(&s.addr, url, &pre("s1", "Read")).1),
        Some("deny")
    );
    let prompt = json!({"session_id": "s1", "hook_event_name": "UserPromptSubmit"});
    assert_eq!(post_json(&s.addr, url, &prompt), (200, json!({})));
    let post = json!({"session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "Read"});
    assert_eq!(post_json(&s.addr, url, &post), (200, json!({})));
}

/// A hook decision is a decision like any other (issue 23): it reaches the decision log and
/// `/metrics` exactly as a `/v1/decide` batch does, with the agent's session and turn ids.
#[test]
fn hook_decisions_reach_the_decision_log_and_the_metrics() {
    let log = temp_dir("hooks-log").join("decisions.jsonl");
    let s = start(
        "hooks-log-srv",
        &[("coding.gate", CODING)],
        &["--log", "all", "--log-file", log.to_str().unwrap()],
    );
    let url = "/v1/hooks/claude-code";
    let prompt =
        json!({"session_id": "s1", "prompt_id": "p1", "hook_event_name": "UserPromptSubmit"});
    post_json(&s.addr, url, &prompt);
    let fetch = json!({"session_id": "s1", "prompt_id": "p1", "hook_event_name": "PreToolUse",
                       "tool_name": "WebFetch", "tool_input": {"url": "https://docs.rs/"}, "tool_use_id": "u1"});
    assert_eq!(post_json(&s.addr, url, &fetch).1, json!({}));
    let write = json!({"session_id": "s1", "prompt_id": "p1", "hook_event_name": "PreToolUse",
                       "tool_name": "Write", "tool_input": {}, "tool_use_id": "u2"});
    assert_eq!(decision(&post_json(&s.addr, url, &write).1), Some("deny"));
    let (_, text) = http(&s.addr, "GET", "/metrics", &[], b"");
    assert_eq!(
        metric(
            &text,
            "toolgate_decisions_total{allow=\"false\",kind=\"latch\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        metric(&text, "toolgate_decisions_total{allow=\"true\",kind=\"\"}"),
        Some(1.0),
        "{text}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let lines = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if lines.len() >= 2 || std::time::Instant::now() > deadline {
            break lines;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(lines.len(), 2, "{lines:?}");
    let denied = &lines[1];
    assert_eq!(denied["session"], "s1", "{denied}");
    assert_eq!(denied["turn"], "p1", "{denied}");
    assert_eq!(denied["decisions"][0]["id"], "u2", "{denied}");
    assert_eq!(denied["decisions"][0]["kind"], "latch", "{denied}");
}
