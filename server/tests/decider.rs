//! The decision pipeline in process ([`Decider`], from [`Server::decider`]), with no HTTP in
//! between: it judges as the routes do, shares their turn state and sinks (a batch judged in
//! process latches the turn for the routes, and is counted in their `/metrics`), and refuses
//! what it cannot judge with a typed error that carries the code and the place.
#![allow(clippy::unwrap_used)]

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use toolgate_server::{router, Caller, Server};
use toolgate_turns::Origin;
use tower::ServiceExt;

use crate::embed;

async fn coach() -> Server {
    let addr = "127.0.0.1:0".parse().unwrap();
    Server::start(embed::config(addr)).await.unwrap()
}

async fn send(app: &Router, request: Request<Body>) -> (StatusCode, String) {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

/// The allowed decisions `/metrics` has counted.
async fn allowed_count(app: &Router) -> u64 {
    let (status, text) = send(app, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    text.lines()
        .find_map(|l| l.strip_prefix("toolgate_decisions_total{allow=\"true\",kind=\"\"} "))
        .map(|n| n.trim().parse().unwrap())
        .unwrap_or(0)
}

fn batch(session: &str, turn: &str, tool: &str) -> String {
    json!({
        "session": session,
        "turn": turn,
        "facts": {"stage": "coach"},
        "calls": [{"id": "c1", "tool": tool, "args": {}}],
    })
    .to_string()
}

#[tokio::test]
async fn a_batch_judged_in_process_is_recorded_and_latches_the_turn_for_the_routes() {
    let server = coach().await;
    let app = router(&server);
    let decider = server.decider();
    let before = allowed_count(&app).await;

    // The ingest runs in process and sets the turn's latch.
    let read = decider
        .decide(&batch("s1", "t1", "search_aws_docs"), None, &Caller::AsSent)
        .await
        .unwrap();
    assert!(read.response.decisions[0].allow, "{:?}", read.response);
    assert_eq!(read.session, Some(Origin::New));
    assert!(!read.decision_id.is_empty());
    assert_eq!(allowed_count(&app).await, before + 1);

    // The write of the same turn, over HTTP, is judged with that latch.
    let request = Request::post("/v1/decide")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(batch("s1", "t1", "update_memory")))
        .unwrap();
    let (status, text) = send(&app, request).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["decisions"][0]["allow"], false, "{answer}");
    assert_eq!(answer["decisions"][0]["kind"], "latch", "{answer}");
    assert_eq!(answer["session"], "carried", "{answer}");

    // And the other way: a write of the next turn in process after an HTTP read of it.
    let request = Request::post("/v1/decide")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(batch("s1", "t2", "fetch_vendor_doc")))
        .unwrap();
    let _ = send(&app, request).await;
    let write = decider
        .decide_value(
            serde_json::from_str(&batch("s1", "t2", "grade_attempt")).unwrap(),
            None,
            &Caller::AsSent,
        )
        .await
        .unwrap();
    assert!(!write.response.decisions[0].allow, "{:?}", write.response);
    assert_eq!(write.session, Some(Origin::Carried));
    server.shutdown().await;
}

#[tokio::test]
async fn what_cannot_be_judged_is_a_typed_error_with_its_code_and_place() {
    let server = coach().await;
    let decider = server.decider();

    let err = decider
        .decide("{\"calls\": [", None, &Caller::AsSent)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "json", "{err}");
    assert_eq!(err.status(), StatusCode::BAD_REQUEST);
    assert!(
        err.location().is_some_and(|l| l.starts_with("line 1")),
        "{err}"
    );

    let err = decider
        .decide(
            &batch("s1", "t1", "lookup_lesson"),
            Some("nope"),
            &Caller::AsSent,
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), StatusCode::NOT_FOUND, "{err}");
    assert!(err.message().contains("`coach`"), "{err}");

    // A verified caller's principal is the token's: a request may not bring its own.
    let own = json!({
        "facts": {"stage": "coach", "principal": {"sub": "mallory"}},
        "calls": [{"id": "c1", "tool": "lookup_lesson", "args": {}}],
    })
    .to_string();
    let err = decider
        .decide(&own, None, &Caller::Verified(Some(json!({"sub": "alice"}))))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "schema", "{err}");
    assert_eq!(err.location(), Some("facts.principal"), "{err}");
    // The same request as sent, with no verification, is judged.
    assert!(decider.decide(&own, None, &Caller::AsSent).await.is_ok());
    server.shutdown().await;
}
