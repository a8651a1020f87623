//! What the in-process server tests share: a server over policy files in a fresh directory,
//! logging to a file, driven through its router with no socket.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::Value;
use std::path::PathBuf;
use toolgate_server::{router, Config, LogSink, PolicySource, Server};
use tower::ServiceExt;

/// A started server, its routes, its decision-log file and the directory holding both.
pub struct Served {
    pub server: Server,
    pub app: Router,
    pub log: PathBuf,
    pub dir: tempfile::TempDir,
}

/// A server over `files` (each a name and its text) in `DIR/policies`, logging to a file,
/// not watching, configured further by `tune` (which gets the temporary directory too).
pub async fn serve(
    files: &[(&str, &str)],
    tune: impl FnOnce(&mut Config, &std::path::Path),
) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let policies = dir.path().join("policies");
    std::fs::create_dir(&policies).unwrap();
    for (name, text) in files {
        std::fs::write(policies.join(name), text).unwrap();
    }
    let log = dir.path().join("decisions.log");
    let mut config = Config::new(PolicySource::Path(policies));
    config.addr = "127.0.0.1:0".parse().unwrap();
    config.log.sink = LogSink::File(log.clone());
    config.poll = std::time::Duration::ZERO;
    tune(&mut config, dir.path());
    let server = Server::start(config).await.unwrap();
    let app = router(&server);
    Served {
        server,
        app,
        log,
        dir,
    }
}

/// Sends `request`: the status and the body's bytes.
pub async fn send_bytes(app: &Router, request: Request<Body>) -> (StatusCode, Vec<u8>) {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, bytes.to_vec())
}

/// Sends `request`: the status and the body read as JSON (`null` if it is not).
pub async fn send(app: &Router, request: Request<Body>) -> (StatusCode, Value) {
    let (status, bytes) = send_bytes(app, request).await;
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// A JSON `POST` of `body`, with `token` as its bearer token if given.
pub fn post_request(path: &str, token: Option<&str>, body: &Value) -> Request<Body> {
    let mut request = Request::post(path).header(header::CONTENT_TYPE, "application/json");
    if let Some(t) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    request.body(Body::from(body.to_string())).unwrap()
}

/// `POST`s `body` as JSON: the status and the answer.
pub async fn post(
    app: &Router,
    path: &str,
    token: Option<&str>,
    body: Value,
) -> (StatusCode, Value) {
    send(app, post_request(path, token, &body)).await
}

/// `GET`s `path`: the status and the answer.
pub async fn get(app: &Router, path: &str, token: Option<&str>) -> (StatusCode, Value) {
    let mut request = Request::get(path);
    if let Some(t) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    send(app, request.body(Body::empty()).unwrap()).await
}

/// The decision log's lines, once the server has stopped.
pub async fn log_lines(served: Served) -> Vec<Value> {
    let Served { server, log, .. } = served;
    server.shutdown().await;
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A batch of `calls` (tool, `args.amount`) in `session` and `turn`, with `facts.principal`
/// `{"sub": SUB, "tenant": "acme"}` when `sub` is given (the budget tests).
pub fn batch(session: &str, turn: &str, sub: Option<&str>, calls: &[(&str, f64)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (tool, a))| serde_json::json!({"id": format!("c{i}"), "tool": tool, "args": {"amount": a}}))
        .collect();
    let mut facts = serde_json::json!({"stage": "main"});
    if let Some(s) = sub {
        facts["principal"] = serde_json::json!({"sub": s, "tenant": "acme"});
    }
    serde_json::json!({"session": session, "turn": turn, "facts": facts, "calls": calls})
}

/// `POST /v1/decide` of `body`, which must answer 200: its decisions.
pub async fn decide(app: &Router, body: Value) -> Vec<Value> {
    let (status, answer) = post(app, "/v1/decide", None, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["decisions"].as_array().unwrap().clone()
}

/// Whether each decision allows its call.
pub fn allowed(d: &[Value]) -> Vec<bool> {
    d.iter().map(|d| d["allow"] == true).collect()
}
