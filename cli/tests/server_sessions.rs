//! Turn state kept by `toolgate serve` is never lost in the allowing direction: no sequence of
//! requests makes a batch of a latched turn be judged unlatched (issue 11, section 3).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::server_support::*;

use serde_json::{json, Value};
use std::time::Duration;

/// Two latches that block different tools: `l1` (set by `a`, blocks `x`), `l2` (set by `b`,
/// blocks `y`).
const TWO_LATCHES: &str = "module two\nwrite x, y\ningest a, b\nstage main { tools [a, b, x, y] }\nlatch l1 { set_by [a] blocks [x] }\nlatch l2 { set_by [b] blocks [y] }\n";

/// A batch of the coach policy in `session`/`turn`.
fn coach_call(session: &str, turn: &str, tool: &str) -> Value {
    json!({"policy": "coach", "session": session, "turn": turn, "facts": {"stage": "coach"},
           "calls": [{"id": "c", "tool": tool, "args": {"q": "x"}}]})
}

fn decide(addr: &str, req: &Value) -> Value {
    let (st, v) = post_json(addr, "/v1/decide", req);
    assert_eq!(st, 200, "{v}");
    v
}

/// Reads the documentation (sets the latch) in `turn`, then checks the turn is latched.
fn latch_turn(addr: &str, session: &str, turn: &str) {
    let v = decide(addr, &coach_call(session, turn, "search_aws_docs"));
    assert_eq!(v["latched"], true, "{v}");
}

fn assert_latched(v: &Value, origin: &str) {
    assert_eq!(v["decisions"][0]["allow"], false, "{v}");
    assert_eq!(v["decisions"][0]["kind"], "latch", "{v}");
    assert_eq!(v["session"], origin, "{v}");
}

#[test]
fn the_response_says_where_the_latch_state_came_from() {
    let s = start("sess-origin", &[("coach.gate", &coach_source())], &[]);
    let a = &s.addr;
    let v = decide(a, &coach_call("s", "t1", "lookup_lesson"));
    assert_eq!(v["session"], "new", "{v}");
    let v = decide(a, &coach_call("s", "t1", "lookup_lesson"));
    assert_eq!(v["session"], "carried", "{v}");
    let v = decide(a, &coach_call("s", "t2", "lookup_lesson"));
    assert_eq!(v["session"], "new", "{v}");
    // Stateless requests carry no session field.
    let v = decide(
        a,
        &json!({"facts": {"stage": "coach"}, "calls": [{"id": "c", "tool": "lookup_lesson"}]}),
    );
    assert!(v.get("session").is_none(), "{v}");
    // The OPA shape says it inside the result.
    let (st, v) = post_json(
        a,
        "/v1/data/coach/decide",
        &json!({"input": coach_call("s", "t2", "lookup_lesson")}),
    );
    assert_eq!(st, 200);
    assert_eq!(v["result"]["session"], "carried", "{v}");
}

#[test]
fn two_policies_sharing_a_session_id_never_share_latch_state() {
    let s = start(
        "sess-policies",
        &[("coach.gate", &coach_source()), ("two.gate", TWO_LATCHES)],
        &[],
    );
    let a = &s.addr;
    for (i, other_turn) in ["t2", "t1", "t9"].iter().enumerate() {
        let session = format!("shared{i}");
        latch_turn(a, &session, "t1");
        // Another policy's batches under the same session id, same or other turn id.
        let other = json!({"policy": "two", "session": session, "turn": other_turn,
                           "facts": {"stage": "main"}, "calls": [{"id": "c", "tool": "x"}]});
        let v = decide(a, &other);
        assert_eq!(v["decisions"][0]["allow"], true, "{v}");
        assert_eq!(
            v["session"], "new",
            "the other policy starts its own state: {v}"
        );
        let v = decide(a, &coach_call(&session, "t1", "update_memory"));
        assert_latched(&v, "carried");
    }
}

#[test]
fn a_late_batch_of_an_earlier_turn_keeps_its_latch() {
    let s = start("sess-late", &[("coach.gate", &coach_source())], &[]);
    let a = &s.addr;
    latch_turn(a, "s", "t1");
    decide(a, &coach_call("s", "u1", "lookup_lesson")); // an unlatched turn
    decide(a, &coach_call("s", "t2", "lookup_lesson"));
    // The late batch of t1 still sees t1's latch.
    assert_latched(
        &decide(a, &coach_call("s", "t1", "update_memory")),
        "carried",
    );
    // Many newer turns later, t1 still cannot run a write: its exact state may be gone, but
    // the server remembers t1 was latched and assumes every latch set.
    for i in 0..40 {
        let v = decide(a, &coach_call("s", &format!("n{i}"), "update_memory"));
        assert_eq!(v["decisions"][0]["allow"], true, "a new turn is fresh: {v}");
        assert_eq!(v["session"], "new");
    }
    let v = decide(a, &coach_call("s", "t1", "update_memory"));
    assert_eq!(v["decisions"][0]["kind"], "latch", "{v}");
    assert_eq!(v["session"], "expired", "{v}");
    // And it stays latched for the rest of that turn.
    assert_latched(
        &decide(a, &coach_call("s", "t1", "grade_attempt")),
        "carried",
    );
    // A turn that never latched anything may be forgotten: judging it afresh is what it had.
    let v = decide(a, &coach_call("s", "u1", "update_memory"));
    assert_eq!(v["decisions"][0]["allow"], true, "{v}");
}

#[test]
fn a_full_store_refuses_new_sessions_and_keeps_every_latched_turn() {
    let s = start(
        "sess-full",
        &[("coach.gate", &coach_source())],
        &["--max-sessions", "4"],
    );
    let a = &s.addr;
    for i in 0..4 {
        latch_turn(a, &format!("s{i}"), "t");
    }
    // The flood: every new session is refused, with a clear JSON error.
    for i in 4..40 {
        let (st, v) = post_json(
            a,
            "/v1/decide",
            &coach_call(&format!("s{i}"), "t", "lookup_lesson"),
        );
        assert_eq!(st, 503, "{v}");
        assert_eq!(v["error"]["code"], "sessions_full", "{v}");
        assert!(v["error"]["message"].as_str().unwrap().contains("session"));
    }
    // No latched turn was evicted to make room.
    for i in 0..4 {
        assert_latched(
            &decide(a, &coach_call(&format!("s{i}"), "t", "update_memory")),
            "carried",
        );
    }
    let (_, metrics) = http(a, "GET", "/metrics", &[], b"");
    assert_eq!(
        metric(&metrics, "toolgate_sessions_refused_total"),
        Some(36.0),
        "{metrics}"
    );
    assert_eq!(
        metric(&metrics, "toolgate_sessions_live"),
        Some(4.0),
        "{metrics}"
    );
    // Stateless requests are never refused.
    let (st, _) = post_json(
        a,
        "/v1/decide",
        &json!({"facts": {"stage": "coach"}, "calls": [{"id": "c", "tool": "lookup_lesson"}]}),
    );
    assert_eq!(st, 200);
}

#[test]
fn sessions_holding_no_latch_make_room_for_new_ones() {
    let s = start(
        "sess-churn",
        &[("coach.gate", &coach_source())],
        &["--max-sessions", "4"],
    );
    let a = &s.addr;
    latch_turn(a, "keep", "t");
    // Unlatched sessions can be forgotten safely: judging them afresh is what they had.
    for i in 0..50 {
        let v = decide(a, &coach_call(&format!("u{i}"), "t", "lookup_lesson"));
        assert_eq!(v["session"], "new");
    }
    assert_latched(
        &decide(a, &coach_call("keep", "t", "update_memory")),
        "carried",
    );
}

#[test]
fn the_store_is_bounded_in_bytes_not_only_in_entries() {
    let s = start(
        "sess-bytes",
        &[("coach.gate", &coach_source())],
        &["--max-session-bytes", "4096", "--max-sessions", "100000"],
    );
    let a = &s.addr;
    let long = "s".repeat(200);
    let mut refused_at = None;
    for i in 0..200 {
        let session = format!("{long}{i}");
        let (st, v) = post_json(
            a,
            "/v1/decide",
            &coach_call(&session, &long, "search_aws_docs"),
        );
        if st == 503 {
            assert_eq!(v["error"]["code"], "sessions_full", "{v}");
            refused_at = Some(i);
            break;
        }
        assert_eq!(st, 200, "{v}");
    }
    let n = refused_at.expect("4 KiB never filled up with 400-byte sessions");
    assert!((2..=20).contains(&n), "refused after {n} sessions");
    let (_, metrics) = http(a, "GET", "/metrics", &[], b"");
    let bytes = metric(&metrics, "toolgate_sessions_bytes").expect("bytes gauge");
    assert!(bytes > 0.0 && bytes <= 4096.0, "{metrics}");
}

#[test]
fn session_and_turn_ids_are_capped_in_length() {
    let s = start(
        "sess-ids",
        &[("coach.gate", &coach_source())],
        &["--max-id-bytes", "64"],
    );
    let a = &s.addr;
    let ok = "i".repeat(64);
    let v = decide(a, &coach_call(&ok, &ok, "lookup_lesson"));
    assert_eq!(v["session"], "new");
    for (session, turn, field) in [
        ("i".repeat(65), ok.clone(), "session"),
        (ok.clone(), "i".repeat(65), "turn"),
        ("é".repeat(33), ok.clone(), "session"),
        ("i".repeat(100_000), ok.clone(), "session"),
        (String::new(), ok.clone(), "session"),
        (ok.clone(), String::new(), "turn"),
    ] {
        let offer = json!({"policy": "coach", "session": session, "turn": turn, "tools": []});
        for (path, req) in [
            ("/v1/decide", coach_call(&session, &turn, "lookup_lesson")),
            ("/v1/offer", offer),
        ] {
            let (st, v) = post_json(a, path, &req);
            assert!((400..500).contains(&st), "{path} {field}: {st} {v}");
            assert_eq!(v["error"]["location"], field, "{v}");
        }
    }
}

#[test]
fn a_turn_whose_session_expired_stays_latched() {
    let s = start(
        "sess-ttl",
        &[("coach.gate", &coach_source())],
        &["--session-ttl", "1"],
    );
    let a = &s.addr;
    latch_turn(a, "s", "t1");
    decide(a, &coach_call("s2", "t1", "lookup_lesson"));
    // Idle past the TTL; the sweeper runs every second.
    std::thread::sleep(Duration::from_millis(2600));
    let v = decide(a, &coach_call("s", "t1", "update_memory"));
    assert_latched(&v, "expired");
    assert_latched(
        &decide(a, &coach_call("s", "t1", "update_memory")),
        "carried",
    );
    let (_, metrics) = http(a, "GET", "/metrics", &[], b"");
    assert_eq!(
        metric(&metrics, "toolgate_sessions_expired_total"),
        Some(1.0),
        "{metrics}"
    );
    // A new turn of that session starts afresh; so does an expired session that held no latch.
    let v = decide(a, &coach_call("s", "t2", "update_memory"));
    assert_eq!(v["decisions"][0]["allow"], true, "{v}");
    assert_eq!(v["session"], "new");
    let v = decide(a, &coach_call("s2", "t1", "update_memory"));
    assert_eq!(v["decisions"][0]["allow"], true, "{v}");
    // An offer of the expired turn shows the writes disabled too.
    let tool = json!({"name": "update_memory", "description": "d", "input_schema": {}});
    std::thread::sleep(Duration::from_millis(2600));
    let (_, v) = post_json(
        a,
        "/v1/offer",
        &json!({"policy": "coach", "session": "s", "turn": "t1", "facts": {"stage": "coach"},
                "tools": [tool]}),
    );
    assert_eq!(v["disabled"][0]["latch"], "documentation_read", "{v}");
}

fn two_call(turn: &str, tool: &str) -> Value {
    json!({"policy": "two", "session": "s", "turn": turn, "facts": {"stage": "main"},
           "calls": [{"id": "c", "tool": tool}]})
}

fn reload(s: &Server, source: &str) {
    std::fs::write(s.dir.join("two.gate"), source).unwrap();
    let (st, body) = http(&s.addr, "POST", "/v1/reload", &[], b"");
    assert_eq!(st, 200, "{body}");
}

#[test]
fn a_reload_maps_latch_state_by_name_and_denies_the_turn_when_a_name_is_gone() {
    let s = start(
        "sess-reload",
        &[("two.gate", TWO_LATCHES)],
        &["--poll-ms", "0"],
    );
    let a = &s.addr;
    let v = decide(a, &two_call("t1", "a"));
    assert_eq!(v["latched"], json!({"l1": true, "l2": false}));

    // Declared in the other order: still by name, so only `x` is blocked.
    reload(&s, "module two\nwrite x, y\ningest a, b\nstage main { tools [a, b, x, y] }\nlatch l2 { set_by [b] blocks [y] }\nlatch l1 { set_by [a] blocks [x] }\n");
    let v = decide(a, &two_call("t1", "x"));
    assert_eq!(v["decisions"][0]["kind"], "latch", "{v}");
    assert_eq!(v["session"], "carried");
    let v = decide(a, &two_call("t1", "y"));
    assert_eq!(v["decisions"][0]["allow"], true, "{v}");

    // `l1` renamed: the stored `l1` means nothing to this policy, so no call of the turn can
    // be judged: every one is denied as `state`, naming the latch.
    reload(&s, "module two\nwrite x, y\ningest a, b\nstage main { tools [a, b, x, y] }\nlatch first { set_by [a] blocks [x] }\nlatch l2 { set_by [b] blocks [y] }\n");
    for tool in ["x", "y", "b", "x"] {
        let v = decide(a, &two_call("t1", tool));
        assert_eq!(v["decisions"][0]["kind"], "state", "{tool}: {v}");
        assert!(
            v["decisions"][0]["reason"]
                .as_str()
                .unwrap()
                .contains("latch `l1`"),
            "{tool}: {v}"
        );
    }
    // A reload that brings the old name back judges the turn with its own latches again:
    // `l1`, and `l2`, which the denied `b` set (a setter latches whether or not it runs).
    reload(&s, TWO_LATCHES);
    let v = decide(a, &two_call("t1", "x"));
    assert_eq!(v["decisions"][0]["rule"], "l1", "{v}");
    let v = decide(a, &two_call("t1", "y"));
    assert_eq!(v["decisions"][0]["rule"], "l2", "{v}");
    // A new turn is fresh.
    let v = decide(a, &two_call("t2", "y"));
    assert_eq!(v["decisions"][0]["allow"], true, "{v}");

    // A removed latch: `l1` gone, `l2` kept.
    decide(a, &two_call("t3", "a"));
    reload(&s, "module two\nwrite x, y\ningest a, b\nstage main { tools [a, b, x, y] }\nlatch l2 { set_by [b] blocks [y] }\n");
    let v = decide(a, &two_call("t3", "y"));
    assert_eq!(v["decisions"][0]["kind"], "state", "{v}");

    // A latch state stored unset for a removed name does not over-deny: `t4` set nothing.
    reload(&s, TWO_LATCHES);
    decide(a, &two_call("t4", "x"));
    reload(&s, "module two\nwrite x, y\ningest a, b\nstage main { tools [a, b, x, y] }\nlatch l2 { set_by [b] blocks [y] }\n");
    let v = decide(a, &two_call("t4", "y"));
    assert_eq!(v["decisions"][0]["allow"], true, "{v}");
}
