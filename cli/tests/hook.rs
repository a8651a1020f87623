//! `toolgate hook`: the real binary answering spec-shaped events of each coding agent, with
//! its per-session state on disk.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const POLICY: &str = r#"
module coding
write  Write, Edit, Bash, mcp__github__create_issue, shell, Deploy
ingest WebFetch
read   Read, Grep
stage main { tools [Write, Edit, Bash, WebFetch, Read, Grep, mcp__github__create_issue, shell, Deploy] }
latch untrusted { set_by ingest  blocks write }
hosts docs { allow ["docs.rs"] }
rule docs_only for WebFetch { require args.url in hosts docs }
rule read_first for mcp__github__create_issue { require called_before(Read) }
rule no_force for shell { require not (args.command matches "--force") }
rule read_this_turn for Deploy { require called_within(Read, turns: 1) }
"#;

struct Setup {
    dir: PathBuf,
    policy: PathBuf,
}

impl Setup {
    fn new(tag: &str) -> Setup {
        let dir = std::env::temp_dir().join(format!("toolgate-hook-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let policy = dir.join("coding.gate");
        std::fs::write(&policy, POLICY).unwrap();
        Setup { dir, policy }
    }

    fn state_dir(&self) -> PathBuf {
        self.dir.join("state")
    }

    fn command(&self, agent: &str, extra: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_toolgate"));
        c.args(["hook", agent, "--policy"])
            .arg(&self.policy)
            .arg("--state-dir")
            .arg(self.state_dir())
            .args(extra);
        c
    }

    /// Starts the hook with `event` written to its stdin.
    fn spawn(&self, agent: &str, extra: &[&str], event: &str) -> std::process::Child {
        let mut child = self
            .command(agent, extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(event.as_bytes())
            .unwrap();
        child
    }

    fn run(&self, agent: &str, extra: &[&str], event: &str) -> Output {
        self.spawn(agent, extra, event).wait_with_output().unwrap()
    }

    /// Runs a Claude Code event; returns the decision (`None` when nothing was printed).
    fn claude(&self, event: Value) -> Option<Value> {
        self.claude_with(&[], event)
    }

    fn claude_with(&self, extra: &[&str], event: Value) -> Option<Value> {
        let out = self.run("claude-code", extra, &event.to_string());
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        (!stdout.trim().is_empty()).then(|| serde_json::from_str(&stdout).unwrap())
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn pre(session: &str, tool: &str, input: Value) -> Value {
    json!({"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/repo",
           "permission_mode": "default", "hook_event_name": "PreToolUse",
           "tool_name": tool, "tool_input": input, "tool_use_id": "toolu_01"})
}

fn post(session: &str, tool: &str, ok: bool) -> Value {
    let name = if ok {
        "PostToolUse"
    } else {
        "PostToolUseFailure"
    };
    json!({"session_id": session, "hook_event_name": name, "tool_name": tool,
           "tool_input": {}, "tool_response": {"ok": ok}})
}

fn prompt(session: &str) -> Value {
    json!({"session_id": session, "hook_event_name": "UserPromptSubmit", "prompt": "hi"})
}

/// The refusal of a Claude Code denial, or a panic if the answer is not a denial.
fn denied(answer: Option<Value>) -> String {
    let answer = answer.expect("a decision");
    let out = &answer["hookSpecificOutput"];
    assert_eq!(out["hookEventName"], "PreToolUse", "{answer}");
    assert_eq!(out["permissionDecision"], "deny", "{answer}");
    out["permissionDecisionReason"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn claude_code_allowed_calls_get_no_decision_unless_approve() {
    let s = Setup::new("allow");
    assert_eq!(
        s.claude(pre("s1", "Read", json!({"file_path": "a.rs"}))),
        None
    );
    let approved = s.claude_with(&["--approve"], pre("s1", "Read", json!({})));
    assert_eq!(
        approved.unwrap()["hookSpecificOutput"]["permissionDecision"],
        "allow"
    );
}

#[test]
fn claude_code_denies_unclassified_tools_and_bad_hosts_with_the_refusal() {
    let s = Setup::new("deny");
    let reason = denied(s.claude(pre("s1", "mcp__evil__exfiltrate", json!({}))));
    assert!(reason.contains("not classified"), "{reason}");
    let reason = denied(s.claude(pre("s1", "WebFetch", json!({"url": "https://evil.tld/"}))));
    assert!(!reason.is_empty());
    // A refused setter still latches the turn (the engine's rule: a setter counts whether or
    // not its own call is allowed), so a write now is refused too.
    denied(s.claude(pre("s1", "Write", json!({"file_path": "x"}))));
}

#[test]
fn claude_code_latch_holds_for_the_turn_and_drops_at_the_next_prompt() {
    let s = Setup::new("latch");
    assert_eq!(s.claude(pre("s1", "Write", json!({}))), None);
    assert_eq!(
        s.claude(pre(
            "s1",
            "WebFetch",
            json!({"url": "https://docs.rs/serde"})
        )),
        None
    );
    let reason = denied(s.claude(pre("s1", "Write", json!({}))));
    assert!(reason.contains("untrusted") || reason.contains("latch") || !reason.is_empty());
    denied(s.claude(pre("s1", "Bash", json!({"command": "ls"}))));
    // Reads still run; another session is unaffected.
    assert_eq!(s.claude(pre("s1", "Read", json!({}))), None);
    assert_eq!(s.claude(pre("s2", "Write", json!({}))), None);
    // A new user turn clears the latch.
    assert_eq!(s.claude(prompt("s1")), None);
    assert_eq!(s.claude(pre("s1", "Write", json!({}))), None);
}

/// Only the prompt event starts a turn. A prompt id merely different from the last never
/// does, and an older prompt's late call keeps that prompt's latch (issue 20, item 1).
#[test]
fn claude_code_only_the_prompt_starts_a_turn_and_older_prompt_ids_stay_latched() {
    let s = Setup::new("prompt-id");
    let with_id = |mut event: Value, id: &str| {
        event["prompt_id"] = id.into();
        event
    };
    assert_eq!(s.claude(with_id(prompt("s1"), "p1")), None);
    let fetch = pre("s1", "WebFetch", json!({"url": "https://docs.rs/"}));
    assert_eq!(s.claude(with_id(fetch, "p1")), None);
    let write = pre("s1", "Write", json!({}));
    denied(s.claude(with_id(write.clone(), "p1")));
    // An id nobody announced: judged with every latch set, not as a fresh turn.
    denied(s.claude(with_id(write.clone(), "p2")));
    // The user's next prompt starts a clear turn...
    assert_eq!(s.claude(with_id(prompt("s1"), "p2")), None);
    assert_eq!(s.claude(with_id(write.clone(), "p2")), None);
    // ...an older prompt's call arriving between two calls stays latched, and does not
    // reset the current turn.
    denied(s.claude(with_id(write.clone(), "p1")));
    assert_eq!(s.claude(with_id(write.clone(), "p2")), None);
    // A late repeat of the older prompt's event does not reset anything either.
    assert_eq!(s.claude(with_id(prompt("s1"), "p1")), None);
    denied(s.claude(with_id(write.clone(), "p1")));
    assert_eq!(s.claude(with_id(write, "p2")), None);
}

/// `SessionStart` (compact, resume, clear, startup) fires mid-prompt; it is not a new turn
/// (issue 20, item 3).
#[test]
fn claude_code_session_start_does_not_clear_the_latch() {
    let s = Setup::new("session-start");
    s.claude(prompt("s1"));
    assert_eq!(
        s.claude(pre("s1", "WebFetch", json!({"url": "https://docs.rs/"}))),
        None
    );
    for source in ["compact", "resume", "clear", "startup"] {
        let start =
            json!({"session_id": "s1", "hook_event_name": "SessionStart", "source": source});
        assert_eq!(s.claude(start), None);
        denied(s.claude(pre("s1", "Write", json!({}))));
    }
}

/// A policy file caught half-way through a rewrite, with the latch declaration cut off,
/// does not judge a latched turn as unlatched (issue 20, item 4).
#[test]
fn a_policy_rewritten_under_a_latched_turn_blocks_the_turn() {
    let s = Setup::new("rewrite");
    s.claude(prompt("s1"));
    assert_eq!(
        s.claude(pre("s1", "WebFetch", json!({"url": "https://docs.rs/"}))),
        None
    );
    let cut = &POLICY[..POLICY.find("latch untrusted").unwrap()];
    std::fs::write(&s.policy, cut).unwrap();
    let reason = denied(s.claude(pre("s1", "Write", json!({}))));
    assert!(reason.contains("untrusted"), "{reason}");
    std::fs::write(&s.policy, POLICY).unwrap();
    denied(s.claude(pre("s1", "Write", json!({}))));
    s.claude(prompt("s1"));
    assert_eq!(s.claude(pre("s1", "Write", json!({}))), None);
}

/// The hook counts turns, so `called_within` sees how old a call is: a Read in this turn
/// lets Deploy run, last turn's does not, and before the agent signalled any turn a call's
/// age is unknown, so it never counts.
#[test]
fn claude_code_called_within_counts_turns() {
    let s = Setup::new("within");
    let deploy = || pre("s1", "Deploy", json!({}));
    // No turn signalled yet: the Read is undated.
    assert_eq!(s.claude(post("s1", "Read", true)), None);
    let reason = denied(s.claude(deploy()));
    assert!(reason.contains("in this turn"), "{reason}");
    // A turn starts; a Read in it lets Deploy run.
    s.claude(prompt("s1"));
    denied(s.claude(deploy()));
    assert_eq!(s.claude(post("s1", "Read", true)), None);
    assert_eq!(s.claude(deploy()), None);
    // The next turn: that Read is one turn old.
    s.claude(prompt("s1"));
    denied(s.claude(deploy()));
    assert_eq!(s.claude(post("s1", "Read", true)), None);
    assert_eq!(s.claude(deploy()), None);
}

#[test]
fn claude_code_called_before_learns_only_successful_calls() {
    let s = Setup::new("called");
    let issue = || pre("s1", "mcp__github__create_issue", json!({"title": "t"}));
    denied(s.claude(issue()));
    assert_eq!(s.claude(post("s1", "Read", false)), None);
    denied(s.claude(issue()));
    assert_eq!(s.claude(post("s1", "Read", true)), None);
    assert_eq!(s.claude(issue()), None);
    // It lasts across turns: called_before is about the conversation.
    s.claude(prompt("s1"));
    assert_eq!(s.claude(issue()), None);
}

#[test]
fn concurrent_hooks_of_one_session_lose_nothing() {
    let s = Setup::new("concurrent");
    // Many PostToolUse hooks and one latch-setting PreToolUse, all at once. Without the lock,
    // a later writer would overwrite the others' state (a lost latch, lost calls).
    let mut children = Vec::new();
    for i in 0..24 {
        let event = if i == 12 {
            pre("s1", "WebFetch", json!({"url": "https://docs.rs/"}))
        } else {
            post("s1", &format!("Tool{i}"), true)
        };
        children.push(s.spawn("claude-code", &[], &event.to_string()));
    }
    for c in children {
        assert!(c.wait_with_output().unwrap().status.success());
    }
    denied(s.claude(pre("s1", "Write", json!({}))));
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(s.state_dir().join("claude-code-coding-s1.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        state["state"]["called"].as_array().unwrap().len(),
        23,
        "{state}"
    );
}

#[test]
fn a_corrupt_state_file_fails_closed_until_the_next_turn() {
    let s = Setup::new("corrupt");
    assert_eq!(s.claude(pre("s1", "Read", json!({}))), None);
    let file = s.state_dir().join("claude-code-coding-s1.json");
    for junk in [
        "{not json",
        "",
        r#"{"version": 99}"#,
        r#"{"version": 1, "turn": null, "latched": false, "called": []}"#,
        r#"{"version": 2, "state": {}, "state": {}}"#,
    ] {
        std::fs::write(&file, junk).unwrap();
        let out = s.run(
            "claude-code",
            &[],
            &pre("s1", "Write", json!({})).to_string(),
        );
        assert_eq!(out.status.code(), Some(0));
        assert!(text(&out.stderr).contains("could not be read"), "{junk}");
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        denied(Some(answer));
        // It stays latched for the rest of the turn, whatever prompt id comes next: only
        // the user's next prompt ends it (issue 20, item 2).
        denied(s.claude(pre("s1", "Edit", json!({}))));
        let mut other_id = pre("s1", "Write", json!({}));
        other_id["prompt_id"] = "p-next".into();
        denied(s.claude(other_id));
        s.claude(prompt("s1"));
        assert_eq!(s.claude(pre("s1", "Write", json!({}))), None, "{junk}");
    }
}

#[test]
fn unknown_events_are_ignored_and_bad_input_blocks() {
    let s = Setup::new("unknown");
    for name in [
        "Notification",
        "Stop",
        "SubagentStop",
        "PreCompact",
        "SomethingNew",
    ] {
        let out = s.run(
            "claude-code",
            &[],
            &json!({"session_id": "s1", "hook_event_name": name}).to_string(),
        );
        assert_eq!(out.status.code(), Some(0), "{name}");
        assert!(out.stdout.is_empty(), "{name}");
    }
    assert!(!s.state_dir().join("claude-code-coding-s1.json").exists());
    // Input the hook cannot judge: exit 2, which every agent treats as "block".
    for bad in [
        "not json".to_string(),
        r#"{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Read", "tool_name": "Write"}"#.into(),
        r#"{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Write", "tool_input": [1]}"#.into(),
        r#"{"hook_event_name": "PreToolUse", "tool_name": "Write"}"#.into(),
        // A turn id that is not a string is not "no turn id": read so, the call would be
        // placed in whatever turn is current.
        r#"{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Write", "prompt_id": 7}"#.into(),
        r#"{"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt_id": ["p1"]}"#.into(),
        r#"{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Write", "tool_use_id": {}}"#.into(),
    ] {
        let out = s.run("claude-code", &[], &bad);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(out.stdout.is_empty(), "{bad}");
        assert!(text(&out.stderr).starts_with("toolgate: "), "{bad}");
    }
    let cursor = r#"{"hook_event_name": "beforeShellExecution", "conversation_id": "c", "generation_id": 3, "command": "ls"}"#;
    let out = s.run("cursor", &[], cursor);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("generation_id"),
        "{}",
        text(&out.stderr)
    );
    // An event that gates a call and that toolgate does not judge is refused, not let
    // through; events that run nothing stay ignored.
    for (agent, name, code) in [
        ("claude-code", "PermissionRequest", 2),
        ("claude-code", "PreToolUseV2", 2),
        ("claude-code", "PreCompact", 0),
        ("gemini-cli", "BeforeToolCall", 2),
        ("gemini-cli", "BeforeToolSelection", 0),
        ("gemini-cli", "BeforeModel", 0),
    ] {
        let event = json!({"session_id": "s1", "hook_event_name": name, "tool_name": "Write",
                           "tool_input": {}});
        let out = s.run(agent, &[], &event.to_string());
        assert_eq!(out.status.code(), Some(code), "{agent} {name}");
        if code == 2 {
            assert!(text(&out.stderr).contains(name), "{}", text(&out.stderr));
        }
    }
    std::fs::write(&s.policy, "module broken\nstage main { tools [nope }\n").unwrap();
    let out = s.run(
        "claude-code",
        &[],
        &pre("s1", "Read", json!({})).to_string(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("does not compile"));
}

#[test]
fn gemini_cli_events() {
    let s = Setup::new("gemini");
    let before = |tool: &str, input: Value| {
        json!({"session_id": "g1", "transcript_path": "/t", "cwd": "/repo",
               "hook_event_name": "BeforeTool", "timestamp": "2026-12-01T00:00:00Z",
               "tool_name": tool, "tool_input": input})
        .to_string()
    };
    let run = |event: String| {
        let out = s.run("gemini-cli", &[], &event);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        (!stdout.trim().is_empty()).then(|| serde_json::from_str::<Value>(&stdout).unwrap())
    };
    assert_eq!(run(before("Write", json!({}))), None);
    assert_eq!(
        run(before("WebFetch", json!({"url": "https://docs.rs/"}))),
        None
    );
    let answer = run(before("Write", json!({}))).unwrap();
    assert_eq!(answer["decision"], "deny");
    assert!(answer["reason"].as_str().is_some_and(|r| !r.is_empty()));
    run(json!({"session_id": "g1", "hook_event_name": "BeforeAgent", "prompt": "x"}).to_string());
    assert_eq!(run(before("Write", json!({}))), None);
    let out = s.run("gemini-cli", &["--approve"], &before("Read", json!({})));
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap(),
        json!({"decision": "allow"})
    );
}

#[test]
fn cursor_events() {
    let s = Setup::new("cursor");
    let shell = |command: &str| {
        json!({"hook_event_name": "beforeShellExecution", "conversation_id": "c1",
               "generation_id": "gen1", "workspace_roots": ["/repo"],
               "command": command, "cwd": "/repo"})
        .to_string()
    };
    let run = |event: String| {
        let out = s.run("cursor", &[], &event);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        (!stdout.trim().is_empty()).then(|| serde_json::from_str::<Value>(&stdout).unwrap())
    };
    assert_eq!(run(shell("git push")), None);
    let answer = run(shell("git push --force")).unwrap();
    assert_eq!(answer["permission"], "deny");
    assert!(answer["agent_message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
    // MCP calls, with arguments as Cursor sends them (a JSON string).
    let mcp = |tool: &str, gen: &str| {
        json!({"hook_event_name": "beforeMCPExecution", "conversation_id": "c1",
               "generation_id": gen, "tool_name": tool,
               "tool_input": "{\"url\": \"https://docs.rs/\"}"})
        .to_string()
    };
    assert_eq!(run(mcp("WebFetch", "gen1")), None);
    assert_eq!(run(shell("git push")).unwrap()["permission"], "deny");
    // A generation id alone is not a new turn; the prompt is.
    assert_eq!(run(mcp("Read", "gen2")), None);
    let gen2_shell = json!({"hook_event_name": "beforeShellExecution", "conversation_id": "c1",
                            "generation_id": "gen2", "command": "ls"})
    .to_string();
    assert_eq!(run(gen2_shell.clone()).unwrap()["permission"], "deny");
    run(
        json!({"hook_event_name": "beforeSubmitPrompt", "conversation_id": "c1",
               "generation_id": "gen3", "prompt": "next"})
        .to_string(),
    );
    assert_eq!(
        run(
            json!({"hook_event_name": "beforeShellExecution", "conversation_id": "c1",
                   "generation_id": "gen3", "command": "ls"})
            .to_string()
        ),
        None
    );
    // The older generation's late call keeps its latch.
    assert_eq!(run(shell("git push")).unwrap()["permission"], "deny");
    assert_eq!(run(mcp("Read", "gen3")), None);
}

#[test]
fn init_prints_and_merges_settings() {
    let s = Setup::new("init");
    let project = s.dir.join("project");
    std::fs::create_dir_all(project.join(".claude")).unwrap();
    std::fs::write(project.join("p.gate"), POLICY).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .current_dir(&project)
        .args(["hook", "init", "claude-code", "--policy", "p.gate"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let snippet: Value = serde_json::from_slice(&out.stdout).unwrap();
    let command = snippet["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    // The running binary by its absolute path (a bare `toolgate` off the hook's PATH exits
    // 127, which the agent reads as "run it"), the policy anchored to the project.
    let binary = std::fs::canonicalize(env!("CARGO_BIN_EXE_toolgate")).unwrap();
    assert_eq!(
        command,
        format!(
            "'{}' hook claude-code --policy \"$CLAUDE_PROJECT_DIR\"/'p.gate'",
            binary.display()
        )
    );
    // --write merges into existing settings, keeps what is there, and is idempotent.
    let settings = project.join(".claude/settings.json");
    std::fs::write(
        &settings,
        r#"{"model": "x", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": []}]}}"#,
    )
    .unwrap();
    for _ in 0..2 {
        let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .current_dir(&project)
            .args([
                "hook",
                "init",
                "claude-code",
                "--policy",
                "p.gate",
                "--write",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let merged: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(merged["model"], "x");
    assert_eq!(
        merged["hooks"]["PreToolUse"].as_array().unwrap().len(),
        2,
        "{merged}"
    );
    assert_eq!(
        merged["hooks"]["UserPromptSubmit"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // Run from a subdirectory that has a policy of its own, the command judges with the
    // project's policy (the write after a fetch stays denied), as the agent runs it.
    let sub = project.join("sub/.claude");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(
        project.join("sub/p.gate"),
        "module coding\nwrite Write\nread WebFetch\nstage main { tools [Write, WebFetch] }\n",
    )
    .unwrap();
    let run = |event: Value| {
        let mut child = Command::new("sh")
            .args([
                "-c",
                &format!("{command} --state-dir '{}'", s.state_dir().display()),
            ])
            .current_dir(project.join("sub"))
            .env("CLAUDE_PROJECT_DIR", &project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(event.to_string().as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    run(prompt("s-sub"));
    run(pre("s-sub", "WebFetch", json!({"url": "https://docs.rs/"})));
    let out = run(pre("s-sub", "Write", json!({})));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    denied(Some(serde_json::from_slice(&out.stdout).unwrap()));
}

/// `init` wires every pre-tool event with each agent's block-on-failure switch, refuses a
/// policy file that is not there, and warns when the policy classifies none of the agent's
/// tools (issue 22, items 5 to 7).
#[test]
fn init_wires_every_pre_tool_event_and_warns_about_unclassified_tools() {
    let s = Setup::new("init-cursor");
    let init = |agent: &str, policy: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["hook", "init", agent, "--policy"])
            .arg(policy)
            .output()
            .unwrap()
    };
    let out = init("cursor", &s.policy);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let snippet: Value = serde_json::from_slice(&out.stdout).unwrap();
    for event in [
        "preToolUse",
        "beforeMCPExecution",
        "beforeShellExecution",
        "beforeReadFile",
    ] {
        let entry = &snippet["hooks"][event][0];
        assert_eq!(entry["failClosed"], true, "{event}: {snippet}");
        assert!(
            entry["command"]
                .as_str()
                .unwrap()
                .contains(&s.policy.display().to_string()),
            "{event}: an absolute policy path: {snippet}"
        );
    }
    // The test policy names Claude Code's tools only.
    let out = init("gemini-cli", &s.policy);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("classifies none of gemini-cli's tools"),
        "{}",
        text(&out.stderr)
    );
    let out = init("claude-code", &s.policy);
    assert!(
        !text(&out.stderr).contains("warning"),
        "{}",
        text(&out.stderr)
    );
    // The shipped coding-agent policy classifies every agent's tools.
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../stdlib-rules/examples/coding_agent.gate");
    for agent in ["claude-code", "gemini-cli", "cursor"] {
        let out = init(agent, &shipped);
        assert!(
            !text(&out.stderr).contains("warning"),
            "{agent}: {}",
            text(&out.stderr)
        );
    }
    let out = init("cursor", &s.dir.join("missing.gate"));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no such file"),
        "{}",
        text(&out.stderr)
    );
}

/// Cursor's `preToolUse` and `beforeReadFile` are judged; a `before...` event toolgate does
/// not know is refused with exit 2, not let through (issue 22, item 6).
#[test]
fn cursor_pre_tool_and_read_file_events_are_judged_and_unknown_ones_refused() {
    let s = Setup::new("cursor-pre");
    let run = |event: Value| s.run("cursor", &[], &event.to_string());
    let base = |name: &str| json!({"hook_event_name": name, "conversation_id": "c1", "generation_id": "g1"});
    run(
        json!({"hook_event_name": "beforeSubmitPrompt", "conversation_id": "c1",
               "generation_id": "g1", "prompt": "p"}),
    );
    let mut fetch = base("preToolUse");
    fetch["tool_name"] = "WebFetch".into();
    fetch["tool_input"] = json!({"url": "https://docs.rs/"});
    assert_eq!(run(fetch).status.code(), Some(0));
    let mut edit = base("preToolUse");
    edit["tool_name"] = "Write".into();
    edit["tool_input"] = json!({"file_path": "a"});
    let out = run(edit);
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["permission"], "deny", "{answer}");
    let mut read = base("beforeReadFile");
    read["file_path"] = "/etc/passwd".into();
    read["content"] = "...".into();
    let out = run(read);
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    // `read_file` is not classified by the test policy: denied as unclassified, judged.
    assert_eq!(answer["permission"], "deny", "{answer}");
    let out = run(base("beforeTabFileRead"));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("beforeTabFileRead"));
}

/// An answer that cannot be written (stdout on a full disk) blocks the call: exit 2, never
/// a panic's 101, which every agent reads as "run it" (issue 20, item 11).
#[test]
fn an_answer_that_cannot_be_written_exits_2() {
    let s = Setup::new("stdout-full");
    s.claude(prompt("s1"));
    s.claude(pre("s1", "WebFetch", json!({"url": "https://docs.rs/"})));
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let mut child = s
        .command("claude-code", &[])
        .stdin(Stdio::piped())
        .stdout(full)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(pre("s1", "Write", json!({})).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("cannot write the answer"));
}

/// A state directory another user could write is refused, and with no home directory
/// there is no shared fallback (issue 20, item 8).
#[test]
fn an_unsafe_or_missing_state_directory_blocks() {
    use std::os::unix::fs::PermissionsExt;
    let s = Setup::new("state-dir");
    let open = s.dir.join("open");
    std::fs::create_dir_all(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    c.args(["hook", "claude-code", "--policy"])
        .arg(&s.policy)
        .arg("--state-dir")
        .arg(&open);
    let out = run_with(c, &pre("s1", "Write", json!({})).to_string());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("may be written"),
        "{}",
        text(&out.stderr)
    );
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    c.args(["hook", "claude-code", "--policy"])
        .arg(&s.policy)
        .env_remove("HOME")
        .env_remove("XDG_STATE_HOME");
    let out = run_with(c, &pre("s1", "Write", json!({})).to_string());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--state-dir"),
        "{}",
        text(&out.stderr)
    );
    let created = s.dir.join("fresh/state");
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    c.args(["hook", "claude-code", "--policy"])
        .arg(&s.policy)
        .arg("--state-dir")
        .arg(&created);
    assert_eq!(
        run_with(c, &prompt("s1").to_string()).status.code(),
        Some(0)
    );
    let mode = std::fs::metadata(&created).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

fn run_with(mut c: Command, event: &str) -> Output {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(event.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// A Codex policy: its shell tool is `Bash`, file edits are `apply_patch`, MCP tools are
/// `mcp__SERVER__TOOL`.
const CODEX_POLICY: &str = r#"
module coding
write  Bash, apply_patch, mcp__github__create_issue
ingest mcp__fetch__fetch
read   mcp__github__get_issue
stage main { tools [Bash, apply_patch, mcp__github__create_issue, mcp__fetch__fetch, mcp__github__get_issue] }
latch untrusted { set_by ingest  blocks write }
rule looked_first for mcp__github__create_issue { require called_before(mcp__github__get_issue) }
rule no_force for Bash { require not (args.command matches "--force") }
"#;

/// A Codex event with the fields of its `*.command.input` schemas.
fn codex_event(name: &str, turn: &str, extra: Value) -> String {
    let mut e = json!({"session_id": "019a-codex", "turn_id": turn, "transcript_path": null,
                       "cwd": "/repo", "hook_event_name": name, "model": "gpt-5-codex",
                       "permission_mode": "default"});
    for (k, v) in extra.as_object().unwrap() {
        e[k] = v.clone();
    }
    e.to_string()
}

fn codex_pre(turn: &str, tool: &str, command: &str) -> String {
    codex_event(
        "PreToolUse",
        turn,
        json!({"tool_name": tool, "tool_input": {"command": command}, "tool_use_id": "call_1"}),
    )
}

fn codex_post(turn: &str, tool: &str, response: Value) -> String {
    codex_event(
        "PostToolUse",
        turn,
        json!({"tool_name": tool, "tool_input": {}, "tool_response": response,
               "tool_use_id": "call_1"}),
    )
}

#[test]
fn codex_events_get_only_denials_in_codexs_own_format() {
    let s = Setup::new("codex");
    std::fs::write(&s.policy, CODEX_POLICY).unwrap();
    let run = |event: String| -> Option<Value> {
        let out = s.run("codex", &[], &event);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        (!stdout.trim().is_empty()).then(|| serde_json::from_str(&stdout).unwrap())
    };
    // Codex takes any key beyond its output schema as a failed hook and runs the call, so a
    // denial is exactly these keys.
    let refusal = |answer: Option<Value>| -> String {
        let answer = answer.expect("a denial");
        assert_eq!(answer.as_object().unwrap().len(), 1, "{answer}");
        let out = answer["hookSpecificOutput"].as_object().unwrap();
        let mut keys: Vec<&str> = out.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "hookEventName",
                "permissionDecision",
                "permissionDecisionReason"
            ]
        );
        assert_eq!(out["permissionDecision"], "deny");
        out["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        run(codex_event(
            "UserPromptSubmit",
            "t1",
            json!({"prompt": "fix it"})
        )),
        None
    );
    assert_eq!(run(codex_pre("t1", "Bash", "cargo test")), None);
    assert!(refusal(run(codex_pre("t1", "Bash", "git push --force"))).contains("no_force"));
    // `called_before` counts only a call that succeeded.
    assert!(!refusal(run(codex_pre("t1", "mcp__github__create_issue", ""))).is_empty());
    // Neither a reported failure (in Codex's or MCP's spelling) nor a response that cannot
    // show success counts.
    for response in [
        json!({"is_error": true}),
        json!({"isError": true}),
        json!("done"),
        json!({"exit_code": 1}),
    ] {
        assert_eq!(
            run(codex_post("t1", "mcp__github__get_issue", response)),
            None
        );
        refusal(run(codex_pre("t1", "mcp__github__create_issue", "")));
    }
    run(codex_post(
        "t1",
        "mcp__github__get_issue",
        json!({"content": []}),
    ));
    assert_eq!(run(codex_pre("t1", "mcp__github__create_issue", "")), None);
    // An MCP fetch latches the turn: the patch after it is refused, until the next prompt.
    assert_eq!(run(codex_pre("t1", "mcp__fetch__fetch", "")), None);
    let patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch";
    assert!(refusal(run(codex_pre("t1", "apply_patch", patch))).contains("untrusted"));
    assert_eq!(
        run(codex_event(
            "UserPromptSubmit",
            "t2",
            json!({"prompt": "go on"})
        )),
        None
    );
    assert_eq!(run(codex_pre("t2", "apply_patch", patch)), None);
    // `--approve` is still nothing for Codex, which supports no "allow" answer.
    let out = s.run("codex", &["--approve"], &codex_pre("t2", "Bash", "ls"));
    assert_eq!(
        (out.status.code(), text(&out.stdout)),
        (Some(0), String::new())
    );
    // What toolgate cannot judge blocks, with the reason Codex needs on stderr for exit 2
    // to block (without one, exit 2 is a failed hook, which runs the call).
    for bad in [
        codex_event(
            "PermissionRequest",
            "t2",
            json!({"tool_name": "Bash", "tool_input": {"command": "ls"}}),
        ),
        codex_event(
            "PreToolUse",
            "t2",
            json!({"tool_name": "Bash", "tool_input": {"command": "ls"}, "turn_id": 7}),
        ),
        codex_event("PreToolUse", "t2", json!({"tool_input": {"command": "ls"}})),
    ] {
        let out = s.run("codex", &[], &bad);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(text(&out.stderr).trim().len() > "toolgate:".len(), "{bad}");
    }
}

#[test]
fn init_codex_wires_every_tool_event_in_its_hooks_file() {
    let s = Setup::new("init-codex");
    let project = s.dir.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("p.gate"), CODEX_POLICY).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .current_dir(&project)
        .args(["hook", "init", "codex", "--policy", "p.gate", "--write"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(project.join(".codex/hooks.json")).unwrap())
            .unwrap();
    let binary = std::fs::canonicalize(env!("CARGO_BIN_EXE_toolgate")).unwrap();
    let policy = std::fs::canonicalize(project.join("p.gate")).unwrap();
    for event in ["PreToolUse", "PostToolUse", "UserPromptSubmit"] {
        let entry = &written["hooks"][event][0];
        // No matcher: shell, `apply_patch` and MCP calls alike.
        assert!(entry.get("matcher").is_none(), "{event}: {entry}");
        assert_eq!(
            entry["hooks"][0]["command"],
            format!(
                "'{}' hook codex --policy '{}'",
                binary.display(),
                policy.display()
            )
        );
    }
    // The written command runs from anywhere and judges with this policy.
    let command = written["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    let mut child = Command::new("sh")
        .args([
            "-c",
            &format!("{command} --state-dir '{}'", s.state_dir().display()),
        ])
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(codex_pre("t1", "Bash", "git push --force").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        text(&out.stdout).contains("\"deny\""),
        "{}",
        text(&out.stdout)
    );
}

/// An `ask when` (issue 24) reaches each agent as its own approval step where it has one:
/// Claude Code and Cursor ask the user; Gemini CLI and Codex, whose hooks cannot ask, get a
/// denial with the same reason, so the call never runs unseen.
#[test]
fn an_ask_is_the_agents_own_prompt_or_a_denial() {
    let s = Setup::new("ask");
    let asking = format!(
        "{POLICY}rule big_deploys for Deploy {{ ask when args.replicas > 3 }}\nrule ask_force for Bash {{ ask when args.command matches \"--force\" }}\nrule ask_rm for shell {{ ask when args.command matches \"^rm \" }}\n"
    );
    std::fs::write(&s.policy, asking).unwrap();
    // Claude Code: `ask`, with the reason for the person.
    let answer = s
        .claude(pre("a1", "Bash", json!({"command": "git push --force"})))
        .unwrap();
    let out = &answer["hookSpecificOutput"];
    assert_eq!(out["permissionDecision"], "ask", "{answer}");
    assert!(out["permissionDecisionReason"]
        .as_str()
        .unwrap()
        .starts_with("Approval needed: rule `ask_force`"));
    assert_eq!(
        s.claude(pre("a1", "Bash", json!({"command": "git push"}))),
        None
    );
    // Cursor: `ask` too (its shell tool is `shell`, whose `require` still denies first).
    let shell = json!({"hook_event_name": "beforeShellExecution", "conversation_id": "c9",
                       "generation_id": "g1", "command": "rm x", "cwd": "/repo"});
    let out = s.run("cursor", &[], &shell.to_string());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["permission"], "ask", "{v}");
    // Gemini CLI and Codex: a denial carrying the ask's reason.
    let before = json!({"session_id": "g9", "hook_event_name": "BeforeTool",
                        "tool_name": "Bash", "tool_input": {"command": "rm --force x"}});
    let out = s.run("gemini-cli", &[], &before.to_string());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["decision"], "deny", "{v}");
    assert!(v["reason"].as_str().unwrap().starts_with("Approval needed"));
    let codex = json!({"session_id": "x9", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                       "tool_input": {"command": "git push --force"}, "turn_id": "t1"});
    let out = s.run("codex", &[], &codex.to_string());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{v}");
}

/// Who the agent acts for reaches a hook from `--principal` or `TOOLGATE_PRINCIPAL` (a JSON
/// object, `{sub, tenant, claims}`): a rule reading `principal.claims.role` allows with the
/// role, denies without, and denies when no principal is given. A malformed principal
/// blocks (exit 2) with the path of what is wrong, never judges without it.
#[test]
fn the_principal_comes_from_a_flag_or_the_environment() {
    let s = Setup::new("principal");
    std::fs::write(
        &s.policy,
        r#"module coding
write Deploy
stage main { tools [Deploy] }
rule admins_deploy for Deploy {
  require principal.claims.role == "admin"
  refusal "only an admin may deploy"
}
"#,
    )
    .unwrap();
    let deploy = || pre("p1", "Deploy", json!({}));
    let admin = r#"{"sub": "ana", "claims": {"role": "admin"}}"#;
    let dev = r#"{"sub": "bo", "claims": {"role": "dev"}}"#;
    assert_eq!(s.claude_with(&["--principal", admin], deploy()), None);
    assert!(denied(s.claude_with(&["--principal", dev], deploy())).contains("only an admin"));
    assert!(denied(s.claude(deploy())).contains("only an admin"));

    let mut c = s.command("claude-code", &[]);
    c.env("TOOLGATE_PRINCIPAL", admin);
    let out = run_with(c, &deploy().to_string());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).trim().is_empty(), "{}", text(&out.stdout));

    for (bad, says) in [
        (r#"{"subject": "ana"}"#, "facts.principal.subject"),
        (r#"{"sub": "ana""#, "--principal"),
        (r#""ana""#, "facts.principal"),
    ] {
        let out = s.run("claude-code", &["--principal", bad], &deploy().to_string());
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", text(&out.stdout));
        assert!(
            text(&out.stderr).contains(says),
            "{bad}: {}",
            text(&out.stderr)
        );
    }
}
