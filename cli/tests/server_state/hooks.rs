//! `/v1/hooks` under `serve --state redis://...` (issue 20, item 9): a hook session's turn
//! state lives in the shared store, so replicas behind one load balancer see each other's
//! latches and turns; the store's loss detection covers hook sessions too; and a store that
//! is down denies the agent's tool calls in the agent's own answer shape (HTTP 200), never
//! an error the agent would run the tool on.

use crate::redis_support::{redis_available, Redis};
use crate::server_support::*;
use serde_json::{json, Value};

pub(super) const CODING: &str = "module coding\nwrite Write, Bash\ningest WebFetch\nread Read\nstage work { tools [Write, Bash, WebFetch, Read] }\nlatch untrusted { set_by ingest blocks write }\nrule pr_after_read for Bash { require called_before(Read) on_missing deny }\n";
const URL: &str = "/v1/hooks/claude-code";

fn hook_replica(tag: &str, redis: &Redis, new: bool) -> Server {
    let url = redis.url();
    let mut args = vec!["--state", &url, "--state-timeout-ms", "2000"];
    if new {
        args.push("--state-new");
    }
    start(tag, &[("coding.gate", CODING)], &args)
}

pub(super) fn pre(session: &str, prompt: &str, tool: &str) -> Value {
    json!({"session_id": session, "prompt_id": prompt, "hook_event_name": "PreToolUse",
           "tool_name": tool, "tool_input": {"url": "https://docs.rs/"}, "tool_use_id": "u1"})
}

pub(super) fn prompt(session: &str, prompt: &str) -> Value {
    json!({"session_id": session, "prompt_id": prompt, "hook_event_name": "UserPromptSubmit"})
}

/// The decision `addr` answers for `event`: "deny", "allow" or "" (no decision: the call
/// runs). Every answer must be a 200.
pub(super) fn hook(addr: &str, event: &Value) -> String {
    let (st, v) = post_json(addr, URL, event);
    assert_eq!(st, 200, "{v}");
    v["hookSpecificOutput"]["permissionDecision"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn a_hook_latch_set_through_one_replica_holds_on_the_other() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("hooks-share", false);
    let a = hook_replica("hooks-share-a", &redis, true);
    let b = hook_replica("hooks-share-b", &redis, true);
    assert_eq!(hook(&a.addr, &prompt("s1", "p1")), "");
    assert_eq!(hook(&b.addr, &pre("s1", "p1", "Write")), "");
    assert_eq!(hook(&a.addr, &pre("s1", "p1", "WebFetch")), "");
    assert_eq!(hook(&b.addr, &pre("s1", "p1", "Write")), "deny");
    // The next prompt, through either replica, starts a clear turn on both.
    assert_eq!(hook(&b.addr, &prompt("s1", "p2")), "");
    assert_eq!(hook(&a.addr, &pre("s1", "p2", "Write")), "");
    // An older prompt id arriving late, through the other replica, is still latched.
    assert_eq!(hook(&b.addr, &pre("s1", "p1", "Write")), "deny");
    // called_before learns from a PostToolUse seen by the other replica.
    assert_eq!(hook(&a.addr, &pre("s1", "p2", "Bash")), "deny");
    let post = json!({"session_id": "s1", "prompt_id": "p2", "hook_event_name": "PostToolUse",
                      "tool_name": "Read", "tool_use_id": "u2", "tool_response": {"ok": true}});
    hook(&b.addr, &post);
    assert_eq!(hook(&a.addr, &pre("s1", "p2", "Bash")), "");
    // Another session is its own (and, like any, starts with its user's prompt).
    assert_eq!(hook(&b.addr, &prompt("s2", "q1")), "");
    assert_eq!(hook(&a.addr, &pre("s2", "q1", "Write")), "");
}

#[test]
fn hook_turns_survive_a_store_going_back_in_time_latched() {
    if !redis_available() {
        return;
    }
    let mut redis = Redis::start("hooks-snap", false);
    let a = hook_replica("hooks-snap-a", &redis, true);
    assert_eq!(hook(&a.addr, &prompt("s1", "p1")), "");
    assert_eq!(redis.command(&["SAVE"]).as_deref(), Some("+OK"));
    assert_eq!(hook(&a.addr, &pre("s1", "p1", "WebFetch")), "");
    assert_eq!(hook(&a.addr, &pre("s1", "p1", "Write")), "deny");
    redis.kill();
    redis.restart();
    // Until the store answers again, calls are denied (a 200 in Claude Code's shape).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (_, health) = get_json(&a.addr, "/health");
        if health["state"]["up"] == true {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{health}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // The snapshot holds the turn unlatched; the store went back in time, so it is latched.
    assert_eq!(hook(&a.addr, &pre("s1", "p1", "Write")), "deny");
    // A replica started after the restore sees it too. A new session is not locked out: its
    // user's first prompt starts it clear.
    let b = hook_replica("hooks-snap-b", &redis, false);
    assert_eq!(hook(&b.addr, &pre("s1", "p1", "Write")), "deny");
    assert_eq!(hook(&b.addr, &prompt("s9", "r1")), "");
    assert_eq!(hook(&b.addr, &pre("s9", "r1", "Write")), "");
    // The user's next prompt is the explicit signal that ends the recovered turn.
    assert_eq!(hook(&b.addr, &prompt("s1", "p2")), "");
    assert_eq!(hook(&a.addr, &pre("s1", "p2", "Write")), "");
}

#[test]
fn a_flushed_store_keeps_hook_sessions_latched() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("hooks-flush", false);
    let a = hook_replica("hooks-flush-a", &redis, true);
    assert_eq!(hook(&a.addr, &prompt("s1", "p1")), "");
    assert_eq!(hook(&a.addr, &pre("s1", "p1", "WebFetch")), "");
    assert_eq!(redis.command(&["FLUSHALL"]).as_deref(), Some("+OK"));
    assert_eq!(hook(&a.addr, &pre("s1", "p1", "Write")), "deny");
    let b = hook_replica("hooks-flush-b", &redis, false);
    assert_eq!(hook(&b.addr, &pre("s1", "p1", "Write")), "deny");
}

#[test]
fn a_store_that_is_down_denies_hook_calls_in_the_agents_shape() {
    if !redis_available() {
        return;
    }
    let mut redis = Redis::start("hooks-down", false);
    let a = hook_replica("hooks-down-a", &redis, true);
    assert_eq!(hook(&a.addr, &pre("s1", "p1", "Read")), "");
    redis.kill();
    assert_eq!(hook(&a.addr, &pre("s1", "p1", "Read")), "deny");
    let (_, v) = post_json(&a.addr, URL, &pre("s1", "p1", "Write"));
    let reason = v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap_or("");
    assert!(reason.contains("turn state"), "{v}");
    // A prompt event that cannot be recorded is answered with nothing: the turn does not
    // advance, which errs towards latched.
    let (st, v) = post_json(&a.addr, URL, &prompt("s1", "p2"));
    assert_eq!((st, v), (200, json!({})));
}

/// Events of one session judged at once by two replicas never lose each other's writes: a
/// fetch let through while the other replica records post-events leaves the turn latched.
#[test]
fn concurrent_hook_events_through_both_replicas_never_lose_a_latch() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("hooks-race", false);
    let a = hook_replica("hooks-race-a", &redis, true);
    let b = hook_replica("hooks-race-b", &redis, true);
    for round in 0..10 {
        let session = format!("s{round}");
        assert_eq!(hook(&a.addr, &prompt(&session, "p1")), "");
        let fetched = std::thread::scope(|scope| {
            let posts = scope.spawn(|| {
                for i in 0..20 {
                    let post = json!({"session_id": session, "prompt_id": "p1",
                                      "hook_event_name": "PostToolUse", "tool_name": "Read",
                                      "tool_use_id": format!("r{i}"), "tool_response": {}});
                    hook(&b.addr, &post);
                }
            });
            std::thread::sleep(std::time::Duration::from_millis(round * 3));
            let fetched = hook(&a.addr, &pre(&session, "p1", "WebFetch")).is_empty();
            posts.join().unwrap();
            fetched
        });
        if fetched {
            assert_eq!(hook(&b.addr, &pre(&session, "p1", "Write")), "deny");
            assert_eq!(hook(&a.addr, &pre(&session, "p1", "Write")), "deny");
        }
    }
}
