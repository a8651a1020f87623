//! Tests of `toolgate test`: example tests, invariants, exit codes, counterexamples that
//! `toolgate eval` accepts as they are printed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use std::path::{Path, PathBuf};

use crate::binary_support::{run, stdout};
use toolgate_tests::{example_path, EXAMPLES};

fn examples_dir() -> PathBuf {
    example_path("coach").parent().unwrap().to_path_buf()
}

/// A fresh directory holding copies of the example files, for editing.
fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("toolgate-test-command")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(examples_dir()).unwrap().flatten() {
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    dir
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "`{from}` not in {}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn the_examples_pass_with_a_summary_line() {
    let out = run(&["test", "--cases", "64", examples_dir().to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    for name in EXAMPLES {
        assert!(
            text.contains(&format!("policy {}", example_path(name).display())),
            "{text}"
        );
    }
    assert!(
        text.contains("invariant motor_claims::payout_only_in_its_stage ... proved"),
        "{text}"
    );
    assert!(text.contains("searched with 64 cases, seed "), "{text}");
    let last = text.lines().last().unwrap();
    let passed: usize = last.split(' ').next().unwrap().parse().unwrap();
    assert!(passed >= 30, "{last}");
    assert!(last.ends_with("passed, 0 failed"), "{last}");
}

#[test]
fn a_broken_policy_fails_with_a_counterexample_that_eval_accepts() {
    let dir = scratch_dir("broken_hosts");
    let policy = dir.join("coach.gate");
    edit(
        &policy,
        "\"developers.cloudflare.com\"]",
        "\"developers.cloudflare.com\", \".amazon.com\"]",
    );
    let out = run(&[
        "test",
        "--cases",
        "128",
        "--seed",
        "7",
        policy.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("invariant coach::vendor_hosts_only ... FAILED"),
        "{text}"
    );
    assert!(
        text.contains("coach.invariants.gate:17:1: invariant `vendor_hosts_only` is violated"),
        "{text}"
    );
    assert!(text.contains("seed 7"), "{text}");
    assert!(text.trim_end().ends_with("1 failed"), "{text}");
    // The request is printed indented after the marker line; feed it to `toolgate eval`.
    let after = text.split("--input FILE`:\n").nth(1).unwrap();
    let json: String = after
        .lines()
        .take_while(|l| l.starts_with("    "))
        .map(|l| format!("{}\n", &l[4..]))
        .collect();
    let request: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}\n{json}"));
    let file = dir.join("cx.json");
    std::fs::write(&file, request.to_string()).unwrap();
    let eval = run(&[
        "eval",
        "--policy",
        policy.to_str().unwrap(),
        "--input",
        file.to_str().unwrap(),
    ]);
    assert_eq!(eval.status.code(), Some(0));
    let resp: Value = serde_json::from_slice(&eval.stdout).unwrap();
    assert!(
        resp["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["allow"] == true),
        "{resp}"
    );
}

#[test]
fn a_failing_example_test_prints_expected_and_actual() {
    let dir = scratch_dir("failing_test");
    edit(
        &dir.join("motor_claims.tests.json"),
        "\"amount\": 250, \"policy\"",
        "\"amount\": 251, \"policy\"",
    );
    let out = run(&[
        "test",
        "--cases",
        "16",
        dir.join("motor_claims.tests.json").to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("test motor_claims::a payout in the auto tier runs ... FAILED"),
        "{text}"
    );
    assert!(text.contains("expected: allow"), "{text}");
    assert!(
        text.contains("actual:   deny kind=args rule=payout_within_auto_tier"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("1 failed"), "{text}");
}

#[test]
fn coverage_names_what_the_tests_never_hit() {
    let out = run(&[
        "test",
        "--coverage",
        "--cases",
        "8",
        example_path("coach").to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("coverage: rules 1/1"), "{text}");
    assert!(
        text.contains("coverage: tools 7/8, never hit: search_cloudflare_docs"),
        "{text}"
    );
}

#[test]
fn broken_invariants_and_missing_paths_are_reported() {
    let dir = scratch_dir("bad_invariants");
    edit(
        &dir.join("coach.invariants.gate"),
        "invariants for coach",
        "invariants for coach_v2",
    );
    let out = run(&["test", dir.join("coach.gate").to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("these invariants are for policy `coach_v2`"),
        "{text}"
    );
    let out = run(&["test", dir.join("nothing_here").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing_here` does not exist"));
    let empty = Path::new(env!("CARGO_TARGET_TMPDIR")).join("toolgate-test-command-empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = run(&["test", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn deny_warnings_fails_a_policy_or_invariants_file_with_warnings() {
    let dir = scratch_dir("deny_warnings");
    let out = run(&[
        "test",
        "--deny-warnings",
        "--cases",
        "16",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the examples have no warnings: {}",
        stdout(&out)
    );
    let policy = dir.join("motor_claims.gate");
    edit(
        &policy,
        "tools [authorise_bacs_payout, lookup_policy_faq]",
        "tools [authorise_bacs_payout, lookup_policy_faq, lookup_policy_faq]",
    );
    let p = policy.to_str().unwrap();
    let out = run(&["test", "--cases", "16", p]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "warnings alone do not fail: {}",
        stdout(&out)
    );
    let out = run(&["test", "--deny-warnings", "--cases", "16", p]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("policy") && text.contains("... FAILED"),
        "{text}"
    );
    assert!(
        text.contains("error: tool `lookup_policy_faq` is listed twice"),
        "{text}"
    );
    // A warning in the invariants file fails it too.
    let dir = scratch_dir("deny_warnings_inv");
    let inv = dir.join("motor_claims.invariants.gate");
    let text = std::fs::read_to_string(&inv).unwrap();
    std::fs::write(&inv, format!("{text}\nhosts nothing {{ allow [] }}\n")).unwrap();
    let p = dir.join("motor_claims.gate");
    let out = run(&["test", "--cases", "16", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = run(&[
        "test",
        "--deny-warnings",
        "--cases",
        "16",
        p.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("denied by --deny-warnings")
            && text.contains("host list `nothing` has no entries"),
        "{text}"
    );
}
