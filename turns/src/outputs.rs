//! The outputs of a session's current turn, for `facts.outputs` (argument provenance).
//!
//! A surface that sees results (the hooks' post-tool events, the MCP proxy forwarding a
//! result, an in-process executor) records them here, and its judge sends them with every
//! later call of the turn, so `from ingest` and a latch's `blocks tainted` can tell an
//! injected value from the user's own.
//!
//! The contract is fail-closed: the outputs are given to a judgement only when they are known
//! to be **complete**, that is when every call of the turn whose output the policy indexes as
//! untrusted and that this session allowed has had its output recorded. Otherwise (a result
//! not seen yet, a call of an earlier turn, past [`MAX_KEPT_OUTPUT_BYTES`], state that was
//! read back from a file or a shared store) the judgement gets none, and a check that reads
//! them denies.
//!
//! They are kept in memory only. Serialised, they are dropped and the turn is marked
//! incomplete, so a state file or a shared store never holds agent text.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{json, Value};

/// The most bytes of output (as JSON) one session keeps for its current turn; past it the
/// turn keeps none, and its outputs are incomplete.
pub const MAX_KEPT_OUTPUT_BYTES: usize = 1 << 20;

/// The call id of an output recorded without one: the hooks' post-event of an agent that
/// sends none, an executor that passes none.
pub const NO_CALL_ID: &str = "call";

/// The most calls one turn awaits the output of; past it the turn's outputs are incomplete.
const MAX_AWAITED: usize = 4_096;

/// An allowed call whose untrusted output is not recorded yet: its call id and tool, and a
/// digest of its arguments as JSON text. The same call judged twice (a framework's preview,
/// then the judgement that runs it) is one awaited output, not two that one record could
/// never both settle; two calls that differ in any of the three are two.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AwaitedCall {
    id: String,
    tool: String,
    args: [u8; 32],
}

impl AwaitedCall {
    /// The call `id` of `tool` with `args`.
    pub(crate) fn new(id: &str, tool: &str, args: &Value) -> Self {
        use sha2::{Digest, Sha256};
        let text = serde_json::to_string(args).unwrap_or_default();
        AwaitedCall {
            id: id.to_string(),
            tool: tool.to_string(),
            args: Sha256::digest(text.as_bytes()).into(),
        }
    }
}

/// The current turn's outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnOutputs {
    /// The turn they belong to.
    turn: u64,
    /// `{id, tool, output}` entries, in the order they were recorded.
    items: Vec<Value>,
    /// Their size as JSON.
    bytes: usize,
    /// Allowed calls of the turn with an untrusted output not recorded yet.
    awaiting: Vec<AwaitedCall>,
    /// False once anything of the turn's outputs is not here (dropped past the cap, or the
    /// state was read back without them).
    whole: bool,
    /// The user's message that started the turn, for `facts.prompt`.
    prompt: Option<String>,
}

impl Default for TurnOutputs {
    fn default() -> Self {
        TurnOutputs::starting(0)
    }
}

impl TurnOutputs {
    /// The outputs of a turn that just started: none, all of them.
    pub(crate) fn starting(turn: u64) -> Self {
        TurnOutputs {
            turn,
            items: Vec::new(),
            bytes: 0,
            awaiting: Vec::new(),
            whole: true,
            prompt: None,
        }
    }

    /// Outputs known to be incomplete (unreadable state).
    pub(crate) fn lost(turn: u64) -> Self {
        TurnOutputs {
            whole: false,
            ..TurnOutputs::starting(turn)
        }
    }

    /// Heap bytes held: the recorded outputs as JSON, the awaited calls and the prompt.
    pub(crate) fn held_bytes(&self) -> usize {
        self.bytes
            + self.items.capacity() * std::mem::size_of::<Value>()
            + self
                .awaiting
                .iter()
                .map(|c| std::mem::size_of::<AwaitedCall>() + c.id.len() + c.tool.len())
                .sum::<usize>()
            + self.prompt.as_ref().map_or(0, String::len)
    }

    /// Whether nothing was recorded or expected since the turn started.
    pub(crate) fn is_fresh(&self) -> bool {
        self.items.is_empty() && self.awaiting.is_empty() && self.whole && self.prompt.is_none()
    }

    /// The turn they belong to.
    pub(crate) fn turn(&self) -> u64 {
        self.turn
    }

    /// An allowed call of the turn whose output is untrusted: until its output is recorded,
    /// the outputs are incomplete. A call already awaited is not awaited twice.
    pub(crate) fn expect(&mut self, call: AwaitedCall) {
        if self.awaiting.contains(&call) {
            return;
        }
        if self.awaiting.len() >= MAX_AWAITED {
            self.whole = false;
            return;
        }
        self.awaiting.push(call);
    }

    /// Records one call's output.
    ///
    /// An untrusted output settles the oldest awaited call with its id and tool; one that
    /// matches no awaited call (its pre-event never came, or named another id) settles none,
    /// so the calls still awaited keep the outputs incomplete. An output recorded without its
    /// call's id ([`NO_CALL_ID`]: an agent's post-event without one, an executor that passes
    /// none) settles the oldest awaited call of its tool, as outputs were counted before calls
    /// were told apart.
    pub(crate) fn record(&mut self, call_id: &str, tool: &str, output: Value, untrusted: bool) {
        if untrusted {
            let exact = self
                .awaiting
                .iter()
                .position(|c| c.id == call_id && c.tool == tool);
            let settled = exact.or_else(|| {
                (call_id == NO_CALL_ID)
                    .then(|| self.awaiting.iter().position(|c| c.tool == tool))
                    .flatten()
            });
            if let Some(at) = settled {
                self.awaiting.remove(at);
            }
        }
        if !self.whole {
            return;
        }
        let entry = json!({"id": call_id, "tool": tool, "output": output});
        let size = serde_json::to_string(&entry).map_or(usize::MAX, |t| t.len());
        match self.bytes.checked_add(size) {
            Some(total) if total <= MAX_KEPT_OUTPUT_BYTES => {
                self.bytes = total;
                self.items.push(entry);
            }
            _ => {
                self.items = Vec::new();
                self.bytes = 0;
                self.whole = false;
            }
        }
    }

    /// Keeps the user's message of the turn (in memory only, like the outputs).
    pub(crate) fn set_prompt(&mut self, prompt: String) {
        self.prompt = Some(prompt);
    }

    /// The `facts.prompt` value, when the turn's message is known.
    pub(crate) fn prompt(&self) -> Option<&str> {
        self.prompt.as_deref()
    }

    /// The `facts.outputs` value, when the outputs are complete.
    pub(crate) fn fact(&self) -> Option<Value> {
        (self.whole && self.awaiting.is_empty()).then(|| Value::Array(self.items.clone()))
    }
}

/// The serialised form: the turn, and whether its outputs are still whole (only a turn with
/// nothing recorded or expected is).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    turn: u64,
    whole: bool,
}

impl Serialize for TurnOutputs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Stored {
            turn: self.turn,
            whole: self.is_fresh(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for TurnOutputs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let stored = Stored::deserialize(d)?;
        Ok(if stored.whole {
            TurnOutputs::starting(stored.turn)
        } else {
            TurnOutputs::lost(stored.turn)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_are_given_only_when_complete() {
        let mut o = TurnOutputs::starting(3);
        assert_eq!(o.fact(), Some(json!([])));
        o.expect(AwaitedCall::new("c1", "fetch", &json!({})));
        assert_eq!(
            o.fact(),
            None,
            "an allowed ingest whose output is not here yet"
        );
        o.record("c1", "fetch", json!("page"), true);
        assert_eq!(
            o.fact(),
            Some(json!([{"id": "c1", "tool": "fetch", "output": "page"}]))
        );
        o.record("c2", "big", json!("x".repeat(MAX_KEPT_OUTPUT_BYTES)), false);
        assert_eq!(o.fact(), None, "past the cap");
    }

    #[test]
    fn one_call_judged_twice_awaits_one_output_and_others_are_not_settled_by_it() {
        let mut o = TurnOutputs::starting(1);
        let page = json!({"url": "https://a.example"});
        // A preview, then the judgement that runs it: one output to wait for.
        o.expect(AwaitedCall::new("c1", "fetch", &page));
        o.expect(AwaitedCall::new("c1", "fetch", &page));
        // The same id with other arguments, and another id: two more.
        o.expect(AwaitedCall::new(
            "c1",
            "fetch",
            &json!({"url": "https://b.example"}),
        ));
        o.expect(AwaitedCall::new("c2", "fetch", &page));
        o.record("c1", "fetch", json!("a"), true);
        assert_eq!(o.fact(), None, "c1's second call and c2 still awaited");
        // An output of a call nobody awaited, or of another tool, settles nothing.
        o.record("c9", "fetch", json!("stray"), true);
        o.record("c2", "search", json!("stray"), true);
        o.record("c1", "fetch", json!("b"), true);
        assert_eq!(o.fact(), None, "c2 still awaited");
        o.record("c2", "fetch", json!("c"), true);
        assert!(o.fact().is_some());
    }

    #[test]
    fn an_output_without_its_call_id_settles_the_oldest_awaited_call_of_its_tool() {
        let mut o = TurnOutputs::starting(1);
        o.expect(AwaitedCall::new("toolu_1", "fetch", &json!({"url": "a"})));
        o.expect(AwaitedCall::new("toolu_2", "fetch", &json!({"url": "b"})));
        o.record(NO_CALL_ID, "search", json!("x"), true);
        assert_eq!(o.fact(), None, "another tool settles nothing");
        o.record(NO_CALL_ID, "fetch", json!("a"), true);
        assert_eq!(o.fact(), None, "one of two");
        o.record(NO_CALL_ID, "fetch", json!("b"), true);
        assert!(o.fact().is_some());
    }

    #[test]
    fn serialised_outputs_keep_no_text_and_come_back_incomplete() {
        let mut o = TurnOutputs::starting(2);
        o.record("c1", "fetch", json!("secret page text"), false);
        let text = serde_json::to_string(&o).unwrap();
        assert!(!text.contains("secret"), "{text}");
        let back: TurnOutputs = serde_json::from_str(&text).unwrap();
        assert_eq!(back.fact(), None);
        let fresh: TurnOutputs =
            serde_json::from_str(&serde_json::to_string(&TurnOutputs::starting(2)).unwrap())
                .unwrap();
        assert_eq!(fresh.fact(), Some(json!([])));
    }
}
