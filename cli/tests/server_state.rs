//! Turn state shared through a real Redis (`serve --state redis://...`, issue 16 section 1):
//! replicas see each other's latches, races on one turn never leave it unlatched, and a store
//! that is down, restarted or slow makes the server fail closed with kind `state`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;
mod hooks;
mod tls;

use crate::redis_support::{redis_available, Redis};
use crate::server_support::*;

use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// `fetch` (ingest) sets `tainted`, which blocks `send`; `look` no latch touches.
const POLICY: &str = "module gate\ningest fetch\nwrite send\nread look\nstage main { tools [fetch, look, send] }\nlatch tainted { set_by [fetch] blocks [send] }\n";

/// A replica of a fleet whose store is new (`--state-new`).
fn replica(tag: &str, redis: &Redis, extra: &[&str]) -> Server {
    let mut args = vec!["--state-new"];
    args.extend_from_slice(extra);
    later_replica(tag, redis, &args)
}

/// A replica started without declaring the store new, as every start after the first is.
fn later_replica(tag: &str, redis: &Redis, extra: &[&str]) -> Server {
    let url = redis.url();
    let mut args = vec!["--state", &url, "--state-timeout-ms", "2000"];
    args.extend_from_slice(extra);
    start(tag, &[("gate.gate", POLICY)], &args)
}

fn call(turn: &str, tools: &[&str]) -> Value {
    let calls: Vec<Value> = tools
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"id": format!("c{i}"), "tool": t, "args": {}}))
        .collect();
    json!({"session": "s", "turn": turn, "facts": {"stage": "main"}, "calls": calls})
}

fn decide(addr: &str, req: &Value) -> Value {
    let (st, v) = post_json(addr, "/v1/decide", req);
    assert_eq!(st, 200, "{v}");
    v
}

/// (allow, kind) of each decision.
fn verdicts(v: &Value) -> Vec<(bool, String)> {
    v["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["allow"].as_bool().unwrap(),
                d["kind"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn pair(allow: bool, kind: &str) -> (bool, String) {
    (allow, kind.to_string())
}

/// The decisions are `calls` (allow, kind) and the state came from `origin`.
fn expect(v: &Value, calls: &[(bool, &str)], origin: &str) {
    let want: Vec<_> = calls.iter().map(|(a, k)| pair(*a, k)).collect();
    assert_eq!(
        (verdicts(v), v["session"].as_str()),
        (want, Some(origin)),
        "{v}"
    );
}

/// Waits (bounded) until `/health` says the store is `up`.
fn wait_health(addr: &str, up: bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (st, v) = get_json(addr, "/health");
        assert_eq!(st, 200, "{v}");
        if v["state"]["up"] == up {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "health never became up={up}: {v}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Once the store is back, `req` (one unlatched call) is allowed again. These servers run
/// with a short store timeout, so one round trip on a loaded CI machine may still outlast
/// it (and fail closed, as it must); the recovery must show within 10 s.
fn recovers(addr: &str, req: &Value) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = decide(addr, req);
        if verdicts(&v) == [pair(true, "")] {
            return;
        }
        assert_eq!(verdicts(&v), [pair(false, "state")], "{v}");
        assert!(Instant::now() < deadline, "never recovered: {v}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_latch_set_through_one_replica_holds_on_the_other() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("share", false);
    let a = replica("state-share-a", &redis, &[]);
    let b = replica("state-share-b", &redis, &[]);
    let v = decide(&a.addr, &call("t1", &["fetch"]));
    assert_eq!(
        (v["latched"].clone(), v["session"].clone()),
        (json!(true), json!("new"))
    );
    let v = decide(&b.addr, &call("t1", &["send"]));
    expect(&v, &[(false, "latch")], "carried");
    // Another turn of the same session starts clear on either replica.
    let v = decide(&b.addr, &call("t2", &["send"]));
    expect(&v, &[(true, "")], "new");
    // The offer through the other replica shows the latch too, and records nothing.
    let (st, v) = post_json(
        &b.addr,
        "/v1/offer",
        &json!({"session": "s", "turn": "t1", "facts": {"stage": "main"},
                "tools": [{"name": "send"}, {"name": "look"}]}),
    );
    assert_eq!(st, 200, "{v}");
    assert!(v.to_string().contains("tainted"), "{v}");
    let (_, health) = get_json(&a.addr, "/health");
    assert_eq!(health["state"], json!({"store": "redis", "up": true}));
}

#[test]
fn the_shared_store_keeps_the_in_memory_rules_for_old_and_idle_turns() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("rules", false);
    let flags = ["--session-ttl", "1", "--session-keep-expired", "30"];
    let a = replica("state-rules-a", &redis, &flags);
    let b = replica("state-rules-b", &redis, &flags);
    decide(&a.addr, &call("t1", &["fetch"]));
    for t in ["t2", "t3", "t4", "t5"] {
        decide(&b.addr, &call(t, &["look"]));
    }
    // t1 was pushed out of the 4 recent turns; it latched, so it comes back fully latched.
    let v = decide(&b.addr, &call("t1", &["send"]));
    expect(&v, &[(false, "latch")], "expired");
    decide(&a.addr, &call("t7", &["fetch"]));
    // Every session key expires by itself: after TTL + keep-expired, since it holds a latch.
    let ttl: i64 = redis
        .command(&["PTTL", "toolgate:s:{gate:s}"])
        .unwrap()
        .trim_start_matches(':')
        .parse()
        .unwrap();
    assert!(ttl > 1000 && ttl <= 31_000, "{ttl}");
    // Idle past the TTL: latched turns are remembered as latched, the others forgotten.
    std::thread::sleep(Duration::from_millis(1500));
    let v = decide(&a.addr, &call("t7", &["send"]));
    expect(&v, &[(false, "latch")], "expired");
    let v = decide(&b.addr, &call("t5", &["send"]));
    expect(&v, &[(true, "")], "new");
}

#[test]
fn concurrent_batches_of_one_turn_through_both_replicas_never_leave_it_unlatched() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("race", false);
    let a = replica("state-race-a", &redis, &[]);
    let b = replica("state-race-b", &redis, &[]);
    let mut sends_allowed = 0;
    for i in 0..150 {
        let turn = format!("t{i}");
        // The latching batch and the blocked one race through different replicas; which
        // goes first alternates so neither replica is always ahead.
        let (setter, sender) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let (v1, v2) = std::thread::scope(|s| {
            let h1 = s.spawn(|| decide(&setter.addr, &call(&turn, &["fetch"])));
            let h2 = s.spawn(|| decide(&sender.addr, &call(&turn, &["send"])));
            (h1.join().unwrap(), h2.join().unwrap())
        });
        assert_eq!(v1["latched"], true, "{v1}");
        // The send ran before the fetch (allowed) or after it (latched): both are
        // serialisable; what must never happen is the turn ending unlatched.
        if verdicts(&v2)[0].0 {
            sends_allowed += 1;
        } else {
            assert_eq!(verdicts(&v2), [pair(false, "latch")], "{v2}");
        }
        for r in [&a, &b] {
            let v = decide(&r.addr, &call(&turn, &["send"]));
            assert_eq!(verdicts(&v), [pair(false, "latch")], "turn {turn}: {v}");
        }
    }
    eprintln!("{sends_allowed} of 150 racing sends ran before their turn latched");
}

#[test]
fn a_store_killed_mid_run_fails_closed_and_no_latch_written_before_is_lost() {
    if !redis_available() {
        return;
    }
    // Persistence off: the restarted store is empty. Every turn it no longer holds is then
    // judged as a forgotten latched turn until TTL + keep-expired (here 3 s) have passed.
    let mut redis = Redis::start("kill", false);
    let a = replica(
        "state-kill-a",
        &redis,
        &["--session-ttl", "2", "--session-keep-expired", "1"],
    );
    let b = replica(
        "state-kill-b",
        &redis,
        &["--session-ttl", "2", "--session-keep-expired", "1"],
    );
    decide(&a.addr, &call("t1", &["fetch"]));
    decide(&b.addr, &call("t2", &["look"]));

    redis.kill();
    let v = decide(&a.addr, &call("t1", &["send", "look"]));
    expect(&v, &[(false, "state"), (true, "")], "unavailable");
    assert!(
        v["decisions"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("session state is unavailable"),
        "{v}"
    );
    // A turn that never latched is no better off: the store cannot say so. A setter is
    // denied too, since the latch it sets could not be recorded; but where the batch's own
    // setter blocks a call, that denial is the policy's.
    let v = decide(&b.addr, &call("t2", &["send"]));
    assert_eq!(verdicts(&v), [pair(false, "state")], "{v}");
    let v = decide(&b.addr, &call("t2", &["fetch", "send"]));
    assert_eq!(
        verdicts(&v),
        [pair(false, "state"), pair(false, "latch")],
        "{v}"
    );
    let health = wait_health(&b.addr, false);
    assert_eq!(health["status"], "degraded", "{health}");
    let (_, text) = http(&b.addr, "GET", "/metrics", &[], b"");
    assert!(
        metric(&text, "toolgate_state_errors_total").unwrap() >= 1.0,
        "{text}"
    );
    assert!(
        metric(
            &text,
            "toolgate_decisions_total{allow=\"false\",kind=\"state\"}"
        )
        .unwrap()
            >= 1.0,
        "{text}"
    );
    assert_eq!(metric(&text, "toolgate_state_up"), Some(0.0), "{text}");

    redis.restart();
    wait_health(&a.addr, true);
    wait_health(&b.addr, true);
    // The latched turn written before the kill is still latched, through either replica:
    // judged as a forgotten latched turn, then held as one.
    for (r, origin) in [(&a, "expired"), (&b, "carried")] {
        let v = decide(&r.addr, &call("t1", &["send"]));
        expect(&v, &[(false, "latch")], origin);
    }
    // Until the horizon has passed, a turn the store does not hold might be a forgotten
    // latched one too.
    let v = decide(&b.addr, &call("t3", &["send"]));
    assert_eq!(verdicts(&v), [pair(false, "latch")], "{v}");
    // After it, new turns start clear again.
    std::thread::sleep(Duration::from_millis(3500));
    let v = decide(&a.addr, &call("t4", &["send"]));
    expect(&v, &[(true, "")], "new");
}

#[test]
fn a_persistent_store_restarted_keeps_every_turn_exactly() {
    if !redis_available() {
        return;
    }
    let mut redis = Redis::start("persist", true);
    let a = replica("state-persist-a", &redis, &[]);
    decide(&a.addr, &call("t1", &["fetch"]));
    decide(&a.addr, &call("t2", &["look"]));
    redis.kill();
    redis.restart();
    wait_health(&a.addr, true);
    let v = decide(&a.addr, &call("t1", &["send"]));
    expect(&v, &[(false, "latch")], "carried");
    let v = decide(&a.addr, &call("t2", &["send"]));
    expect(&v, &[(true, "")], "carried");
}

#[test]
fn a_slow_store_times_out_and_fails_closed() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("slow", false);
    let url = redis.url();
    let a = start(
        "state-slow",
        &[("gate.gate", POLICY)],
        &["--state", &url, "--state-new", "--state-timeout-ms", "200"],
    );
    decide(&a.addr, &call("t1", &["look"]));
    // Every client of the store is held for 3 s: each round trip now outlasts the timeout.
    assert_eq!(
        redis
            .command(&["CLIENT", "PAUSE", "3000", "ALL"])
            .as_deref(),
        Some("+OK")
    );
    let v = decide(&a.addr, &call("t1", &["send", "look"]));
    assert_eq!(verdicts(&v), [pair(false, "state"), pair(true, "")], "{v}");
    let (_, text) = http(&a.addr, "GET", "/metrics", &[], b"");
    assert!(
        metric(&text, "toolgate_state_requests_total{result=\"timeout\"}").unwrap() >= 1.0,
        "{text}"
    );
    redis.command(&["CLIENT", "UNPAUSE"]);
    wait_health(&a.addr, true);
    recovers(&a.addr, &call("t1", &["send"]));
}

#[test]
fn a_store_down_at_start_up_fails_closed_until_it_is_up() {
    if !redis_available() {
        return;
    }
    let mut redis = Redis::start("late", false);
    redis.kill();
    let url = redis.url();
    let a = start(
        "state-late",
        &[("gate.gate", POLICY)],
        &["--state", &url, "--state-new", "--state-timeout-ms", "300"],
    );
    let v = decide(&a.addr, &call("t1", &["send", "look"]));
    assert_eq!(verdicts(&v), [pair(false, "state"), pair(true, "")], "{v}");
    redis.restart();
    wait_health(&a.addr, true);
    recovers(&a.addr, &call("t1", &["send"]));
}

#[test]
fn a_bad_state_url_stops_the_server_with_a_clear_error() {
    let dir = temp_dir("state-bad-url");
    std::fs::write(dir.join("gate.gate"), POLICY).unwrap();
    for (url, says) in [
        ("http://nowhere", "did not parse"),
        ("redis://:hunter2@127.0.0.1:6379/x", "database"),
    ] {
        let dir = dir.to_str().unwrap();
        let (code, err) = serve_refused(&[dir, "--addr", "127.0.0.1:0", "--state", url]);
        assert_eq!(code, Some(2), "{url}: {err}");
        assert!(
            err.contains("--state") && err.contains(says),
            "{url}: {err}"
        );
        assert!(
            !err.contains("hunter2"),
            "the password is never printed: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_full_store_refuses_writes_and_toolgate_fails_closed_rather_than_evict() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("full", false);
    let a = replica("state-full", &redis, &[]);
    decide(&a.addr, &call("t1", &["fetch"]));
    // Below what it holds already: under `noeviction` every write is refused (OOM).
    assert_eq!(
        redis
            .command(&["CONFIG", "SET", "maxmemory", "1"])
            .as_deref(),
        Some("+OK")
    );
    let v = decide(&a.addr, &call("t2", &["send", "look"]));
    expect(&v, &[(false, "state"), (true, "")], "unavailable");
    let (_, text) = http(&a.addr, "GET", "/metrics", &[], b"");
    assert!(
        metric(&text, "toolgate_state_requests_total{result=\"reply\"}").unwrap() >= 1.0,
        "{text}"
    );
    redis.command(&["CONFIG", "SET", "maxmemory", "0"]);
    let v = decide(&a.addr, &call("t1", &["send"]));
    expect(&v, &[(false, "latch")], "carried");
    let v = decide(&a.addr, &call("t2", &["send"]));
    expect(&v, &[(true, "")], "new");
}

/// A restart from an older snapshot (the RDB persistence Debian's package enables) keeps the
/// marker and loses the latch set since: the counter written with every latch went back,
/// so the turn stays latched, for this replica and for one started after the restore
/// (issue 20, item 7).
#[test]
fn a_store_restored_from_an_older_snapshot_keeps_the_turn_latched() {
    if !redis_available() {
        return;
    }
    let mut redis = Redis::start("snapshot", false);
    let a = replica("state-snap-a", &redis, &[]);
    decide(&a.addr, &call("t0", &["fetch"]));
    assert_eq!(redis.command(&["SAVE"]).as_deref(), Some("+OK"));
    decide(&a.addr, &call("t1", &["look"]));
    decide(&a.addr, &call("t1", &["fetch"]));
    redis.kill();
    redis.restart();
    wait_health(&a.addr, true);
    let v = decide(&a.addr, &call("t1", &["send"]));
    expect(&v, &[(false, "latch")], "expired");
    let b = later_replica("state-snap-b", &redis, &[]);
    let v = decide(&b.addr, &call("t2", &["send"]));
    expect(&v, &[(false, "latch")], "expired");
    let v = decide(&b.addr, &call("t1", &["send"]));
    expect(&v, &[(false, "latch")], "carried");
}

/// On one node the store's latch counter is one for the whole store: a replica that saw a
/// latch written for one session knows a restore went back in time for every session, those
/// it never judged included. (Per-slot counters, which a cluster needs, would miss this: the
/// replica never saw the other session's slot move.)
#[test]
fn a_snapshot_restore_is_seen_for_sessions_this_replica_never_judged() {
    if !redis_available() {
        return;
    }
    let mut redis = Redis::start("snapshot-other", false);
    let a = replica("state-snap-other-a", &redis, &[]);
    let b = replica("state-snap-other-b", &redis, &[]);
    let other = |turn: &str, tools: &[&str]| {
        let mut req = call(turn, tools);
        req["session"] = json!("other");
        req
    };
    assert_eq!(redis.command(&["SAVE"]).as_deref(), Some("+OK"));
    // B latches session `other`; A only ever judges session `s`, after B's latch.
    decide(&b.addr, &other("t1", &["fetch"]));
    decide(&a.addr, &call("t1", &["fetch"]));
    redis.kill();
    redis.restart();
    wait_health(&a.addr, true);
    let v = decide(&a.addr, &other("t1", &["send"]));
    expect(&v, &[(false, "latch")], "expired");
}

/// A replica started after a FLUSHALL does not take the empty store as new, and what it
/// writes before a replica that knew the store sees the loss is not trusted either.
#[test]
fn a_flushed_store_is_not_taken_as_new() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("flush", false);
    let a = replica("state-flush-a", &redis, &[]);
    decide(&a.addr, &call("t1", &["fetch"]));
    assert_eq!(redis.command(&["FLUSHALL"]).as_deref(), Some("+OK"));
    let b = later_replica("state-flush-b", &redis, &[]);
    let v = decide(&b.addr, &call("t1", &["send"]));
    expect(&v, &[(false, "latch")], "expired");
    let v = decide(&a.addr, &call("t1", &["send"]));
    expect(&v, &[(false, "latch")], "carried");
    // Declared new, a replica started on an empty store judges new turns clear.
    assert_eq!(redis.command(&["FLUSHALL"]).as_deref(), Some("+OK"));
    let c = replica("state-flush-c", &redis, &[]);
    let v = decide(&c.addr, &call("t9", &["send"]));
    expect(&v, &[(true, "")], "new");
}

/// An eviction policy that can drop session keys stops the server at start-up, naming the
/// setting; a store that keeps every key is started with a word on its persistence.
#[test]
fn an_evicting_store_is_refused_and_persistence_is_announced() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("evict", false);
    let ok = replica("state-evict-ok", &redis, &[]);
    assert!(
        ok.startup
            .iter()
            .any(|l| l.contains("AOF off") && l.contains("RDB snapshots off")),
        "{:?}",
        ok.startup
    );
    assert_eq!(
        redis
            .command(&["CONFIG", "SET", "maxmemory-policy", "volatile-lru"])
            .as_deref(),
        Some("+OK")
    );
    let dir = temp_dir("state-evict");
    std::fs::write(dir.join("gate.gate"), POLICY).unwrap();
    let url = redis.url();
    let (code, err) = serve_refused(&[
        dir.to_str().unwrap(),
        "--addr",
        "127.0.0.1:0",
        "--state",
        &url,
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("maxmemory-policy")
            && err.contains("volatile-lru")
            && err.contains("noeviction"),
        "{err}"
    );
}

/// Turn ids are stored inside one string per session: ids holding the bytes that string uses
/// as separators (and the escape character) stay distinct turns, each with its own latches.
#[test]
fn turn_ids_with_any_characters_keep_their_own_state() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("ids", false);
    let a = replica("state-ids", &redis, &[]);
    // "t\u{1}" would be "t%01" if the escape were not escaped itself.
    let ids = ["t\n1", "t\u{1}", "t%01", "t|1|\u{2}"];
    for (i, t) in ids.iter().enumerate() {
        let tool = if i % 2 == 0 { "fetch" } else { "look" };
        decide(&a.addr, &call(t, &[tool]));
    }
    for (i, t) in ids.iter().enumerate() {
        let v = decide(&a.addr, &call(t, &["send"]));
        let want = if i % 2 == 0 {
            (false, "latch")
        } else {
            (true, "")
        };
        expect(&v, &[want], "carried");
    }
}
