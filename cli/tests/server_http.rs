//! What a browser or a slow client can do to `toolgate serve`, refused (issue 11, section 6):
//! cross-origin requests, non-JSON bodies, slow headers and bodies, idle connections, too many
//! connections, malformed HTTP. Every refusal has a JSON body and is counted in /metrics.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::server_support::*;

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn assert_json_error(status: u16, body: &str, want: u16, code: &str) {
    assert_eq!(status, want, "{body}");
    let v: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body:?}"));
    assert_eq!(v["error"]["code"], code, "{body}");
    assert!(v["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
}

fn decide_body() -> Vec<u8> {
    batch("send").to_string().into_bytes()
}

#[test]
fn a_post_body_must_be_declared_json() {
    let s = start("http-ctype", &[("gate.gate", POLICY_A)], &[]);
    let a = &s.addr;
    // What a browser may send cross-origin without a preflight, and other non-JSON types.
    for ctype in [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "application/json-seq",
        "text/json",
        "application/xml",
        "application/json, text/plain",
        "",
    ] {
        for path in [
            "/v1/decide",
            "/v1/offer",
            "/v1/data/gate/decide",
            "/v1/check",
        ] {
            // An empty value means no Content-Type header at all.
            let (st, body) = http(a, "POST", path, &[("Content-Type", ctype)], &decide_body());
            assert_json_error(st, &body, 415, "unsupported_media_type");
        }
    }
    for ctype in [
        "application/json",
        "Application/JSON",
        "application/json; charset=utf-8",
        "application/json;charset=UTF-8",
    ] {
        let (st, body) = http(
            a,
            "POST",
            "/v1/decide",
            &[("Content-Type", ctype)],
            &decide_body(),
        );
        assert_eq!(st, 200, "{ctype}: {body}");
    }
    // A POST with no body needs no type.
    let (st, body) = http(a, "POST", "/v1/reload", &[("Content-Type", "")], b"");
    assert_eq!(st, 200, "{body}");
    let (_, metrics) = http(a, "GET", "/metrics", &[], b"");
    assert_eq!(
        metric(
            &metrics,
            "toolgate_http_refused_total{reason=\"content_type\"}"
        ),
        Some(40.0),
        "{metrics}"
    );
}

#[test]
fn a_request_from_another_origin_is_refused() {
    let s = start(
        "http-origin",
        &[("gate.gate", POLICY_A)],
        &["--allow-origin", "https://console.example.com"],
    );
    let a = &s.addr;
    let port = a.rsplit(':').next().unwrap();
    let mut refused = 0;
    for origin in [
        "https://evil.example",
        "null",
        "http://localhost.evil.example",
        &format!("http://127.0.0.1.evil.example:{port}"),
        &format!("https://127.0.0.1:{port}"),
        &format!("http://127.0.0.1:{}", port.parse::<u16>().unwrap() ^ 1),
        "https://console.example.com.evil.example",
        "http://console.example.com",
        "https://console.example.com:8443",
    ] {
        for (method, path, body) in [
            ("POST", "/v1/decide", decide_body()),
            ("POST", "/v1/reload", Vec::new()),
            ("GET", "/v1/policies", Vec::new()),
            ("GET", "/metrics", Vec::new()),
            ("GET", "/health", Vec::new()),
        ] {
            // A browser's simple POST, text/plain: refused for its origin before its type.
            let (st, resp) = http(
                a,
                method,
                path,
                &[("Origin", origin), ("Content-Type", "text/plain")],
                &body,
            );
            assert_json_error(st, &resp, 403, "origin");
            refused += 1;
        }
    }
    // The server's own origin and the listed one.
    for origin in [
        format!("http://{a}"),
        format!("http://localhost:{port}"),
        "https://console.example.com".to_string(),
    ] {
        let (st, body) = http(
            a,
            "POST",
            "/v1/decide",
            &[("Origin", &origin)],
            &decide_body(),
        );
        assert_eq!(st, 200, "{origin}: {body}");
    }
    // A listed origin's page can make its CORS preflight and read the answer; others cannot.
    let preflight = |origin: &str| {
        let raw = format!("OPTIONS /v1/decide HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\nOrigin: {origin}\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type\r\n\r\n");
        http_raw(a, raw.as_bytes())
    };
    let (st, head, _) = preflight("https://console.example.com");
    assert_eq!(st, 204, "{head}");
    let head = head.to_ascii_lowercase();
    assert!(
        head.contains("access-control-allow-origin: https://console.example.com"),
        "{head}"
    );
    assert!(
        head.contains("access-control-allow-headers: content-type"),
        "{head}"
    );
    let (st, head, body) = preflight("https://evil.example");
    assert_json_error(st, &body, 403, "origin");
    assert!(
        !head.to_ascii_lowercase().contains("access-control-allow"),
        "{head}"
    );
    refused += 1;
    let raw = format!("POST /v1/decide HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\nOrigin: https://console.example.com\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", decide_body().len());
    let mut raw = raw.into_bytes();
    raw.extend(decide_body());
    let (st, head, _) = http_raw(a, &raw);
    assert_eq!(st, 200);
    assert!(
        head.to_ascii_lowercase()
            .contains("access-control-allow-origin: https://console.example.com"),
        "{head}"
    );
    let (_, head, _) = http_raw(
        a,
        format!("GET /health HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    assert!(
        !head.to_ascii_lowercase().contains("access-control-allow"),
        "no CORS without an Origin: {head}"
    );

    let (_, metrics) = http(a, "GET", "/metrics", &[], b"");
    assert_eq!(
        metric(&metrics, "toolgate_http_refused_total{reason=\"origin\"}"),
        Some(refused as f64),
        "{metrics}"
    );
}

/// Reads until the server closes the connection or `limit` passes; how long it took, and what
/// was read.
fn wait_for_close(s: &mut TcpStream, limit: Duration) -> (Duration, Vec<u8>, bool) {
    let started = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while started.elapsed() < limit {
        match s.read(&mut buf) {
            Ok(0) => return (started.elapsed(), out, true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return (started.elapsed(), out, true),
        }
    }
    (started.elapsed(), out, false)
}

#[test]
fn slowloris_headers_are_cut_off_at_the_header_timeout() {
    let s = start(
        "http-slowloris",
        &[("gate.gate", POLICY_A)],
        &["--header-timeout-ms", "800", "--idle-timeout-ms", "5000"],
    );
    let mut conn = TcpStream::connect(&s.addr).unwrap();
    conn.set_write_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let started = Instant::now();
    conn.write_all(b"POST /v1/decide HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    // Dribble one header byte every 100 ms: each byte is fresh activity, so only a deadline on
    // the whole head can stop it.
    let mut closed_after = None;
    for b in b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n"
        .iter()
        .cycle()
        .take(100)
    {
        std::thread::sleep(Duration::from_millis(100));
        if conn.write_all(&[*b]).is_err() {
            closed_after = Some(started.elapsed());
            break;
        }
        conn.set_nonblocking(true).unwrap();
        let mut probe = [0u8; 512];
        let r = conn.read(&mut probe);
        conn.set_nonblocking(false).unwrap();
        match r {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            _ => {
                closed_after = Some(started.elapsed());
                break;
            }
        }
    }
    let t = closed_after.expect("a dribbling client kept its connection for 10 s");
    assert!(t < Duration::from_millis(2500), "closed after {t:?}");
    assert!(t >= Duration::from_millis(700), "closed too early: {t:?}");
    let (_, metrics) = http(&s.addr, "GET", "/metrics", &[], b"");
    assert_eq!(
        metric(
            &metrics,
            "toolgate_http_refused_total{reason=\"header_timeout\"}"
        ),
        Some(1.0),
        "{metrics}"
    );
}

#[test]
fn headers_that_stop_arriving_get_a_json_408() {
    let s = start(
        "http-stalled",
        &[("gate.gate", POLICY_A)],
        &["--header-timeout-ms", "600", "--idle-timeout-ms", "5000"],
    );
    for partial in [
        &b"P"[..],
        b"POST /v1/decide HTTP/1.1\r\n",
        b"POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Type: appl",
    ] {
        let mut conn = TcpStream::connect(&s.addr).unwrap();
        conn.write_all(partial).unwrap();
        let (t, raw, closed) = wait_for_close(&mut conn, Duration::from_secs(5));
        assert!(closed, "the connection stayed open");
        assert!(t < Duration::from_millis(2000), "{t:?}");
        let (st, _, body) = parse_response(&raw);
        assert_json_error(st, &body, 408, "timeout");
    }
    let (_, metrics) = http(&s.addr, "GET", "/metrics", &[], b"");
    assert_eq!(
        metric(
            &metrics,
            "toolgate_http_refused_total{reason=\"header_timeout\"}"
        ),
        Some(3.0),
        "{metrics}"
    );
}

#[test]
fn a_slow_body_gets_a_json_408() {
    let s = start(
        "http-slowbody",
        &[("gate.gate", POLICY_A)],
        &["--body-timeout-ms", "600"],
    );
    let mut conn = TcpStream::connect(&s.addr).unwrap();
    conn.write_all(b"POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"calls\"")
        .unwrap();
    let (t, raw, closed) = wait_for_close(&mut conn, Duration::from_secs(5));
    assert!(closed, "the connection stayed open");
    assert!(t < Duration::from_millis(2500), "{t:?}");
    let (st, _, body) = parse_response(&raw);
    assert_json_error(st, &body, 408, "timeout");
    let (_, metrics) = http(&s.addr, "GET", "/metrics", &[], b"");
    assert_eq!(
        metric(
            &metrics,
            "toolgate_http_refused_total{reason=\"body_timeout\"}"
        ),
        Some(1.0),
        "{metrics}"
    );
}

#[test]
fn an_idle_keep_alive_connection_is_closed() {
    let s = start(
        "http-idle",
        &[("gate.gate", POLICY_A)],
        &["--idle-timeout-ms", "500", "--header-timeout-ms", "5000"],
    );
    let mut conn = TcpStream::connect(&s.addr).unwrap();
    // One request on a keep-alive connection, then silence.
    let body = decide_body();
    let req = format!(
        "POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(req.as_bytes()).unwrap();
    conn.write_all(&body).unwrap();
    let (t, raw, closed) = wait_for_close(&mut conn, Duration::from_secs(4));
    assert!(closed, "idle connection kept open for 4 s");
    assert!(t < Duration::from_millis(2000), "{t:?}");
    assert_eq!(parse_response(&raw).0, 200);
    // A connection that never sends a byte is idle too.
    let mut silent = TcpStream::connect(&s.addr).unwrap();
    let (t, raw, closed) = wait_for_close(&mut silent, Duration::from_secs(4));
    assert!(closed && raw.is_empty(), "{raw:?}");
    assert!(t < Duration::from_millis(2000), "{t:?}");
    let (_, metrics) = http(&s.addr, "GET", "/metrics", &[], b"");
    assert!(
        metric(
            &metrics,
            "toolgate_http_refused_total{reason=\"idle_timeout\"}"
        )
        .unwrap()
            >= 2.0,
        "{metrics}"
    );
}

#[test]
fn connections_over_the_cap_get_a_json_503() {
    let s = start(
        "http-conns",
        &[("gate.gate", POLICY_A)],
        &["--max-connections", "3", "--idle-timeout-ms", "10000"],
    );
    let held: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(&s.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..5 {
        let (st, _, body) = http_raw(&s.addr, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_json_error(st, &body, 503, "too_many_connections");
    }
    drop(held);
    // The slots free up once the server sees the closes.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut answer = http(&s.addr, "POST", "/v1/decide", &[], &decide_body());
    while answer.0 == 503 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        answer = http(&s.addr, "POST", "/v1/decide", &[], &decide_body());
    }
    assert_eq!(answer.0, 200, "{}", answer.1);
    let (_, metrics) = http(&s.addr, "GET", "/metrics", &[], b"");
    let refused = metric(
        &metrics,
        "toolgate_http_refused_total{reason=\"connections\"}",
    );
    assert!(refused.is_some_and(|n| n >= 5.0), "{metrics}");
    assert!(
        metric(&metrics, "toolgate_connections_open").is_some(),
        "{metrics}"
    );
}

#[test]
fn malformed_http_gets_a_json_error() {
    let s = start("http-malformed", &[("gate.gate", POLICY_A)], &[]);
    let a = &s.addr;
    let huge_header = format!(
        "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(200_000)
    );
    let cases: Vec<(Vec<u8>, u16)> = vec![
        (b"GARBAGE\r\n\r\n".to_vec(), 400),
        (b"GET /health HTTP/1.1\r\nBad Header: x\r\n\r\n".to_vec(), 400),
        (b"GET /health HTTP/9.9\r\nHost: x\r\n\r\n".to_vec(), 400),
        (b"GET /he alth HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), 400),
        (b"POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n".to_vec(), 400),
        (b"POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n".to_vec(), 400),
        (huge_header.into_bytes(), 431),
        // Routing and body errors past the parser are JSON too.
        (b"GET /v1/decide HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(), 405),
        (b"DELETE /v1/policies HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(), 405),
        (b"POST /v1/decide HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(), 400),
    ];
    for (raw, want) in cases {
        let (st, head, body) = http_raw(a, &raw);
        assert_eq!(
            st,
            want,
            "{:?}: {head}\n{body}",
            String::from_utf8_lossy(&raw[..raw.len().min(80)])
        );
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|_| {
            panic!(
                "not JSON for {:?}: {head}\n{body:?}",
                String::from_utf8_lossy(&raw[..raw.len().min(80)])
            )
        });
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{body}"
        );
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{head}"
        );
    }
    let (_, metrics) = http(a, "GET", "/metrics", &[], b"");
    assert!(
        metric(
            &metrics,
            "toolgate_http_refused_total{reason=\"malformed\"}"
        )
        .unwrap()
            >= 7.0,
        "{metrics}"
    );
}

#[test]
fn a_client_that_stops_reading_loses_its_connection() {
    let s = start(
        "http-noread",
        &[("gate.gate", POLICY_A)],
        &["--idle-timeout-ms", "500", "--max-connections", "4"],
    );
    // Offers whose answers (each ~900 KB, the tools echoed) fill every buffer between the
    // server and a client that never reads.
    let big = "d".repeat(450_000);
    let tool = |name: &str| json!({"name": name, "description": big, "input_schema": {}});
    let body =
        json!({"facts": {"stage": "main"}, "tools": [tool("look"), tool("send")]}).to_string();
    let request = format!(
        "POST /v1/offer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let conn = TcpStream::connect(&s.addr).unwrap();
    let mut writer = conn.try_clone().unwrap();
    writer
        .set_write_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let started = Instant::now();
    let outcome = std::thread::spawn(move || {
        for _ in 0..200 {
            if let Err(e) = writer.write_all(request.as_bytes()) {
                return (e.kind(), started.elapsed());
            }
        }
        (std::io::ErrorKind::Other, started.elapsed())
    })
    .join()
    .unwrap();
    let (kind, t) = outcome;
    assert!(
        matches!(
            kind,
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
        ),
        "the server kept the connection: {kind:?} after {t:?}"
    );
    assert!(t < Duration::from_secs(15), "{t:?}");
    drop(conn);
    let (_, metrics) = http(&s.addr, "GET", "/metrics", &[], b"");
    assert!(
        metric(
            &metrics,
            "toolgate_http_refused_total{reason=\"idle_timeout\"}"
        )
        .unwrap()
            >= 1.0,
        "{metrics}"
    );
}
