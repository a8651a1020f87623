//! Each coding agent's hook format: its event JSON in, its decision JSON out.
//!
//! Field names follow each agent's hooks reference (sources in `docs/agents.md`). Tool names
//! pass through unchanged, so a policy names an MCP tool the way the agent reports it:
//! `mcp__SERVER__TOOL` in Claude Code and Gemini CLI. Cursor's shell commands are judged as
//! the tool `shell` with the argument `command`.

use super::{Answer, Event};
use serde_json::{json, Map, Value};
use toolgate_turns::NO_CALL_ID;

/// The agents `toolgate hook` speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Agent {
    /// Claude Code (and the Claude Agent SDK): `PreToolUse`, `PostToolUse`,
    /// `PostToolUseFailure`, `UserPromptSubmit`.
    ClaudeCode,
    /// Gemini CLI: `BeforeTool`, `AfterTool`, `BeforeAgent`.
    GeminiCli,
    /// Cursor: `preToolUse`, `beforeMCPExecution`, `beforeShellExecution`,
    /// `beforeReadFile`, their `after...` events and `beforeSubmitPrompt`.
    Cursor,
    /// Codex CLI: `PreToolUse` (shell, `apply_patch` and MCP calls), `PostToolUse`,
    /// `UserPromptSubmit`.
    Codex,
}

/// Why an event could not be read.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// Not JSON, or ambiguous JSON (a key given twice).
    #[error("the hook event is not valid JSON: {0}")]
    Json(#[from] toolgate_engine::RequestError),
    /// An event that gates an action, which toolgate does not know how to judge: refused,
    /// since answering nothing would let the action run.
    #[error("the hook event `{0}` comes before an action toolgate cannot judge, so it is refused; wire only the events docs/agents.md lists")]
    UnknownPreEvent(String),
    /// A field the event needs is missing or of the wrong type.
    #[error("the hook event's `{field}` is missing or not {expected}")]
    Field {
        /// The field.
        field: &'static str,
        /// What it should be.
        expected: &'static str,
    },
}

impl Agent {
    /// Every agent, in the order the docs list them.
    pub const ALL: [Agent; 4] = [
        Agent::ClaudeCode,
        Agent::GeminiCli,
        Agent::Cursor,
        Agent::Codex,
    ];

    /// The agent called `name` (as on the command line), if there is one.
    pub fn from_name(name: &str) -> Option<Agent> {
        Agent::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The tool names the agent sends for its built-in tools (as toolgate names them: Cursor's
    /// shell commands are `shell`, its file reads `read_file`); a policy for the agent
    /// classifies them. MCP tools come on top, under the names the agent gives them.
    pub fn tool_names(self) -> &'static [&'static str] {
        match self {
            Agent::ClaudeCode => &[
                "Bash",
                "Write",
                "Edit",
                "MultiEdit",
                "NotebookEdit",
                "WebFetch",
                "WebSearch",
                "Read",
                "Grep",
                "Glob",
                "LS",
                "TodoWrite",
                "Task",
            ],
            Agent::GeminiCli => &[
                "run_shell_command",
                "write_file",
                "replace",
                "web_fetch",
                "google_web_search",
                "read_file",
                "read_many_files",
                "glob",
                "search_file_content",
                "list_directory",
                "save_memory",
            ],
            Agent::Cursor => &[
                "shell",
                "read_file",
                "edit_file",
                "delete_file",
                "web_search",
            ],
            // Codex names file edits `apply_patch` (its matcher aliases `Edit` and `Write`
            // for it), and the patch text is in `tool_input.command`, as a command is.
            Agent::Codex => &["Bash", "apply_patch"],
        }
    }

    /// The name used on the command line and in state file names.
    pub fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::GeminiCli => "gemini-cli",
            Agent::Cursor => "cursor",
            Agent::Codex => "codex",
        }
    }

    /// Reads one event.
    pub fn read(self, text: &str) -> Result<Event, EventError> {
        let Value::Object(event) = toolgate_engine::parse_json(text)? else {
            return Err(EventError::Field {
                field: "(event)",
                expected: "an object",
            });
        };
        match self {
            Agent::ClaudeCode => claude_code(&event),
            Agent::GeminiCli => gemini_cli(&event),
            Agent::Cursor => cursor(&event),
            Agent::Codex => codex(&event),
        }
    }

    /// The answer in the agent's own format, or `None` to print nothing.
    pub fn render(self, answer: &Answer) -> Option<Value> {
        let (word, reason) = match answer {
            Answer::Nothing => return None,
            // Codex supports only a denial: any other decision is a failed hook, which it
            // logs and ignores.
            Answer::Allow if self == Agent::Codex => return None,
            Answer::Allow => ("allow", None),
            Answer::Deny { reason } => ("deny", Some(reason.as_str())),
            // Claude Code and Cursor prompt the user themselves. Gemini CLI's hooks answer
            // only allow or deny, and Codex only deny: there the ask is a denial with the
            // same reason, never a silent run.
            Answer::Ask { reason } => match self {
                Agent::ClaudeCode | Agent::Cursor => ("ask", Some(reason.as_str())),
                Agent::GeminiCli | Agent::Codex => ("deny", Some(reason.as_str())),
            },
        };
        Some(match self {
            // Codex reads Claude Code's format, but takes any key beyond its schema as a
            // failed hook and runs the call: exactly these three keys.
            Agent::ClaudeCode | Agent::Codex => {
                let mut out = json!({"hookEventName": "PreToolUse", "permissionDecision": word});
                if let Some(reason) = reason {
                    out["permissionDecisionReason"] = reason.into();
                }
                json!({ "hookSpecificOutput": out })
            }
            Agent::GeminiCli => match reason {
                Some(reason) => json!({"decision": word, "reason": reason}),
                None => json!({ "decision": word }),
            },
            Agent::Cursor => match reason {
                Some(reason) => json!({
                    "permission": word,
                    "user_message": format!("toolgate: {reason}"),
                    "agent_message": reason,
                }),
                None => json!({ "permission": word }),
            },
        })
    }
}

fn string(event: &Map<String, Value>, field: &'static str) -> Result<String, EventError> {
    match event.get(field) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(EventError::Field {
            field,
            expected: "a string",
        }),
    }
}

/// An optional string field: absent or null is `None`; any other type is an error, never
/// read as absent (a numeric `prompt_id` read as "no turn id" would place the call in
/// whatever turn is current).
/// What a post-tool event says the tool returned, as the agent sends it: Claude Code's,
/// Gemini CLI's and Codex's `tool_response`, Cursor's `result_json` (MCP) or `output`
/// (shell), or the `error` of a failure.
fn tool_output(event: &Map<String, Value>) -> Option<Value> {
    [
        "tool_response",
        "tool_output",
        "result_json",
        "output",
        "error",
    ]
    .into_iter()
    .find_map(|k| event.get(k).filter(|v| !v.is_null()).cloned())
}

fn opt_string(
    event: &Map<String, Value>,
    field: &'static str,
) -> Result<Option<String>, EventError> {
    match event.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(EventError::Field {
            field,
            expected: "a string",
        }),
    }
}

/// Tool arguments: an object, or a string holding one (some agents send it encoded);
/// absent means none.
fn args(event: &Map<String, Value>, field: &'static str) -> Result<Value, EventError> {
    let bad = EventError::Field {
        field,
        expected: "an object",
    };
    match event.get(field) {
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        Some(v @ Value::Object(_)) => Ok(v.clone()),
        Some(Value::String(s)) => match toolgate_engine::parse_json(s) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Err(bad),
        },
        Some(_) => Err(bad),
    }
}

fn claude_code(e: &Map<String, Value>) -> Result<Event, EventError> {
    let name = string(e, "hook_event_name")?;
    let session = || string(e, "session_id");
    Ok(match name.as_str() {
        // `SessionStart` (startup, resume, clear, compact) is not a new user turn: compaction
        // fires in the middle of one. Only the prompt starts a turn.
        "UserPromptSubmit" => Event::TurnStart {
            session: session()?,
            turn: opt_string(e, "prompt_id")?,
            prompt: opt_string(e, "prompt")?,
        },
        "PreToolUse" => Event::BeforeTool {
            session: session()?,
            turn: opt_string(e, "prompt_id")?,
            call_id: opt_string(e, "tool_use_id")?.unwrap_or_else(|| NO_CALL_ID.into()),
            tool: string(e, "tool_name")?,
            args: args(e, "tool_input")?,
        },
        "PostToolUse" | "PostToolUseFailure" => Event::AfterTool {
            session: session()?,
            call_id: opt_string(e, "tool_use_id")?,
            output: tool_output(e),
            turn: opt_string(e, "prompt_id")?,
            tool: string(e, "tool_name")?,
            ok: name == "PostToolUse",
        },
        // A permission dialog about to be answered, or a tool event of a later version:
        // each gates a call, so one toolgate does not judge is refused, not let through.
        other if other == "PermissionRequest" || gates_a_tool(other, "Pre") => {
            return Err(EventError::UnknownPreEvent(other.to_string()))
        }
        _ => Event::Other,
    })
}

/// Whether an event name toolgate does not know reads as one that comes before a tool runs
/// (`PreToolUse2`, `BeforeToolCall`): its `prefix` and a `Tool` in the name.
fn gates_a_tool(name: &str, prefix: &str) -> bool {
    name.starts_with(prefix) && name.contains("Tool")
}

fn gemini_cli(e: &Map<String, Value>) -> Result<Event, EventError> {
    let name = string(e, "hook_event_name")?;
    let session = || string(e, "session_id");
    Ok(match name.as_str() {
        "BeforeAgent" => Event::TurnStart {
            session: session()?,
            turn: None,
            prompt: opt_string(e, "prompt")?,
        },
        "BeforeTool" => Event::BeforeTool {
            session: session()?,
            turn: None,
            call_id: NO_CALL_ID.into(),
            tool: string(e, "tool_name")?,
            args: args(e, "tool_input")?,
        },
        "AfterTool" => {
            // A tool that failed reports an error in its response.
            let failed = e
                .get("tool_response")
                .and_then(|r| r.get("error"))
                .is_some_and(|err| !err.is_null());
            Event::AfterTool {
                session: session()?,
                call_id: opt_string(e, "tool_use_id")?,
                output: tool_output(e),
                turn: None,
                tool: string(e, "tool_name")?,
                ok: !failed,
            }
        }
        // `BeforeToolSelection` filters the tools offered to the model; it runs nothing.
        // Another `Before...Tool...` event gates a call toolgate does not judge: refused.
        other if other != "BeforeToolSelection" && gates_a_tool(other, "Before") => {
            return Err(EventError::UnknownPreEvent(other.to_string()))
        }
        _ => Event::Other,
    })
}

fn cursor(e: &Map<String, Value>) -> Result<Event, EventError> {
    let name = string(e, "hook_event_name")?;
    let session = || string(e, "conversation_id");
    let turn = opt_string(e, "generation_id")?;
    let shell_args = || {
        let mut a = Map::new();
        a.insert(
            "command".into(),
            e.get("command").cloned().unwrap_or_default(),
        );
        if let Some(cwd) = e.get("cwd") {
            a.insert("cwd".into(), cwd.clone());
        }
        Value::Object(a)
    };
    Ok(match name.as_str() {
        "beforeSubmitPrompt" => Event::TurnStart {
            session: session()?,
            turn,
            prompt: opt_string(e, "prompt")?,
        },
        "beforeMCPExecution" | "preToolUse" => Event::BeforeTool {
            session: session()?,
            turn,
            call_id: opt_string(e, "tool_use_id")?.unwrap_or_else(|| NO_CALL_ID.into()),
            tool: string(e, "tool_name")?,
            args: args(e, "tool_input")?,
        },
        "beforeShellExecution" => {
            string(e, "command")?;
            Event::BeforeTool {
                session: session()?,
                turn,
                call_id: NO_CALL_ID.into(),
                tool: "shell".into(),
                args: shell_args(),
            }
        }
        "beforeReadFile" => {
            let mut a = Map::new();
            a.insert("file_path".into(), string(e, "file_path")?.into());
            Event::BeforeTool {
                session: session()?,
                turn,
                call_id: NO_CALL_ID.into(),
                tool: "read_file".into(),
                args: Value::Object(a),
            }
        }
        "afterMCPExecution" | "postToolUse" => Event::AfterTool {
            session: session()?,
            call_id: opt_string(e, "tool_use_id")?,
            output: tool_output(e),
            turn: turn.clone(),
            tool: string(e, "tool_name")?,
            ok: true,
        },
        "afterShellExecution" => Event::AfterTool {
            session: session()?,
            call_id: opt_string(e, "tool_use_id")?,
            output: tool_output(e),
            turn: turn.clone(),
            tool: "shell".into(),
            ok: true,
        },
        // Cursor's `before...`/`pre...` events each gate an action (a tab read, a new one):
        // one toolgate does not know is refused, not answered with nothing.
        other if other.starts_with("before") || other.starts_with("pre") => {
            return Err(EventError::UnknownPreEvent(other.to_string()))
        }
        _ => Event::Other,
    })
}

fn codex(e: &Map<String, Value>) -> Result<Event, EventError> {
    let name = string(e, "hook_event_name")?;
    let session = || string(e, "session_id");
    let turn = || opt_string(e, "turn_id");
    Ok(match name.as_str() {
        // `SessionStart` is not a turn: only the prompt starts one.
        "UserPromptSubmit" => Event::TurnStart {
            session: session()?,
            turn: turn()?,
            prompt: opt_string(e, "prompt")?,
        },
        "PreToolUse" => Event::BeforeTool {
            session: session()?,
            turn: turn()?,
            call_id: opt_string(e, "tool_use_id")?.unwrap_or_else(|| NO_CALL_ID.into()),
            tool: string(e, "tool_name")?,
            args: args(e, "tool_input")?,
        },
        // One event for success and failure: a response that reports an error or a
        // non-zero exit, or that is no object at all, is not counted by `called_before`.
        "PostToolUse" => Event::AfterTool {
            session: session()?,
            call_id: opt_string(e, "tool_use_id")?,
            output: tool_output(e),
            turn: turn()?,
            tool: string(e, "tool_name")?,
            ok: !codex_failed(e.get("tool_response")),
        },
        // An approval Codex is about to ask for gates an action toolgate does not judge
        // there (it judged the call at `PreToolUse`): refused if wired, not let through.
        "PermissionRequest" => return Err(EventError::UnknownPreEvent(name)),
        _ => Event::Other,
    })
}

/// Whether a Codex `tool_response` cannot be taken as a success: a failure it reports
/// (`is_error` or MCP's `isError` true, an `error`, a non-zero `exit_code`), or a response
/// that is not an object, which cannot show success either way. `called_before` then does
/// not count the call: unsure is not counted.
fn codex_failed(response: Option<&Value>) -> bool {
    let Some(Value::Object(r)) = response else {
        return true;
    };
    let flagged = |key: &str| r.get(key).and_then(Value::as_bool) == Some(true);
    flagged("is_error")
        || flagged("isError")
        || r.get("error").is_some_and(|e| !e.is_null())
        || r.get("exit_code")
            .and_then(Value::as_i64)
            .is_some_and(|c| c != 0)
}
