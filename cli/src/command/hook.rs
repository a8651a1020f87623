//! `toolgate hook AGENT --policy FILE`: answer one coding-agent hook event from stdin.
//! `toolgate hook init AGENT --policy FILE [--write]`: the settings that install the hook.

use super::{compile_file, read_input};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use toolgate_engine::{Facts, Policy, Request};
use toolgate_hooks::agents::Agent;
use toolgate_hooks::Judge;
use toolgate_turns::{NewIds, StateDir};

/// Arguments of `toolgate hook`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: HookCommand,
}

#[derive(clap::Subcommand)]
enum HookCommand {
    /// Answer one Claude Code hook event (PreToolUse, PostToolUse, UserPromptSubmit).
    ClaudeCode(RunArgs),
    /// Answer one Gemini CLI hook event (BeforeTool, AfterTool, BeforeAgent).
    GeminiCli(RunArgs),
    /// Answer one Cursor hook event (beforeMCPExecution, beforeShellExecution, ...).
    Cursor(RunArgs),
    /// Answer one Codex CLI hook event (PreToolUse, PostToolUse, UserPromptSubmit).
    Codex(RunArgs),
    /// Print the agent settings that run `toolgate hook` (or merge them in with `--write`).
    Init(InitArgs),
}

/// Arguments of `toolgate hook AGENT`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// The policy file (`.gate`).
    #[arg(long, short)]
    policy: String,
    /// The stage every call is judged in (default: the policy's only stage, if it has one).
    #[arg(long)]
    stage: Option<String>,
    /// Where per-session state lives (default: `$XDG_STATE_HOME/toolgate/hooks`).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Answer "allow" for allowed calls, instead of leaving them to the agent's own rules.
    #[arg(long)]
    approve: bool,
    /// Who the agent acts for, as `facts.principal`: a JSON object with `sub`, `tenant` and
    /// `claims` (also TOOLGATE_PRINCIPAL). Rules read it as `principal.sub`, ...; without it
    /// they deny. A malformed one blocks every call.
    #[arg(long, env = "TOOLGATE_PRINCIPAL", value_name = "JSON")]
    principal: Option<String>,
}

/// Arguments of `toolgate hook init`.
#[derive(clap::Args)]
pub struct InitArgs {
    /// The agent to configure.
    #[arg(value_parser = agent_name())]
    agent: Agent,
    /// The policy file the hook enforces.
    #[arg(long, short)]
    policy: String,
    /// The stage, passed on to the hook.
    #[arg(long)]
    stage: Option<String>,
    /// Merge the hooks into the agent's project settings file instead of printing them.
    #[arg(long)]
    write: bool,
}

/// The agents by their names (`claude-code`, ...), for clap: the hooks crate knows the names
/// and has no command-line parser of its own.
fn agent_name() -> impl clap::builder::TypedValueParser<Value = Agent> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Agent::ALL.map(Agent::name))
        .try_map(|name| Agent::from_name(&name).ok_or("not an agent toolgate knows"))
}

/// The exit code every agent reads as "block this call".
const BLOCK: u8 = 2;

/// Exit 0 with the agent's answer on stdout (a denial is an answer). When the hook cannot
/// judge (a bad policy, an unreadable event, unusable state, an answer that cannot be
/// written, a panic), exit 2 with the reason on stderr: each agent treats exit 2 as "block",
/// and any other failure (101 for a panic) as a non-blocking error that runs the call.
pub fn run(args: &Args) -> ExitCode {
    if !matches!(args.command, HookCommand::Init(_)) {
        std::panic::set_hook(Box::new(|info| {
            let _ = writeln!(
                std::io::stderr(),
                "toolgate: internal error, the call is blocked: {info}"
            );
            std::process::exit(i32::from(BLOCK));
        }));
    }
    let result = match &args.command {
        HookCommand::ClaudeCode(a) => answer(Agent::ClaudeCode, a),
        HookCommand::GeminiCli(a) => answer(Agent::GeminiCli, a),
        HookCommand::Cursor(a) => answer(Agent::Cursor, a),
        HookCommand::Codex(a) => answer(Agent::Codex, a),
        HookCommand::Init(a) => init(a),
    };
    let written = match result {
        Ok(Some(out)) => {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{out}").and_then(|()| stdout.flush())
        }
        Ok(None) => Ok(()),
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "toolgate: {message}");
            return ExitCode::from(BLOCK);
        }
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "toolgate: cannot write the answer ({e}); the call is blocked"
            );
            ExitCode::from(BLOCK)
        }
    }
}

fn answer(agent: Agent, args: &RunArgs) -> Result<Option<String>, String> {
    let input = read_input("-")?;
    let event = agent.read(&input).map_err(|e| e.to_string())?;
    let Some(session) = event.session() else {
        return Ok(None);
    };
    let text = read_input(&args.policy)?;
    let policy = compile_file(&args.policy, &text)
        .map_err(|e| format!("policy does not compile\n{}", e.render().trim_end()))?;
    let judge = Judge::new(&policy, args.stage.clone(), args.approve);
    let facts = principal_facts(&policy, args.principal.as_deref())?;
    let dir = match &args.state_dir {
        Some(dir) => StateDir::new(dir),
        None => StateDir::new(StateDir::default_path().map_err(|e| e.to_string())?),
    };
    let mut locked = dir
        .lock(agent.name(), policy.module(), session)
        .map_err(|e| e.to_string())?;
    if locked.state.is_recovered() {
        eprintln!(
            "toolgate: the hook state of session `{session}` could not be read; every latch is \
             taken as set until the next turn"
        );
    }
    let answer = judge.handle_with(&event, &mut locked.state, &facts, NewIds::NeedSignal);
    locked.save().map_err(|e| e.to_string())?;
    Ok(agent.render(&answer).map(|v| v.to_string()))
}

/// The facts `--principal` gives every call: `facts.principal`, checked by the engine's own
/// reader of it, so a principal the hook takes is one `/v1/decide` would take.
fn principal_facts(policy: &Policy, principal: Option<&str>) -> Result<Facts, String> {
    let Some(text) = principal else {
        return Ok(Facts::default());
    };
    let value = toolgate_engine::parse_json(text)
        .map_err(|e| format!("--principal is not JSON: {e}; the call is blocked"))?;
    let request = Request::from_value(json!({"facts": {"principal": value}, "calls": []}))
        .map_err(|e| format!("--principal: {e}; the call is blocked"))?;
    policy
        .check_facts(&request.facts)
        .map_err(|e| format!("--principal: {e}; the call is blocked"))?;
    Ok(request.facts)
}

/// Quotes `s` for a POSIX shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The policy path as the hook command names it: inside the project (the directory `init`
/// runs in), anchored to Claude Code's `$CLAUDE_PROJECT_DIR`, so the hook judges with this
/// policy from any working directory; elsewhere, or for the other agents, absolute.
fn policy_argument(agent: Agent, policy: &std::path::Path) -> Result<String, String> {
    let absolute = std::fs::canonicalize(policy).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!("no such file: `{}`", policy.display())
        } else {
            format!("cannot read `{}`: {e}", policy.display())
        }
    })?;
    let project = std::env::current_dir()
        .and_then(std::fs::canonicalize)
        .map_err(|e| format!("cannot read the working directory: {e}"))?;
    match (agent, absolute.strip_prefix(&project)) {
        (Agent::ClaudeCode, Ok(inside)) => Ok(format!(
            "\"$CLAUDE_PROJECT_DIR\"/{}",
            shell_quote(&inside.display().to_string())
        )),
        _ => Ok(shell_quote(&absolute.display().to_string())),
    }
}

/// The hook command line for `agent`: the running binary's absolute path (a bare `toolgate`
/// off the hook's `PATH` exits 127, which every agent takes as "run the call"), and the
/// policy anchored to the project.
fn hook_command(agent: Agent, args: &InitArgs) -> Result<String, String> {
    let binary = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| format!("cannot tell where this toolgate binary is: {e}"))?;
    let mut cmd = format!(
        "{} hook {} --policy {}",
        shell_quote(&binary.display().to_string()),
        agent.name(),
        policy_argument(agent, std::path::Path::new(&args.policy))?
    );
    if let Some(stage) = &args.stage {
        cmd.push_str(&format!(" --stage {}", shell_quote(stage)));
    }
    Ok(cmd)
}

/// The settings snippet that installs the hook for `args.agent`: every event the agent has
/// before a tool runs, after it ran, and at a user prompt.
fn settings(args: &InitArgs) -> Result<(PathBuf, Value), String> {
    let command = hook_command(args.agent, args)?;
    let hook = json!([{"matcher": "*", "hooks": [{"type": "command", "command": command}]}]);
    let plain = json!([{"hooks": [{"type": "command", "command": command}]}]);
    Ok(match args.agent {
        Agent::ClaudeCode => (
            PathBuf::from(".claude/settings.json"),
            json!({"hooks": {
                "PreToolUse": hook,
                "PostToolUse": hook,
                "PostToolUseFailure": hook,
                "UserPromptSubmit": plain,
            }}),
        ),
        // No matcher: every tool, shell, `apply_patch` and MCP alike. Codex has no
        // block-on-failure switch (a hook that exits other than 0 or 2 lets the call run),
        // hence the absolute binary path and the hook's own exit 2 with a reason.
        Agent::Codex => (
            PathBuf::from(".codex/hooks.json"),
            json!({"hooks": {
                "PreToolUse": plain,
                "PostToolUse": plain,
                "UserPromptSubmit": plain,
            }}),
        ),
        Agent::GeminiCli => (
            PathBuf::from(".gemini/settings.json"),
            json!({"hooks": {"BeforeTool": hook, "AfterTool": hook, "BeforeAgent": plain}}),
        ),
        Agent::Cursor => {
            // Cursor's own switch: a hook that fails (crashes, times out) blocks the action.
            let entry = json!([{ "command": command, "failClosed": true }]);
            (
                PathBuf::from(".cursor/hooks.json"),
                json!({"version": 1, "hooks": {
                    "preToolUse": entry,
                    "beforeMCPExecution": entry,
                    "beforeShellExecution": entry,
                    "beforeReadFile": entry,
                    "afterMCPExecution": entry,
                    "afterShellExecution": entry,
                    "beforeSubmitPrompt": entry,
                }}),
            )
        }
    })
}

/// A warning when the policy classifies none of the tool names `agent` sends: every call
/// would then be denied as unclassified.
fn coverage_warning(agent: Agent, policy: &str) -> Result<Option<String>, String> {
    let text = read_input(policy)?;
    let compiled = compile_file(policy, &text)
        .map_err(|e| format!("policy does not compile\n{}", e.render().trim_end()))?;
    let names = agent.tool_names();
    let classified = names
        .iter()
        .filter(|n| compiled.class_of(n).is_some())
        .count();
    Ok((classified == 0).then(|| {
        format!(
            "toolgate: warning: `{policy}` classifies none of {}'s tools ({}), so every call would be denied as unclassified; see docs/agents.md for each agent's tool names",
            agent.name(),
            names.join(", ")
        )
    }))
}

fn init(args: &InitArgs) -> Result<Option<String>, String> {
    if let Some(warning) = coverage_warning(args.agent, &args.policy)? {
        let _ = writeln!(std::io::stderr(), "{warning}");
    }
    let (path, snippet) = settings(args)?;
    let pretty = |v: &Value| serde_json::to_string_pretty(v).map_err(|e| e.to_string());
    if !args.write {
        return pretty(&snippet).map(Some);
    }
    let mut current = match std::fs::read_to_string(&path) {
        Ok(text) => toolgate_engine::parse_json(&text)
            .map_err(|e| format!("cannot merge into `{}`: {e}", path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(e) => return Err(format!("cannot read `{}`: {e}", path.display())),
    };
    merge(&mut current, &snippet).map_err(|at| {
        format!(
            "cannot merge into `{}`: `{at}` is not an object",
            path.display()
        )
    })?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    }
    std::fs::write(&path, pretty(&current)? + "\n")
        .map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
    Ok(Some(format!(
        "toolgate: hooks written to {}",
        path.display()
    )))
}

/// Merges `add` into `into`: objects key by key, and each hook list gains the entries it
/// does not already hold (so running `init --write` twice adds nothing). The error names a
/// key whose existing value is not an object where one is needed.
fn merge(into: &mut Value, add: &Value) -> Result<(), String> {
    let (Value::Object(into), Value::Object(add)) = (into, add) else {
        return Err("(top)".into());
    };
    for (key, value) in add {
        match (into.get_mut(key), value) {
            (None, v) => {
                into.insert(key.clone(), v.clone());
            }
            (Some(Value::Array(list)), Value::Array(entries)) => {
                for e in entries {
                    if !list.contains(e) {
                        list.push(e.clone());
                    }
                }
            }
            (Some(existing @ Value::Object(_)), Value::Object(_)) => merge(existing, value)?,
            (Some(_), Value::Object(_)) => return Err(key.clone()),
            (Some(existing), v) => *existing = v.clone(),
        }
    }
    Ok(())
}
