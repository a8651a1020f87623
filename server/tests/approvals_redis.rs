//! Approvals under `--state redis://...` and `redis+cluster://...` (issue 24), against a real
//! `redis-server` and a real three-shard cluster: an ask made on one replica is listed and
//! answered on another and used by either, once; two replicas racing for one approval use it
//! once; approvals and waiting asks expire on the store's clock; a store that is down
//! records and uses nothing (the call stays an ask, the approval routes answer 503); a
//! flushed store forgets approvals, and one restored from a snapshot taken before an
//! approval was used never gives it back; a batch that asks nothing costs no round trip more.
#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::approvals::{asked, SHOP};
use crate::budgets_redis::{replica_on, script_calls};
use crate::redis_support::{redis_available, Redis, RedisCluster};
use crate::support::{decide, get, log_lines, post, serve, Served};
use axum::http::StatusCode;
use axum::Router;
use serde_json::{json, Value};
use std::time::Duration;
use toolgate_server::{RedisConfig, StoreTls};

/// [`SHOP`] with approvals valid for one second.
fn shop_for_a_second() -> String {
    format!("{SHOP}approvals {{ valid_for 1s }}\n")
}

/// A batch of refunds (by amount) in `session`, turn `t1`.
fn refunds(session: &str, amounts: &[f64]) -> Value {
    let calls: Vec<Value> = amounts
        .iter()
        .enumerate()
        .map(|(i, a)| json!({"id": format!("c{i}"), "tool": "refund", "args": {"amount": a, "order": "A-17"}}))
        .collect();
    json!({"session": session, "turn": "t1", "facts": {"stage": "main"}, "calls": calls})
}

/// `POST /v1/approvals`: `decision` ("approve" or "reject") of `digest` in `session`.
async fn answer(app: &Router, session: &str, digest: &str, decision: &str) -> (StatusCode, Value) {
    post(
        app,
        "/v1/approvals",
        None,
        json!({"session": session, "approval": digest, "decision": decision, "approver": "dana"}),
    )
    .await
}

/// `GET /v1/approvals?session=SESSION`: the status and the asks listed.
async fn waiting(app: &Router, session: &str) -> (StatusCode, Value) {
    get(app, &format!("/v1/approvals?session={session}"), None).await
}

/// Two replicas of `policy` on the store at `url`.
async fn replicas(url: String, policy: &str) -> (Served, Served) {
    (
        replica_on(url.clone(), policy).await,
        replica_on(url, policy).await,
    )
}

/// A replica of `policy` on the store at `url` whose sessions last a second, and a second
/// more once latched: a store loss then judges turns latched for two seconds
/// ([`LOSS_PASSED`] is well past them), where the default is 25 hours.
async fn quick_replica(url: String, policy: &str) -> Served {
    serve(&[("shop.gate", policy)], move |c, _| {
        c.state = Some(RedisConfig {
            url,
            timeout: Duration::from_secs(2),
            prefix: "toolgate".into(),
            tls: StoreTls::default(),
            declared_new: true,
        });
        c.sessions.ttl = Duration::from_secs(1);
        c.sessions.keep_expired = Duration::from_secs(1);
    })
    .await
}

/// Well past the two seconds a loss judges turns latched for on a [`quick_replica`].
const LOSS_PASSED: Duration = Duration::from_millis(3500);

/// Waits until `served` reaches the store again (its connection comes back by itself).
async fn wait_up(served: &Served) {
    let mut up = false;
    for _ in 0..100 {
        up = get(&served.app, "/health", None).await.1["state"]["up"] == true;
        if up {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "the replica never reached the store again");
}

/// Once a loss has passed (the approval given before it is gone): the call asks again on
/// replica `a`, that new ask is approved on `b` and runs once there.
async fn after_the_loss(a: &Served, b: &Served, digest: &str) {
    tokio::time::sleep(LOSS_PASSED).await;
    assert_eq!(
        asked(&decide(&a.app, refunds("s1", &[120.0])).await[0]),
        digest
    );
    // An ask recorded after the loss was seen is trusted: answered, it runs once.
    let (status, e) = answer(&b.app, "s1", digest, "approve").await;
    assert_eq!(status, StatusCode::OK, "{e}");
    let ran = decide(&b.app, refunds("s1", &[120.0])).await;
    assert_eq!(ran[0]["allow"], true, "{ran:?}");
    asked(&decide(&a.app, refunds("s1", &[120.0])).await[0]);
}

/// Two [`quick_replica`]s.
async fn quick_replicas(url: String, policy: &str) -> (Served, Served) {
    (
        quick_replica(url.clone(), policy).await,
        quick_replica(url, policy).await,
    )
}

#[tokio::test]
async fn an_ask_made_on_one_replica_is_approved_on_another_and_used_once() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("approvals-replicas", false);
    let (a, b) = replicas(redis.url(), SHOP).await;
    let digest = asked(&decide(&a.app, refunds("s1", &[120.0])).await[0]);

    // Listed on the other replica, with what a person needs to judge it.
    let (status, list) = waiting(&b.app, "s1").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let asks = list["asks"].as_array().unwrap();
    assert_eq!(asks.len(), 1, "{list}");
    assert_eq!(asks[0]["approval"], digest.as_str());
    assert_eq!(asks[0]["tool"], "refund");
    assert_eq!(asks[0]["rule"], "refunds");
    assert_eq!(asks[0]["call_id"], "c0");
    assert_eq!(asks[0]["turn"], "t1");
    assert_eq!(asks[0]["args"], json!({"amount": 120.0, "order": "A-17"}));
    assert!(asks[0]["asked_at_ms"].as_u64().unwrap() > 0, "{list}");
    let left = asks[0]["expires_in_ms"].as_u64().unwrap();
    assert!(left > 0 && left <= 600_000, "{left}");

    let (status, answered) = answer(&b.app, "s1", &digest, "approve").await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    assert_eq!(answered["granted"], true);
    assert_eq!(answered["expires_in_ms"], 600_000);
    assert_eq!(waiting(&a.app, "s1").await.1["asks"], json!([]));

    // The asking replica uses it, once; the other then asks again.
    let ran = decide(&a.app, refunds("s1", &[120.0])).await;
    assert_eq!(ran[0]["allow"], true, "{ran:?}");
    assert_eq!(ran[0]["approval"], digest.as_str());
    assert_eq!(
        asked(&decide(&b.app, refunds("s1", &[120.0])).await[0]),
        digest
    );
    // And the other way round: asked on a, approved on a, used on b.
    let (status, _) = answer(&a.app, "s1", &digest, "approve").await;
    assert_eq!(status, StatusCode::OK);
    let ran = decide(&b.app, refunds("s1", &[120.0])).await;
    assert_eq!(ran[0]["allow"], true, "{ran:?}");
    asked(&decide(&a.app, refunds("s1", &[120.0])).await[0]);
    // An answer to what no longer waits is refused on every replica.
    let (status, e) = answer(&b.app, "s2", &digest, "approve").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{e}");

    let (_, health) = get(&b.app, "/health", None).await;
    assert_eq!(health["approvals"]["store"], "redis", "{health}");
    assert_eq!(health["approvals"]["ask"], "deny", "{health}");

    // The answer is logged by the replica that took it, naming the approver.
    drop(a);
    let lines = log_lines(b).await;
    let answers: Vec<&Value> = lines.iter().filter(|l| l["event"] == "approval").collect();
    assert_eq!(answers.len(), 1, "{lines:?}");
    assert_eq!(answers[0]["approver"], "dana");
    assert_eq!(answers[0]["granted"], true);
    assert_eq!(answers[0]["approval"], digest.as_str());
    assert_eq!(answers[0]["tool"], "refund");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_racing_for_one_approval_use_it_once() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("approvals-race", false);
    let (a, b) = replicas(redis.url(), SHOP).await;
    for round in 0..20 {
        let amount = 100.0 + f64::from(round);
        let digest = asked(&decide(&a.app, refunds("s1", &[amount])).await[0]);
        let (status, e) = answer(&b.app, "s1", &digest, "approve").await;
        assert_eq!(status, StatusCode::OK, "{e}");
        let (x, y) = tokio::join!(
            tokio::spawn({
                let app = a.app.clone();
                async move { decide(&app, refunds("s1", &[amount])).await }
            }),
            tokio::spawn({
                let app = b.app.clone();
                async move { decide(&app, refunds("s1", &[amount])).await }
            }),
        );
        let (x, y) = (x.unwrap(), y.unwrap());
        let ran = [&x[0], &y[0]].iter().filter(|d| d["allow"] == true).count();
        assert_eq!(ran, 1, "round {round}: {x:?} {y:?}");
    }
}

/// [`SHOP`] with a latch that blocks refunds once a turn fetched.
const LATCHED: &str = r#"module shop
write refund
ingest fetch
stage main { tools [refund, fetch] }
latch tainted { set_by [fetch] blocks [refund] }
rule refunds for refund {
  require args.amount is number and args.amount <= 500
  ask when args.amount > 50
}
"#;

/// An approval taken by a batch that then does not use it goes back to the store: here the
/// batch is judged first with its own latches only, takes the approval its ask names, and is
/// judged again with the latch its turn carries from another replica, which blocks the call.
#[tokio::test]
async fn an_approval_a_batch_took_and_did_not_use_goes_back() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("approvals-back", false);
    let (a, b) = replicas(redis.url(), LATCHED).await;
    let digest = asked(&decide(&a.app, refunds("s1", &[120.0])).await[0]);
    answer(&b.app, "s1", &digest, "approve").await;
    let fetch = json!({"session": "s1", "turn": "t1", "facts": {"stage": "main"},
                       "calls": [{"id": "f", "tool": "fetch"}]});
    assert_eq!(decide(&b.app, fetch).await[0]["allow"], true);
    let d = decide(&a.app, refunds("s1", &[120.0])).await;
    assert_eq!(d[0]["allow"], false, "{d:?}");
    assert_eq!(d[0]["kind"], "latch", "{d:?}");
    assert_eq!(
        redis.cli(&["HEXISTS", "toolgate:a:{s1}", &format!("g:{digest}")]),
        "1",
        "the approval is back in the store"
    );
}

#[tokio::test]
async fn approvals_and_waiting_asks_expire_on_the_stores_clock() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("approvals-expiry", false);
    let (a, b) = replicas(redis.url(), &shop_for_a_second()).await;
    let digest = asked(&decide(&a.app, refunds("s1", &[120.0])).await[0]);
    let (_, answered) = answer(&b.app, "s1", &digest, "approve").await;
    assert_eq!(answered["expires_in_ms"], 1000, "{answered}");
    // Well past the window: the approval is gone, and the call asks again.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    asked(&decide(&b.app, refunds("s1", &[120.0])).await[0]);
    assert_eq!(
        waiting(&a.app, "s1").await.1["asks"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (status, list) = waiting(&a.app, "s1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["asks"], json!([]), "{list}");
    let (status, _) = answer(&a.app, "s1", &digest, "approve").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The store drops the keys itself once nothing in them can be used.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(redis.cli(&["EXISTS", "toolgate:a:{s1}"]), "0");
}

#[tokio::test]
async fn a_store_that_is_down_records_and_uses_no_approval() {
    if !redis_available() {
        return;
    }
    let mut redis = Redis::start("approvals-down", false);
    let (a, b) = quick_replicas(redis.url(), SHOP).await;
    let digest = asked(&decide(&a.app, refunds("s1", &[120.0])).await[0]);
    answer(&b.app, "s1", &digest, "approve").await;
    redis.kill();
    // Never an allow: the call stays an ask.
    let d = decide(&a.app, refunds("s1", &[120.0])).await;
    assert_eq!(asked(&d[0]), digest);
    let (status, e) = answer(&b.app, "s1", &digest, "approve").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{e}");
    assert_eq!(e["error"]["code"], "approvals_unavailable", "{e}");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("store"),
        "{e}"
    );
    let (status, e) = waiting(&b.app, "s1").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{e}");
    assert_eq!(e["error"]["code"], "approvals_unavailable", "{e}");
    let (_, health) = get(&a.app, "/health", None).await;
    assert_eq!(health["approvals"]["store"], "redis", "{health}");
    assert_eq!(health["approvals"]["up"], false, "{health}");
    // Back up, empty: a loss, so every turn is judged latched for a while (in this policy
    // with no latch, every call of a turn is denied as `state`), and the approval is lost.
    redis.restart();
    wait_up(&a).await;
    let d = decide(&a.app, refunds("s1", &[120.0])).await;
    assert_eq!(d[0]["allow"], false, "{d:?}");
    after_the_loss(&a, &b, &digest).await;
}

#[tokio::test]
async fn a_flushed_store_forgets_approvals() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("approvals-flush", false);
    let (a, b) = quick_replicas(redis.url(), SHOP).await;
    let digest = asked(&decide(&a.app, refunds("s1", &[120.0])).await[0]);
    answer(&b.app, "s1", &digest, "approve").await;
    assert_eq!(redis.command(&["FLUSHALL"]).as_deref(), Some("+OK"));
    let d = decide(&a.app, refunds("s1", &[120.0])).await;
    assert_eq!(d[0]["allow"], false, "{d:?}");
    after_the_loss(&a, &b, &digest).await;
}

/// A restart from a snapshot taken before an approval was used would hold it again: the
/// store went back in time, which the slot's marker shows to a replica that saw it later,
/// and an approval recorded before the loss was seen is refused, also once the loss's
/// horizon for turns has passed.
#[tokio::test]
async fn a_store_restored_from_a_snapshot_never_gives_a_used_approval_back() {
    if !redis_available() {
        return;
    }
    let mut redis = Redis::start("approvals-snapshot", false);
    let (a, b) = quick_replicas(redis.url(), SHOP).await;
    let digest = asked(&decide(&a.app, refunds("s1", &[120.0])).await[0]);
    answer(&b.app, "s1", &digest, "approve").await;
    // Another approval, waiting to be used after the restore: lost with the loss (a denial).
    let other = asked(&decide(&a.app, refunds("s1", &[140.0])).await[0]);
    answer(&b.app, "s1", &other, "approve").await;
    assert_eq!(redis.command(&["SAVE"]).as_deref(), Some("+OK"));
    let ran = decide(&a.app, refunds("s1", &[120.0])).await;
    assert_eq!(ran[0]["allow"], true, "{ran:?}");
    // Replica b judges another session after the use: it has seen the store since.
    decide(&b.app, refunds("s2", &[10.0])).await;
    redis.kill();
    redis.restart();
    assert_eq!(
        redis.cli(&["HEXISTS", "toolgate:a:{s1}", &format!("g:{digest}")]),
        "1",
        "the snapshot holds the used approval again"
    );
    // Replica b's next batch, of any session, sees the store went back.
    wait_up(&b).await;
    let d = decide(&b.app, refunds("s9", &[10.0])).await;
    assert_eq!(d[0]["allow"], false, "{d:?}");
    tokio::time::sleep(LOSS_PASSED).await;
    assert_eq!(
        asked(&decide(&b.app, refunds("s1", &[120.0])).await[0]),
        digest
    );
    assert_eq!(
        asked(&decide(&a.app, refunds("s1", &[120.0])).await[0]),
        digest
    );
    assert_eq!(
        asked(&decide(&a.app, refunds("s1", &[140.0])).await[0]),
        other
    );
    // The asks just made were recorded after the loss was seen: they can be approved.
    let (status, e) = answer(&b.app, "s1", &digest, "approve").await;
    assert_eq!(status, StatusCode::OK, "{e}");
    assert_eq!(
        decide(&a.app, refunds("s1", &[120.0])).await[0]["allow"],
        true
    );
}

/// Script calls per batch: one for a batch that asks nothing (its turn state), and the
/// approvals' own only for a batch that asks.
#[tokio::test]
async fn a_batch_that_asks_nothing_costs_no_round_trip_more() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("approvals-trips", false);
    let (a, b) = replicas(redis.url(), SHOP).await;
    decide(&a.app, refunds("warm", &[120.0])).await;
    let digest = asked(&decide(&a.app, refunds("warm", &[130.0])).await[0]);
    answer(&b.app, "warm", &digest, "approve").await;
    decide(&a.app, refunds("warm", &[130.0])).await;
    let trips = |body: Value| {
        let app = a.app.clone();
        let redis = &redis;
        async move {
            let before = script_calls(redis);
            let d = decide(&app, body).await;
            (script_calls(redis) - before, d)
        }
    };
    let (plain, d) = trips(refunds("s1", &[20.0])).await;
    assert_eq!(d[0]["allow"], true);
    let (asking, d) = trips(refunds("s1", &[120.0])).await;
    let digest = asked(&d[0]);
    answer(&b.app, "s1", &digest, "approve").await;
    let (approved, d) = trips(refunds("s1", &[120.0])).await;
    assert_eq!(d[0]["allow"], true, "{d:?}");
    eprintln!(
        "script calls: no ask {plain}, an ask that waits {asking}, an approved ask {approved}"
    );
    assert_eq!((plain, asking, approved), (1, 3, 2));
}

/// The same on a real three-shard cluster: the session's approvals live in one slot (its
/// hash tag), any replica lists, answers and uses them, and a race uses one approval once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_an_approval_is_shared_and_used_once() {
    if !redis_available() {
        return;
    }
    let cluster = RedisCluster::start("approvals-cluster", 3);
    let (a, b) = replicas(cluster.url(), SHOP).await;
    let mut holders = Vec::new();
    for round in 0..20 {
        let session = format!("s{round}");
        let amount = 100.0 + f64::from(round);
        let digest = asked(&decide(&a.app, refunds(&session, &[amount])).await[0]);
        let (status, list) = waiting(&b.app, &session).await;
        assert_eq!(status, StatusCode::OK, "{list}");
        assert_eq!(list["asks"][0]["approval"], digest.as_str(), "{list}");
        let key = format!("toolgate:a:{{{session}}}");
        let holder = cluster
            .holder(&key)
            .expect("the session's approvals are kept");
        assert_eq!(cluster.holder(&format!("{key}:asks")), Some(holder));
        holders.push(holder);
        let (status, e) = answer(&b.app, &session, &digest, "approve").await;
        assert_eq!(status, StatusCode::OK, "{e}");
        let (x, y) = tokio::join!(
            tokio::spawn({
                let (app, s) = (a.app.clone(), session.clone());
                async move { decide(&app, refunds(&s, &[amount])).await }
            }),
            tokio::spawn({
                let (app, s) = (b.app.clone(), session.clone());
                async move { decide(&app, refunds(&s, &[amount])).await }
            }),
        );
        let (x, y) = (x.unwrap(), y.unwrap());
        let ran = [&x[0], &y[0]].iter().filter(|d| d["allow"] == true).count();
        assert_eq!(ran, 1, "round {round}: {x:?} {y:?}");
    }
    holders.sort_unstable();
    holders.dedup();
    assert_eq!(holders.len(), 3, "sessions' approvals over every shard");
}
