//! Signed policy bundles end to end: `toolgate bundle keygen/build/inspect`, and
//! `toolgate serve --bundle` against a real HTTP server on loopback (Python's http.server
//! with ETags), including hostile archives.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::bundle_support::*;
use crate::server_support::{
    self, batch, get_json, http, metric, post_json, temp_dir, POLICY_A, POLICY_B,
};

const SHARED: &str = "module shared\nhosts docs { allow [\"docs.example.com\"] }\n";

/// POLICY_A (allows `send`) or POLICY_B (denies it), importing `lib/shared.gate`.
fn policy(allow_send: bool) -> String {
    let base = if allow_send { POLICY_A } else { POLICY_B };
    base.replacen("module gate\n", "module gate\nuse \"lib/shared.gate\"\n", 1)
}

/// The scope every fixture's replica serves.
const SCOPE: &str = "fleet-a";

/// A scratch folder with a key pair and a policy directory.
struct Fixture {
    root: PathBuf,
    /// The serial of the last bundle built; each build takes the next.
    serial: std::cell::Cell<u64>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        let root = temp_dir(&format!("bundle-{tag}"));
        let out = toolgate(&["bundle", "keygen", "--out", s(&root.join("keys"))]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let out = toolgate(&["bundle", "keygen", "--out", s(&root.join("other"))]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        std::fs::create_dir_all(root.join("policies/lib")).unwrap();
        std::fs::create_dir_all(root.join("www")).unwrap();
        std::fs::write(root.join("policies/lib/shared.gate"), SHARED).unwrap();
        std::fs::write(root.join("policies/gate.tests.json"), "[]").unwrap();
        let fx = Fixture {
            root,
            serial: std::cell::Cell::new(0),
        };
        fx.set_policy(true);
        fx
    }

    fn set_policy(&self, allow_send: bool) {
        std::fs::write(self.root.join("policies/gate.gate"), policy(allow_send)).unwrap();
    }

    fn key(&self, which: &str, file: &str) -> PathBuf {
        self.root.join(which).join(file)
    }

    /// Builds the policy directory with key pair `which`, in [`SCOPE`] with the next serial;
    /// returns the bundle's bytes.
    fn build(&self, which: &str) -> Vec<u8> {
        self.serial.set(self.serial.get() + 1);
        self.build_as(which, SCOPE, self.serial.get())
    }

    /// Builds the policy directory with key pair `which` as `scope` and `serial`.
    fn build_as(&self, which: &str, scope: &str, serial: u64) -> Vec<u8> {
        let out_file = self.root.join("built.tar.gz");
        let serial = serial.to_string();
        let out = toolgate(&[
            "bundle",
            "build",
            s(&self.root.join("policies")),
            "--key",
            s(&self.key(which, "bundle.key")),
            "--scope",
            scope,
            "--serial",
            &serial,
            "-o",
            s(&out_file),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        std::fs::read(out_file).unwrap()
    }

    /// Puts `bytes` where the HTTP server serves `bundle.tar.gz`.
    fn publish(&self, bytes: &[u8]) {
        let tmp = self.root.join("www/.tmp");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(tmp, self.root.join("www/bundle.tar.gz")).unwrap();
    }

    fn www(&self) -> PathBuf {
        self.root.join("www")
    }

    fn public(&self) -> String {
        s(&self.key("keys", "bundle.pub")).to_string()
    }

    /// Serves what is published over HTTP and starts `toolgate serve --bundle` on it with
    /// the configured key and `extra` flags.
    fn serve_published(&self, extra: &[&str]) -> (Services, Toolgate) {
        let www = Services::start(&self.www(), 0);
        let tg = self.serve_url(&www.url("bundle.tar.gz"), extra, &[]);
        (www, tg)
    }

    /// `toolgate serve --bundle URL` with the configured key, [`SCOPE`], no decision log,
    /// `extra` flags and `env`.
    fn serve_url(&self, url: &str, extra: &[&str], env: &[(&str, &str)]) -> Toolgate {
        let pk = self.public();
        let mut args = vec![
            "--bundle",
            url,
            "--verify-key",
            &pk,
            "--scope",
            SCOPE,
            "--log",
            "off",
        ];
        args.extend_from_slice(extra);
        serve_with_env(&args, env)
    }

    /// Publishes a good bundle and serves it, polled every `poll_s` seconds; returns once
    /// the bundle is loaded.
    fn serve_good(&self, poll_s: &str) -> (Services, Toolgate) {
        self.serve_good_with(poll_s, &[])
    }

    /// [`Fixture::serve_good`] with `extra` flags.
    fn serve_good_with(&self, poll_s: &str, extra: &[&str]) -> (Services, Toolgate) {
        self.publish(&self.build("keys"));
        let mut args = vec!["--poll-s", poll_s];
        args.extend_from_slice(extra);
        let (www, tg) = self.serve_published(&args);
        wait_for("the first bundle to load", || {
            get_json(&tg.addr, "/health").0 == 200
        });
        (www, tg)
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The entries of a tar.gz, raw.
fn unpack(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    archive
        .entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = String::from_utf8(e.path_bytes().to_vec()).unwrap();
            let mut data = Vec::new();
            e.read_to_end(&mut data).unwrap();
            (name, data)
        })
        .collect()
}

/// Entry kinds `pack` can write.
enum Kind {
    File,
    Symlink(&'static str),
}

/// A tar.gz with exactly these entries, names written raw (no path checks), as an attacker
/// would write them.
fn pack(entries: &[(String, Vec<u8>, Kind)]) -> Vec<u8> {
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    for (name, data, kind) in entries {
        let mut h = tar::Header::new_old();
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_mode(0o644);
        match kind {
            Kind::File => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(data.len() as u64);
            }
            Kind::Symlink(target) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_link_name(target).unwrap();
                h.set_size(0);
            }
        }
        h.set_cksum();
        b.append(&h, data.as_slice()).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

fn files(entries: Vec<(String, Vec<u8>)>) -> Vec<(String, Vec<u8>, Kind)> {
    entries
        .into_iter()
        .map(|(n, d)| (n, d, Kind::File))
        .collect()
}

/// Whether `send` is allowed right now.
fn send_allowed(addr: &str) -> bool {
    let (st, v) = post_json(addr, "/v1/decide", &batch("send"));
    assert_eq!(st, 200, "{v}");
    v["decisions"][0]["allow"].as_bool().unwrap()
}

/// Asserts that `/health` answers 503 (nothing is served) with a message holding each of
/// `needles`.
fn assert_unavailable(addr: &str, needles: &[&str]) {
    let (st, v) = get_json(addr, "/health");
    assert_eq!(st, 503, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    for needle in needles {
        assert!(message.contains(needle), "{needle:?} not in: {message}");
    }
}

fn metrics(addr: &str) -> String {
    http(addr, "GET", "/metrics", &[], b"").1
}

fn fetches(addr: &str, outcome: &str) -> f64 {
    metric(
        &metrics(addr),
        &format!("toolgate_bundle_fetches_total{{outcome=\"{outcome}\"}}"),
    )
    .unwrap_or_else(|| panic!("no {outcome} counter in /metrics"))
}

fn reload(addr: &str) -> (u16, Value) {
    let (st, body) = http(addr, "POST", "/v1/reload", &[], b"");
    (st, serde_json::from_str(&body).unwrap_or(Value::Null))
}

#[test]
fn keygen_build_and_inspect_a_bundle_with_its_imports_and_tests() {
    let fx = Fixture::new("inspect");
    let bytes = fx.build("keys");
    let file = fx.root.join("b.tar.gz");
    std::fs::write(&file, &bytes).unwrap();

    let names: Vec<String> = unpack(&bytes).into_iter().map(|(n, _)| n).collect();
    for want in [
        ".manifest",
        ".signatures.json",
        "gate.gate",
        "gate.tests.json",
        "lib/shared.gate",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }

    let out = toolgate(&["bundle", "inspect", s(&file), "--verify-key", &fx.public()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["compiles"], true);
    assert!(
        v["signature"].as_str().unwrap().starts_with("verified"),
        "{v}"
    );
    let modules = &v["manifest"]["metadata"]["toolgate"]["modules"];
    assert_eq!(modules[0]["module"], "gate");
    assert_eq!(modules[0]["file"], "gate.gate");
    assert!(!modules[0]["revision"].as_str().unwrap().is_empty());
    assert_eq!(
        v["manifest"]["metadata"]["toolgate"]["version"],
        env!("CARGO_PKG_VERSION")
    );

    // Another key: refused, and the message says which key ids differ.
    let other = s(&fx.key("other", "bundle.pub")).to_string();
    let out = toolgate(&["bundle", "inspect", s(&file), "--verify-key", &other]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("does not verify"),
        "{}",
        text(&out.stderr)
    );

    // keygen never overwrites a key.
    let before = std::fs::read(fx.key("keys", "bundle.key")).unwrap();
    let out = toolgate(&["bundle", "keygen", "--out", s(&fx.root.join("keys"))]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read(fx.key("keys", "bundle.key")).unwrap(), before);
}

#[test]
fn build_refuses_imports_outside_the_directory_and_policies_that_do_not_compile() {
    let fx = Fixture::new("buildbad");
    std::fs::write(fx.root.join("outside.gate"), SHARED).unwrap();
    std::fs::write(
        fx.root.join("policies/gate.gate"),
        POLICY_A.replacen("module gate\n", "module gate\nuse \"../outside.gate\"\n", 1),
    )
    .unwrap();
    let args = |out: &Path| {
        vec![
            "bundle".to_string(),
            "build".into(),
            s(&fx.root.join("policies")).into(),
            "--key".into(),
            s(&fx.key("keys", "bundle.key")).into(),
            "--scope".into(),
            SCOPE.into(),
            "--serial".into(),
            "1".into(),
            "-o".into(),
            s(out).into(),
        ]
    };
    let out_file = fx.root.join("x.tar.gz");
    let a = args(&out_file);
    let out = toolgate(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("outside the policy directory"),
        "{}",
        text(&out.stderr)
    );
    assert!(!out_file.exists());

    std::fs::write(fx.root.join("policies/gate.gate"), server_support::BROKEN).unwrap();
    let out = toolgate(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("gate.gate:"),
        "{}",
        text(&out.stderr)
    );
    assert!(!out_file.exists());
}

#[test]
fn a_served_bundle_loads_swaps_on_change_and_a_304_recompiles_nothing() {
    let fx = Fixture::new("swap");
    let (www, tg) = fx.serve_good("1");
    let a = &tg.addr;
    assert!(send_allowed(a));
    let (_, v) = get_json(a, "/v1/policies");
    assert_eq!(v["bundle"]["outcome"], "loaded", "{v}");
    assert_eq!(v["bundle"]["verified"], true);
    let revision = v["bundle"]["revision"].as_str().unwrap().to_string();
    let generation = v["generation"].as_u64().unwrap();
    // What is served is what the manifest says: its revision and each policy's revision.
    let out = toolgate(&["bundle", "inspect", s(&fx.www().join("bundle.tar.gz"))]);
    let inspected: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(inspected["manifest"]["revision"], revision.as_str());
    assert_eq!(
        inspected["manifest"]["metadata"]["toolgate"]["modules"][0]["revision"],
        v["policies"][0]["revision"]
    );
    assert_eq!(v["bundle"]["key_id"].as_str().map(str::len), Some(16));

    // Unchanged: the poll gets 304s and nothing is compiled again.
    wait_for("two 304 answers", || {
        let (_, stats) = get_json(&www.addr, "/__stats");
        stats["304"].as_u64().unwrap_or(0) >= 2
    });
    assert!(fetches(a, "not_modified") >= 2.0);
    assert_eq!(fetches(a, "loaded"), 1.0);
    assert_eq!(
        get_json(a, "/v1/policies").1["generation"].as_u64(),
        Some(generation)
    );

    // A new bundle is picked up by the next poll and swapped in whole.
    fx.set_policy(false);
    fx.publish(&fx.build("keys"));
    wait_for("the new bundle", || !send_allowed(a));
    let (_, v) = get_json(a, "/v1/policies");
    assert_ne!(v["bundle"]["revision"].as_str().unwrap(), revision);
    assert_eq!(v["generation"].as_u64(), Some(generation + 1));
    assert_eq!(fetches(a, "loaded"), 2.0);
}

/// Each hostile or broken bundle, and the words its refusal must hold.
fn attacks(fx: &Fixture) -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let good = unpack(&fx.build("keys"));
    let mut out = Vec::new();

    let mut tampered = good.clone();
    for (name, data) in &mut tampered {
        if name == "gate.gate" {
            *data = policy(false).into_bytes();
        }
    }
    out.push((
        "tampered",
        pack(&files(tampered)),
        "does not match its signed hash",
    ));

    let stripped: Vec<_> = good
        .iter()
        .filter(|(n, _)| n != ".signatures.json")
        .cloned()
        .collect();
    out.push(("stripped signature", pack(&files(stripped)), "not signed"));

    let wrong_key = unpack(&fx.build("other"));
    out.push((
        "wrong key",
        pack(&files(wrong_key)),
        "does not verify with the configured key",
    ));

    // The signed files plus one more entry, as an attacker would add it.
    let added: [(&str, Vec<u8>, &str, &str); 5] = [
        (
            "extra unsigned file",
            policy(false).into_bytes(),
            "zz.gate",
            "`zz.gate` is in the bundle but not signed",
        ),
        (
            "path traversal",
            policy(false).into_bytes(),
            "../escape.gate",
            "`../escape.gate` refused",
        ),
        (
            "absolute path",
            policy(false).into_bytes(),
            "/tmp/abs.gate",
            "`/tmp/abs.gate` refused",
        ),
        (
            "duplicate entry",
            policy(false).into_bytes(),
            "gate.gate",
            "`gate.gate` appears twice",
        ),
        (
            "oversized entry",
            vec![b' '; 5 << 20],
            "big.gate",
            "`big.gate` is over the limit",
        ),
    ];
    for (what, data, name, expect) in added {
        let mut entries = good.clone();
        entries.push((name.to_string(), data));
        out.push((what, pack(&files(entries)), expect));
    }

    let missing: Vec<_> = good
        .iter()
        .filter(|(n, _)| n != "lib/shared.gate")
        .cloned()
        .collect();
    out.push((
        "signed file missing",
        pack(&files(missing)),
        "`lib/shared.gate` is signed but missing",
    ));

    let mut with_link = files(good.clone());
    with_link.push(("link.gate".into(), Vec::new(), Kind::Symlink("/etc/passwd")));
    out.push(("symlink", pack(&with_link), "links are not allowed"));

    out.push((
        "not an archive",
        b"<html>oops</html>".to_vec(),
        "not a readable tar.gz",
    ));
    out
}

#[test]
fn every_hostile_or_tampered_bundle_is_refused_and_the_old_set_keeps_serving() {
    let fx = Fixture::new("attacks");
    let (_www, tg) = fx.serve_good("3600");
    let a = &tg.addr;
    assert!(send_allowed(a));
    let generation = get_json(a, "/v1/policies").1["generation"].as_u64();

    let cases = attacks(&fx);
    for (i, (what, bytes, expect)) in cases.iter().enumerate() {
        fx.publish(bytes);
        let (st, v) = reload(a);
        assert_eq!(st, 422, "{what}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("refused") && message.contains(expect),
            "{what}: {message}"
        );
        assert!(send_allowed(a), "{what}: the old set must keep serving");
        let (st, health) = get_json(a, "/health");
        assert_eq!(st, 200);
        assert!(
            health["bundle"]["error"].as_str().unwrap().contains(expect),
            "{what}: {health}"
        );
        let (_, p) = get_json(a, "/v1/policies");
        assert_eq!(p["generation"].as_u64(), generation, "{what}");
        assert_eq!(p["last_reload"]["ok"], false, "{what}");
        assert_eq!(p["bundle"]["outcome"], "refused", "{what}");
        assert_eq!(fetches(a, "refused"), (i + 1) as f64, "{what}");
    }
    assert!(
        tg.stderr
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("does not match its signed hash")),
        "refusals are logged"
    );

    // The good bundle again is taken, and the error is cleared.
    fx.set_policy(false);
    fx.publish(&fx.build("keys"));
    assert_eq!(reload(a).0, 200);
    assert!(!send_allowed(a));
    assert!(get_json(a, "/health").1["bundle"]["error"].is_null());
}

#[test]
fn a_bundle_that_fails_to_compile_on_the_server_is_refused() {
    // Built fine (a warning is no error), refused by a server with --deny-warnings.
    let fx = Fixture::new("warn");
    std::fs::write(
        fx.root.join("policies/gate.gate"),
        "module gate\nwrite send, orphan\nread look\nstage main { tools [look, send, look] }\n",
    )
    .unwrap();
    fx.publish(&fx.build("keys"));
    let (_www, tg) = fx.serve_published(&["--deny-warnings"]);
    assert_unavailable(&tg.addr, &["do not compile", "gate.gate"]);
}

#[test]
fn without_a_key_a_bundle_needs_insecure_unsigned() {
    let fx = Fixture::new("unsigned");
    let good = unpack(&fx.build("keys"));
    let stripped: Vec<_> = good
        .into_iter()
        .filter(|(n, _)| n != ".signatures.json")
        .collect();
    fx.publish(&pack(&files(stripped)));
    let www = Services::start(&fx.www(), 0);
    let url = www.url("bundle.tar.gz");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--bundle", &url, "--scope", SCOPE])
        .args(["--addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--verify-key"),
        "{}",
        text(&out.stderr)
    );

    let tg = serve(&[
        "--bundle",
        &url,
        "--scope",
        SCOPE,
        "--insecure-unsigned",
        "--log",
        "off",
    ]);
    assert_eq!(get_json(&tg.addr, "/health").0, 200);
    assert_eq!(
        get_json(&tg.addr, "/v1/policies").1["bundle"]["verified"],
        false
    );
}

#[test]
fn a_bundle_server_that_is_down_is_reported_and_picked_up_once_it_is_up() {
    let fx = Fixture::new("down");
    fx.publish(&fx.build("keys"));
    let down = Down::new();
    let url = format!("http://127.0.0.1:{}/bundle.tar.gz", down.port());
    let tg = fx.serve_url(&url, &["--poll-s", "1"], &[]);
    let a = &tg.addr;
    assert_unavailable(a, &["unreachable"]);
    assert!(fetches(a, "unreachable") >= 1.0);

    let _www = down.up(&fx.www());
    wait_for("the bundle once its server is up", || {
        get_json(a, "/health").0 == 200
    });
    assert!(send_allowed(a));
    assert_eq!(get_json(a, "/v1/policies").1["bundle"]["outcome"], "loaded");
}

#[test]
fn https_bundles_are_verified_against_trusted_roots_only() {
    let fx = Fixture::new("https");
    fx.publish(&fx.build("keys"));
    let (cert, key) = tls_cert(&fx.root);
    let www = Services::start_tls(&fx.www(), 0, Some((&cert, &key)));
    let url = format!("https://{}/bundle.tar.gz", www.addr);

    // Not trusted: the download fails, nothing is served.
    let tg = fx.serve_url(&url, &[], &[]);
    assert_unavailable(&tg.addr, &["unreachable", "certificate"]);

    // Trusted (the system roots replaced by this certificate): loaded over TLS.
    let tg = fx.serve_url(&url, &[], &[("SSL_CERT_FILE", s(&cert))]);
    assert_eq!(get_json(&tg.addr, "/health").0, 200);
    assert!(send_allowed(&tg.addr));
}

/// A certificate and key for 127.0.0.1 in `root`, made by openssl (installed by .ci/run).
fn tls_cert(root: &Path) -> (PathBuf, PathBuf) {
    let (cert, key) = (root.join("cert.pem"), root.join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-keyout", s(&key), "-out", s(&cert), "-days", "2", "-nodes"])
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .output()
        .expect("openssl is needed to make a test certificate");
    assert!(made.status.success(), "{}", text(&made.stderr));
    (cert, key)
}

/// A bundle poll is an automatic reload: a bundle that widens what is allowed is held back by
/// the same gate as a directory change, and applies only when an operator asks for it.
#[test]
fn a_bundle_that_widens_is_held_back_until_an_explicit_reload() {
    let fx = Fixture::new("widen");
    fx.set_policy(false);
    let (_www, tg) = fx.serve_good("1");
    let a = &tg.addr;
    assert!(!send_allowed(a));
    let generation = get_json(a, "/v1/policies").1["generation"]
        .as_u64()
        .unwrap();

    // The new bundle allows `send`: fetched and verified by the next polls, but not applied.
    fx.set_policy(true);
    fx.publish(&fx.build("keys"));
    wait_for("the widening bundle to be held", || {
        let (_, v) = get_json(a, "/v1/policies");
        v["pending"].is_object()
    });
    let (_, v) = get_json(a, "/v1/policies");
    assert_eq!(v["generation"].as_u64(), Some(generation), "{v}");
    let pending = v["pending"].to_string();
    assert!(
        pending.contains("send"),
        "the held diff names the widened tool: {pending}"
    );
    assert!(!send_allowed(a), "a held bundle must not serve");
    assert!(metric(&metrics(a), "toolgate_reload_pending").unwrap_or(0.0) >= 1.0);

    // The operator applies it.
    let (st, v) = reload(a);
    assert_eq!(st, 200, "{v}");
    assert!(send_allowed(a));
    assert!(get_json(a, "/v1/policies").1["pending"].is_null());
}

/// A policy whose `fetch` may reach only `hosts`.
fn hosts_policy(hosts: &[&str]) -> String {
    let list: Vec<String> = hosts.iter().map(|h| format!("\"{h}\"")).collect();
    format!(
        "module gate\nhosts docs {{ allow [{}] }}\nread fetch\nwrite send\nstage main {{ tools [fetch] }}\nrule docs_only for fetch {{ require args.url in hosts docs }}\n",
        list.join(", ")
    )
}

/// Whether `fetch` of `url` is allowed right now.
fn fetch_allowed(addr: &str, url: &str) -> bool {
    let call = serde_json::json!({"facts": {"stage": "main"}, "calls": [{"id": "c1", "tool": "fetch", "args": {"url": url}}]});
    let (st, v) = post_json(addr, "/v1/decide", &call);
    assert_eq!(st, 200, "{v}");
    v["decisions"][0]["allow"].as_bool().unwrap()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn reload_query(addr: &str, query: &str) -> (u16, Value) {
    let (st, body) = http(addr, "POST", &format!("/v1/reload{query}"), &[], b"");
    (st, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn stderr_has(tg: &Toolgate, needle: &str) -> bool {
    tg.stderr.lock().unwrap().iter().any(|l| l.contains(needle))
}

/// The reviewed change is the applied change: an explicit reload applies the bundle whose
/// digest `pending` reported, and answers 409 without applying anything once the remote
/// bundle is another one.
#[test]
fn an_explicit_reload_applies_the_pending_bundle_and_no_other() {
    let fx = Fixture::new("pending");
    let docs = "https://docs.example.com/a";
    let partner = "https://partner.example.com/a";
    let attacker = "https://attacker.example.org/x";
    std::fs::write(
        fx.root.join("policies/gate.gate"),
        hosts_policy(&["docs.example.com"]),
    )
    .unwrap();
    let (_www, tg) = fx.serve_good("3600");
    let a = &tg.addr;
    assert!(fetch_allowed(a, docs) && !fetch_allowed(a, partner));
    let generation = get_json(a, "/v1/policies").1["generation"].as_u64();

    // A one-host widening, reviewed under `pending` with its digest.
    std::fs::write(
        fx.root.join("policies/gate.gate"),
        hosts_policy(&["docs.example.com", "partner.example.com"]),
    )
    .unwrap();
    let reviewed = fx.build("keys");
    fx.publish(&reviewed);
    let digest = sha256_hex(&reviewed);
    let (st, v) = reload(a);
    assert_eq!(st, 409, "nothing was pending, so the widening is held: {v}");
    assert_eq!(v["error"]["code"], "reload_held", "{v}");
    let (_, p) = get_json(a, "/v1/policies");
    assert_eq!(p["pending"]["digest"], digest.as_str(), "{p}");
    assert_eq!(p["pending"]["bundle"]["serial"], 2, "{p}");
    assert_eq!(p["pending"]["bundle"]["scope"], SCOPE, "{p}");
    assert!(
        p["pending"]["apply_with"]
            .as_str()
            .unwrap()
            .contains(&digest),
        "{p}"
    );
    assert!(!fetch_allowed(a, partner));

    // The remote bundle is replaced (no longer the reviewed one): neither POST /v1/reload,
    // nor one naming the reviewed digest, nor SIGHUP applies it.
    std::fs::write(
        fx.root.join("policies/gate.gate"),
        hosts_policy(&[
            "docs.example.com",
            "partner.example.com",
            "attacker.example.org",
        ]),
    )
    .unwrap();
    fx.publish(&fx.build("keys"));
    for query in ["", &format!("?digest={digest}")] {
        let (st, v) = reload_query(a, query);
        assert_eq!(st, 409, "{query}: {v}");
        assert_eq!(v["error"]["code"], "bundle_changed", "{query}: {v}");
        assert!(!fetch_allowed(a, attacker), "{query}");
    }
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &tg.child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    wait_for("SIGHUP's refusal", || {
        stderr_has(&tg, "reload (sighup) refused: the bundle changed")
    });
    assert!(!fetch_allowed(a, attacker) && !fetch_allowed(a, partner));
    let (_, p) = get_json(a, "/v1/policies");
    assert_eq!(p["generation"].as_u64(), generation, "{p}");
    assert_eq!(p["pending"]["digest"], digest.as_str(), "{p}");

    // A malformed digest is a 400; the reviewed bundle back in place applies by its digest.
    assert_eq!(reload_query(a, "?digest=abc").0, 400);
    fx.publish(&reviewed);
    let (st, v) = reload_query(a, &format!("?digest={digest}"));
    assert_eq!(st, 200, "{v}");
    assert!(fetch_allowed(a, partner) && !fetch_allowed(a, attacker));
    assert!(get_json(a, "/v1/policies").1["pending"].is_null());
}

/// Scope binds a bundle to a fleet; the serial only grows. Another fleet's bundle signed
/// with the same key, an older serial or the same serial again is refused, and a narrowing
/// rollback never applies by itself, with or without --allow-rollback.
#[test]
fn another_scope_or_a_serial_not_above_the_serving_one_is_refused() {
    let fx = Fixture::new("serial");
    fx.serial.set(4);
    let (_www, tg) = fx.serve_good("1");
    let a = &tg.addr;
    assert!(send_allowed(a));
    let (_, v) = get_json(a, "/v1/policies");
    assert_eq!(v["bundle"]["serial"], 5, "{v}");
    assert_eq!(v["bundle"]["scope"], SCOPE, "{v}");
    assert_eq!(metric(&metrics(a), "toolgate_bundle_serial"), Some(5.0));
    let generation = v["generation"].as_u64();

    fx.set_policy(false);
    for (what, bytes, expect) in [
        (
            "another scope",
            fx.build_as("keys", "fleet-b", 9),
            "its scope is `fleet-b`",
        ),
        (
            "the same serial",
            fx.build_as("keys", SCOPE, 5),
            "serial 5 is not above serial 5",
        ),
    ] {
        fx.publish(&bytes);
        let (st, v) = reload(a);
        assert_eq!(st, 422, "{what}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(expect), "{what}: {message}");
        assert!(send_allowed(a), "{what}");
    }

    // A narrowing rollback, published for the poll: refused, never applied.
    fx.publish(&fx.build_as("keys", SCOPE, 3));
    let refused = fetches(a, "refused");
    wait_for("the poll to refuse the rollback", || {
        fetches(a, "refused") > refused
    });
    assert!(send_allowed(a));
    let (st, health) = get_json(a, "/health");
    assert_eq!(st, 200);
    assert_eq!(health["status"], "degraded", "{health}");
    assert!(
        health["bundle"]["error"]
            .as_str()
            .unwrap()
            .contains("serial 3 is not above serial 5"),
        "{health}"
    );
    assert_eq!(reload(a).0, 422, "no --allow-rollback");
    assert_eq!(
        get_json(a, "/v1/policies").1["generation"].as_u64(),
        generation
    );

    // With --allow-rollback a poll still does not apply it; an explicit reload does.
    drop(tg);
    fx.set_policy(true);
    let (_www2, tg) = {
        fx.serial.set(4);
        let (www, tg) = fx.serve_good_with("1", &["--allow-rollback"]);
        (www, tg)
    };
    let a = &tg.addr;
    assert!(send_allowed(a));
    fx.set_policy(false);
    fx.publish(&fx.build_as("keys", SCOPE, 3));
    let refused = fetches(a, "refused");
    wait_for("the poll to refuse the rollback", || {
        fetches(a, "refused") > refused
    });
    assert!(send_allowed(a), "a rollback never applies by itself");
    let (st, v) = reload(a);
    assert_eq!(st, 200, "{v}");
    assert!(!send_allowed(a));
    assert_eq!(get_json(a, "/v1/policies").1["bundle"]["serial"], 3);

    // A restarted replica has no serving serial; --min-serial refuses the replay anyway.
    drop(tg);
    let (_www3, tg) = fx.serve_published(&["--min-serial", "4", "--allow-rollback"]);
    assert_unavailable(&tg.addr, &["serial 3 is below --min-serial 4"]);

    // A bundle server needs --scope; a build needs --scope and --serial.
    let (code, stderr) = server_support::serve_refused(&[
        "--bundle",
        "http://127.0.0.1:9/b.tar.gz",
        "--verify-key",
        &fx.public(),
    ]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--scope"), "{stderr}");
    let out = toolgate(&[
        "bundle",
        "build",
        s(&fx.root.join("policies")),
        "--key",
        s(&fx.key("keys", "bundle.key")),
        "-o",
        s(&fx.root.join("x.tar.gz")),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--scope"),
        "{}",
        text(&out.stderr)
    );
}

/// `--bundle https://` never follows a redirect to `http://`; a redirect that stays on
/// https is followed.
#[test]
fn a_redirect_from_https_to_http_is_refused() {
    let fx = Fixture::new("redirect");
    fx.publish(&fx.build("keys"));
    let (cert, key) = tls_cert(&fx.root);
    let tls = Services::start_tls(&fx.www(), 0, Some((&cert, &key)));
    let plain = Services::start(&fx.www(), 0);
    let start = |to: &str| {
        let url = format!("https://{}/__redirect?to={to}", tls.addr);
        fx.serve_url(&url, &[], &[("SSL_CERT_FILE", s(&cert))])
    };
    let tg = start(&plain.url("bundle.tar.gz"));
    assert_unavailable(&tg.addr, &["unreachable", "redirect from https"]);
    let (_, stats) = get_json(&plain.addr, "/__stats");
    assert!(stats["200"].is_null(), "nothing fetched over http: {stats}");

    let tg = start(&format!("https://{}/bundle.tar.gz", tls.addr));
    assert_eq!(get_json(&tg.addr, "/health").0, 200);
    assert!(send_allowed(&tg.addr));
}

/// A server that reuses one ETag for new bytes answers every conditional poll 304; the
/// unconditional fetch every --refetch-s still finds the new bundle. A replica that cannot
/// download the bundle whole for two refetch intervals is not `fresh`, and `/health` says
/// `degraded`.
#[test]
fn a_reused_etag_does_not_freeze_a_replica_and_health_tells_stale_from_fresh() {
    let fx = Fixture::new("etag");
    fx.publish(&fx.build("keys"));
    let www = Services::start(&fx.www(), 0);
    let (st, _) = http(&www.addr, "POST", "/__etag?value=%22v1%22", &[], b"");
    assert_eq!(st, 204);
    let extra = ["--poll-s", "1", "--refetch-s", "3"];
    let tg = fx.serve_url(&www.url("bundle.tar.gz"), &extra, &[]);
    let a = &tg.addr;
    wait_for("the first bundle", || get_json(a, "/health").0 == 200);
    let (_, health) = get_json(a, "/health");
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["bundle"]["fresh"], true, "{health}");
    assert_eq!(metric(&metrics(a), "toolgate_bundle_fresh"), Some(1.0));
    assert!(send_allowed(a));

    fx.set_policy(false);
    fx.publish(&fx.build("keys"));
    wait_for("a 304 for the new bytes", || {
        get_json(&www.addr, "/__stats").1["304"]
            .as_u64()
            .unwrap_or(0)
            >= 1
    });
    wait_for("the unconditional fetch to find the new bundle", || {
        !send_allowed(a)
    });
    assert!(stderr_has(
        &tg,
        "sent ETag \"v1\" again for different bytes"
    ));

    drop(www);
    wait_for("health to say the bundle is not fresh", || {
        let (_, h) = get_json(a, "/health");
        h["bundle"]["fresh"] == false && h["status"] == "degraded"
    });
    assert_eq!(metric(&metrics(a), "toolgate_bundle_fresh"), Some(0.0));
    assert!(!send_allowed(a), "still serving the last verified set");
}

/// Names from an archive never reach a log line raw: a newline or an ANSI escape in an entry
/// name cannot forge a `loaded generation` line, signed bundle or not.
#[test]
fn entry_names_cannot_forge_log_lines() {
    let fx = Fixture::new("inject");
    let forged = "x.gate\ntoolgate: loaded generation 99 (startup): forged\u{1b}[2K";
    let mut entries = files(unpack(&fx.build("keys")));
    entries.push((forged.to_string(), b"module x\n".to_vec(), Kind::File));
    fx.publish(&pack(&entries));
    for extra in [
        &["--verify-key", &fx.public()][..],
        &["--insecure-unsigned"][..],
    ] {
        let www = Services::start(&fx.www(), 0);
        let url = www.url("bundle.tar.gz");
        let mut args = vec!["--bundle", url.as_str(), "--scope", SCOPE, "--log", "off"];
        args.extend_from_slice(extra);
        let tg = serve(&args);
        assert_unavailable(&tg.addr, &["x.gate\\u{a}toolgate: loaded generation 99"]);
        let lines = tg.stderr.lock().unwrap().clone();
        assert!(
            lines
                .iter()
                .all(|l| !l.starts_with("toolgate: loaded generation 99") && !l.contains('\u{1b}')),
            "{extra:?}: {lines:#?}"
        );
        assert!(lines.iter().any(|l| l.contains("\\u{1b}[2K")), "{lines:#?}");
    }
}

/// Keys as `bundle keygen` writes them are read by OpenSSL 3 and Python's `cryptography`
/// (both installed by .ci/run), and a key made by `openssl genpkey` signs a bundle.
#[test]
fn keygen_keys_are_read_by_openssl_and_python_cryptography() {
    let fx = Fixture::new("keys-interop");
    let (private, public) = (fx.key("keys", "bundle.key"), fx.key("keys", "bundle.pub"));
    let pubout = std::process::Command::new("openssl")
        .args(["pkey", "-in", s(&private), "-pubout"])
        .output()
        .expect("openssl is needed (installed by .ci/run)");
    assert!(pubout.status.success(), "{}", text(&pubout.stderr));
    assert_eq!(
        text(&pubout.stdout),
        std::fs::read_to_string(&public).unwrap()
    );
    let script = "import sys\n\
        from cryptography.hazmat.primitives import serialization as s\n\
        k = s.load_pem_private_key(open(sys.argv[1], 'rb').read(), None)\n\
        p = s.load_pem_public_key(open(sys.argv[2], 'rb').read())\n\
        raw = lambda key: key.public_bytes(s.Encoding.Raw, s.PublicFormat.Raw)\n\
        assert raw(k.public_key()) == raw(p), 'the public key is not the private key\\'s'\n\
        p.verify(k.sign(b'toolgate'), b'toolgate')\n\
        print('ok')\n";
    let py = std::process::Command::new("python3")
        .args(["-c", script, s(&private), s(&public)])
        .output()
        .unwrap();
    assert!(
        py.status.success() && text(&py.stdout).trim() == "ok",
        "python cryptography (installed by .ci/run): {}",
        text(&py.stderr)
    );

    // The other way: OpenSSL's own Ed25519 key signs a bundle toolgate verifies.
    let dir = fx.root.join("openssl");
    std::fs::create_dir_all(&dir).unwrap();
    let made = std::process::Command::new("openssl")
        .args(["genpkey", "-algorithm", "ed25519", "-out"])
        .arg(dir.join("bundle.key"))
        .status()
        .unwrap();
    assert!(made.success());
    let made = std::process::Command::new("openssl")
        .args(["pkey", "-pubout", "-in"])
        .arg(dir.join("bundle.key"))
        .arg("-out")
        .arg(dir.join("bundle.pub"))
        .status()
        .unwrap();
    assert!(made.success());
    let bytes = fx.build("openssl");
    let file = fx.root.join("o.tar.gz");
    std::fs::write(&file, bytes).unwrap();
    let out = toolgate(&[
        "bundle",
        "inspect",
        s(&file),
        "--verify-key",
        s(&dir.join("bundle.pub")),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// A private key others may read is reported; key and bundle files are read within a bound,
/// so `/dev/zero` is a clear error, not a process that eats memory.
#[test]
fn loose_key_modes_are_reported_and_key_reads_are_bounded() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new("keys-modes");
    let private = fx.key("keys", "bundle.key");
    let mode = std::fs::metadata(&private).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "keygen writes the private key 0600");
    let build = |serial: &str| {
        toolgate(&[
            "bundle",
            "build",
            s(&fx.root.join("policies")),
            "--key",
            s(&private),
            "--scope",
            SCOPE,
            "--serial",
            serial,
            "-o",
            s(&fx.root.join("m.tar.gz")),
        ])
    };
    let out = build("1");
    assert!(out.status.success());
    assert!(
        !text(&out.stderr).contains("warning"),
        "{}",
        text(&out.stderr)
    );
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = build("2");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("open to its group or others (mode 0644)"),
        "{}",
        text(&out.stderr)
    );

    let limited = |args: &[&str]| {
        let started = std::time::Instant::now();
        let out = toolgate(args);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{args:?}"
        );
        (out.status.code(), text(&out.stderr))
    };
    let bundle_file = s(&fx.root.join("m.tar.gz")).to_string();
    for (args, expect) in [
        (
            vec![
                "bundle",
                "inspect",
                &bundle_file,
                "--verify-key",
                "/dev/zero",
            ],
            "bad key `/dev/zero`: over 16384 bytes",
        ),
        (
            vec!["bundle", "inspect", "/dev/zero"],
            "`/dev/zero` is over the limit",
        ),
        (
            vec![
                "bundle",
                "build",
                "policies",
                "--key",
                "/dev/zero",
                "--scope",
                SCOPE,
                "--serial",
                "3",
                "-o",
                "/dev/null",
            ],
            "bad key `/dev/zero`: over 16384 bytes",
        ),
    ] {
        let (code, stderr) = limited(&args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
    }
    let (code, stderr) = server_support::serve_refused(&[
        "--bundle",
        "http://127.0.0.1:9/b.tar.gz",
        "--scope",
        SCOPE,
        "--verify-key",
        "/dev/zero",
    ]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("bad key `/dev/zero`: over 16384 bytes"),
        "{stderr}"
    );
}
