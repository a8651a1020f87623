//! The reload gate end to end: the real server on loopback, its directory changed under it.
//! A change that widens what is allowed is held back (the old policies keep serving) until an
//! explicit reload; a change that only narrows applies by itself.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use std::io::Write as _;
use std::time::{Duration, Instant};

use crate::server_support::*;

/// `[search_aws_docs, grade_attempt]` in stage `coach`: the latch must deny the grade.
fn ingest_then_write() -> Value {
    json!({"facts": {"stage": "coach"}, "calls": [
        {"id": "c1", "tool": "search_aws_docs", "args": {}},
        {"id": "c2", "tool": "grade_attempt", "args": {}}
    ]})
}

fn fetch(url: &str) -> Value {
    json!({"facts": {"stage": "coach"}, "calls": [
        {"id": "c1", "tool": "fetch_vendor_doc", "args": {"url": url}}
    ]})
}

fn decision(addr: &str, body: &Value, call: usize) -> Value {
    let (st, v) = post_json(addr, "/v1/decide", body);
    assert_eq!(st, 200, "{v}");
    v["decisions"][call].clone()
}

/// Polls `/v1/policies` until `done` holds; fails after a generous deadline.
fn wait_for(addr: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, v) = get_json(addr, "/v1/policies");
        if done(&v) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {v}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn revision_of(addr: &str, source: &str) -> String {
    let (_, body) = http(addr, "POST", "/v1/check", &[], &check_body(source));
    let v: Value = serde_json::from_str(&body).unwrap();
    v["revision"].as_str().unwrap().to_string()
}

fn serving(v: &Value) -> &str {
    v["policies"][0]["revision"].as_str().unwrap_or("")
}

fn metrics(addr: &str) -> String {
    http(addr, "GET", "/metrics", &[], b"").1
}

/// The shipped coach policy with one more host on the vendor allowlist.
fn with_pastebin(coach: &str) -> String {
    let widened = coach.replace(
        "\"developers.cloudflare.com\"]",
        "\"developers.cloudflare.com\", \"pastebin.com\"]",
    );
    assert_ne!(widened, coach, "the allowlist line moved");
    widened
}

#[test]
fn a_half_written_prefix_that_compiles_is_held_until_the_file_is_complete() {
    let coach = coach_source();
    let cut = coach.find("latch documentation_read").unwrap();
    let (prefix, rest) = coach.split_at(cut);
    let s = start(
        "gate-prefix",
        &[("coach.gate", &coach)],
        &["--poll-ms", "50"],
    );
    let a = &s.addr;
    assert_eq!(
        revision_of(a, prefix).len(),
        revision_of(a, &coach).len(),
        "the prefix is itself a valid policy"
    );
    let full_rev = revision_of(a, &coach);

    // A writer that writes the first part of the file in place, then stalls.
    let path = s.dir.join("coach.gate");
    let mut file = std::fs::File::create(&path).unwrap();
    file.write_all(prefix.as_bytes()).unwrap();
    file.flush().unwrap();
    let v = wait_for(a, "the prefix to be held back", |v| !v["pending"].is_null());
    assert_eq!(serving(&v), full_rev, "the complete policy keeps serving");
    let summary = v["pending"]["summary"].to_string();
    assert!(summary.contains("grade_attempt"), "{summary}");
    assert!(summary.contains("latch `documentation_read`"), "{summary}");
    assert!(summary.contains("fetch_vendor_doc"), "{summary}");

    // While the writer stalls, the protections hold.
    let d = decision(a, &ingest_then_write(), 1);
    assert_eq!(d["allow"], false, "{d}");
    assert_eq!(d["kind"], "latch");
    let d = decision(a, &fetch("https://evil.example/x"), 0);
    assert_eq!(d["allow"], false, "{d}");
    let m = metrics(a);
    assert_eq!(metric(&m, "toolgate_reloads_held_total"), Some(1.0), "{m}");
    assert_eq!(metric(&m, "toolgate_reload_pending"), Some(1.0), "{m}");

    // The writer finishes: the complete file is what it was, nothing widens, the hold clears.
    file.write_all(rest.as_bytes()).unwrap();
    file.flush().unwrap();
    drop(file);
    let v = wait_for(a, "the hold to clear", |v| v["pending"].is_null());
    assert_eq!(serving(&v), full_rev);
    assert_eq!(metric(&metrics(a), "toolgate_reload_pending"), Some(0.0));
    assert_eq!(decision(a, &ingest_then_write(), 1)["allow"], false);
}

#[test]
fn a_host_added_to_an_allowlist_is_held_until_an_explicit_reload() {
    let coach = coach_source();
    let s = start("gate-host", &[("coach.gate", &coach)], &["--poll-ms", "50"]);
    let a = &s.addr;
    let old_rev = revision_of(a, &coach);
    let widened = with_pastebin(&coach);
    let new_rev = revision_of(a, &widened);
    std::fs::write(s.dir.join("coach.gate"), &widened).unwrap();
    let v = wait_for(a, "the new host to be held back", |v| {
        !v["pending"].is_null()
    });
    assert_eq!(serving(&v), old_rev);
    let change = &v["pending"]["diff"]["modules"][0]["widenings"][0];
    assert_eq!(change["tool"], "fetch_vendor_doc", "{v}");
    assert_eq!(change["old"], "rule `vendor_doc_host`");
    assert_eq!(change["new"], "allowed");
    // The diff's request is one the new policy allows and the old one denies.
    let url = change["request"]["calls"][0]["args"]["url"]
        .as_str()
        .unwrap();
    assert!(url.to_lowercase().contains("pastebin.com"), "{url}");
    assert_eq!(
        decision(a, &fetch("https://pastebin.com/x"), 0)["allow"],
        false
    );

    // An operator applies it.
    let (st, body) = http(a, "POST", "/v1/reload", &[], b"");
    assert_eq!(st, 200, "{body}");
    let (_, v) = get_json(a, "/v1/policies");
    assert_eq!(serving(&v), new_rev);
    assert!(v["pending"].is_null());
    assert_eq!(
        decision(a, &fetch("https://pastebin.com/x"), 0)["allow"],
        true
    );
    let m = metrics(a);
    assert_eq!(metric(&m, "toolgate_reload_pending"), Some(0.0), "{m}");
    assert_eq!(
        metric(&m, "toolgate_reloads_widening_applied_total"),
        Some(1.0)
    );
}

#[test]
fn a_latch_renamed_applies_by_itself_but_not_when_it_stops_blocking() {
    let coach = coach_source();
    let s = start(
        "gate-latch",
        &[("coach.gate", &coach)],
        &["--poll-ms", "50"],
    );
    let a = &s.addr;
    // A pure rename changes nothing a call can reach: it applies by itself.
    let renamed = coach.replace("documentation_read", "docs_read");
    let renamed_rev = revision_of(a, &renamed);
    std::fs::write(s.dir.join("coach.gate"), &renamed).unwrap();
    let v = wait_for(a, "the rename to apply", |v| serving(v) == renamed_rev);
    assert!(v["pending"].is_null(), "{v}");
    let d = decision(a, &ingest_then_write(), 1);
    assert_eq!(d["allow"], false);
    assert_eq!(d["rule"], "docs_read");

    // A rename that also loses what the latch blocks is held back.
    let broken = renamed.replace("blocks write", "blocks read");
    assert_ne!(broken, renamed);
    std::fs::write(s.dir.join("coach.gate"), &broken).unwrap();
    let v = wait_for(a, "the weakened latch to be held", |v| {
        !v["pending"].is_null()
    });
    assert_eq!(serving(&v), renamed_rev);
    let summary = v["pending"]["summary"].to_string();
    assert!(
        summary.contains("OLD latch `docs_read`, NEW allowed"),
        "{summary}"
    );
    assert_eq!(decision(a, &ingest_then_write(), 1)["allow"], false);
}

#[test]
fn a_pure_narrowing_applies_by_itself() {
    let coach = coach_source();
    let s = start(
        "gate-narrow",
        &[("coach.gate", &coach)],
        &["--poll-ms", "50"],
    );
    let a = &s.addr;
    let narrowed = coach.replace(", \"developers.cloudflare.com\"", "");
    assert_ne!(narrowed, coach);
    let narrowed_rev = revision_of(a, &narrowed);
    let url = "https://developers.cloudflare.com/workers/";
    assert_eq!(decision(a, &fetch(url), 0)["allow"], true);
    std::fs::write(s.dir.join("coach.gate"), &narrowed).unwrap();
    let v = wait_for(a, "the narrowing to apply", |v| serving(v) == narrowed_rev);
    assert!(v["pending"].is_null(), "{v}");
    assert_eq!(decision(a, &fetch(url), 0)["allow"], false);
    assert_eq!(
        metric(&metrics(a), "toolgate_reloads_held_total"),
        Some(0.0)
    );
}

#[test]
fn widening_allow_applies_a_widening_from_the_watcher() {
    let coach = coach_source();
    let s = start(
        "gate-allow",
        &[("coach.gate", &coach)],
        &["--poll-ms", "50", "--reload", "widening=allow"],
    );
    let a = &s.addr;
    let widened = with_pastebin(&coach);
    let new_rev = revision_of(a, &widened);
    std::fs::write(s.dir.join("coach.gate"), &widened).unwrap();
    let v = wait_for(a, "the widening to apply", |v| serving(v) == new_rev);
    assert!(v["pending"].is_null());
    assert_eq!(
        decision(a, &fetch("https://pastebin.com/x"), 0)["allow"],
        true
    );
}

#[cfg(unix)]
#[test]
fn sighup_applies_a_held_change() {
    let coach = coach_source();
    let s = start("gate-hup", &[("coach.gate", &coach)], &["--poll-ms", "50"]);
    let a = &s.addr;
    let widened = with_pastebin(&coach);
    let new_rev = revision_of(a, &widened);
    std::fs::write(s.dir.join("coach.gate"), &widened).unwrap();
    wait_for(a, "the hold", |v| !v["pending"].is_null());
    let status = std::process::Command::new("kill")
        .args(["-HUP", &s.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let v = wait_for(a, "SIGHUP to apply it", |v| serving(v) == new_rev);
    assert!(v["pending"].is_null());
}

#[test]
fn the_first_set_that_compiles_applies_by_itself_when_nothing_was_serving() {
    let s = start(
        "gate-first",
        &[("coach.gate", BROKEN)],
        &["--poll-ms", "50"],
    );
    let a = &s.addr;
    let (_, v) = get_json(a, "/v1/policies");
    assert_eq!(v["policies"].as_array().map(Vec::len), Some(0), "{v}");
    let coach = coach_source();
    let rev = revision_of(a, &coach);
    std::fs::write(s.dir.join("coach.gate"), &coach).unwrap();
    let v = wait_for(a, "the fixed file to load", |v| serving(v) == rev);
    assert!(v["pending"].is_null());
}

#[test]
fn a_change_the_gate_cannot_prove_is_held_like_a_widening() {
    // NEW admits only calls OLD admits (the anchored pattern is within the other), but a
    // Unicode `\b` cannot be decided on a DFA and no search finds a counterexample:
    // undecided. Before the proof the search's silence was "no widening", and the watcher
    // applied it.
    let policy = |req: &str| {
        format!(
            "module m\nwrite pay\nstage s {{ tools [pay] }}\nrule policy_code for pay {{\n  require {req}\n}}\n"
        )
    };
    let old = policy("args.code matches \"\\\\bPOL\\\\b\"");
    let s = start("gate-undecided", &[("m.gate", &old)], &["--poll-ms", "50"]);
    let a = &s.addr;
    let old_rev = revision_of(a, &old);
    std::fs::write(
        s.dir.join("m.gate"),
        policy("args.code matches \"^\\\\bPOL\\\\b$\""),
    )
    .unwrap();
    let v = wait_for(a, "the change to be held back", |v| !v["pending"].is_null());
    assert_eq!(serving(&v), old_rev);
    let m = &v["pending"]["diff"]["modules"][0];
    assert_eq!(m["widenings"].as_array().map(Vec::len), Some(0), "{v}");
    assert_eq!(m["undecided"][0]["rule"], "`policy_code`", "{v}");
}

#[test]
fn an_explicit_reload_applies_only_the_directory_set_that_was_reviewed() {
    let coach = coach_source();
    let s = start(
        "gate-reviewed",
        &[("coach.gate", &coach)],
        &["--poll-ms", "50"],
    );
    let a = &s.addr;
    let old_rev = revision_of(a, &coach);
    let reviewed = with_pastebin(&coach);
    std::fs::write(s.dir.join("coach.gate"), &reviewed).unwrap();
    let v = wait_for(a, "the new host to be held back", |v| {
        !v["pending"].is_null()
    });
    let digest = v["pending"]["digest"].as_str().unwrap().to_string();
    assert_eq!(digest.len(), 64, "{v}");
    // After the review, and before the operator applies it, the file changes again: a second
    // host the operator never saw.
    let unreviewed = reviewed.replace("\"pastebin.com\"]", "\"pastebin.com\", \"evil.example\"]");
    assert_ne!(unreviewed, reviewed);
    std::fs::write(s.dir.join("coach.gate"), &unreviewed).unwrap();
    let (st, body) = http(a, "POST", &format!("/v1/reload?digest={digest}"), &[], b"");
    assert_eq!(st, 409, "{body}");
    assert!(body.contains("changed since"), "{body}");
    let (_, v) = get_json(a, "/v1/policies");
    assert_eq!(serving(&v), old_rev, "nothing applied");
    assert_eq!(
        decision(a, &fetch("https://evil.example/x"), 0)["allow"],
        false
    );
    // What is on disk now is what is pending, under its own digest, for a new review.
    let now = v["pending"]["digest"].as_str().unwrap().to_string();
    assert_ne!(now, digest);
    let (st, body) = http(a, "POST", &format!("/v1/reload?digest={now}"), &[], b"");
    assert_eq!(st, 200, "{body}");
    assert_eq!(
        decision(a, &fetch("https://evil.example/x"), 0)["allow"],
        true
    );
}
