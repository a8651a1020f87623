//! Budget counts under `--state redis+cluster://...` (issue 26 on issue 20's cluster), against a
//! real three-shard Redis Cluster: a session's and a turn's counts ride in the session's one
//! script, a principal's and a tenant's live in slots of their own (another shard, checked and
//! consumed there), replicas never spend one remainder twice across shards, a shard that is
//! down denies as `state`, and a flushed shard's counts are taken as spent.
#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::budgets_redis::{self, concurrently, replica_on, shop, PLAIN};
use crate::redis_support::{redis_available, RedisCluster};
use crate::support::{allowed, batch, decide, get, Served};
use serde_json::json;

const SHOP: &str = shop!(
    "budget per_tenant for refund { sum args.amount <= 6 within 1h per tenant }\n",
    "budget per_session for send { count <= 3 per session }\n",
    "budget per_turn for note { count <= 2 per turn }\n",
    "budget by_principal for pay { count <= 4 within 1h per principal }\n"
);

/// Budgets of a session only: they must add no round trip.
const SESSION_ONLY: &str = shop!(
    "budget per_session for send { count <= 1000 per session }\n",
    "budget per_turn for note { count <= 1000 per turn }\n"
);

/// A principal's budget: one more round trip, to the principal's slot.
const PRINCIPAL: &str = shop!(
    "budget per_session for send { count <= 1000 per session }\n",
    "budget by_principal for pay { count <= 1000 within 1h per principal }\n"
);

async fn replica(cluster: &RedisCluster, policy: &str) -> Served {
    replica_on(cluster.url(), policy).await
}

/// A three-shard cluster for the test `tag` and one replica of [`SHOP`] on it; `None` without
/// `redis-server`.
async fn started(tag: &str) -> Option<(RedisCluster, Served)> {
    if !redis_available() {
        return None;
    }
    let cluster = RedisCluster::start(tag, 3);
    let shop = replica(&cluster, SHOP).await;
    Some((cluster, shop))
}

/// The key of session `s`'s count of budget `budget` (module `shop`, default prefix): under
/// the session's hash tag.
fn session_count(budget: &str, s: &str) -> String {
    format!("toolgate:b:{}:{{shop:{s}}}:{budget}:session:{s}", s.len())
}

/// The key of principal `sub`'s count of budget `budget`: under a hash tag of its own.
fn principal_count(budget: &str, sub: &str) -> String {
    format!("toolgate:b:{{shop:{budget}:principal:{sub}}}")
}

/// The key of session `s`'s turn state.
fn session_key(s: &str) -> String {
    format!("toolgate:s:{{shop:{s}}}")
}

/// The cluster slot of `key`, as the cluster computes it.
fn slot(cluster: &RedisCluster, key: &str) -> u16 {
    cluster.nodes[0]
        .cli(&["CLUSTER", "KEYSLOT", key])
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_one_cluster_never_spend_one_remainder_twice() {
    if !redis_available() {
        return;
    }
    let cluster = RedisCluster::start("budget-cluster-replicas", 3);
    let (a, b) = (replica(&cluster, SHOP).await, replica(&cluster, SHOP).await);
    // Per tenant and per principal, over 20 sessions on every shard: both counts in slots of
    // their own, checked and consumed there after the session's script.
    let ran = concurrently(&a, &b, 20, |i, app| async move {
        let body = batch(
            &format!("s{i}"),
            "t1",
            Some("cara"),
            &[("refund", 1.0), ("pay", 0.0)],
        );
        allowed(&decide(&app, body).await)
    })
    .await;
    let refunds = ran.iter().filter(|d| d[0]).count();
    let pays = ran.iter().filter(|d| d[1]).count();
    assert_eq!(
        refunds, 6,
        "the tenant's 6 are spent once over both replicas"
    );
    assert_eq!(
        pays, 4,
        "the principal's 4 are spent once over both replicas"
    );
    // One session's count and one turn's, shared: concurrent batches over both replicas.
    let ran = concurrently(&a, &b, 10, |i, app| async move {
        let send = batch("shared", &format!("t{i}"), None, &[("send", 0.0)]);
        let note = batch("shared", "one", None, &[("note", 0.0)]);
        (
            allowed(&decide(&app, send).await)[0],
            allowed(&decide(&app, note).await)[0],
        )
    })
    .await;
    let sends = ran.iter().filter(|(send, _)| *send).count();
    let notes = ran.iter().filter(|(_, note)| *note).count();
    assert_eq!(sends, 3, "the session's 3 sends over both replicas");
    assert_eq!(notes, 2, "the turn's 2 notes over both replicas");
    let (_, health) = get(&b.app, "/health", None).await;
    assert_eq!(health["budgets"]["kept"], true, "{health}");
}

#[tokio::test]
async fn a_principals_count_lives_in_its_own_slot_and_a_sessions_beside_the_session() {
    let Some((cluster, shop)) = started("budget-cluster-slots").await else {
        return;
    };
    let d = decide(
        &shop.app,
        batch("s1", "t1", Some("ana"), &[("send", 0.0), ("pay", 0.0)]),
    )
    .await;
    assert_eq!(allowed(&d), [true, true], "{d:?}");
    let (session, count) = (session_key("s1"), session_count("per_session", "s1"));
    assert_eq!(slot(&cluster, &count), slot(&cluster, &session));
    assert_eq!(cluster.holder(&count), cluster.holder(&session));
    assert!(
        cluster.holder(&count).is_some(),
        "the session's count is kept"
    );
    // Principals' counts spread over the shards, each apart from the session's slot.
    let mut holders = Vec::new();
    for i in 0..12 {
        let sub = format!("p{i}");
        let d = decide(
            &shop.app,
            batch("s1", &format!("t{}", i + 2), Some(&sub), &[("pay", 0.0)]),
        )
        .await;
        assert_eq!(allowed(&d), [true], "{d:?}");
        let key = principal_count("by_principal", &sub);
        assert_ne!(slot(&cluster, &key), slot(&cluster, &session));
        holders.push(cluster.holder(&key).expect("the principal's count is kept"));
    }
    let session_holder = cluster.holder(&session).unwrap();
    assert!(
        holders.iter().any(|h| *h != session_holder),
        "some principal's count is on another shard than the session: {holders:?}"
    );
    let mut shards = holders.clone();
    shards.sort_unstable();
    shards.dedup();
    assert_eq!(shards.len(), 3, "over every shard: {holders:?}");
}

/// The script calls (`EVALSHA`, `EVAL`) of each shard: the round trips batches made there.
fn script_calls(cluster: &RedisCluster) -> Vec<u64> {
    cluster
        .nodes
        .iter()
        .map(budgets_redis::script_calls)
        .collect()
}

/// Script calls per batch of `calls` in session s1 by principal `sub`, on each shard, over 20
/// batches: the first (not counted) loads the scripts on the shards the measured ones use.
async fn trips(
    cluster: &RedisCluster,
    shop: &Served,
    sub: &str,
    calls: &[(&str, f64)],
) -> Vec<f64> {
    const BATCHES: u64 = 20;
    let warm = format!("warm{}", calls.len());
    decide(&shop.app, batch("s1", &warm, Some(sub), calls)).await;
    let before = script_calls(cluster);
    for i in 0..BATCHES {
        let turn = format!("t{}-{i}", calls.len());
        let d = decide(&shop.app, batch("s1", &turn, Some(sub), calls)).await;
        assert!(allowed(&d).iter().all(|a| *a), "every batch fits: {d:?}");
    }
    script_calls(cluster)
        .into_iter()
        .zip(before)
        .map(|(after, before)| (after - before) as f64 / BATCHES as f64)
        .collect()
}

#[tokio::test]
async fn a_sessions_budget_adds_no_round_trip_and_a_principals_one() {
    if !redis_available() {
        return;
    }
    let all = [("send", 0.0), ("note", 0.0), ("pay", 0.0)];
    for (tag, policy) in [
        ("plain", PLAIN),
        ("session", SESSION_ONLY),
        ("principal", PRINCIPAL),
    ] {
        let cluster = RedisCluster::start(&format!("budget-cluster-trips-{tag}"), 3);
        let shop = replica(&cluster, policy).await;
        let sub = sub_apart(&cluster, "s1");
        // One script on the session's shard per batch, and one on the principal's (another
        // one) when its count is read.
        let expected = |principal: bool| {
            let mut per_shard = vec![0.0; cluster.nodes.len()];
            per_shard[owner(&cluster, &session_key("s1"))] += 1.0;
            if principal {
                per_shard[owner(&cluster, &principal_count("by_principal", &sub))] += 1.0;
            }
            per_shard
        };
        let measured = trips(&cluster, &shop, &sub, &all).await;
        eprintln!("script calls per batch and shard on a cluster, {tag}: {measured:?}");
        assert_eq!(measured, expected(tag == "principal"), "{tag}");
        if tag == "principal" {
            // No call the principal's budget counts: its count is not read.
            let measured = trips(&cluster, &shop, &sub, &all[..2]).await;
            eprintln!("the same, no call the principal's budget counts: {measured:?}");
            assert_eq!(measured, expected(false), "{tag}, not counted");
        }
    }
}

/// The index of the node that serves the slot of `key`.
fn owner(cluster: &RedisCluster, key: &str) -> usize {
    let slot = slot(cluster, key);
    cluster.nodes.iter().position(|n| owns(n, slot)).unwrap()
}

/// A sub whose `by_principal` count is on another shard than session `s`'s keys.
fn sub_apart(cluster: &RedisCluster, s: &str) -> String {
    let home = owner(cluster, &session_key(s));
    (0..)
        .map(|i| format!("sub{i}"))
        .find(|sub| owner(cluster, &principal_count("by_principal", sub)) != home)
        .unwrap()
}

/// Whether `node` serves `slot` (`CLUSTER NODES`, its own line: `myself`).
fn owns(node: &crate::redis_support::Redis, slot: u16) -> bool {
    let nodes = node.cli(&["CLUSTER", "NODES"]);
    let Some(me) = nodes.lines().find(|l| l.contains("myself")) else {
        return false;
    };
    me.split_whitespace().skip(8).any(|range| {
        let mut ends = range.split('-').map(|n| n.parse::<u16>());
        match (ends.next(), ends.next()) {
            (Some(Ok(a)), Some(Ok(b))) => (a..=b).contains(&slot),
            (Some(Ok(a)), None) => a == slot,
            _ => false,
        }
    })
}

/// One pay of session s1 (turn t1) by a principal whose `by_principal` count is on another
/// shard than the session's keys: the principal, and the node that holds its count.
async fn paid_apart(cluster: &RedisCluster, shop: &Served) -> (String, usize) {
    let sub = sub_apart(cluster, "s1");
    let d = decide(&shop.app, batch("s1", "t1", Some(&sub), &[("pay", 0.0)])).await;
    assert_eq!(allowed(&d), [true], "{d:?}");
    let holder = cluster
        .holder(&principal_count("by_principal", &sub))
        .unwrap();
    (sub, holder)
}

#[tokio::test]
async fn a_shard_down_denies_budgeted_calls_as_state() {
    let Some((mut cluster, shop)) = started("budget-cluster-down").await else {
        return;
    };
    let (sub, holder) = paid_apart(&cluster, &shop).await;
    cluster.nodes[holder].kill();
    let d = decide(&shop.app, batch("s1", "t2", Some(&sub), &[("pay", 0.0)])).await;
    assert_eq!(allowed(&d), [false], "{d:?}");
    assert_eq!(d[0]["kind"], "state", "{d:?}");
    // With no session too: the principal's count alone.
    let d = decide(
        &shop.app,
        json!({"facts": {"stage": "main", "principal": {"sub": sub, "tenant": "acme"}},
               "calls": [{"id": "c", "tool": "pay", "args": {}}]}),
    )
    .await;
    assert_eq!(d[0]["kind"], "state", "{d:?}");
}

#[tokio::test]
async fn a_flushed_shard_takes_its_principals_counts_as_spent() {
    let Some((cluster, shop)) = started("budget-cluster-flush").await else {
        return;
    };
    let (sub, holder) = paid_apart(&cluster, &shop).await;
    // Another principal, whose count is on a shard that keeps its data.
    let other = (0..)
        .map(|i| format!("kept{i}"))
        .find(|s| {
            let k = principal_count("by_principal", s);
            !owns(&cluster.nodes[holder], slot(&cluster, &k))
        })
        .unwrap();
    let d = decide(
        &shop.app,
        batch("s1", "t2", Some(&other), &[("pay", 0.0), ("pay", 0.0)]),
    )
    .await;
    assert_eq!(allowed(&d), [true, true], "{d:?}");
    assert_eq!(
        cluster.nodes[holder].command(&["FLUSHALL"]).as_deref(),
        Some("+OK")
    );
    // The count is gone with the shard's marker: not taken for zero, but for all of it.
    let d = decide(&shop.app, batch("s1", "t3", Some(&sub), &[("pay", 0.0)])).await;
    assert_eq!(allowed(&d), [false], "{d:?}");
    assert_eq!(d[0]["kind"], "budget", "{d:?}");
    // The other principal's count is exact: 2 of 4 spent.
    let d = decide(
        &shop.app,
        batch(
            "s1",
            "t4",
            Some(&other),
            &[("pay", 0.0), ("pay", 0.0), ("pay", 0.0)],
        ),
    )
    .await;
    assert_eq!(allowed(&d), [true, true, false], "{d:?}");
}
