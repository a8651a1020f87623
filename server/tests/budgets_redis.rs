//! Budget counts under `--state redis` (issue 26), against a real `redis-server`: replicas on
//! one store share one count and never spend one remainder twice, windows slide on the
//! store's clock, a server restart keeps the counts, a store that is down denies as `state`,
//! a flushed store is detected for counts as it is for latches, a scope the request does not
//! identify denies, and a budget adds no round trip.
#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::redis_support::{redis_available, Redis};
use crate::support::{allowed, batch, decide, get, serve, Served};
use serde_json::json;
use std::time::Duration;
use toolgate_server::{RedisConfig, StoreTls};

/// A policy over the tools, stage and latch every budget test here shares, with `budgets`
/// (literals) after them.
macro_rules! shop {
    ($($budgets:literal),*) => {
        concat!(
            "module shop\nwrite refund, send, pay, note\ningest fetch\n",
            "stage main { tools [refund, send, pay, note, fetch] }\n",
            "latch tainted { set_by [fetch] blocks [send] }\n",
            $($budgets),*
        )
    };
}
pub(crate) use shop;

const SHOP: &str = shop!(
    "budget per_tenant for refund { sum args.amount <= 6 within 1h per tenant }\n",
    "budget per_session for send { count <= 3 per session }\n",
    "budget quick for pay { count <= 2 within 1s per principal }\n",
    "budget many for note { count <= 100000 within 1h per principal }\n"
);

/// The same tools without a budget: the round-trip baseline.
pub(crate) const PLAIN: &str = shop!();

async fn replica(redis: &Redis, policy: &str) -> Served {
    replica_on(redis.url(), policy).await
}

/// A replica serving `policy` with its turn state and counts in the store at `url`, which it
/// declares new (`--state-new`).
pub(crate) async fn replica_on(url: String, policy: &str) -> Served {
    serve(&[("shop.gate", policy)], move |c, _| {
        c.state = Some(RedisConfig {
            url,
            timeout: Duration::from_secs(2),
            prefix: "toolgate".into(),
            tls: StoreTls::default(),
            declared_new: true,
        });
    })
    .await
}

/// Runs `n` tasks at once, the i-th `each(i, app)` with the app of `a` for an even i and of
/// `b` for an odd one: their outputs, in order.
pub(crate) async fn concurrently<T, F>(
    a: &Served,
    b: &Served,
    n: usize,
    each: impl Fn(usize, axum::Router) -> F,
) -> Vec<T>
where
    T: Send + 'static,
    F: std::future::Future<Output = T> + Send + 'static,
{
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let app = if i % 2 == 0 { &a.app } else { &b.app };
            tokio::spawn(each(i, app.clone()))
        })
        .collect();
    let mut out = Vec::with_capacity(n);
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

/// A store for the test `tag` and one replica on it, with a first batch of `sub` that spends
/// 1 of the tenant's 6 (allowed: fails where counts are not kept); `None` without
/// `redis-server`.
async fn started(tag: &str, sub: &str) -> Option<(Redis, Served)> {
    if !redis_available() {
        return None;
    }
    let redis = Redis::start(tag, false);
    let shop = replica(&redis, SHOP).await;
    let d = decide(&shop.app, batch("s1", "t1", Some(sub), &[("refund", 1.0)])).await;
    assert_eq!(allowed(&d), [true], "{d:?}");
    Some((redis, shop))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_one_store_never_spend_one_remainder_twice() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("budget-replicas", false);
    let (a, b) = (replica(&redis, SHOP).await, replica(&redis, SHOP).await);
    let ran = concurrently(&a, &b, 20, |i, app| async move {
        let body = batch(&format!("s{i}"), "t1", Some("cara"), &[("refund", 1.0)]);
        decide(&app, body).await[0]["allow"] == true
    })
    .await
    .into_iter()
    .filter(|ran| *ran)
    .count();
    assert_eq!(ran, 6, "the tenant's 6 are spent once over both replicas");
    // One session's count, shared: three sends over both replicas, then none.
    let mut sends = Vec::new();
    for (i, app) in [&a.app, &b.app, &a.app, &b.app].into_iter().enumerate() {
        let d = decide(
            app,
            batch("shared", &format!("t{i}"), None, &[("send", 0.0)]),
        )
        .await;
        sends.push(d[0]["allow"] == true);
    }
    assert_eq!(sends, [true, true, true, false]);
}

#[tokio::test]
async fn a_window_slides_on_the_stores_clock() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("budget-window", false);
    let shop = replica(&redis, SHOP).await;
    let pays = [("pay", 0.0), ("pay", 0.0), ("pay", 0.0)];
    let d = decide(&shop.app, batch("s1", "t1", Some("ana"), &pays)).await;
    assert_eq!(allowed(&d), [true, true, false], "{d:?}");
    assert_eq!(d[2]["kind"], "budget");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let d = decide(&shop.app, batch("s1", "t2", Some("ana"), &pays)).await;
    assert_eq!(allowed(&d), [true, true, false], "the window slid: {d:?}");
}

#[tokio::test]
async fn a_server_restart_keeps_the_counts() {
    let Some((redis, first)) = started("budget-restart", "ana").await else {
        return;
    };
    let d = decide(
        &first.app,
        batch("s1", "t2", Some("ana"), &[("refund", 3.0)]),
    )
    .await;
    assert_eq!(allowed(&d), [true]);
    first.server.shutdown().await;
    let second = replica(&redis, SHOP).await;
    let d = decide(
        &second.app,
        batch("s2", "t1", Some("ana"), &[("refund", 3.0), ("refund", 2.0)]),
    )
    .await;
    assert_eq!(
        allowed(&d),
        [false, true],
        "4 of 6 were spent before: {d:?}"
    );
    let (_, health) = get(&second.app, "/health", None).await;
    assert_eq!(health["budgets"]["kept"], true, "{health}");
}

#[tokio::test]
async fn a_store_that_is_down_denies_budgeted_calls_as_state() {
    let Some((mut redis, shop)) = started("budget-down", "ana").await else {
        return;
    };
    redis.kill();
    let d = decide(
        &shop.app,
        json!({"facts": {"stage": "main", "principal": {"sub": "ana", "tenant": "acme"}},
               "calls": [{"id": "c", "tool": "refund", "args": {"amount": 1}}]}),
    )
    .await;
    assert_eq!(
        d[0]["kind"], "state",
        "no session: still judged from the store {d:?}"
    );
    let d = decide(
        &shop.app,
        batch("s1", "t2", Some("ana"), &[("refund", 1.0)]),
    )
    .await;
    assert_eq!(d[0]["allow"], false);
    assert_eq!(d[0]["kind"], "state", "{d:?}");
}

#[tokio::test]
async fn a_flushed_store_is_detected_for_counts_as_for_latches() {
    let Some((redis, shop)) = started("budget-flush", "ana").await else {
        return;
    };
    assert_eq!(redis.command(&["FLUSHALL"]).as_deref(), Some("+OK"));
    // The count is gone with the marker: not taken for zero, but for all of it.
    let d = decide(
        &shop.app,
        batch("s1", "t2", Some("ana"), &[("refund", 1.0)]),
    )
    .await;
    assert_eq!(allowed(&d), [false], "{d:?}");
    let d = decide(
        &shop.app,
        batch("s2", "t1", Some("ana"), &[("refund", 1.0)]),
    )
    .await;
    assert_eq!(allowed(&d), [false], "still within the window: {d:?}");
}

#[tokio::test]
async fn a_scope_the_request_does_not_identify_denies() {
    let Some((_redis, shop)) = started("budget-identity", "ana").await else {
        return;
    };
    let d = decide(&shop.app, batch("s1", "t2", None, &[("refund", 1.0)])).await;
    assert_eq!(allowed(&d), [false]);
    assert_eq!(d[0]["kind"], "budget");
    assert!(
        d[0]["reason"].as_str().unwrap().contains("not known"),
        "{d:?}"
    );
}

#[tokio::test]
async fn a_latch_carried_from_an_earlier_batch_is_judged_with_the_count() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("budget-latch", false);
    let (a, b) = (replica(&redis, SHOP).await, replica(&redis, SHOP).await);
    let d = decide(
        &a.app,
        batch("s1", "t1", None, &[("send", 0.0), ("send", 0.0)]),
    )
    .await;
    assert_eq!(allowed(&d), [true, true]);
    let d = decide(&b.app, batch("s1", "t2", None, &[("fetch", 0.0)])).await;
    assert_eq!(allowed(&d), [true]);
    // Turn t2 is latched: the send is blocked and consumes nothing.
    let d = decide(&a.app, batch("s1", "t2", None, &[("send", 0.0)])).await;
    assert_eq!(d[0]["kind"], "latch", "{d:?}");
    let d = decide(
        &b.app,
        batch("s1", "t3", None, &[("send", 0.0), ("send", 0.0)]),
    )
    .await;
    assert_eq!(allowed(&d), [true, false], "one of three left: {d:?}");
}

/// One budget over a tool a latch blocks and one it does not.
const SPAN: &str = r#"module shop
write refund, send
ingest fetch
stage main { tools [refund, send, fetch] }
latch tainted { set_by [fetch] blocks [send] }
budget spend for [send, refund] { sum args.amount <= 6 within 1h per tenant }
"#;

/// A batch whose counts wait for the turn's latches ("deferred") is judged again with the
/// counts the store answered, not with those this replica saw before: another replica spent
/// most of the tenant's 6 meanwhile.
#[tokio::test]
async fn a_deferred_batch_is_judged_with_the_stores_counts() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("budget-deferred", false);
    let (a, b) = (replica(&redis, SPAN).await, replica(&redis, SPAN).await);
    // Replica a sees the tenant's count at 0 and latches turn t1.
    let d = decide(&a.app, batch("s1", "t1", Some("ana"), &[("fetch", 0.0)])).await;
    assert_eq!(allowed(&d), [true]);
    let d = decide(&b.app, batch("s2", "t1", Some("bob"), &[("refund", 4.0)])).await;
    assert_eq!(allowed(&d), [true]);
    // Judged first with 0 and no latch: the send fits, the refund does not (2 + 5 > 6), and
    // 4 + 2 fits in the store, so the script lets it stand. The turn carries the latch, so
    // the counts wait for the judgement with it: the send is blocked, and the refund must be
    // judged against the 4 spent, not the 0 seen before.
    let d = decide(
        &a.app,
        batch("s1", "t1", Some("ana"), &[("send", 2.0), ("refund", 5.0)]),
    )
    .await;
    assert_eq!(allowed(&d), [false, false], "2 of 6 left: {d:?}");
    assert_eq!(d[0]["kind"], "latch", "{d:?}");
    assert_eq!(d[1]["kind"], "budget", "{d:?}");
    let d = decide(&b.app, batch("s3", "t1", Some("bob"), &[("refund", 2.0)])).await;
    assert_eq!(allowed(&d), [true], "2 of 6 left: {d:?}");
}

/// Two latches, and one budget over a tool the first blocks and a tool that sets the second.
const SETTER: &str = r#"module shop
write send, pay
read lookup
ingest fetch
stage main { tools [send, pay, lookup, fetch] }
latch tainted { set_by [fetch] blocks [send] }
latch looked { set_by [lookup] blocks [pay] }
budget once for [send, lookup] { count <= 1 per session }
"#;

/// A call the first judgement's budget denied may run once the turn's latches block an
/// earlier call of the batch; the latch it sets is in the store already, since a batch sets
/// the latches of all its setters, allowed or not (`docs/language.md`, "Pre-scan"), and the
/// exchange recorded them.
#[tokio::test]
async fn a_call_the_turns_latches_make_room_for_runs_and_its_latch_is_kept() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("budget-setter", false);
    let (a, b) = (replica(&redis, SETTER).await, replica(&redis, SETTER).await);
    let d = decide(&a.app, batch("s1", "t1", None, &[("fetch", 0.0)])).await;
    assert_eq!(allowed(&d), [true]);
    // First judged with no latch: the send takes the one, the lookup is over budget. With
    // the turn's latch the send is blocked, and the lookup fits.
    let d = decide(
        &a.app,
        batch("s1", "t1", None, &[("send", 0.0), ("lookup", 0.0)]),
    )
    .await;
    assert_eq!(allowed(&d), [false, true], "{d:?}");
    assert_eq!(d[0]["kind"], "latch", "{d:?}");
    let d = decide(&b.app, batch("s1", "t1", None, &[("pay", 0.0)])).await;
    assert_eq!(allowed(&d), [false], "the lookup latched the turn: {d:?}");
    assert_eq!(d[0]["rule"], "looked", "{d:?}");
    let d = decide(&b.app, batch("s1", "t2", None, &[("lookup", 0.0)])).await;
    assert_eq!(allowed(&d), [false], "the session's one is spent: {d:?}");
}

#[tokio::test]
async fn a_windows_history_is_capped_and_merges_its_oldest_forward() {
    let Some((redis, shop)) = started("budget-cap", "ana").await else {
        return;
    };
    // 4 096 entries of 1, stamped now by the store's clock, as the script writes them.
    let time: Vec<u64> = redis
        .cli(&["TIME"])
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    let ms = time[0] * 1000 + time[1] / 1000;
    let key = "toolgate:b:shop:many:principal:ana";
    let value = format!("{ms}|0|{}", format!("{ms}:1,").repeat(4096));
    assert_eq!(redis.cli(&["SET", key, &value]), "OK");
    let d = decide(&shop.app, batch("s2", "t1", Some("ana"), &[("note", 0.0)])).await;
    assert_eq!(allowed(&d), [true], "{d:?}");
    let stored = redis.cli(&["GET", key]);
    let entries: Vec<f64> = stored
        .split('|')
        .nth(2)
        .unwrap()
        .split_terminator(',')
        .map(|e| e.split(':').nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(entries.len(), 4096, "capped");
    assert_eq!(entries.iter().sum::<f64>(), 4097.0, "no amount lost");
    assert_eq!(entries[0], 2.0, "the oldest two merged");
    let ttl: i64 = redis.cli(&["PTTL", key]).parse().unwrap();
    assert!(
        ttl > 3_600_000 && ttl <= 3_660_000,
        "a window and a minute: {ttl}"
    );
}

/// The sum of `calls` of the script commands (`EVALSHA`, `EVAL`) in `INFO commandstats`: the
/// round trips batches made.
pub(crate) fn script_calls(redis: &Redis) -> u64 {
    redis
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

#[tokio::test]
async fn a_budget_adds_no_round_trip() {
    if !redis_available() {
        return;
    }
    const BATCHES: u64 = 20;
    let mut per_batch = Vec::new();
    for (tag, policy) in [("plain", PLAIN), ("budget", SHOP)] {
        let redis = Redis::start(&format!("budget-trips-{tag}"), false);
        let shop = replica(&redis, policy).await;
        // The first batch loads the script and reads the markers.
        decide(
            &shop.app,
            batch("warm", "t0", Some("ana"), &[("send", 0.0)]),
        )
        .await;
        let before = script_calls(&redis);
        let mut ran = 0;
        for i in 0..BATCHES {
            let d = decide(
                &shop.app,
                batch("s1", &format!("t{i}"), Some("ana"), &[("refund", 0.25)]),
            )
            .await;
            ran += u64::from(d[0]["allow"] == true);
        }
        assert_eq!(ran, BATCHES, "{tag}: 20 × 0.25 fits in 6");
        per_batch.push((script_calls(&redis) - before) as f64 / BATCHES as f64);
    }
    eprintln!(
        "script calls per batch: without a budget {}, with one {}",
        per_batch[0], per_batch[1]
    );
    assert_eq!(per_batch, [1.0, 1.0]);
}
