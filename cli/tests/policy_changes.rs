//! Tests of the real `toolgate` binary for policy changes: `diff`, `test --against`, and
//! `check`/`fmt` over directories.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use std::path::{Path, PathBuf};

use crate::binary_support::{run, stderr, stdout};
use toolgate_tests::example_path;

/// A fresh scratch directory for one test, with `files` written into it.
fn scratch(tag: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("toolgate-policy-changes")
        .join(tag);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn coach() -> String {
    std::fs::read_to_string(example_path("coach")).unwrap()
}

fn truncated_coach() -> String {
    let full = coach();
    full[..full.find("latch documentation_read").unwrap()].to_string()
}

#[test]
fn diff_exits_1_on_a_widening_0_without_and_2_on_an_error() {
    let dir = scratch(
        "diff-exit",
        &[("old.gate", &coach()), ("new.gate", &truncated_coach())],
    );
    let (old, new) = (dir.join("old.gate"), dir.join("new.gate"));
    let out = run(&["diff", s(&old), s(&new)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "widening: `grade_attempt` in stage `coach` after `fetch_vendor_doc` (ingest) in the same batch: OLD latch `documentation_read`, NEW allowed"
        ),
        "{text}"
    );
    assert!(
        text.contains("\"tool\":\"grade_attempt\""),
        "each widening shows its request: {text}"
    );

    let out = run(&["diff", s(&new), s(&old)]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("narrowing: `grade_attempt`"));

    let out = run(&["diff", "--json", s(&old), s(&new)]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["widens"], true);
    let w = &v["modules"][0]["widenings"];
    assert!(w
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["tool"] == "fetch_vendor_doc"));

    let out = run(&["diff", s(&old), s(&dir.join("missing.gate"))]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("missing.gate"), "{}", stderr(&out));
    std::fs::write(
        dir.join("broken.gate"),
        "module coach\nwrite x\nstage s { tools [y\n",
    )
    .unwrap();
    let out = run(&["diff", s(&old), s(&dir.join("broken.gate"))]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("broken.gate:"), "{}", stderr(&out));
}

#[test]
fn diff_matches_directories_by_module_name() {
    let look = "module other\nread look\nstage s { tools [look] }\n";
    let old = scratch("diff-dir-old", &[("a.gate", &coach()), ("b.gate", look)]);
    // Same modules under other file names; `other` gains a tool in its stage.
    let wider = "module other\nread look, peek\nstage s { tools [look, peek] }\n";
    let new = scratch(
        "diff-dir-new",
        &[("renamed.gate", &coach()), ("z.gate", wider)],
    );
    let out = run(&["diff", "--json", s(&old), s(&new)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let modules = v["modules"].as_array().unwrap();
    assert_eq!(modules.len(), 2);
    for m in modules {
        let n = m["widenings"].as_array().unwrap().len();
        match m["module"].as_str().unwrap() {
            "coach" => assert_eq!(n, 0),
            "other" => assert_eq!(n, 1, "{m}"),
            x => panic!("unexpected module {x}"),
        }
    }
}

#[test]
fn test_against_a_baseline_fails_on_an_unacknowledged_widening() {
    let base = scratch("against-base", &[("coach.gate", &coach())]);
    let wider = coach().replace(
        "\"developers.cloudflare.com\"]",
        "\"developers.cloudflare.com\", \"docs.example.org\"]",
    );
    let new = scratch("against-new", &[("coach.gate", &wider)]);
    let out = run(&["test", "--cases", "64", s(&new), "--against", s(&base)]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    let line =
        "coach: `fetch_vendor_doc` in stage `coach`: OLD rule `vendor_doc_host`, NEW allowed";
    assert!(
        text.contains(&format!("widening {line} ... FAILED")),
        "{text}"
    );

    let ack = new.join("accepted-widenings.txt");
    std::fs::write(
        &ack,
        format!("# docs.example.org is our docs mirror (PR 123)\n{line}\n"),
    )
    .unwrap();
    let out = run(&[
        "test",
        "--cases",
        "64",
        s(&new.join("coach.gate")),
        "--against",
        s(&base),
        "--accept-widenings",
        s(&ack),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains(&format!("widening {line} ... acknowledged")));

    // A narrowing needs no acknowledgement.
    let out = run(&["test", "--cases", "64", s(&base), "--against", s(&new)]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("narrowing coach:"));
}

#[test]
fn check_takes_a_directory_and_compiles_invariants_files() {
    let examples = example_path("coach").parent().unwrap().to_path_buf();
    let out = run(&["check", s(&examples)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("coach.gate: ok: module `coach`"), "{text}");
    assert!(
        text.contains("coach.invariants.gate: ok: 3 invariants of module `coach`"),
        "{text}"
    );

    let dir = scratch(
        "check-inv",
        &[
            ("p.gate", "module p\nread look\nstage s { tools [look] }\n"),
            ("p.invariants.gate", "invariant i { never allow lok }\n"),
        ],
    );
    let out = run(&["check", s(&dir.join("p.invariants.gate"))]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("p.invariants.gate:1:"), "{err}");
    assert!(!err.contains("expected module"), "{err}");

    std::fs::remove_file(dir.join("p.gate")).unwrap();
    let out = run(&["check", s(&dir)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("p.gate` does not exist"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn fmt_check_shows_a_unified_diff_and_fmt_takes_a_directory() {
    let messy = "module m\nwrite  a\nstage s {tools [a]}\n";
    let dir = scratch("fmt-dir", &[("m.gate", messy)]);
    let out = run(&["fmt", "--check", s(&dir)]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("m.gate: not formatted"), "{text}");
    assert!(text.contains("-write  a\n"), "{text}");
    assert!(text.contains("+write a\n"), "{text}");
    assert!(
        text.contains("@@ "),
        "a unified diff has hunk headers: {text}"
    );
    assert_eq!(std::fs::read_to_string(dir.join("m.gate")).unwrap(), messy);

    let out = run(&["fmt", s(&dir)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_ne!(std::fs::read_to_string(dir.join("m.gate")).unwrap(), messy);
    let out = run(&["fmt", "--check", s(&dir)]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn an_undecided_change_exits_1_in_diff_and_needs_acknowledging_in_test_against() {
    let policy = |req: &str| {
        format!(
            "module m\nwrite pay\nstage s {{ tools [pay] }}\nrule policy_code for pay {{\n  require {req}\n}}\n"
        )
    };
    // NEW admits no call OLD denied (the anchored pattern is within the other), but a
    // Unicode `\b` cannot be decided on a DFA and no search finds a counterexample: the
    // change is held, not passed.
    let base = scratch(
        "undecided-base",
        &[("m.gate", &policy("args.code matches \"\\\\bPOL\\\\b\""))],
    );
    let new = scratch(
        "undecided-new",
        &[("m.gate", &policy("args.code matches \"^\\\\bPOL\\\\b$\""))],
    );
    let (old_file, new_file) = (base.join("m.gate"), new.join("m.gate"));
    let out = run(&["diff", s(&old_file), s(&new_file)]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("undecided: `pay` in stage `s`: rule `policy_code`: `args.code` matches"),
        "{text}"
    );
    assert!(
        text.contains("not proved that NEW allows nothing OLD denied: held"),
        "{text}"
    );
    let out = run(&["diff", "--json", s(&old_file), s(&new_file)]);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        (v["widens"].as_bool(), v["found_widening"].as_bool()),
        (Some(true), Some(false))
    );
    let undecided = &v["modules"][0]["undecided"][0];
    assert_eq!(undecided["tool"], "pay");
    assert!(
        undecided["reason"]
            .as_str()
            .unwrap()
            .contains("not decided"),
        "{undecided}"
    );
    // The line `test --against` asks to be acknowledged is the summary, module first.
    let line = format!("m: undecided: {}", undecided["summary"].as_str().unwrap());

    let out = run(&["test", "--cases", "64", s(&new), "--against", s(&base)]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains(&format!("widening {line} ... FAILED")),
        "{}",
        stdout(&out)
    );
    let ack = new.join("accepted-widenings.txt");
    std::fs::write(
        &ack,
        format!("# proved by hand: an anchored match is a match\n{line}\n"),
    )
    .unwrap();
    let out = run(&[
        "test",
        "--cases",
        "64",
        s(&new_file),
        "--against",
        s(&base),
        "--accept-widenings",
        s(&ack),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}
