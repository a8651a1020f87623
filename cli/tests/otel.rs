//! `--otel-endpoint`: one span per decision request, exported over OTLP/HTTP (JSON) to an
//! in-process collector on loopback (Python's http.server), continuing the caller's W3C
//! trace context.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};

use crate::bundle_support::*;
use crate::server_support::{attr, batch, get_json, http, spans, POLICY_A};

#[test]
fn a_decision_span_continues_the_callers_trace_with_one_event_per_call() {
    let (dir, www) = policy_and_www("otel", POLICY_A);
    let collector = Services::start(&www, 0);
    let endpoint = format!("http://{}", collector.addr);
    let tg = serve_with_env(
        &[
            dir.to_str().unwrap(),
            "--log",
            "off",
            "--otel-endpoint",
            &endpoint,
        ],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    );
    let addr = tg.addr.clone();

    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent_id = "00f067aa0ba902b7";
    let traceparent = format!("00-{trace_id}-{parent_id}-01");
    let mut body = batch("send");
    body["calls"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "c2", "tool": "nope", "args": {}}));
    let (st, text) = http(
        &addr,
        "POST",
        "/v1/decide",
        &[("traceparent", &traceparent)],
        body.to_string().as_bytes(),
    );
    assert_eq!(st, 200, "{text}");
    let decided: Value = serde_json::from_str(&text).unwrap();
    // A second request without trace context starts a trace of its own.
    let (st, _) = http(
        &addr,
        "POST",
        "/v1/decide",
        &[],
        batch("look").to_string().as_bytes(),
    );
    assert_eq!(st, 200);
    // A hook event is a decision request too (issue 23: one pipeline for every path).
    let hook = json!({"session_id": "h1", "hook_event_name": "PreToolUse", "tool_name": "look",
                      "tool_input": {}, "tool_use_id": "toolu_1"});
    let (st, _) = http(
        &addr,
        "POST",
        "/v1/hooks/claude-code",
        &[],
        hook.to_string().as_bytes(),
    );
    assert_eq!(st, 200);
    // Other endpoints get no span.
    assert_eq!(get_json(&addr, "/health").0, 200);

    wait_for("three spans at the collector", || {
        spans(&collector.addr).len() >= 3
    });
    let all = spans(&collector.addr);
    assert_eq!(all.len(), 3, "one span per decision request only: {all:?}");
    let hooked = all
        .iter()
        .find(|s| attr(&s["attributes"], "url.path").is_some_and(|p| p == "/v1/hooks/claude-code"))
        .expect("the hook's span");
    let hook_call = &hooked["events"][0]["attributes"];
    assert_eq!(attr(hook_call, "gen_ai.tool.call.id").unwrap(), "toolu_1");
    assert_eq!(attr(hook_call, "toolgate.decision").unwrap(), "allow");
    let span = all
        .iter()
        .find(|s| s["traceId"] == trace_id)
        .expect("the caller's trace");
    assert_eq!(span["parentSpanId"], parent_id);
    assert_eq!(span["name"], "toolgate.decide");
    let attrs = &span["attributes"];
    assert_eq!(attr(attrs, "toolgate.policy").unwrap(), "gate");
    assert_eq!(
        attr(attrs, "toolgate.policy.revision").unwrap(),
        &decided["revision"]
    );
    assert_eq!(
        attr(attrs, "toolgate.decision_id").unwrap(),
        &decided["decision_id"]
    );
    assert_eq!(attr(attrs, "url.path").unwrap(), "/v1/decide");
    let events = span["events"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{events:?}");
    let send = &events[0]["attributes"];
    assert_eq!(attr(send, "gen_ai.tool.name").unwrap(), "send");
    assert_eq!(attr(send, "gen_ai.tool.call.id").unwrap(), "c1");
    assert_eq!(attr(send, "toolgate.decision").unwrap(), "allow");
    let nope = &events[1]["attributes"];
    assert_eq!(attr(nope, "gen_ai.tool.name").unwrap(), "nope");
    assert_eq!(attr(nope, "toolgate.decision").unwrap(), "deny");
    assert_eq!(attr(nope, "toolgate.deny.kind").unwrap(), "unclassified");

    let other = all
        .iter()
        .find(|s| s["traceId"] != trace_id && s["traceId"] != hooked["traceId"])
        .unwrap();
    assert!(
        other["parentSpanId"].as_str().unwrap_or("").is_empty(),
        "{other}"
    );

    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&www);
}

#[test]
fn spans_still_buffered_are_exported_at_shutdown() {
    let (dir, www) = policy_and_www("otel-flush", POLICY_A);
    let collector = Services::start(&www, 0);
    let endpoint = format!("http://{}", collector.addr);
    // The batch processor's delay is far longer than the test: only the shutdown flush can
    // export the span in time.
    let mut tg = serve_with_env(
        &[
            dir.to_str().unwrap(),
            "--log",
            "off",
            "--otel-endpoint",
            &endpoint,
        ],
        &[("OTEL_BSP_SCHEDULE_DELAY", "600000")],
    );
    let (st, _) = http(
        &tg.addr,
        "POST",
        "/v1/decide",
        &[],
        batch("send").to_string().as_bytes(),
    );
    assert_eq!(st, 200);
    tg.terminate();
    assert_eq!(spans(&collector.addr).len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&www);
}
