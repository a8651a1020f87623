//! The server's routes in-process (`tower::ServiceExt::oneshot`, no socket): what
//! `/v1/decide` answers for an allowed and a denied call, straight from [`router`] and from
//! the embedding example's app, which mounts it under a prefix of its own. The binary's
//! tests (`cli/tests/server*.rs`) keep what needs a real connection: HTTP hardening,
//! signals, TLS.
#![allow(clippy::unwrap_used)]

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use toolgate_server::{router, Server};
use tower::ServiceExt;

use crate::embed;

/// A server over the coach policy, as the example configures it.
async fn coach() -> Server {
    let addr = "127.0.0.1:0".parse().unwrap();
    Server::start(embed::config(addr)).await.unwrap()
}

/// POSTs `body` to `path` and reads the JSON answer.
async fn post(app: &Router, path: &str, body: Value) -> (StatusCode, Value) {
    let request = Request::post(path)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

/// One batch: a read the coach stage lists, and a fetch from a host outside the policy's
/// `vendor_docs` allowlist.
fn batch() -> Value {
    json!({
        "facts": {"stage": "coach"},
        "calls": [
            {"id": "c1", "tool": "lookup_lesson", "args": {}},
            {"id": "c2", "tool": "fetch_vendor_doc",
             "args": {"url": "https://docs.aws.amazon.com.evil.tld/lambda"}},
        ],
    })
}

/// `response` judged `batch()`: the read allowed, the fetch denied by the host rule.
fn assert_judged(response: &Value) {
    assert_eq!(response["policy"], "coach", "{response}");
    let decisions = response["decisions"].as_array().unwrap();
    assert_eq!(decisions.len(), 2, "{response}");
    let (allowed, denied) = (&decisions[0], &decisions[1]);
    assert_eq!(allowed["id"], "c1");
    assert_eq!(allowed["allow"], true, "{response}");
    assert_eq!(denied["id"], "c2");
    assert_eq!(denied["allow"], false, "{response}");
    assert_eq!(denied["kind"], "host", "{response}");
    assert_eq!(denied["rule"], "vendor_doc_host", "{response}");
    assert!(denied["reason"].as_str().is_some_and(|r| !r.is_empty()));
}

#[tokio::test]
async fn the_router_allows_and_denies_as_the_policy_says() {
    let server = coach().await;
    let app = router(&server);
    let (status, answer) = post(&app, "/v1/decide", batch()).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_judged(&answer);
    assert!(answer["decision_id"].is_string(), "{answer}");

    // The same judge behind the OPA shape.
    let (status, answer) = post(&app, "/v1/data/coach/decide", json!({"input": batch()})).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_judged(&answer["result"]);

    // A stage the call is not in denies it; a call outside the schema is a 400 with its path.
    let mut outside = batch();
    outside["facts"]["stage"] = json!("review");
    let (_, answer) = post(&app, "/v1/decide", outside).await;
    assert_eq!(answer["decisions"][0]["allow"], false, "{answer}");
    let (status, answer) = post(&app, "/v1/decide", json!({"calls": 5})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["error"]["location"], "calls", "{answer}");
    server.shutdown().await;
}

#[tokio::test]
async fn the_example_app_serves_its_own_route_and_toolgates_under_its_prefix() {
    let server = coach().await;
    let app = embed::app(&server);

    let (status, answer) = post(&app, &format!("{}/v1/decide", embed::PREFIX), batch()).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_judged(&answer);

    // Outside the prefix toolgate does not answer; the app's own route does.
    let request = Request::get("/").body(Body::empty()).unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let request = Request::post("/v1/decide")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(batch().to_string()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);

    // Under it, toolgate's own guards and errors: a foreign origin is refused as JSON.
    let request = Request::post(format!("{}/v1/decide", embed::PREFIX))
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ORIGIN, "https://elsewhere.example")
        .body(Body::from(batch().to_string()))
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(answer["error"]["code"], "origin", "{answer}");
    server.shutdown().await;
}
