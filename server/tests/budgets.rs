//! The server as the keeper of budget counts (issue 26), in-process: a budget over batches
//! starts from what earlier batches consumed, per session, turn, principal or tenant, and in a
//! sliding window; concurrent batches never spend one remainder twice; a request cannot bring
//! its own counts; a scope the request does not identify, or a shared turn-state store,
//! denies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::{allowed, batch, decide, get, log_lines, post, serve, Served};
use axum::http::StatusCode;
use serde_json::json;

const SHOP: &str = r#"module shop
write refund, send
stage main { tools [refund, send] }
budget daily for refund { sum args.amount <= 500 within 2s per principal }
budget per_session for send { count <= 3 per session }
budget per_turn for send { count <= 2 per turn }
budget per_tenant for refund { count <= 6 within 1h per tenant }
"#;

async fn shop() -> Served {
    serve(&[("shop.gate", SHOP)], |_, _| {}).await
}

#[tokio::test]
async fn a_principals_daily_budget_spans_sessions_and_frees_up_as_the_window_slides() {
    let shop = shop().await;
    let app = &shop.app;
    let d = decide(app, batch("s1", "t1", Some("ana"), &[("refund", 300.0)])).await;
    assert_eq!(allowed(&d), [true]);
    // Another session of the same principal: 200 left, so 250 is refused and 200 runs.
    let d = decide(
        app,
        batch(
            "s2",
            "t1",
            Some("ana"),
            &[("refund", 250.0), ("refund", 200.0)],
        ),
    )
    .await;
    assert_eq!(allowed(&d), [false, true], "{d:?}");
    assert_eq!(d[0]["kind"], "budget");
    assert_eq!(d[0]["rule"], "daily");
    assert!(
        d[0]["reason"]
            .as_str()
            .unwrap()
            .contains("200 of 500 left per principal"),
        "{d:?}"
    );
    // Another principal has its own count.
    let d = decide(app, batch("s3", "t1", Some("ben"), &[("refund", 500.0)])).await;
    assert_eq!(allowed(&d), [true]);
    let d = decide(app, batch("s1", "t2", Some("ana"), &[("refund", 1.0)])).await;
    assert_eq!(allowed(&d), [false]);
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let d = decide(app, batch("s1", "t3", Some("ana"), &[("refund", 500.0)])).await;
    assert_eq!(
        allowed(&d),
        [true],
        "the window slid past the first refunds: {d:?}"
    );
}

#[tokio::test]
async fn session_and_turn_counts_are_kept_and_a_new_turn_starts_its_own() {
    let shop = shop().await;
    let app = &shop.app;
    let d = decide(
        app,
        batch(
            "s1",
            "t1",
            None,
            &[("send", 0.0), ("send", 0.0), ("send", 0.0)],
        ),
    )
    .await;
    assert_eq!(allowed(&d), [true, true, false]);
    assert_eq!(d[2]["rule"], "per_turn");
    // A new turn: the turn's count starts again, the session's does not (2 of 3 used).
    let d = decide(
        app,
        batch("s1", "t2", None, &[("send", 0.0), ("send", 0.0)]),
    )
    .await;
    assert_eq!(allowed(&d), [true, false]);
    assert_eq!(d[1]["rule"], "per_session");
    let d = decide(app, batch("s2", "t1", None, &[("send", 0.0)])).await;
    assert_eq!(allowed(&d), [true], "another session counts on its own");
}

#[tokio::test]
async fn a_denied_call_consumes_nothing_across_batches() {
    let shop = shop().await;
    let app = &shop.app;
    let d = decide(app, batch("s1", "t1", Some("ana"), &[("refund", 600.0)])).await;
    assert_eq!(allowed(&d), [false]);
    let d = decide(app, batch("s1", "t1", Some("ana"), &[("refund", 500.0)])).await;
    assert_eq!(allowed(&d), [true]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_batches_never_spend_one_remainder_twice() {
    let shop = shop().await;
    let app = &shop.app;
    let mut handles = Vec::new();
    for i in 0..20 {
        let app = app.clone();
        handles.push(tokio::spawn(async move {
            let body = batch(&format!("s{i}"), "t1", Some("cara"), &[("refund", 60.0)]);
            decide(&app, body).await[0]["allow"] == true
        }));
    }
    let mut ran = 0;
    for h in handles {
        ran += usize::from(h.await.unwrap());
    }
    // 500 / 60: eight refunds fit, and the tenant's count (6) stops it first.
    assert_eq!(ran, 6, "the tenant budget allows six refunds");
}

#[tokio::test]
async fn a_request_cannot_bring_its_own_counts() {
    let shop = shop().await;
    let mut body = batch("s1", "t1", Some("ana"), &[("refund", 1.0)]);
    body["facts"]["spent"] = json!({"daily": 0});
    let (status, answer) = post(&shop.app, "/v1/decide", None, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["error"]["location"], "facts.spent", "{answer}");
}

#[tokio::test]
async fn a_scope_the_request_does_not_identify_denies() {
    let shop = shop().await;
    let app = &shop.app;
    // No principal: the per-principal budget has no count, so the refund is denied.
    let d = decide(app, batch("s1", "t1", None, &[("refund", 1.0)])).await;
    assert_eq!(d[0]["kind"], "budget");
    assert!(
        d[0]["reason"].as_str().unwrap().contains("not known"),
        "{d:?}"
    );
    // No session: the per-session and per-turn budgets have none.
    let body =
        json!({"facts": {"stage": "main"}, "calls": [{"id": "c", "tool": "send", "args": {}}]});
    let d = decide(app, body).await;
    assert_eq!(d[0]["kind"], "budget");
}

#[tokio::test]
async fn health_says_whether_counts_are_kept_and_how_many_scopes() {
    let shop = shop().await;
    decide(
        &shop.app,
        batch("s1", "t1", Some("ana"), &[("refund", 1.0)]),
    )
    .await;
    let (status, health) = get(&shop.app, "/health", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(health["budgets"]["kept"], true, "{health}");
    // daily (ana) and per_tenant (acme).
    assert_eq!(health["budgets"]["scopes"], 2, "{health}");
}

#[tokio::test]
async fn the_log_records_what_a_batch_spent_and_what_a_shadow_rule_would_deny() {
    let policy =
        format!("{SHOP}rule trial for refund {{\n  shadow\n  require args.amount <= 10\n}}\n");
    let shop = serve(&[("shop.gate", &policy)], |_, _| {}).await;
    let d = decide(
        &shop.app,
        batch("s1", "t1", Some("ana"), &[("refund", 40.0)]),
    )
    .await;
    assert_eq!(allowed(&d), [true]);
    assert_eq!(d[0]["shadow_denials"], json!(["trial"]), "{d:?}");
    let lines = log_lines(shop).await;
    let line = lines.iter().find(|l| l["decisions"].is_array()).unwrap();
    assert_eq!(
        line["spent"],
        json!({"daily": 40.0, "per_tenant": 1.0}),
        "{line}"
    );
    assert_eq!(
        line["decisions"][0]["shadow_denials"],
        json!(["trial"]),
        "{line}"
    );
}

#[tokio::test]
async fn a_sessions_count_outlives_the_session_ttl() {
    let shop = serve(&[("shop.gate", SHOP)], |c, _| {
        c.sessions.ttl = std::time::Duration::from_secs(1);
    })
    .await;
    let app = &shop.app;
    let sends = [("send", 0.0), ("send", 0.0)];
    assert_eq!(
        allowed(&decide(app, batch("s1", "t1", None, &sends)).await),
        [true, true]
    );
    // Idle past the TTL, and past a sweep (every second here): the count is still there.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let d = decide(app, batch("s1", "t2", None, &sends)).await;
    assert_eq!(allowed(&d), [true, false], "{d:?}");
    assert_eq!(d[1]["rule"], "per_session");
}

#[tokio::test]
async fn a_call_a_carried_latch_blocks_consumes_nothing() {
    let policy = "module shop\nwrite send\ningest fetch\nstage main { tools [send, fetch] }\nlatch tainted { set_by [fetch] blocks [send] }\nbudget per_session for send { count <= 3 per session }\n";
    let shop = serve(&[("shop.gate", policy)], |_, _| {}).await;
    let app = &shop.app;
    assert_eq!(
        allowed(&decide(app, batch("s1", "t1", None, &[("fetch", 0.0)])).await),
        [true]
    );
    // Judged first with its own latches (allowed), then with the turn's (blocked): only the
    // final judgement counts.
    let d = decide(app, batch("s1", "t1", None, &[("send", 0.0)])).await;
    assert_eq!(d[0]["kind"], "latch", "{d:?}");
    let sends = [("send", 0.0), ("send", 0.0), ("send", 0.0)];
    let d = decide(app, batch("s1", "t2", None, &sends)).await;
    assert_eq!(allowed(&d), [true, true, true], "nothing was spent: {d:?}");
}
