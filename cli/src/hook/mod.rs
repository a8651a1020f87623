//! Decision hooks for coding agents (`toolgate hook AGENT`).
//!
//! A coding agent (Claude Code, Gemini CLI, Cursor) runs a command before each tool call and
//! reads a decision from its output. Each agent has its own event shape; `agents.rs` turns
//! them into one [`Event`] and renders one [`Answer`] back. This module judges the event with
//! the engine, against per-session state kept on disk by `state.rs` (the turn's latch and the
//! calls that succeeded, for `called_before`).
//!
//! A hook sees one call at a time, so it cannot pre-scan a batch as [`Policy::decide`] does:
//! an allowed latch setter sets the latch at once, so every call judged after it in the turn
//! is blocked, but a write the agent dispatched *before* the setter in the same model turn was
//! already judged unlatched. `docs/agents.md` says so.

pub mod agents;
pub mod state;

use serde_json::Value;
use state::SessionState;
use toolgate_engine::{Call, CalledTool, Facts, Policy, Request};

/// One agent event, normalised.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A new user turn: the turn's latches are dropped.
    TurnStart {
        /// The agent's session (conversation) id.
        session: String,
        /// The agent's id for the new turn, when it sends one.
        turn: Option<String>,
    },
    /// The agent is about to run a tool.
    BeforeTool {
        /// The agent's session id.
        session: String,
        /// The agent's turn id, when it sends one.
        turn: Option<String>,
        /// The agent's id for the call.
        call_id: String,
        /// The tool, as the policy names it.
        tool: String,
        /// The arguments (a JSON object).
        args: Value,
    },
    /// A tool ran.
    AfterTool {
        /// The agent's session id.
        session: String,
        /// The tool, as the policy names it.
        tool: String,
        /// Whether it succeeded.
        ok: bool,
    },
    /// An event toolgate has no part in; answered with nothing.
    Other,
}

impl Event {
    /// The session the event belongs to; `None` for an event toolgate has no part in.
    pub fn session(&self) -> Option<&str> {
        match self {
            Event::TurnStart { session, .. }
            | Event::BeforeTool { session, .. }
            | Event::AfterTool { session, .. } => Some(session),
            Event::Other => None,
        }
    }
}

/// What the hook tells the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// No decision: the agent's own permission rules apply.
    Nothing,
    /// Run the call (only with `--approve`).
    Allow,
    /// Do not run the call; the reason is the refusal the model reads.
    Deny {
        /// The refusal text.
        reason: String,
    },
}

/// How the hook judges calls.
pub struct Judge<'a> {
    /// The compiled policy.
    pub policy: &'a Policy,
    /// The stage every call is judged in.
    pub stage: Option<String>,
    /// Answer [`Answer::Allow`] for allowed calls instead of [`Answer::Nothing`].
    pub approve: bool,
}

impl<'a> Judge<'a> {
    /// A judge for `policy` in `stage`, or, when `stage` is `None`, in the policy's only
    /// stage if it declares exactly one (otherwise no stage: every call is denied for it).
    pub fn new(policy: &'a Policy, stage: Option<String>, approve: bool) -> Self {
        let stage = stage.or_else(|| {
            let mut stages = policy.stages();
            match (stages.next(), stages.next()) {
                (Some(only), None) => Some(only.to_string()),
                _ => None,
            }
        });
        Judge {
            policy,
            stage,
            approve,
        }
    }

    /// Handles one event against the session's state, updating the state in place.
    pub fn handle(&self, event: &Event, state: &mut SessionState) -> Answer {
        self.handle_with(event, state, &Facts::default())
    }

    /// [`Judge::handle`] with facts the caller knows beyond the stage, the latches and the
    /// earlier calls (which come from `self` and `state`, whatever `base` says), for
    /// `toolgate mcp --facts`.
    pub fn handle_with(&self, event: &Event, state: &mut SessionState, base: &Facts) -> Answer {
        match event {
            Event::TurnStart { turn, .. } => {
                state.start_turn(turn.clone());
                Answer::Nothing
            }
            Event::BeforeTool {
                turn,
                call_id,
                tool,
                args,
                ..
            } => {
                if turn.is_some() && *turn != state.turn {
                    state.start_turn(turn.clone());
                }
                self.before_tool(call_id, tool, args, state, base)
            }
            Event::AfterTool { tool, ok, .. } => {
                state.record_call(tool, *ok);
                Answer::Nothing
            }
            Event::Other => Answer::Nothing,
        }
    }

    fn before_tool(
        &self,
        call_id: &str,
        tool: &str,
        args: &Value,
        state: &mut SessionState,
        base: &Facts,
    ) -> Answer {
        let facts = Facts {
            stage: self.stage.clone(),
            latched: state.latched.clone(),
            called: Some(
                state
                    .called
                    .iter()
                    // A call's age in turns, for `called_within`; undated (and so never
                    // recent) before the agent signalled a turn (docs/agents.md).
                    .map(|(tool, ok, turn)| CalledTool {
                        tool: tool.clone(),
                        ok: *ok,
                        turns_ago: turn.map(|t| state.turns.saturating_sub(t)),
                    })
                    .collect(),
            ),
            ..base.clone()
        };
        let request = Request::new(facts, vec![Call::new(call_id, tool, args.clone())]);
        let response = self.policy.decide(&request);
        // An allowed setter latches the turn now, so every later call in it is judged latched.
        state.latched = response.latched.clone();
        match response.decisions.first() {
            Some(d) if d.allow => {
                if self.approve {
                    Answer::Allow
                } else {
                    Answer::Nothing
                }
            }
            Some(d) => Answer::Deny {
                reason: d
                    .reason
                    .as_deref()
                    .unwrap_or("Blocked by the toolgate policy.")
                    .to_string(),
            },
            None => Answer::Deny {
                reason: "Blocked: toolgate returned no decision for this call.".into(),
            },
        }
    }
}
