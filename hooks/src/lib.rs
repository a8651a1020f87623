//! Coding-agent hooks for toolgate: the part of `toolgate hook AGENT` and of the server's
//! `/v1/hooks/{agent}` that knows the agents.
//!
//! A coding agent (Claude Code, Gemini CLI, Cursor, Codex CLI) runs a hook before each tool
//! call and reads a decision from its answer. Each agent has its own event shape;
//! [`agents`] turns them into one [`Event`] and renders one [`Answer`] back. [`Judge`]
//! judges an event with the engine against one session's turn state
//! ([`toolgate_turns::SessionTurns`]); where that state is kept (a file per session, the
//! server's memory or its shared store) is the caller's.
//!
//! A hook sees one call at a time, so it cannot pre-scan a batch as [`Policy::decide`] does:
//! an allowed latch setter sets the latch at once, so every call judged after it in the turn
//! is blocked, but a write the agent dispatched *before* the setter in the same model turn was
//! already judged unlatched. `docs/agents.md` says so.

pub mod agents;

use serde_json::Value;
use toolgate_engine::{Call, Facts, Policy, Request, Response};
use toolgate_turns::{NewIds, SessionTurns};

/// One agent event, normalised.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A new user turn: the turn's latches are dropped.
    TurnStart {
        /// The agent's session (conversation) id.
        session: String,
        /// The agent's id for the new turn, when it sends one.
        turn: Option<String>,
        /// The user's message, when the event carries it (`facts.prompt`).
        prompt: Option<String>,
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
        /// The agent's turn id, when it sends one (a late event is dated by its own turn).
        turn: Option<String>,
        /// The agent's id for the call, when it sends one.
        call_id: Option<String>,
        /// The tool, as the policy names it.
        tool: String,
        /// Whether it succeeded.
        ok: bool,
        /// What it returned, when the event carries it (`facts.outputs`).
        output: Option<Value>,
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

    /// The agent's turn id the event names, if it names one.
    pub fn turn(&self) -> Option<&str> {
        match self {
            Event::TurnStart { turn, .. }
            | Event::BeforeTool { turn, .. }
            | Event::AfterTool { turn, .. } => turn.as_deref(),
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
    /// The policy asks a person (`ask when`, a latch's `asks`): the agent's own permission
    /// prompt where it has one (Claude Code, Cursor), a denial with the same reason where it
    /// has none (Gemini CLI, Codex), so asking never runs the call unseen.
    Ask {
        /// Why, for the person and the model.
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

    /// Handles one event against the session's turn state, updating it in place. On the
    /// hooks an unseen turn id never starts a turn: only the agent's prompt event does.
    pub fn handle(&self, event: &Event, state: &mut SessionTurns) -> Answer {
        self.handle_with(event, state, &Facts::default(), NewIds::NeedSignal)
    }

    /// [`Judge::handle`] with facts the caller knows beyond the stage, the latches and the
    /// earlier calls (which come from `self` and `state`, whatever `base` says), and the
    /// surface's reading of unseen turn ids (`toolgate mcp`: an unseen id is a new turn).
    pub fn handle_with(
        &self,
        event: &Event,
        state: &mut SessionTurns,
        base: &Facts,
        new_ids: NewIds,
    ) -> Answer {
        self.judge(event, state, base, new_ids).answer
    }

    /// [`Judge::handle_with`], also giving the engine's response when the event was a call
    /// it judged, for a caller that records decisions (the server's decision log and
    /// metrics).
    pub fn judge(
        &self,
        event: &Event,
        state: &mut SessionTurns,
        base: &Facts,
        new_ids: NewIds,
    ) -> Handled {
        let answer = match event {
            Event::TurnStart { turn, prompt, .. } => {
                // A session that cannot start another turn stays in its current one, whose
                // latches then go on judging: that errs towards latched.
                if state.signal(self.policy, turn.as_deref()).is_ok() {
                    if let Some(p) = prompt {
                        state.set_prompt(p);
                    }
                }
                Answer::Nothing
            }
            Event::BeforeTool {
                turn,
                call_id,
                tool,
                args,
                ..
            } => {
                return self.before_tool(turn.as_deref(), call_id, tool, args, state, base, new_ids)
            }
            Event::AfterTool {
                tool,
                ok,
                turn,
                call_id,
                output,
                ..
            } => {
                state.record_call(tool, *ok, turn.as_deref());
                // A post event without the result leaves the turn's outputs incomplete, so
                // a check that reads them denies.
                if let Some(output) = output {
                    let id = call_id.as_deref().unwrap_or(toolgate_turns::NO_CALL_ID);
                    state.record_output(self.policy, id, tool, output.clone(), turn.as_deref());
                }
                Answer::Nothing
            }
            Event::Other => Answer::Nothing,
        };
        Handled {
            answer,
            response: None,
            request: None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn before_tool(
        &self,
        turn: Option<&str>,
        call_id: &str,
        tool: &str,
        args: &Value,
        state: &mut SessionTurns,
        base: &Facts,
        new_ids: NewIds,
    ) -> Handled {
        let placed = match state.place(self.policy, turn, new_ids) {
            Ok(placed) => placed,
            Err(e) => {
                return Handled {
                    answer: Answer::Deny {
                        reason: format!("Blocked: {e}."),
                    },
                    response: None,
                    request: None,
                }
            }
        };
        let facts = Facts {
            stage: self.stage.clone(),
            latched: placed.latched.clone(),
            // Each call dated in turns, for `called_within`; undated (never recent) when its
            // turn is unknown (docs/agents.md).
            called: Some(state.called_facts()),
            ..base.clone()
        };
        let mut facts = facts;
        if facts.outputs.is_none() {
            facts.outputs = state.outputs_fact(&placed);
        }
        if facts.prompt.is_none() {
            facts.prompt = state.prompt_fact(&placed);
        }
        let request = Request::new(facts, vec![Call::new(call_id, tool, args.clone())]);
        let response = self.policy.decide(&request);
        if response.decisions.first().is_some_and(|d| d.allow) {
            state.expect_output(self.policy, &placed, call_id, tool, args);
        }
        // An allowed setter latches the turn now, so every later call in it is judged latched.
        state.latch(self.policy, &placed, tool, &response.latched);
        let answer = match response.decisions.first() {
            Some(d) if d.allow => {
                if self.approve {
                    Answer::Allow
                } else {
                    Answer::Nothing
                }
            }
            Some(d) if d.kind == Some(toolgate_engine::DenyKind::Ask) => Answer::Ask {
                reason: d
                    .reason
                    .as_deref()
                    .unwrap_or("Approval needed before this call runs.")
                    .to_string(),
            },
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
        };
        Handled {
            answer,
            response: Some(response),
            request: Some(request),
        }
    }
}

/// What judging one event gave: the agent's answer, and the engine's response when the
/// event was a call the engine judged (not a turn signal, a post-event, or a call refused
/// before it reached the engine because its turn cannot be judged).
#[derive(Debug, Clone)]
pub struct Handled {
    /// What the agent is told.
    pub answer: Answer,
    /// The one-call batch's response.
    pub response: Option<Response>,
    /// The one-call batch `response` answers, as it was judged (the session's latches and
    /// calls in its facts), so another policy can judge the same call: the server's shadow
    /// mode does (`toolgate serve --shadow`).
    pub request: Option<Request>,
}
