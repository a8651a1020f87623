//! Tests of the real `toolgate` binary: `check` and `eval`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use toolgate_tests::{example_path, scenarios, EXAMPLES, MIN_SCENARIOS};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

fn run_stdin(args: &[&str], input: &str) -> Output {
    let mut child = bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The child may exit before reading everything; a broken pipe is fine.
    let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A scratch file for this test binary, named after the calling test.
fn scratch(name: &str, contents: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("toolgate-cli-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

fn golden_dir() -> PathBuf {
    toolgate_tests::repo_root().join("tests").join("golden")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Asserts the binary did not panic and wrote a single paragraph to stderr.
fn assert_clean_failure(out: &Output, code: i32, mentions: &[&str]) {
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(code),
        "exit status; stderr:\n{stderr}\nstdout:\n{}",
        text(&out.stdout)
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("RUST_BACKTRACE"), "{stderr}");
    let trimmed = stderr.trim();
    assert!(!trimmed.is_empty(), "no message on stderr");
    assert!(
        !trimmed.contains("\n\n"),
        "the error is one paragraph:\n{stderr}"
    );
    for m in mentions {
        assert!(
            stderr.contains(m),
            "stderr does not mention `{m}`:\n{stderr}"
        );
    }
}

// ---- eval: the shared scenarios ----------------------------------------------------------

#[test]
fn every_scenario_is_decided_as_expected_through_toolgate_eval() {
    let all = scenarios();
    assert!(all.len() >= MIN_SCENARIOS, "found {} scenarios", all.len());
    let mut failures = Vec::new();
    for sc in &all {
        let stem = sc.path.file_stem().unwrap().to_string_lossy().into_owned();
        let input = scratch(
            &format!("scenario-{stem}.request.json"),
            &sc.request().to_string(),
        );
        let policy = example_path(&sc.policy);
        let out = run(&["eval", "--policy", s(&policy), "--input", s(&input)]);
        if out.status.code() != Some(0) {
            failures.push(format!(
                "{}: exit {:?}: {}",
                sc.path.display(),
                out.status.code(),
                text(&out.stderr)
            ));
            continue;
        }
        let response: Value = match serde_json::from_slice(&out.stdout) {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{}: stdout is not JSON: {e}", sc.path.display()));
                continue;
            }
        };
        assert_eq!(response["policy"], json!(sc.policy));
        if let Err(e) = sc.check(&response) {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scenarios failed through the binary:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n\n")
    );
}

#[test]
fn eval_reads_standard_input_and_exits_0_on_denials() {
    let policy = example_path("coach");
    let req = json!({"facts": {"stage": "coach"}, "calls": [
        {"id": "c1", "tool": "grade_attempt", "args": {}},
        {"id": "c2", "tool": "search_aws_docs", "args": {}},
        {"id": "c3", "tool": "nope", "args": {}},
    ]});
    let out = run_stdin(
        &["eval", "--policy", s(&policy), "--input", "-"],
        &req.to_string(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["policy"], json!("coach"));
    assert!(v["revision"].as_str().is_some_and(|r| !r.is_empty()));
    assert_eq!(v["latched"], json!(true));
    let d = v["decisions"].as_array().unwrap();
    assert_eq!(d.len(), 3);
    assert_eq!(d[0]["kind"], json!("latch"));
    assert_eq!(d[1]["allow"], json!(true));
    assert_eq!(d[2]["kind"], json!("unclassified"));
}

#[test]
fn eval_reports_fail_open_in_its_json() {
    let policy = example_path("messenger_payments");
    let input = scratch(
        "fail-open.json",
        &json!({"facts": {"stage": "chat"}, "calls": [{"id": "c1", "tool": "confirm_payment", "args": {}}]})
            .to_string(),
    );
    let out = run(&["eval", "--policy", s(&policy), "--input", s(&input)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["decisions"][0]["allow"], json!(true));
    assert_eq!(v["decisions"][0]["fail_open"], json!(true));
}

#[test]
fn eval_runs_the_sample_request_next_to_each_example() {
    for name in EXAMPLES {
        let policy = example_path(name);
        let input = policy.with_extension("request.json");
        let out = run(&["eval", "--policy", s(&policy), "--input", s(&input)]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["policy"], json!(name));
    }
}

// ---- eval: malformed input exits 2 with one paragraph ------------------------------------

fn eval_coach_with(name: &str, request: &str) -> Output {
    let input = scratch(name, request);
    run(&[
        "eval",
        "--policy",
        s(&example_path("coach")),
        "--input",
        s(&input),
    ])
}

#[test]
fn eval_rejects_bad_json() {
    let out = eval_coach_with("bad.json", "{\"facts\": {}, \"calls\": [\n");
    assert_clean_failure(&out, 2, &["bad.json"]);
    assert!(out.stdout.is_empty(), "nothing on stdout");
    let out = eval_coach_with("empty.json", "");
    assert_clean_failure(&out, 2, &["empty.json"]);
}

#[test]
fn eval_rejects_messages_of_the_wrong_type() {
    let out = eval_coach_with(
        "messages5.json",
        r#"{"facts": {"messages": 5}, "calls": []}"#,
    );
    assert_clean_failure(&out, 2, &["facts.messages", "messages5.json"]);
    assert!(out.stdout.is_empty());
}

#[test]
fn eval_rejects_ambiguous_requests() {
    for (name, req, mentions) in [
        (
            "dup-tool.json",
            r#"{"facts": {"stage": "coach"}, "calls": [{"id": "1", "tool": "lookup_lesson", "tool": "grade_attempt"}]}"#,
            ["calls[0].tool", "twice"],
        ),
        (
            "dup-id.json",
            r#"{"calls": [{"id": "1", "tool": "lookup_lesson"}, {"id": "1", "tool": "grade_attempt"}]}"#,
            ["calls[1].id", "calls[0]"],
        ),
        (
            "latch-case.json",
            r#"{"facts": {"latched": {"Documentation_read": true}}, "calls": []}"#,
            [
                "facts.latched.Documentation_read",
                "did you mean `documentation_read`",
            ],
        ),
    ] {
        let out = eval_coach_with(name, req);
        assert_clean_failure(&out, 2, &mentions);
        assert!(out.stdout.is_empty(), "{name}: nothing on stdout");
    }
}

/// Every object of a request is closed: a call sent with OpenAI's `arguments` or Anthropic's
/// `input` was judged with no arguments; now it exits 2 naming the key and what it meant.
#[test]
fn eval_rejects_unknown_keys_in_a_call_naming_the_path_and_what_was_meant() {
    for (name, req, mentions) in [
        (
            "arguments.json",
            r#"{"facts": {"stage": "coach"}, "calls": [{"id": "1", "tool": "update_memory", "arguments": {"note": "x"}}]}"#,
            [
                "calls[0].arguments",
                "did you mean `args`?",
                "arguments.json",
            ],
        ),
        (
            "input.json",
            r#"{"facts": {"stage": "coach"}, "calls": [{"id": "1", "tool": "update_memory", "input": {}}]}"#,
            ["calls[0].input", "did you mean `args`?", "input.json"],
        ),
        (
            "name.json",
            r#"{"facts": {"stage": "coach"}, "calls": [{"id": "1", "name": "update_memory"}]}"#,
            ["calls[0].name", "did you mean `tool`?", "name.json"],
        ),
        (
            "role.json",
            r#"{"facts": {"messages": [{"from": "client", "role": "user"}]}, "calls": []}"#,
            [
                "facts.messages[0].role",
                "did you mean `from`?",
                "role.json",
            ],
        ),
    ] {
        let out = eval_coach_with(name, req);
        assert_clean_failure(&out, 2, &mentions);
        assert!(out.stdout.is_empty(), "{name}: nothing on stdout");
    }
}

#[test]
fn eval_rejects_missing_calls() {
    let out = eval_coach_with("nocalls.json", r#"{"facts": {"stage": "coach"}}"#);
    assert_clean_failure(&out, 2, &["calls"]);
    assert!(out.stdout.is_empty());
}

#[test]
fn eval_rejects_other_schema_errors_naming_the_field() {
    for (name, req, path) in [
        (
            "from.json",
            r#"{"facts": {"messages": [{"from": "client"}, {"from": 1}]}, "calls": []}"#,
            "facts.messages[1].from",
        ),
        (
            "ok.json",
            r#"{"facts": {"called": [{"tool": "x", "ok": "yes"}]}, "calls": []}"#,
            "facts.called[0].ok",
        ),
        (
            "latched.json",
            r#"{"facts": {"latched": "no"}, "calls": []}"#,
            "facts.latched",
        ),
        (
            "turns.json",
            r#"{"facts": {"stage_turns": -2}, "calls": []}"#,
            "facts.stage_turns",
        ),
        (
            "args.json",
            r#"{"calls": [{"id": "c1", "tool": "t", "args": "{}"}]}"#,
            "calls[0].args",
        ),
        ("extra.json", r#"{"calls": [], "expect": {}}"#, "expect"),
        ("array.json", "[]", "error"),
        (
            "wrongpolicy.json",
            r#"{"policy": "motor_claims", "calls": []}"#,
            "motor_claims",
        ),
    ] {
        let out = eval_coach_with(name, req);
        assert_clean_failure(&out, 2, &[path]);
    }
}

#[test]
fn eval_rejects_a_broken_policy() {
    let request = scratch("ok.request.json", r#"{"facts": {}, "calls": []}"#);
    let policy = golden_dir().join("duplicate_class.gate");
    let out = run(&["eval", "--policy", s(&policy), "--input", s(&request)]);
    assert_clean_failure(&out, 2, &["duplicate_class.gate:3:12", "classified twice"]);
    assert!(out.stdout.is_empty());
}

#[test]
fn eval_rejects_a_policy_with_several_errors_in_one_paragraph() {
    let request = scratch("ok3.request.json", r#"{"facts": {}, "calls": []}"#);
    let policy = golden_dir().join("multi_error.gate");
    let out = run(&["eval", "--policy", s(&policy), "--input", s(&request)]);
    assert_clean_failure(&out, 2, &["multi_error.gate:7:13"]);
    assert!(out.stdout.is_empty());
}

#[test]
fn eval_rejects_missing_files() {
    let request = scratch("ok2.request.json", r#"{"facts": {}, "calls": []}"#);
    let out = run(&[
        "eval",
        "--policy",
        "/nonexistent/p.gate",
        "--input",
        s(&request),
    ]);
    assert_clean_failure(&out, 2, &["/nonexistent/p.gate"]);
    let out = run(&[
        "eval",
        "--policy",
        s(&example_path("coach")),
        "--input",
        "/nonexistent/r.json",
    ]);
    assert_clean_failure(&out, 2, &["/nonexistent/r.json"]);
}

// ---- check -------------------------------------------------------------------------------

#[test]
fn check_passes_every_example() {
    for name in EXAMPLES {
        let out = run(&["check", s(&example_path(name))]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        assert!(
            !text(&out.stderr).contains("error"),
            "{}",
            text(&out.stderr)
        );
    }
    let all: Vec<PathBuf> = EXAMPLES.iter().map(|n| example_path(n)).collect();
    let args: Vec<&str> = std::iter::once("check")
        .chain(all.iter().map(|p| s(p)))
        .collect();
    assert_eq!(run(&args).status.code(), Some(0));
}

#[test]
fn check_fails_on_every_broken_golden_policy() {
    let mut n = 0;
    for entry in std::fs::read_dir(golden_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "gate") {
            continue;
        }
        n += 1;
        let out = run(&["check", s(&path)]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {stderr}", path.display());
        assert!(!stderr.contains("panicked"), "{stderr}");
        // `file:line:col: error: ...` with the file as given on the command line.
        let needle = format!("{}:", s(&path));
        let first = stderr
            .lines()
            .find(|l| l.contains(": error: "))
            .unwrap_or_else(|| panic!("no error line for {}: {stderr}", path.display()));
        assert!(first.starts_with(&needle), "{first}");
        assert!(stderr.contains('^'), "a caret: {stderr}");
    }
    assert!(n >= 12, "found {n} golden policies");
}

#[test]
fn check_exits_1_when_any_of_several_files_is_broken() {
    let good = example_path("coach");
    let bad = golden_dir().join("missing_brace.gate");
    let out = run(&["check", s(&good), s(&bad)]);
    assert_eq!(out.status.code(), Some(1));
    let out = run(&["check", s(&bad), s(&good)]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn check_reports_several_syntax_errors_at_once() {
    let path = golden_dir().join("multi_error.gate");
    let out = run(&["check", s(&path)]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let errors = stderr.lines().filter(|l| l.contains(": error: ")).count();
    assert!(errors >= 2, "{stderr}");
}

#[test]
fn check_warns_but_passes_on_suspicious_policies() {
    let path = scratch(
        "warnings.gate",
        "module w\nwrite pay, orphan\nread look\nstage s { tools [pay, look, look] }\nhosts empty { allow [] }\nrule media for pay { require client_sent_media(within: 90, kinds: [image]) }\nrule r for [] { require args.x == 1 }\n",
    );
    let out = run(&["check", s(&path)]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "warnings do not fail: {stderr}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(": warning: "))
        .collect();
    let has = |words: &[&str]| {
        warnings
            .iter()
            .any(|w| words.iter().all(|word| w.contains(word)))
    };
    // Five of the warnings the spec lists (a name that is never classified is an error).
    assert!(has(&["look", "listed twice"]), "{stderr}");
    assert!(has(&["orphan", "no stage"]), "{stderr}");
    assert!(has(&["90", "50"]), "{stderr}");
    assert!(has(&["empty", "no entries"]), "{stderr}");
    assert!(has(&["rule `r` applies to no tool"]), "{stderr}");
    for w in &warnings {
        assert!(w.starts_with(&format!("{}:", s(&path))), "{w}");
    }
}

#[test]
fn check_with_a_missing_file_fails_without_panicking() {
    let out = run(&["check", "/nonexistent/policy.gate"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("/nonexistent/policy.gate"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn check_deny_warnings_turns_every_warning_into_an_error() {
    let path = scratch(
        "deny.gate",
        "module w\nwrite pay, orphan\nread look\nstage s { tools [pay, look, look] }\nhosts empty { allow [] }\n",
    );
    let out = run(&["check", s(&path)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = run(&["check", "--deny-warnings", s(&path)]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains(": warning: "), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains(": error: ")).collect();
    assert_eq!(errors.len(), 3, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}:4:29: error: tool `look` is listed twice in stage `s`",
            s(&path)
        )),
        "{stderr}"
    );
    assert!(stderr.contains("denied by `--deny-warnings`"), "{stderr}");
    assert!(text(&out.stdout).contains(&format!("{}: 3 errors", s(&path))));
    // A policy without warnings passes, and so does every shipped example.
    let mut args = vec!["check", "--deny-warnings"];
    let examples: Vec<PathBuf> = [
        "coach",
        "motor_claims",
        "messenger_payments",
        "support_desk",
    ]
    .iter()
    .map(|n| example_path(n))
    .collect();
    args.extend(examples.iter().map(|p| s(p)));
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn check_deny_warnings_covers_the_tools_list_warnings() {
    let policy = scratch(
        "deny_tools.gate",
        "module w\nwrite pay\nread look\nstage s { tools [pay, look] }\n",
    );
    let tools = scratch("deny_tools.json", r#"[{"name": "pay"}]"#);
    let out = run(&["check", "--tools", s(&tools), s(&policy)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("warning: tool `look` is classified"));
    let out = run(&["check", "--deny-warnings", "--tools", s(&tools), s(&policy)]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: tool `look` is classified `read`"),
        "{stderr}"
    );
}

#[test]
fn check_refuses_the_issue_example_of_a_misspelt_rule_target() {
    let path = scratch(
        "misspelt.gate",
        "module m\negress send_email\nstage s { tools [send_email] }\nrule r for send_emails { require args.to == \"a@example.com\" }\n",
    );
    let out = run(&["check", s(&path)]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr
            .contains("4:12: error: rule `r` names tool `send_emails`, which is never classified"),
        "{stderr}"
    );
    assert!(
        stderr.contains("help: did you mean `send_email`?"),
        "{stderr}"
    );
}

/// A file that is not there is "no such file", not "not a policy file" (issue 22, item 12).
#[test]
fn a_missing_file_says_no_such_file() {
    for args in [
        &["playground", "no-such-dir/coach.gate"][..],
        &["eval", "--policy", "no-such.gate", "--input", "-"][..],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no such file"), "{args:?}: {err}");
    }
}

/// `serve --jwks` needs the issuer and audience it checks, and a bad AuthZEN identifier
/// stops the server: both before anything listens.
#[test]
fn serve_refuses_half_configured_token_checks_and_bad_pdp_identifiers() {
    let dir = std::env::temp_dir().join(format!("toolgate-jwks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("m.gate"),
        "module m\nread r\nstage s { tools [r] }\n",
    )
    .unwrap();
    let d = dir.display().to_string();
    let out = run(&["serve", &d, "--jwks", "keys.json", "--jwt-audience", "a"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--jwt-issuer"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&["serve", &d, "--jwt-issuer", "https://idp"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--jwks"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&[
        "serve",
        &d,
        "--addr",
        "127.0.0.1:0",
        "--authzen-pdp",
        "http://pdp",
    ]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--authzen-pdp"),
        "{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
