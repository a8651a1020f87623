//! `POST /v1/hooks/{agent}`: coding-agent hook events over HTTP, against the real server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};

mod server_support;
use server_support::*;

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
    // Once "a" starts a new turn it holds no latch and may make room.
    post_json(
        &s.addr,
        url,
        &json!({"session_id": "a", "hook_event_name": "UserPromptSubmit"}),
    );
    assert_eq!(post_json(&s.addr, url, &pre("c", "Read")).1, json!({}));
    assert_eq!(
        decision(&post_json(&s.addr, url, &pre("b", "Write")).1),
        Some("deny")
    );
}
