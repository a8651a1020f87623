//! The server's approvals (issue 24), in-process: an ask is listed for approval UIs
//! (`GET /v1/approvals`), a person's answer is recorded (`POST /v1/approvals`) behind the
//! approver or admin token, an approval lets exactly its call run once within the policy's
//! window, a request cannot bring its own, `--ask allow-logged` lets asks run for headless
//! agents, and every ask, answer and use is in the decision log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::{get, log_lines, post, serve, Served};
use axum::http::StatusCode;
use axum::Router;
use serde_json::{json, Value};
use toolgate_server::{AskMode, Config};

pub(crate) const SHOP: &str = r#"module shop
write refund
stage main { tools [refund] }
rule refunds for refund {
  require args.amount is number and args.amount <= 500
  ask when args.amount > 50
}
"#;

/// A server over one policy, and its decision log.
type Shop = Served;

/// A server over `policy`, logging to a file, configured further by `tune`.
async fn shop_with(policy: &str, tune: impl FnOnce(&mut Config)) -> Shop {
    serve(&[("shop.gate", policy)], |c, _| tune(c)).await
}

async fn shop() -> Shop {
    shop_with(SHOP, |_| {}).await
}

/// A batch of refunds (by amount) in session `s1`, turn `t1`.
fn refunds(amounts: &[f64]) -> Value {
    let calls: Vec<Value> = amounts
        .iter()
        .enumerate()
        .map(|(i, a)| json!({"id": format!("c{i}"), "tool": "refund", "args": {"amount": a, "order": "A-17"}}))
        .collect();
    json!({"session": "s1", "turn": "t1", "facts": {"stage": "main"}, "calls": calls})
}

/// The decisions of one `/v1/decide` of `body`.
async fn decide(app: &Router, body: Value) -> Vec<Value> {
    let (status, answer) = post(app, "/v1/decide", None, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["decisions"].as_array().unwrap().clone()
}

/// The digest of a decision that asks.
pub(crate) fn asked(d: &Value) -> String {
    assert_eq!(d["allow"], false, "{d}");
    assert_eq!(d["kind"], "ask", "{d}");
    d["approval"].as_str().unwrap().to_string()
}

async fn answer(app: &Router, digest: &str, decision: &str) -> (StatusCode, Value) {
    post(
        app,
        "/v1/approvals",
        None,
        json!({"session": "s1", "approval": digest, "decision": decision, "approver": "dana"}),
    )
    .await
}

#[tokio::test]
async fn an_approved_ask_runs_once_and_then_asks_again() {
    let shop = shop().await;
    let app = &shop.app;
    let digest = asked(&decide(app, refunds(&[120.0])).await[0]);

    // The ask waits for a person, with what they need to judge it.
    let (status, waiting) = get(app, "/v1/approvals?session=s1", None).await;
    assert_eq!(status, StatusCode::OK, "{waiting}");
    let asks = waiting["asks"].as_array().unwrap();
    assert_eq!(asks.len(), 1, "{waiting}");
    let ask = &asks[0];
    assert_eq!(ask["approval"], digest.as_str());
    assert_eq!(ask["tool"], "refund");
    assert_eq!(ask["rule"], "refunds");
    assert_eq!(ask["call_id"], "c0");
    assert_eq!(ask["args"], json!({"amount": 120.0, "order": "A-17"}));
    assert_eq!(ask["turn"], "t1");
    assert!(ask["reason"]
        .as_str()
        .unwrap()
        .starts_with("Approval needed"));
    let left = ask["expires_in_ms"].as_u64().unwrap();
    assert!(left > 0 && left <= 600_000, "{left}");

    let (status, answered) = answer(app, &digest, "approve").await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    assert_eq!(answered["granted"], true);
    assert_eq!(answered["expires_in_ms"], 600_000);
    let (_, waiting) = get(app, "/v1/approvals?session=s1", None).await;
    assert_eq!(waiting["asks"], json!([]), "{waiting}");

    let ran = decide(app, refunds(&[120.0])).await;
    assert_eq!(ran[0]["allow"], true, "{ran:?}");
    assert_eq!(ran[0]["approval"], digest.as_str());
    // Used once: the same call asks again, and waits again.
    assert_eq!(asked(&decide(app, refunds(&[120.0])).await[0]), digest);
    let (_, waiting) = get(app, "/v1/approvals?session=s1", None).await;
    assert_eq!(waiting["asks"].as_array().unwrap().len(), 1, "{waiting}");

    // Every ask, the answer and the use are in the decision log.
    let lines = log_lines(shop).await;
    let calls: Vec<(&Value, &Value)> = lines
        .iter()
        .filter(|l| l.get("event").is_none())
        .map(|l| (&l["decisions"][0]["allow"], &l["decisions"][0]["approval"]))
        .collect();
    let d = json!(digest);
    assert_eq!(
        calls,
        vec![(&json!(false), &d), (&json!(true), &d), (&json!(false), &d)]
    );
    let answers: Vec<&Value> = lines.iter().filter(|l| l["event"] == "approval").collect();
    assert_eq!(answers.len(), 1, "{lines:?}");
    assert_eq!(answers[0]["granted"], true);
    assert_eq!(answers[0]["approver"], "dana");
    assert_eq!(answers[0]["session"], "s1");
    assert_eq!(answers[0]["tool"], "refund");
    assert_eq!(answers[0]["approval"], digest.as_str());
}

#[tokio::test]
async fn a_rejected_ask_does_not_run_and_an_approval_is_for_its_call_only() {
    let shop = shop().await;
    let app = &shop.app;
    let first = decide(app, refunds(&[120.0, 130.0])).await;
    let (a, b) = (asked(&first[0]), asked(&first[1]));
    let (status, answered) = answer(app, &a, "reject").await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    assert_eq!(answered["granted"], false);
    assert!(answered.get("expires_in_ms").is_none(), "{answered}");
    assert_eq!(answer(app, &b, "approve").await.0, StatusCode::OK);

    // The approval of 130 runs 130 only; 120 was refused; 131 was never asked.
    let again = decide(app, refunds(&[120.0, 130.0, 131.0])).await;
    asked(&again[0]);
    assert_eq!(again[1]["allow"], true, "{again:?}");
    asked(&again[2]);
    // An answer to what is no longer waiting is refused.
    let (status, e) = answer(app, &b, "approve").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{e}");
    assert_eq!(e["error"]["code"], "not_pending");
}

#[tokio::test]
async fn one_approval_lets_one_of_two_identical_calls_run() {
    let shop = shop().await;
    let app = &shop.app;
    let digest = asked(&decide(app, refunds(&[99.0])).await[0]);
    answer(app, &digest, "approve").await;
    let both = decide(app, refunds(&[99.0, 99.0])).await;
    assert_eq!(both[0]["allow"], true, "{both:?}");
    assert_eq!(asked(&both[1]), digest);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_batches_cannot_both_use_one_approval() {
    let shop = shop().await;
    let app = &shop.app;
    for round in 0..20 {
        let amount = 100.0 + f64::from(round);
        let digest = asked(&decide(app, refunds(&[amount])).await[0]);
        answer(app, &digest, "approve").await;
        let (x, y) = tokio::join!(
            decide(app, refunds(&[amount])),
            decide(app, refunds(&[amount]))
        );
        let ran = [&x[0], &y[0]].iter().filter(|d| d["allow"] == true).count();
        assert_eq!(ran, 1, "round {round}: {x:?} {y:?}");
    }
}

#[tokio::test]
async fn an_approval_expires_with_its_policy_window() {
    let shop = shop_with(&format!("{SHOP}approvals {{ valid_for 1s }}\n"), |_| {}).await;
    let app = &shop.app;
    let digest = asked(&decide(app, refunds(&[120.0])).await[0]);
    let (_, answered) = answer(app, &digest, "approve").await;
    assert_eq!(answered["expires_in_ms"], 1000, "{answered}");
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    asked(&decide(app, refunds(&[120.0])).await[0]);
    // A waiting ask expires too: the one just made is gone after the window.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (_, waiting) = get(app, "/v1/approvals?session=s1", None).await;
    assert_eq!(waiting["asks"], json!([]), "{waiting}");
    let (status, _) = answer(app, &digest, "approve").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_request_cannot_bring_its_own_approvals() {
    let shop = shop().await;
    let app = &shop.app;
    let digest = asked(&decide(app, refunds(&[120.0])).await[0]);
    let mut body = refunds(&[120.0]);
    body["facts"]["approvals"] = json!([digest]);
    for path in ["/v1/decide"] {
        let (status, e) = post(app, path, None, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
        assert_eq!(e["error"]["location"], "facts.approvals", "{e}");
        assert!(e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("POST /v1/approvals"));
    }
    let (status, e) = post(app, "/v1/data/shop/decide", None, json!({"input": body})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
}

#[tokio::test]
async fn an_answer_is_read_strictly() {
    let shop = shop().await;
    let app = &shop.app;
    let digest = asked(&decide(app, refunds(&[120.0])).await[0]);
    for (body, location) in [
        (
            json!({"approval": digest, "decision": "approve"}),
            "session",
        ),
        (
            json!({"session": "s1", "approval": "yes", "decision": "approve"}),
            "approval",
        ),
        (
            json!({"session": "s1", "approval": digest, "decision": "ok"}),
            "decision",
        ),
        (
            json!({"session": "s1", "approval": digest, "decision": "approve", "ttl": 9}),
            "ttl",
        ),
        (
            json!({"session": 1, "approval": digest, "decision": "approve"}),
            "session",
        ),
    ] {
        let (status, e) = post(app, "/v1/approvals", None, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {e}");
        assert_eq!(e["error"]["location"], location, "{body}: {e}");
    }
    // Another session's ask cannot be answered from this one.
    let (status, _) = post(
        app,
        "/v1/approvals",
        None,
        json!({"session": "s2", "approval": digest, "decision": "approve"}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = get(app, "/v1/approvals", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn approvals_need_the_approver_or_the_admin_token() {
    let shop = shop_with(SHOP, |c| {
        c.admin_token = Some("admin-secret".into());
        c.approver_token = Some("approver-secret".into());
    })
    .await;
    let app = &shop.app;
    // Deciding needs no token; approving does.
    let digest = asked(&decide(app, refunds(&[120.0])).await[0]);
    let body = json!({"session": "s1", "approval": digest, "decision": "approve"});
    for token in [None, Some("wrong"), Some("approver-secret ")] {
        let (status, e) = post(app, "/v1/approvals", token, body.clone()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token:?}: {e}");
        let (status, _) = get(app, "/v1/approvals?session=s1", token).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token:?}");
    }
    let (status, _) = get(app, "/v1/approvals?session=s1", Some("admin-secret")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, e) = post(app, "/v1/approvals", Some("approver-secret"), body).await;
    assert_eq!(status, StatusCode::OK, "{e}");
    // The approver token is not an admin token.
    let (status, _) = post(app, "/v1/reload", Some("approver-secret"), json!({})).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn beyond_loopback_without_a_token_approvals_are_refused() {
    let shop = shop_with(SHOP, |c| c.addr = "0.0.0.0:0".parse().unwrap()).await;
    let (status, _) = get(&shop.app, "/v1/approvals?session=s1", None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn headless_agents_can_let_asks_run_and_the_log_says_so() {
    let shop = shop_with(SHOP, |c| c.ask = AskMode::AllowLogged).await;
    let app = &shop.app;
    let (_, health) = get(app, "/health", None).await;
    assert_eq!(health["approvals"]["ask"], "allow-logged", "{health}");
    let ran = decide(app, refunds(&[120.0, 20.0, 600.0])).await;
    assert_eq!(ran[0]["allow"], true, "{ran:?}");
    assert!(ran[0]["approval"].is_string());
    assert_eq!(ran[1]["allow"], true);
    // A failed `require` still denies.
    assert_eq!(ran[2]["kind"], "args", "{ran:?}");
    // Without a session too.
    let mut stateless = refunds(&[120.0]);
    stateless.as_object_mut().unwrap().remove("session");
    stateless.as_object_mut().unwrap().remove("turn");
    assert_eq!(decide(app, stateless).await[0]["allow"], true);
    let lines = log_lines(shop).await;
    let first = &lines[0]["decisions"];
    assert_eq!(first[0]["headless"], true, "{first}");
    assert!(first[1].get("headless").is_none(), "{first}");
}

#[tokio::test]
async fn health_reports_the_ask_mode_and_what_waits() {
    let shop = shop().await;
    let app = &shop.app;
    decide(app, refunds(&[120.0, 130.0])).await;
    let (_, health) = get(app, "/health", None).await;
    assert_eq!(
        health["approvals"],
        json!({"ask": "deny", "store": "memory", "sessions": 1, "waiting": 2, "approved": 0}),
        "{health}"
    );
}
