//! Tests of the real `toolgate` binary: `offer` and `check --tools`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

use crate::binary_support::{run, text};
use toolgate_tests::{example_path, repo_root, EXAMPLES};

fn scratch(name: &str, contents: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("toolgate-offer-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

fn tools_path(example: &str) -> PathBuf {
    repo_root()
        .join("examples")
        .join("tools")
        .join(format!("{example}.tools.json"))
}

fn policy(example: &str) -> String {
    example_path(example).to_str().unwrap().to_string()
}

fn offer(example: &str, facts: &Value, extra: &[&str]) -> Value {
    let facts = scratch(&format!("{example}-facts.json"), &facts.to_string());
    let tools = tools_path(example);
    let policy = policy(example);
    let mut args = vec![
        "offer",
        "--policy",
        &policy,
        "--tools",
        tools.to_str().unwrap(),
        "--facts",
        facts.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn names(tools: &Value) -> Vec<&str> {
    tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

#[test]
fn offer_shows_only_the_stage_tools_in_executor_order() {
    let intake = offer("motor_claims", &json!({"stage": "intake_claim"}), &[]);
    assert_eq!(intake["tools"], json!([]));
    assert_eq!(intake["withheld"].as_array().unwrap().len(), 4);
    assert_eq!(intake["withheld"][0]["reason"], "not_in_stage");

    let payout = offer("motor_claims", &json!({"stage": "tier_auto_payout"}), &[]);
    assert_eq!(
        names(&payout["tools"]),
        ["lookup_policy_faq", "authorise_bacs_payout"]
    );
    let desc = payout["tools"][1]["description"].as_str().unwrap();
    assert!(
        desc.starts_with("Pay a settled claim to the customer's bank account by BACS.\n\nHARD REQUIREMENT: this function will refuse to run unless all of these hold:"),
        "{desc}"
    );
    // The schema is the executor's, byte for byte.
    let defs: Value =
        serde_json::from_str(&std::fs::read_to_string(tools_path("motor_claims")).unwrap())
            .unwrap();
    assert_eq!(payout["tools"][1]["input_schema"], defs[2]["input_schema"]);
    assert_eq!(payout["policy"], "motor_claims");
}

#[test]
fn offer_marks_latched_tools_and_can_print_only_the_tools() {
    let v = offer(
        "coach",
        &json!({"stage": "coach", "latched": true}),
        &["--only-tools", "--compact"],
    );
    assert_eq!(v.as_array().unwrap().len(), 8);
    for t in v.as_array().unwrap() {
        let desc = t["description"].as_str().unwrap();
        let is_write = ["grade_attempt", "update_memory", "schedule_review"]
            .contains(&t["name"].as_str().unwrap());
        assert_eq!(desc.starts_with("DISABLED FOR THIS TURN"), is_write, "{t}");
    }
}

#[test]
fn offer_rejects_bad_inputs_with_a_location_and_exit_2() {
    let facts = scratch("bad-facts.json", r#"{"stage": 7}"#);
    let tools = scratch("bad-tools.json", r#"[{"name": "a"}, {"description": "b"}]"#);
    let good_tools = tools_path("coach");
    let good_facts = scratch("good-facts.json", r#"{"stage": "coach"}"#);
    let cases: &[(&[&str], &str)] = &[
        (
            &[tools.to_str().unwrap(), good_facts.to_str().unwrap()],
            "`[1].name`: missing field",
        ),
        (
            &[good_tools.to_str().unwrap(), facts.to_str().unwrap()],
            "`facts.stage`",
        ),
        (
            &[good_tools.to_str().unwrap(), "/no/such/facts.json"],
            "no such file: `/no/such/facts.json`",
        ),
    ];
    for (files, mention) in cases {
        let out = run(&[
            "offer",
            "--policy",
            &policy("coach"),
            "--tools",
            files[0],
            "--facts",
            files[1],
        ]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(mention), "{mention}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let broken = scratch("broken.gate", "module x\nread a\nread a\n");
    let out = run(&[
        "offer",
        "--policy",
        broken.to_str().unwrap(),
        "--tools",
        good_tools.to_str().unwrap(),
        "--facts",
        good_facts.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("broken.gate:3:6: error: tool `a` is classified twice"));
}

#[test]
fn check_tools_passes_every_example_with_its_tool_list() {
    for name in EXAMPLES {
        let out = run(&[
            "check",
            "--tools",
            tools_path(name).to_str().unwrap(),
            &policy(name),
        ]);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
        assert!(
            stdout.contains(": 0 unclassified, 0 in the policy only"),
            "{stdout}"
        );
    }
}

#[test]
fn check_tools_fails_on_an_unclassified_executor_tool_and_warns_on_a_missing_one() {
    // The executor gained `send_slack` and lost `schedule_review`.
    let mut defs: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(tools_path("coach")).unwrap()).unwrap();
    defs.retain(|d| d["name"] != "schedule_review");
    defs.push(json!({"name": "send_slack", "description": "Post a message to Slack."}));
    let body = serde_json::to_string_pretty(&json!({"model": "m", "tools": defs})).unwrap();
    let line = body
        .lines()
        .position(|l| l.contains("\"send_slack\""))
        .unwrap()
        + 1;
    let tools = scratch("grown.tools.json", &body);
    let out = run(&[
        "check",
        "--tools",
        tools.to_str().unwrap(),
        &policy("coach"),
    ]);
    let stderr = text(&out.stderr);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("grown.tools.json:{line}:"))
            && stderr.contains(": error: tool `send_slack` is not classified by policy `coach`"),
        "{stderr}"
    );
    assert!(stderr.contains("= help: classify it in"), "{stderr}");
    assert!(
        stderr.contains("coach.gate:8:38: warning: tool `schedule_review` is classified `write` but the executor's tool list"),
        "{stderr}"
    );
    assert!(
        stdout.contains("grown.tools.json: 8 tools checked against module `coach`: 1 unclassified, 1 in the policy only"),
        "{stdout}"
    );
    // Without --tools the same policy is fine.
    assert_eq!(run(&["check", &policy("coach")]).status.code(), Some(0));
}

#[test]
fn check_tools_rejects_a_malformed_tool_list() {
    let tools = scratch("broken.tools.json", "[{\"name\": \"a\"},\n {\"name\": ]");
    let out = run(&[
        "check",
        "--tools",
        tools.to_str().unwrap(),
        &policy("coach"),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("broken.tools.json:2:") && stderr.contains("not valid JSON"),
        "{stderr}"
    );
}
