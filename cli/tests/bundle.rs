//! Signed policy bundles end to end: `toolgate bundle keygen/build/inspect`, and
//! `toolgate serve --bundle` against a real HTTP server on loopback (Python's http.server
//! with ETags), including hostile archives.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

mod bundle_support;
mod server_support;
use bundle_support::*;
use server_support::{batch, get_json, http, metric, post_json, temp_dir, POLICY_A, POLICY_B};

const SHARED: &str = "module shared\nhosts docs { allow [\"docs.example.com\"] }\n";

/// POLICY_A (allows `send`) or POLICY_B (denies it), importing `lib/shared.gate`.
fn policy(allow_send: bool) -> String {
    let base = if allow_send { POLICY_A } else { POLICY_B };
    base.replacen("module gate\n", "module gate\nuse \"lib/shared.gate\"\n", 1)
}

/// A scratch folder with a key pair and a policy directory.
struct Fixture {
    root: PathBuf,
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
        let fx = Fixture { root };
        fx.set_policy(true);
        fx
    }

    fn set_policy(&self, allow_send: bool) {
        std::fs::write(self.root.join("policies/gate.gate"), policy(allow_send)).unwrap();
    }

    fn key(&self, which: &str, file: &str) -> PathBuf {
        self.root.join(which).join(file)
    }

    /// Builds the policy directory with key pair `which`; returns the bundle's bytes.
    fn build(&self, which: &str) -> Vec<u8> {
        let out_file = self.root.join("built.tar.gz");
        let out = toolgate(&[
            "bundle",
            "build",
            s(&self.root.join("policies")),
            "--key",
            s(&self.key(which, "bundle.key")),
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
        let url = www.url("bundle.tar.gz");
        let pk = self.public();
        let mut args = vec!["--bundle", &url, "--verify-key", &pk, "--log", "off"];
        args.extend_from_slice(extra);
        let tg = serve(&args);
        (www, tg)
    }

    /// Publishes a good bundle and serves it, polled every `poll_s` seconds; returns once
    /// the bundle is loaded.
    fn serve_good(&self, poll_s: &str) -> (Services, Toolgate) {
        self.publish(&self.build("keys"));
        let (www, tg) = self.serve_published(&["--poll-s", poll_s]);
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
    let (st, v) = get_json(&tg.addr, "/health");
    assert_eq!(st, 503, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("do not compile") && message.contains("gate.gate"),
        "{message}"
    );
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
        .args(["serve", "--bundle", &url, "--addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--verify-key"),
        "{}",
        text(&out.stderr)
    );

    let tg = serve(&["--bundle", &url, "--insecure-unsigned", "--log", "off"]);
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
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/bundle.tar.gz");
    let pk = fx.public();
    let tg = serve(&[
        "--bundle",
        &url,
        "--verify-key",
        &pk,
        "--poll-s",
        "1",
        "--log",
        "off",
    ]);
    let a = &tg.addr;
    let (st, v) = get_json(a, "/health");
    assert_eq!(st, 503, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unreachable"),
        "{v}"
    );
    assert!(fetches(a, "unreachable") >= 1.0);

    let _www = Services::start(&fx.www(), port);
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
    // A certificate for 127.0.0.1, made by openssl (installed by .ci/run).
    let (cert, key) = (fx.root.join("cert.pem"), fx.root.join("key.pem"));
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
    let www = Services::start_tls(&fx.www(), 0, Some((&cert, &key)));
    let url = format!("https://{}/bundle.tar.gz", www.addr);
    let pk = fx.public();
    let args = ["--bundle", &url, "--verify-key", &pk, "--log", "off"];

    // Not trusted: the download fails, nothing is served.
    let tg = serve(&args);
    let (st, v) = get_json(&tg.addr, "/health");
    assert_eq!(st, 503, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("unreachable") && message.contains("certificate"),
        "{message}"
    );

    // Trusted (the system roots replaced by this certificate): loaded over TLS.
    let tg = serve_with_env(&args, &[("SSL_CERT_FILE", s(&cert))]);
    assert_eq!(get_json(&tg.addr, "/health").0, 200);
    assert!(send_allowed(&tg.addr));
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
