//! Offering tools to the model: only the tools that exist in the current stage, each with the
//! requirements its rules enforce appended to its description.
//!
//! The executor hands over its tool definitions (`name`, `description`, `input_schema`, as the
//! model APIs take them) and the facts of the turn; [`Policy::offer`] returns the definitions
//! the model may see. A tool outside the stage is withheld, so the model never sees a schema
//! for a tool it may not call. A tool latched off for this turn stays offered, with a
//! description saying so, so the model can explain rather than guess. Requirements read as
//! `HARD REQUIREMENT: this function will refuse to run unless ...`. Schemas and every other field pass through unchanged.
//!
//! Like [`Policy::decide`], offering is pure: no I/O, no clock, never a panic.

use crate::decide::{blocking_latch, ActiveStage, StageGate};
use crate::error::RequestError;
use crate::policy::Policy;
use crate::wire::request::{opt_string, read_json, schema, top_object, type_name, Facts};
use crate::wire::schema as key;
use crate::wire::view::LatchedRef;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::sync::Arc;

/// One tool definition as the executor gives it to the model API.
///
/// `name` is required; `description` and `input_schema` are optional. Any other field (an
/// OpenAI-style `parameters`, MCP's `inputSchema`, `cache_control`, ...) is kept in `extra`
/// and passed through. OpenAI's Chat Completions shape (`{"type": "function", "function":
/// {..}}`) is read from inside `function` and written back in that shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// The tool's name, matched against the policy's classified tools.
    pub name: String,
    /// What the model reads about the tool.
    pub description: Option<String>,
    /// The JSON schema of the tool's input; offered unchanged.
    pub input_schema: Option<Value>,
    /// Every other field of the definition, passed through unchanged.
    pub extra: Map<String, Value>,
}

/// The tools to show the model for one turn, and what was left out, for the executor's logs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offer {
    /// The policy's module name.
    pub policy: Arc<str>,
    /// The content hash of the policy source that made the offer.
    pub revision: Arc<str>,
    /// The stage the offer was made for, as the facts give it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// The definitions to send to the model, in the executor's order.
    pub tools: Vec<ToolDef>,
    /// Offered tools that a set latch disables for the rest of this turn (also in `tools`,
    /// with a description that says so).
    pub disabled: Vec<DisabledTool>,
    /// Tools left out and why. For the executor's logs; never show this to the model.
    pub withheld: Vec<WithheldTool>,
}

/// An offered tool that a latch switches off for the rest of the user turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisabledTool {
    /// The tool's name.
    pub name: String,
    /// The latch that disables it (the first declared, when several do).
    pub latch: Arc<str>,
}

/// A tool the model is not shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WithheldTool {
    /// The tool's name as the executor gave it.
    pub name: String,
    /// Why it is withheld.
    pub reason: WithheldReason,
    /// The same in words, naming the stage where one applies.
    pub detail: String,
}

/// Why a tool is not offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WithheldReason {
    /// The policy never classified the tool, so every call to it is denied.
    Unclassified,
    /// The facts name no stage, so no tool exists.
    NoStage,
    /// The facts name a stage the policy does not define.
    UnknownStage,
    /// The tool does not exist in the active stage.
    NotInStage,
    /// The stage has used up its `max_turns`, so every call in it is denied.
    TurnsUsedUp,
    /// The stage's `require` does not hold for this principal and these facts, so every
    /// call in it is denied.
    StageRefused,
    /// The executor listed the name before; only the first definition is offered.
    Duplicate,
}

impl WithheldReason {
    /// The reason as it appears in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            WithheldReason::Unclassified => "unclassified",
            WithheldReason::NoStage => "no_stage",
            WithheldReason::UnknownStage => "unknown_stage",
            WithheldReason::NotInStage => "not_in_stage",
            WithheldReason::TurnsUsedUp => "turns_used_up",
            WithheldReason::StageRefused => "stage_refused",
            WithheldReason::Duplicate => "duplicate",
        }
    }
}

/// An offer request as JSON carries it: `{"facts", "tools", "policy"?, "session"?, "turn"?}`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OfferRequest {
    /// The facts of the turn (the same schema as a decision request's).
    pub facts: Facts,
    /// The executor's tool definitions, in its order.
    pub tools: Vec<ToolDef>,
    /// The policy module the request is meant for, if the caller names one.
    pub policy: Option<String>,
    /// The executor's session id (used by the decision server).
    pub session: Option<String>,
    /// The executor's user-turn id (used by the decision server).
    pub turn: Option<String>,
}

impl ToolDef {
    /// A definition with a name, a description and an input schema.
    pub fn new(name: impl Into<String>, description: impl Into<String>, schema: Value) -> Self {
        ToolDef {
            name: name.into(),
            description: Some(description.into()),
            input_schema: Some(schema),
            extra: Map::new(),
        }
    }

    /// Reads a tool list from JSON text: an array of definitions, or an object whose `tools`
    /// field is one (a model API request body). Errors name the field at fault.
    pub fn list_from_json(text: &str) -> Result<Vec<ToolDef>, RequestError> {
        match read_json(text)? {
            Value::Object(mut top) => match top.remove("tools") {
                Some(list) => Self::list_from_value(list, "tools"),
                None => Err(schema(
                    "tools",
                    "missing field; give an array of tool definitions, or an object with `tools`",
                )),
            },
            other => Self::list_from_value(other, ""),
        }
    }

    /// Reads a tool list from a JSON array; `at` is its path, used in error messages.
    pub fn list_from_value(value: Value, at: &str) -> Result<Vec<ToolDef>, RequestError> {
        let Value::Array(items) = value else {
            return Err(schema(
                at,
                format!(
                    "expected an array of tool definitions, found {}",
                    type_name(&value)
                ),
            ));
        };
        items
            .into_iter()
            .enumerate()
            .map(|(i, v)| Self::from_value(v, &format!("{at}[{i}]")))
            .collect()
    }

    fn from_value(value: Value, at: &str) -> Result<ToolDef, RequestError> {
        let Value::Object(mut map) = value else {
            return Err(schema(
                at,
                format!(
                    "expected an object, found {}; {}",
                    type_name(&value),
                    shape::ACCEPTED
                ),
            ));
        };
        shape::unwrap_openai(&mut map);
        let name = match map.remove("name") {
            Some(Value::String(s)) if !s.is_empty() => s,
            Some(Value::String(_)) => return Err(schema(&format!("{at}.name"), "empty name")),
            Some(v) => {
                return Err(schema(
                    &format!("{at}.name"),
                    format!("expected a string, found {}", type_name(&v)),
                ))
            }
            None => {
                return Err(schema(
                    &format!("{at}.name"),
                    format!("missing field; {}", shape::ACCEPTED),
                ))
            }
        };
        let description = match map.remove("description") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(v) => {
                return Err(schema(
                    &format!("{at}.description"),
                    format!("expected a string, found {}", type_name(&v)),
                ))
            }
        };
        let input_schema = match map.remove("input_schema") {
            None => None,
            Some(v @ Value::Object(_)) => Some(v),
            Some(v) => {
                return Err(schema(
                    &format!("{at}.input_schema"),
                    format!("expected a JSON schema object, found {}", type_name(&v)),
                ))
            }
        };
        Ok(ToolDef {
            name,
            description,
            input_schema,
            extra: map,
        })
    }
}

impl OfferRequest {
    /// Reads an offer request from JSON text; errors name the field at fault.
    pub fn from_json(text: &str) -> Result<Self, RequestError> {
        Self::from_value(read_json(text)?)
    }

    /// Reads an offer request from an already parsed JSON value.
    pub fn from_value(value: Value) -> Result<Self, RequestError> {
        let mut top = top_object(value, &key::OFFER_KEYS, || {
            format!(
                "an offer request has `{}`, `{}` and optionally `{}`, `{}`, `{}`",
                key::FACTS,
                key::TOOLS,
                key::POLICY,
                key::SESSION,
                key::TURN
            )
        })?;
        let tools = match top.remove(key::TOOLS) {
            Some(v) => ToolDef::list_from_value(v, key::TOOLS)?,
            None => {
                return Err(schema(
                    key::TOOLS,
                    "missing field; send the executor's tool definitions",
                ))
            }
        };
        // The facts share the decision request's reader, so both report the same paths.
        let facts = match top.remove(key::FACTS) {
            Some(v) => Facts::from_value(v)?,
            None => Facts::default(),
        };
        Ok(OfferRequest {
            facts,
            tools,
            policy: opt_string(&mut top, "", key::POLICY)?,
            session: opt_string(&mut top, "", key::SESSION)?,
            turn: opt_string(&mut top, "", key::TURN)?,
        })
    }
}

impl Policy {
    /// The tool definitions to show the model for a turn with these facts.
    ///
    /// Keeps the executor's order. Withholds tools the policy never classified and tools that
    /// do not exist in the active stage (all of them when the stage is missing, undefined or
    /// out of turns); appends each offered tool's requirements to its description; marks
    /// tools a set latch disables for this turn. Never fails.
    pub fn offer(&self, facts: &Facts, tools: &[ToolDef]) -> Offer {
        // The stage and latch checks are decide's own (`ActiveStage::gate`,
        // `blocking_latch`), so an offered tool is one whose call passes them.
        let stage = self.judged_stage(crate::wire::view::FactsRef::Owned(facts));
        let turns = facts.stage_turns.unwrap_or(0);
        let latched = self.initial_latches(LatchedRef::from(&facts.latched));

        // Latches that some offered tool sets: only those are worth a warning in a
        // description, and only offered setters are named (the model sees no other tool).
        let offered_ids: Vec<_> = match &stage {
            ActiveStage::Known(s) => tools
                .iter()
                .filter_map(|t| self.tool_id(t.name.as_str()))
                .filter(|id| s.tools.contains(*id))
                .collect(),
            _ => Vec::new(),
        };

        let mut seen: HashSet<&str> = HashSet::new();
        let mut offer = Offer {
            policy: self.module.clone(),
            revision: self.revision.clone(),
            stage: facts.stage.clone(),
            tools: Vec::new(),
            disabled: Vec::new(),
            withheld: Vec::new(),
        };
        for def in tools {
            let mut withhold = |reason: WithheldReason, detail: String| {
                offer.withheld.push(WithheldTool {
                    name: def.name.clone(),
                    reason,
                    detail,
                })
            };
            if !seen.insert(def.name.as_str()) {
                withhold(
                    WithheldReason::Duplicate,
                    "the tool list names this tool more than once; the first definition is offered"
                        .into(),
                );
                continue;
            }
            let Some(id) = self.tool_id(def.name.as_str()) else {
                withhold(
                    WithheldReason::Unclassified,
                    "the policy never classified this tool, so every call to it is denied".into(),
                );
                continue;
            };
            match stage.gate(id, turns) {
                StageGate::Open(_) => {}
                StageGate::Unknown => {
                    let name = facts.stage.as_deref().unwrap_or_default();
                    withhold(
                        WithheldReason::UnknownStage,
                        format!("the policy defines no stage `{name}`, so no tool exists"),
                    );
                    continue;
                }
                StageGate::Missing => {
                    withhold(
                        WithheldReason::NoStage,
                        "the facts name no stage, so no tool exists".into(),
                    );
                    continue;
                }
                StageGate::NotListed(stage) => {
                    withhold(
                        WithheldReason::NotInStage,
                        format!("the tool does not exist in stage `{}`", stage.name),
                    );
                    continue;
                }
                StageGate::Refused(stage) => {
                    withhold(
                        WithheldReason::StageRefused,
                        format!(
                            "stage `{}` is open only when {}, and these facts do not meet that",
                            stage.name, stage.requirement
                        ),
                    );
                    continue;
                }
                StageGate::TurnsUsedUp(stage, max) => {
                    withhold(
                        WithheldReason::TurnsUsedUp,
                        format!(
                            "stage `{}` allows at most {max} turns and they are used up",
                            stage.name
                        ),
                    );
                    continue;
                }
            }
            let info = &self.tools[id.index()];
            let disabled_by = blocking_latch(info.blocked_by, latched)
                .and_then(|latch| self.latches.get(usize::from(latch)));
            let mut out = def.clone();
            out.description =
                self.offered_description(def.description.as_deref(), id, disabled_by, &offered_ids);
            if let Some(latch) = disabled_by {
                offer.disabled.push(DisabledTool {
                    name: def.name.clone(),
                    latch: latch.name.clone(),
                });
            }
            offer.tools.push(out);
        }
        offer
    }

    /// Parses `json` as an [`OfferRequest`] and answers it.
    ///
    /// Fails only when the request is malformed, or names a policy other than this one.
    pub fn offer_json(&self, json: &str) -> Result<Offer, RequestError> {
        let request = OfferRequest::from_json(json)?;
        self.check_module(request.policy.as_deref())?;
        self.check_facts(&request.facts)?;
        Ok(self.offer(&request.facts, &request.tools))
    }

    /// The description the model reads: the disabled notice, the executor's text, the
    /// requirements, and a warning about latches an offered tool can set. The executor's
    /// text comes back untouched when the policy has nothing to add.
    fn offered_description(
        &self,
        original: Option<&str>,
        id: crate::ids::ToolId,
        disabled_by: Option<&crate::policy::LatchInfo>,
        offered: &[crate::ids::ToolId],
    ) -> Option<String> {
        let info = &self.tools[id.index()];
        let mut before: Option<String> = None;
        let mut parts: Vec<String> = Vec::new();
        if let Some(latch) = disabled_by {
            before = Some(format!(
                "DISABLED FOR THIS TURN: latch `{}` is set, so this function will refuse to run until the user's next message. Do not call it now, and do not claim its action happened; tell the user it cannot be done in this turn. If called, it answers: {}",
                latch.name, latch.refusal
            ));
        }
        let requirements: Vec<&str> = info
            .rules
            .iter()
            .map(|r| &*self.rules[r.index()].requirement)
            .collect();
        match requirements.as_slice() {
            [] => {}
            [one] => parts.push(format!(
                "HARD REQUIREMENT: this function will refuse to run unless this holds: {one}. Do not claim the action happened until the call succeeds."
            )),
            many => parts.push(format!(
                "HARD REQUIREMENT: this function will refuse to run unless all of these hold: {}. Do not claim the action happened until the call succeeds.",
                many.iter()
                    .enumerate()
                    .map(|(i, r)| format!("({}) {r}", i + 1))
                    .collect::<Vec<_>>()
                    .join("; ")
            )),
        }
        if disabled_by.is_none() {
            for (bit, latch) in self.latches.iter().enumerate() {
                if info.blocked_by & (1 << bit) == 0 {
                    continue;
                }
                let setters: Vec<String> = offered
                    .iter()
                    .filter(|s| self.tools[s.index()].sets & (1 << bit) != 0)
                    .map(|s| format!("`{}`", self.tools[s.index()].name))
                    .collect();
                if setters.is_empty() {
                    continue;
                }
                parts.push(format!(
                    "NOTE: once this turn calls {}, this function is disabled until the user's next message (latch `{}`), whatever the order of the calls in a batch. Do not call it in the same turn as those.",
                    or_list(&setters),
                    latch.name
                ));
            }
        }
        if before.is_none() && parts.is_empty() {
            return original.map(str::to_string);
        }
        let text = original.map(str::trim_end).filter(|t| !t.is_empty());
        Some(
            before
                .into_iter()
                .chain(text.map(str::to_string))
                .chain(parts)
                .collect::<Vec<_>>()
                .join("\n\n"),
        )
    }
}

/// `a`, `a or b`, `a, b or c`.
fn or_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

mod shape;

#[cfg(test)]
mod tests;
