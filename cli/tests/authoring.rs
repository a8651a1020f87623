//! What a new author meets first, from the docs alone: `--help`, example-test files that say
//! every mistake at once, and a policy with no tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use crate::binary_support::{run, stdout};

const POLICY: &str = "module mail\nwrite send\nread look\nstage main { tools [look, send] }\nrule no_cc for send { require not args.cc exists }\n";

fn scratch(name: &str, tests: Option<&str>) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("toolgate-authoring")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("mail.gate"), POLICY).unwrap();
    if let Some(t) = tests {
        std::fs::write(dir.join("mail.tests.json"), t).unwrap();
    }
    dir
}

const CC_REQUEST: &str =
    r#"{"facts": {"stage": "main"}, "calls": [{"id": "a", "tool": "send", "args": {"cc": "x"}}]}"#;

#[test]
fn help_lists_every_command() {
    let out = run(&["--help"]);
    let text = stdout(&out);
    assert!(out.status.success());
    let about = text.lines().next().unwrap();
    assert!(!about.contains("check, eval."), "{about}");
    let commands: Vec<&str> = text
        .split("Commands:")
        .nth(1)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .take_while(|w| !w.ends_with(':'))
        .collect();
    for c in [
        "check",
        "eval",
        "offer",
        "fmt",
        "serve",
        "test",
        "hook",
        "mcp",
        "playground",
    ] {
        assert!(commands.contains(&c), "`{c}` missing from {commands:?}");
    }
}

#[test]
fn an_unknown_key_is_an_error_with_a_did_you_mean_and_every_error_is_reported() {
    let tests = format!(
        r#"{{"cases": [
          {{"name": "cc", "request": {CC_REQUEST}, "expected": [{{"allow": false}}]}},
          {{"name": "two", "request": {CC_REQUEST}, "expect": [{{"allow": false, "rul": "no_cc"}}]}},
          {{"name": "three", "request": {CC_REQUEST}, "expect": [{{"allow": false, "kind": "nope"}}]}}
        ]}}"#
    );
    let dir = scratch("unknown-key", Some(&tests));
    let out = run(&["test", "--cases", "8", dir.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("cases[0].expected: unknown key `expected`; did you mean `expect`?"),
        "{text}"
    );
    assert!(
        text.contains("cases[0].expect: expected an array"),
        "{text}"
    );
    assert!(
        text.contains("cases[1].expect[0].rul: unknown key `rul`; did you mean `rule`?"),
        "{text}"
    );
    assert!(
        text.contains("cases[2].expect[0].kind: expected one of"),
        "{text}"
    );
}

#[test]
fn reason_is_checked_by_substring() {
    let case = |reason: &str| {
        format!(
            r#"{{"cases": [{{"name": "cc", "request": {CC_REQUEST}, "expect": [{{"allow": false, "rule": "no_cc", "reason": "{reason}"}}]}}]}}"#
        )
    };
    let dir = scratch("reason-ok", Some(&case("args.cc")));
    let out = run(&["test", "--cases", "8", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    let dir = scratch("reason-bad", Some(&case("args.bcc")));
    let out = run(&["test", "--cases", "8", dir.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("expected to contain: \"args.bcc\""), "{text}");
    assert!(text.contains("refusal:"), "{text}");
}

#[test]
fn a_policy_with_no_tests_gets_a_notice() {
    let dir = scratch("no-tests", None);
    let out = run(&["test", "--cases", "8", dir.to_str().unwrap()]);
    let text = stdout(&out);
    assert!(
        text.contains("notice: no example tests: write `") && text.contains("mail.tests.json"),
        "{text}"
    );
}

#[test]
fn offer_and_check_read_openai_tool_lists_and_name_the_shapes_on_error() {
    let dir = scratch("tool-shapes", None);
    let policy = dir.join("mail.gate");
    let tools = dir.join("tools.json");
    let facts = dir.join("facts.json");
    std::fs::write(&facts, r#"{"stage": "main"}"#).unwrap();
    std::fs::write(
        &tools,
        r#"[{"type": "function", "function": {"name": "send", "description": "Sends.", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}]"#,
    )
    .unwrap();
    let p = policy.to_str().unwrap();
    let t = tools.to_str().unwrap();
    let out = run(&[
        "offer",
        "--policy",
        p,
        "--tools",
        t,
        "--facts",
        facts.to_str().unwrap(),
        "--only-tools",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let offered: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(offered[0]["type"], "function");
    assert_eq!(offered[0]["function"]["name"], "send");
    assert!(
        offered[0]["function"]["description"]
            .as_str()
            .unwrap()
            .contains("`args.cc` must be absent"),
        "{offered}"
    );
    let out = run(&["check", "--tools", t, p]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    std::fs::write(&tools, r#"[{"tool": "send"}]"#).unwrap();
    let out = run(&["check", "--tools", t, p]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    for shape in ["OpenAI", "Anthropic", "MCP"] {
        assert!(err.contains(shape), "{err}");
    }
}
