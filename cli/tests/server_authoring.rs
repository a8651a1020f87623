//! What a new author meets running the server: several policies and a default, a directory
//! that is not one, a failed reload in `/health` and the log, and the playground's endpoints.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::server_support::*;

const OTHER: &str = "module other\nread look\nstage main { tools [look] }\n";

#[test]
fn a_request_naming_no_policy_lists_the_loaded_ones() {
    let s = start("names", &[("a.gate", POLICY_A), ("b.gate", OTHER)], &[]);
    for path in ["/v1/decide", "/v1/offer"] {
        let body = if path == "/v1/offer" {
            json!({"facts": {"stage": "main"}, "tools": [{"name": "look"}]})
        } else {
            batch("look")
        };
        let (st, v) = post_json(&s.addr, path, &body);
        assert_eq!(st, 400, "{path}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("`gate`") && message.contains("`other`"),
            "{message}"
        );
        assert!(message.contains("--default-policy"), "{message}");
    }
    let mut named = batch("look");
    named["policy"] = json!("gatee");
    let (st, v) = post_json(&s.addr, "/v1/decide", &named);
    assert_eq!(st, 404);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`gate`, `other`"),
        "{v}"
    );
}

#[test]
fn default_policy_judges_a_request_that_names_none() {
    let s = start(
        "default",
        &[("a.gate", POLICY_A), ("b.gate", OTHER)],
        &["--default-policy", "other"],
    );
    // `send` is classified in `gate` but not in `other`: the default judged it.
    let (st, v) = post_json(&s.addr, "/v1/decide", &batch("send"));
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["policy"], "other");
    assert_eq!(v["decisions"][0]["kind"], "unclassified");
    // The OPA shape names its module in the URL; a named policy still wins.
    let mut named = batch("send");
    named["policy"] = json!("gate");
    let (_, v) = post_json(&s.addr, "/v1/decide", &named);
    assert_eq!(v["policy"], "gate");
    assert_eq!(v["decisions"][0]["allow"], true);
    // Offers too.
    let (st, v) = post_json(
        &s.addr,
        "/v1/offer",
        &json!({"facts": {"stage": "main"}, "tools": [{"name": "look"}]}),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["policy"], "other");
}

#[test]
fn serve_refuses_a_missing_directory_and_a_file() {
    let dir = temp_dir("notadir");
    let file = dir.join("a.gate");
    std::fs::write(&file, POLICY_A).unwrap();
    for (path, says) in [
        (dir.join("missing"), "does not exist"),
        (file.clone(), "is not a directory"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .arg("serve")
            .arg(&path)
            .args(["--addr", "127.0.0.1:0"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", path.display());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(says) && err.contains(&*path.to_string_lossy()),
            "{err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failed_reload_is_degraded_health_and_the_log_names_file_and_revision() {
    let dir = temp_dir("degraded");
    std::fs::write(dir.join("gate.gate"), POLICY_A).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("serve")
        .arg(&dir)
        .args(["--addr", "127.0.0.1:0", "--log", "off", "--poll-ms", "0"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next = || rx.recv_timeout(Duration::from_secs(20)).unwrap();
    let mut lines = Vec::new();
    let addr = loop {
        let line = next();
        lines.push(line.clone());
        if let Some(a) = line.strip_prefix("toolgate: listening on http://") {
            break a.trim().to_string();
        }
    };
    let (_, v) = post_json(&addr, "/v1/decide", &batch("send"));
    let revision = v["revision"].as_str().unwrap().to_string();
    let loaded = lines
        .iter()
        .find(|l| l.contains("loaded generation 1"))
        .unwrap();
    assert!(
        loaded.contains(&revision) && loaded.contains("gate.gate"),
        "{loaded}"
    );
    let (st, v) = get_json(&addr, "/health");
    assert_eq!((st, v["status"].as_str()), (200, Some("ok")), "{v}");

    std::fs::write(dir.join("gate.gate"), BROKEN).unwrap();
    assert_eq!(http(&addr, "POST", "/v1/reload", &[], b"").0, 422);
    let (st, v) = get_json(&addr, "/health");
    assert_eq!(st, 200, "still serving: {v}");
    assert_eq!(v["status"], "degraded");
    assert_eq!(v["last_reload"]["ok"], false);
    assert!(
        v["last_reload"]["error"]
            .as_str()
            .unwrap()
            .contains("gate.gate:"),
        "{v}"
    );
    let failed = loop {
        let line = next();
        if line.contains("reload (api) failed") {
            break line;
        }
    };
    assert!(
        failed.contains(&revision) && failed.contains("gate.gate"),
        "{failed}"
    );
    // Decisions go on from the old revision.
    let (_, v) = post_json(&addr, "/v1/decide", &batch("send"));
    assert_eq!(v["revision"], revision.as_str());

    // A good reload clears it.
    std::fs::write(dir.join("gate.gate"), POLICY_B).unwrap();
    assert_eq!(http(&addr, "POST", "/v1/reload", &[], b"").0, 200);
    assert_eq!(get_json(&addr, "/health").1["status"], "ok");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

fn playground(addr: &str, body: &Value) -> (u16, Value) {
    post_json(addr, "/v1/playground", body)
}

#[test]
fn playground_endpoint_compiles_judges_explains_and_offers_a_posted_policy() {
    let s = start("pg-endpoint", &[("gate.gate", POLICY_A)], &[]);
    let broken = "module demo\nread look\nstage main { tools [look, nope] }\n";
    let (st, v) = playground(&s.addr, &json!({"source": broken}));
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["ok"], false);
    let d = &v["diagnostics"][0];
    assert_eq!(
        (d["line"].as_u64(), d["file"].as_str()),
        (Some(3), Some("playground.gate"))
    );
    // The span covers `nope` exactly: columns 27 to 31 of line 3.
    assert_eq!(
        (d["col"].as_u64(), d["end_col"].as_u64()),
        (Some(27), Some(31)),
        "{d}"
    );
    assert!(v.get("response").is_none());

    let fixed = "module demo\nread look\nwrite send\nstage main { tools [look, send] }\nrule no_cc for send { require not args.cc exists }\n";
    let request = r#"{"facts": {"stage": "main"}, "calls": [
        {"id": "a", "tool": "look", "args": {}},
        {"id": "b", "tool": "send", "args": {"cc": "x"}}]}"#;
    let (st, v) = playground(&s.addr, &json!({"source": fixed, "request": request}));
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["ok"], true);
    assert_eq!(v["module"], "demo");
    assert_eq!(v["response"]["decisions"][0]["allow"], true);
    assert_eq!(v["response"]["decisions"][1]["allow"], false);
    assert_eq!(v["explain"][1]["decision"], v["response"]["decisions"][1]);
    assert!(
        v["explain"][1]["steps"].as_array().unwrap().len() >= 3,
        "{v}"
    );
    let offered: Vec<&str> = v["offer"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["look", "send"]);
    // Nothing posted is loaded: the server still serves its own policy.
    assert_eq!(
        post_json(&s.addr, "/v1/decide", &batch("send")).1["policy"],
        "gate"
    );

    // The request and the tools are read by the strict readers, errors located.
    let (_, v) = playground(
        &s.addr,
        &json!({"source": fixed, "request": "{\"facts\": {}, \"calls\": [}"}),
    );
    assert!(
        v["request_error"]["location"]
            .as_str()
            .unwrap()
            .starts_with("line 1"),
        "{v}"
    );
    let (_, v) = playground(
        &s.addr,
        &json!({"source": fixed, "request": request, "tools": "[{\"nam\": \"look\"}]"}),
    );
    assert_eq!(v["tools_error"]["location"], "[0].name", "{v}");
    assert!(v["response"].is_object());
    // An unknown field is refused.
    let (st, v) = playground(&s.addr, &json!({"source": fixed, "policy": "x"}));
    assert_eq!(
        (st, v["error"]["location"].as_str()),
        (400, Some("policy")),
        "{v}"
    );
}

#[test]
fn playground_endpoints_are_admin_and_respect_the_origin_guard() {
    let s = start(
        "pg-admin",
        &[("gate.gate", POLICY_A)],
        &["--admin-token", "sesame"],
    );
    let body = json!({"source": POLICY_A}).to_string();
    let (st, _) = http(&s.addr, "POST", "/v1/playground", &[], body.as_bytes());
    assert_eq!(st, 401);
    let auth = [("Authorization", "Bearer sesame")];
    let (st, _) = http(&s.addr, "POST", "/v1/playground", &auth, body.as_bytes());
    assert_eq!(st, 200);
    let (st, v) = http(&s.addr, "GET", "/v1/policies/gate/source", &auth, b"");
    assert_eq!(st, 200);
    let v: Value = serde_json::from_str(&v).unwrap();
    assert_eq!(v["source"], POLICY_A);
    // The page's own origin is admitted; another is not, and neither is a form post.
    let own = format!("http://{}", s.addr);
    let with = |origin: &str, ct: &str| {
        let h = [
            ("Authorization", "Bearer sesame"),
            ("Origin", origin),
            ("Content-Type", ct),
        ];
        http(&s.addr, "POST", "/v1/playground", &h, body.as_bytes()).0
    };
    assert_eq!(with(&own, "application/json"), 200);
    assert_eq!(with("http://evil.example", "application/json"), 403);
    assert_eq!(with(&own, "text/plain"), 415);
}

#[test]
fn playground_page_and_assets_come_from_the_binary_locked_down() {
    let s = start("pg-page", &[("gate.gate", POLICY_A)], &[]);
    let (st, head, page) = http_raw(
        &s.addr,
        format!(
            "GET /playground HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            s.addr
        )
        .as_bytes(),
    );
    assert_eq!(st, 200);
    let head = head.to_ascii_lowercase();
    assert!(head.contains("content-type: text/html"), "{head}");
    assert!(
        head.contains("content-security-policy: default-src 'none'; script-src 'self'"),
        "{head}"
    );
    assert!(head.contains("x-frame-options: deny"), "{head}");
    // Nothing the page loads is from elsewhere.
    for needle in ["http://", "https://", "//cdn", "<script>"] {
        assert!(!page.contains(needle), "the page has `{needle}`");
    }
    for (path, kind) in [
        ("/playground/app.js", "text/javascript"),
        ("/playground/app.css", "text/css"),
    ] {
        let (st, head, body) = http_raw(
            &s.addr,
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        );
        assert_eq!(st, 200, "{path}");
        assert!(head.to_ascii_lowercase().contains(kind), "{head}");
        assert!(page.contains(path), "the page loads {path}");
        assert!(
            !body.contains("https://") && !body.contains("http://"),
            "{path} reaches out"
        );
    }
}

#[test]
fn playground_command_serves_one_file_and_prints_the_address() {
    let dir = temp_dir("pg-cmd");
    let file = dir.join("gate.gate");
    std::fs::write(&file, POLICY_A).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("playground")
        .arg(&file)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("the command prints its address")
            .unwrap();
        if let Some(u) = line.strip_prefix("toolgate: playground at ") {
            break u.trim().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let rest = url.strip_prefix("http://127.0.0.1:").expect("on loopback");
    let (port, path) = rest.split_once('/').unwrap();
    assert_eq!(path, "playground?file");
    let addr = format!("127.0.0.1:{port}");
    let (st, v) = get_json(&addr, "/v1/playground/file");
    assert_eq!(st, 200);
    assert_eq!(v["source"], POLICY_A);
    let (st, v) = get_json(&addr, "/v1/policies/gate/source");
    assert_eq!((st, v["source"].as_str()), (200, Some(POLICY_A)));
    // It serves the file: a decision needs no policy name.
    assert_eq!(
        post_json(&addr, "/v1/decide", &batch("send")).1["policy"],
        "gate"
    );
    // A broken file still opens, so the page can show its diagnostics.
    std::fs::write(&file, BROKEN).unwrap();
    assert_eq!(get_json(&addr, "/v1/playground/file").1["source"], BROKEN);
    let _ = child.kill();
    let _ = child.wait();

    // A directory is for `serve`.
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("playground")
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}
