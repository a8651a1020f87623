//! What the server tests share: starting the real binary on an ephemeral loopback port, and a
//! minimal HTTP/1.1 client that can also send what a real client never would.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A policy that allows `send` and `look` in stage `main`.
pub const POLICY_A: &str =
    "module gate\nwrite send\nread look\nstage main { tools [look, send] }\n";
/// The same module with `send` outside the stage.
pub const POLICY_B: &str = "module gate\nwrite send\nread look\nstage main { tools [look] }\n";
/// A file that does not compile.
pub const BROKEN: &str = "module gate\nwrite send\nstage main { tools [look\n";

/// A running `toolgate serve`; killed and its directory removed on drop.
pub struct Server {
    pub child: Child,
    pub addr: String,
    pub dir: PathBuf,
    /// What the server printed before it listened.
    pub startup: Vec<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh directory for one test. The test files are modules of one binary, so they share a
/// process id: the sequence number keeps two tests that pass the same tag apart.
pub fn temp_dir(tag: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("toolgate-srv-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts the server over `files`, with `extra` flags, and waits until it listens. The
/// decision log is off unless `extra` sets `--log`.
pub fn start(tag: &str, files: &[(&str, &str)], extra: &[&str]) -> Server {
    let dir = temp_dir(tag);
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("serve")
        .arg(&dir)
        .args(["--addr", "127.0.0.1:0"])
        .args(if extra.contains(&"--log") {
            &[][..]
        } else {
            &["--log", "off"][..]
        })
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let mut startup = Vec::new();
    let addr = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("server exited before listening: {startup:?}"))
            .unwrap();
        if let Some(rest) = line.strip_prefix("toolgate: listening on http://") {
            break rest.trim().to_string();
        }
        startup.push(line);
    };
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Server {
        child,
        addr,
        dir,
        startup,
    }
}

/// One request per connection, `Content-Type: application/json` and `Connection: close`.
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        req.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        if !v.is_empty() {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    req.push_str("\r\n");
    let mut raw = req.into_bytes();
    raw.extend_from_slice(body);
    let (status, _, body) = http_raw(addr, &raw);
    (status, body)
}

/// Sends `raw` bytes as they are and reads until the server closes: (status, head, body).
pub fn http_raw(addr: &str, raw: &[u8]) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(raw);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    parse_response(&out)
}

/// Splits a raw HTTP/1.1 response into (status, head, de-chunked body).
pub fn parse_response(raw: &[u8]) -> (u16, String, String) {
    let text = String::from_utf8_lossy(raw).to_string();
    let status: u16 = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, head.to_string(), body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}

/// POSTs `v` as JSON; the status and the body read as JSON (`null` if it is not).
pub fn post_json(addr: &str, path: &str, v: &Value) -> (u16, Value) {
    let (status, body) = http(addr, "POST", path, &[], v.to_string().as_bytes());
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// GETs `path`; the status and the body read as JSON (`null` if it is not).
pub fn get_json(addr: &str, path: &str) -> (u16, Value) {
    let (status, body) = http(addr, "GET", path, &[], b"");
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// A one-call batch in stage `main`.
pub fn batch(tool: &str) -> Value {
    json!({"facts": {"stage": "main"}, "calls": [{"id": "c1", "tool": tool, "args": {}}]})
}

/// The shipped coach policy (one latch, `documentation_read`, set by ingest, blocks write).
pub fn coach_source() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../stdlib-rules/examples/coach.gate"),
    )
    .unwrap()
}

/// The `/v1/check` body for a policy source.
pub fn check_body(source: &str) -> Vec<u8> {
    json!({ "source": source }).to_string().into_bytes()
}

/// The value of a metric line `name value` (labels included in `name`).
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Runs `toolgate serve ARGS...`, expected to refuse to start: its exit code and standard
/// error. A server that starts anyway is killed after 30 s and the test fails, rather than
/// the test waiting forever.
pub fn serve_refused(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("serve")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "`serve {args:?}` started instead of refusing: {}",
                reader.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code(), reader.join().unwrap())
}

/// Every span the collector received.
pub fn spans(collector: &str) -> Vec<Value> {
    let exports = get_json(collector, "/__traces").1;
    let mut out = Vec::new();
    for export in exports.as_array().unwrap() {
        assert_eq!(export["type"], "application/json");
        for rs in export["body"]["resourceSpans"].as_array().unwrap() {
            for ss in rs["scopeSpans"].as_array().unwrap() {
                out.extend(ss["spans"].as_array().unwrap().iter().cloned());
            }
        }
    }
    out
}

/// An attribute's value (OTLP JSON: `{"key": .., "value": {"stringValue": ..}}`).
pub fn attr<'a>(attrs: &'a Value, key: &str) -> Option<&'a Value> {
    attrs
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| a["value"].as_object().unwrap().values().next().unwrap())
}
