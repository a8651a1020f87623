//! Turn state in a real three-shard Redis Cluster (`--state redis+cluster://...`, issue 20
//! section 2): each batch is one script on one shard, sessions spread over every shard, and a
//! shard that lost its data is detected for its own sessions only.

use super::{pair, verdicts, POLICY};
use crate::redis_support::{redis_available, RedisCluster};
use crate::server_support::*;
use serde_json::{json, Value};

/// A replica on `cluster`; `extra` flags after the cluster URL.
fn replica(tag: &str, cluster: &RedisCluster, extra: &[&str]) -> Server {
    let url = cluster.url();
    let mut args = vec!["--state", &url, "--state-timeout-ms", "2000"];
    args.extend_from_slice(extra);
    start(tag, &[("gate.gate", POLICY)], &args)
}

fn call(session: &str, turn: &str, tool: &str) -> Value {
    json!({"session": session, "turn": turn, "facts": {"stage": "main"},
           "calls": [{"id": "c0", "tool": tool, "args": {}}]})
}

fn decide(addr: &str, session: &str, turn: &str, tool: &str) -> Value {
    let (st, v) = post_json(addr, "/v1/decide", &call(session, turn, tool));
    assert_eq!(st, 200, "{v}");
    v
}

/// The key of session `s` of module `gate` under the default prefix.
fn key(session: &str) -> String {
    format!("toolgate:s:{{gate:{session}}}")
}

const SESSIONS: usize = 24;

/// A latch set through one replica holds through another, for sessions on every shard; a
/// replica started later without `--state-new` takes the slots nobody wrote yet as new, since
/// the first replica created every slot's marker at start-up.
#[test]
fn a_latch_set_through_one_replica_holds_on_another_for_sessions_on_every_shard() {
    if !redis_available() {
        return;
    }
    let cluster = RedisCluster::start("cluster-share", 3);
    let a = replica("cluster-share-a", &cluster, &["--state-new"]);
    // Every slot has its marker, on the shard that holds the slot.
    let markers = cluster.counts("toolgate:m:*");
    assert_eq!(markers.iter().sum::<usize>(), 16_384, "{markers:?}");
    assert!(markers.iter().all(|n| *n > 5000), "{markers:?}");
    let b = replica("cluster-share-b", &cluster, &[]);
    for i in 0..SESSIONS {
        let s = format!("s{i}");
        let v = decide(&a.addr, &s, "t1", "fetch");
        assert_eq!(
            (&v["latched"], &v["session"]),
            (&json!(true), &json!("new")),
            "{v}"
        );
        let v = decide(&b.addr, &s, "t1", "send");
        assert_eq!(verdicts(&v), [pair(false, "latch")], "{s}: {v}");
        assert_eq!(v["session"], "carried", "{v}");
        let v = decide(&b.addr, &s, "t2", "send");
        assert_eq!(verdicts(&v), [pair(true, "")], "{s}: {v}");
        assert_eq!(v["session"], "new", "{v}");
    }
    // The sessions are spread over all three shards, each key on the shard of its slot.
    let sessions = cluster.counts("toolgate:s:*");
    assert!(sessions.iter().all(|n| *n > 0), "{sessions:?}");
    assert_eq!(sessions.iter().sum::<usize>(), SESSIONS, "{sessions:?}");
    for i in 0..SESSIONS {
        let k = key(&format!("s{i}"));
        let holder = cluster.holder(&k).expect("some shard holds the session");
        let slot: u16 = cluster.nodes[holder]
            .cli(&["CLUSTER", "KEYSLOT", &k])
            .parse()
            .unwrap();
        let owns = cluster.nodes[holder].cli(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]);
        assert_ne!(owns, "0", "{k} in slot {slot}");
    }
    let (_, health) = get_json(&b.addr, "/health");
    assert_eq!(health["state"], json!({"store": "redis", "up": true}));
}

/// One shard flushed: its sessions' turns are judged latched (a loss of its slots), through
/// the replica that saw them and one started after; the other shards' sessions keep their
/// exact state.
#[test]
fn a_flushed_shard_is_a_loss_for_its_own_sessions_only() {
    if !redis_available() {
        return;
    }
    let cluster = RedisCluster::start("cluster-flush", 3);
    let a = replica("cluster-flush-a", &cluster, &["--state-new"]);
    let mut on: Vec<Vec<String>> = vec![Vec::new(); 3];
    for i in 0..SESSIONS {
        let s = format!("s{i}");
        decide(&a.addr, &s, "t1", "fetch");
        decide(&a.addr, &s, "t2", "look");
        on[cluster.holder(&key(&s)).unwrap()].push(s);
    }
    assert!(on.iter().all(|s| !s.is_empty()), "{on:?}");
    assert_eq!(
        cluster.nodes[0].command(&["FLUSHALL"]).as_deref(),
        Some("+OK")
    );
    let b = replica("cluster-flush-b", &cluster, &[]);
    for (node, sessions) in on.iter().enumerate() {
        for (i, s) in sessions.iter().enumerate() {
            let r = if i % 2 == 0 { &a } else { &b };
            let t1 = decide(&r.addr, s, "t1", "send");
            assert_eq!(verdicts(&t1), [pair(false, "latch")], "{s} on {node}: {t1}");
            let t2 = decide(&r.addr, s, "t2", "send");
            let t3 = decide(&r.addr, s, "t3", "send");
            if node == 0 {
                // Lost with the shard: every turn latched, the unlatched t2 and a new t3 too.
                assert_eq!(t1["session"], "expired", "{s}: {t1}");
                assert_eq!(verdicts(&t2), [pair(false, "latch")], "{s}: {t2}");
                assert_eq!(verdicts(&t3), [pair(false, "latch")], "{s}: {t3}");
            } else {
                assert_eq!(t1["session"], "carried", "{s}: {t1}");
                assert_eq!(
                    (verdicts(&t2), &t2["session"]),
                    (vec![pair(true, "")], &json!("carried")),
                    "{s}: {t2}"
                );
                assert_eq!(
                    (verdicts(&t3), &t3["session"]),
                    (vec![pair(true, "")], &json!("new")),
                    "{s}: {t3}"
                );
            }
        }
    }
}

/// The bound on forgotten latched turns holds in the shared store as in memory: 4 recent turns
/// and 4096 forgotten latched ones, then a new turn that would push out one more latched turn
/// is refused (503 `sessions_full`), while a forgotten one still comes back fully latched.
#[test]
fn a_session_that_forgot_too_many_latched_turns_is_refused_a_new_one() {
    if !redis_available() {
        return;
    }
    let cluster = RedisCluster::start("cluster-bound", 3);
    let a = replica("cluster-bound", &cluster, &["--state-new"]);
    for i in 0..4 + 4096 {
        let (st, v) = post_json(&a.addr, "/v1/decide", &call("s", &format!("t{i}"), "fetch"));
        assert_eq!(st, 200, "turn {i}: {v}");
    }
    let holder = cluster.holder(&key("s")).unwrap();
    let old = format!("{}:old", key("s"));
    assert_eq!(
        cluster.nodes[holder].command(&["SCARD", &old]).as_deref(),
        Some(":4096")
    );
    let (st, v) = post_json(&a.addr, "/v1/decide", &call("s", "t-new", "look"));
    assert_eq!(st, 503, "{v}");
    assert_eq!(v["error"]["code"], "sessions_full", "{v}");
    let v = decide(&a.addr, "s", "t0", "send");
    assert_eq!(
        (verdicts(&v), &v["session"]),
        (vec![pair(false, "latch")], &json!("expired")),
        "{v}"
    );
    // t0 left the set, and its place among the recent turns pushed t4096 into it.
    assert_eq!(
        cluster.nodes[holder].command(&["SCARD", &old]).as_deref(),
        Some(":4096")
    );
    let v = decide(&a.addr, "s", "t4099", "send");
    assert_eq!(
        (verdicts(&v), &v["session"]),
        (vec![pair(false, "latch")], &json!("carried")),
        "{v}"
    );
}

/// `/v1/hooks` sessions live in the cluster too: a hook latch set through one replica holds
/// through another, for sessions on every shard.
#[test]
fn hook_sessions_are_shared_through_the_cluster() {
    use super::hooks::{hook, pre, prompt, CODING};
    if !redis_available() {
        return;
    }
    let cluster = RedisCluster::start("cluster-hooks", 3);
    let url = cluster.url();
    let flags = ["--state", &url, "--state-timeout-ms", "2000"];
    let a = start(
        "cluster-hooks-a",
        &[("coding.gate", CODING)],
        &[&flags[..], &["--state-new"]].concat(),
    );
    let b = start("cluster-hooks-b", &[("coding.gate", CODING)], &flags);
    for i in 0..SESSIONS {
        let s = format!("h{i}");
        assert_eq!(hook(&a.addr, &prompt(&s, "p1")), "");
        assert_eq!(hook(&b.addr, &pre(&s, "p1", "Write")), "");
        assert_eq!(hook(&a.addr, &pre(&s, "p1", "WebFetch")), "");
        assert_eq!(hook(&b.addr, &pre(&s, "p1", "Write")), "deny", "{s}");
    }
    let hooks = cluster.counts("toolgate:h:*");
    assert!(hooks.iter().all(|n| *n > 0), "{hooks:?}");
}

/// A cluster URL with a database, or with no node, stops the server at start-up, naming
/// `--state`; TLS flags need the TLS form of it.
#[test]
fn a_bad_cluster_url_stops_the_server_with_a_clear_error() {
    let dir = temp_dir("cluster-bad-url");
    std::fs::write(dir.join("gate.gate"), POLICY).unwrap();
    let d = dir.to_str().unwrap();
    for (flags, says) in [
        (
            vec!["--state", "redis+cluster://127.0.0.1:7000/1"],
            "database 0 only",
        ),
        (
            vec!["--state", "redis+cluster://"],
            "at least one HOST:PORT",
        ),
        (
            vec!["--state", "redis+cluster://127.0.0.1:7000", "--state-ca", d],
            "rediss://",
        ),
    ] {
        let mut args = vec![d, "--addr", "127.0.0.1:0"];
        args.extend(flags.iter().copied());
        let (code, err) = serve_refused(&args);
        assert_eq!(code, Some(2), "{flags:?}: {err}");
        assert!(
            err.contains("--state") && err.contains(says),
            "{flags:?}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
