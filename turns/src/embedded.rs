//! [`EmbeddedTurns`]: the turn state of one session for an executor that embeds toolgate and
//! judges whole model messages in process (the Python and Node packages' `TurnState`, behind
//! their frameworks' `Turn` adapters).
//!
//! It is [`SessionTurns`], the model every other surface uses, with what in-process judging
//! adds, written once here so the language packages only wrap it:
//!
//! - **One call judges a batch** ([`EmbeddedTurns::judge`]): it places the batch into its
//!   turn, decides it with the placed latches and the session's earlier calls merged into the
//!   executor's facts, and records the latches the judgement set. The caller holds one lock
//!   around it, so nothing can fall between placing, judging and latching.
//! - **Turn ids are the framework's own new-turn signal** ([`NewIds::StartTurn`]): an id
//!   never seen starts a turn, a known one goes back to its own turn and latches.
//! - **A verdict cache per model message** ([`EmbeddedTurns::decision`]), for frameworks that
//!   ask about one call at a time after the adapter judged their message whole. A verdict
//!   answers only a call of the batch it was judged in (same batch id, turn, call id, tool,
//!   arguments and policy revision), and only once; every kept verdict is dropped as soon as
//!   a judgement changes any latch of the session, so a verdict judged before a latch is
//!   never served after it.

use crate::session::{Called, NewIds, Placed, Placement, SessionTurns, TurnError, TurnKey};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Arc;
use toolgate_engine::{Call, Decision, Latched, Policy, Request, Response};

/// How many judged batches a session keeps verdicts of; the oldest goes first. A batch
/// whose verdicts are gone is judged again, call by call: never allowed by default.
pub const MAX_BATCHES: usize = 64;

/// One session's turns and the verdicts of its recent batches.
#[derive(Debug, Default)]
pub struct EmbeddedTurns {
    turns: SessionTurns,
    /// Verdicts of batches judged with a batch id, oldest first, at most [`MAX_BATCHES`].
    /// Emptied whenever a judgement changes a latch.
    batches: VecDeque<Batch>,
}

/// One batch judged whole, and what it was judged as.
#[derive(Debug)]
struct Batch {
    /// The caller's id of the model message.
    id: String,
    /// The turn it was judged in (the fingerprint of its id), `None` for no id.
    turn: Option<TurnKey>,
    /// Its calls as the engine read them (ids, tools, arguments).
    calls: Vec<Call>,
    /// The response, one decision per call in the same order.
    response: Response,
    /// Which calls' decisions `decision` has given: each is given once.
    served: Vec<bool>,
}

impl EmbeddedTurns {
    /// The turn model underneath, to read.
    pub fn turns(&self) -> &SessionTurns {
        &self.turns
    }

    /// The agent's explicit new-turn signal (see [`SessionTurns::signal`]).
    pub fn signal(&mut self, policy: &Policy, id: Option<&str>) -> Result<(), TurnError> {
        self.turns.signal(policy, id)
    }

    /// What a judgement that stopped half-way (a panic) leaves: the current turn latched and
    /// no verdict kept, since it may have set a latch it did not get to record.
    pub fn recover(&mut self) {
        self.turns.latch_current();
        self.batches.clear();
    }

    /// Places, judges and latches one batch as a call of turn `turn` (an unseen id starts a
    /// turn; `None` is the current one). The executor's `facts` are kept, with the turn's
    /// latches ORed into `facts.latched` and the session's recorded calls appended to
    /// `facts.called` (the fact stays absent only when neither has any).
    ///
    /// With `batch` (the framework's id of the model message) the verdicts are kept for
    /// [`EmbeddedTurns::decision`]; judging the same batch again (same id, turn, calls and
    /// policy revision, and no latch changed since) returns the kept response.
    pub fn judge(
        &mut self,
        policy: &Policy,
        mut request: Request,
        turn: Option<&str>,
        batch: Option<String>,
    ) -> Result<Response, TurnError> {
        let key = turn.map(TurnKey::of);
        if let Some(id) = batch.as_deref() {
            let kept = self.batches.iter().find(|b| {
                b.id == id && b.turn == key && b.calls == request.calls && same_policy(b, policy)
            });
            if let Some(b) = kept {
                return Ok(b.response.clone());
            }
        }
        let placed = self.turns.place(policy, turn, NewIds::StartTurn)?;
        let facts = &mut request.facts;
        facts.latched = placed.latched.or(&facts.latched);
        let recorded = self.turns.called_facts();
        if !recorded.is_empty() {
            facts.called.get_or_insert_with(Vec::new).extend(recorded);
        }
        // The executor's own outputs and prompt win; else what this session recorded.
        if facts.outputs.is_none() {
            facts.outputs = self.turns.outputs_fact(&placed);
        }
        if facts.prompt.is_none() {
            facts.prompt = self.turns.prompt_fact(&placed);
        }
        let response = policy.decide(&request);
        for (call, d) in request.calls.iter().zip(&response.decisions) {
            if d.allow {
                self.turns
                    .expect_output(policy, &placed, &call.id, &call.tool, &call.args);
            }
        }
        if self.record_latches(policy, &placed, &request.calls, &response.latched) {
            self.batches.clear();
        }
        if let Some(id) = batch {
            self.batches.retain(|b| b.id != id);
            if self.batches.len() >= MAX_BATCHES {
                self.batches.pop_front();
            }
            self.batches.push_back(Batch {
                id,
                turn: key,
                served: vec![false; request.calls.len()],
                calls: request.calls,
                response: response.clone(),
            });
        }
        Ok(response)
    }

    /// Records the latches a judgement of `calls` reported into the turn they were placed
    /// in; true when that may have changed a latch of the session.
    fn record_latches(
        &mut self,
        policy: &Policy,
        placed: &Placed,
        calls: &[Call],
        latched: &Latched,
    ) -> bool {
        if calls.is_empty() {
            self.turns.latch(policy, placed, "", latched);
        }
        for call in calls {
            // The tool matters only for a call the session could not place, which records
            // the latches its own tool sets; for a placed batch this is one union.
            self.turns.latch(policy, placed, &call.tool, latched);
        }
        match placed.placement {
            Placement::Current | Placement::Earlier => adds(&placed.latched, latched),
            // Nothing the turn did is known here: count it as a change.
            Placement::Forgotten | Placement::Unknown => true,
        }
    }

    /// The kept decision of a batch judged with a batch id (`batch`; `None` is the batch
    /// judged last) for call `call_id` of `tool` with `args`, or `None`: judge the call
    /// alone. Given only for the very call it was judged as (same batch and turn, call id,
    /// tool, arguments and policy revision), only once, and never after a judgement changed
    /// a latch of the session.
    pub fn decision(
        &mut self,
        policy: &Policy,
        call_id: &str,
        tool: &str,
        args: &Value,
        turn: Option<&str>,
        batch: Option<&str>,
    ) -> Option<Decision> {
        let at = match batch {
            Some(id) => self.batches.iter().rposition(|b| b.id == id)?,
            None => self.batches.len().checked_sub(1)?,
        };
        let b = self.batches.get_mut(at)?;
        if b.turn != turn.map(TurnKey::of) || !same_policy(b, policy) {
            return None;
        }
        let i = b.calls.iter().position(|c| c.id == call_id)?;
        let call = b.calls.get(i)?;
        if call.tool != tool || call.args != *args {
            return None;
        }
        let served = b.served.get_mut(i)?;
        if std::mem::replace(served, true) {
            return None;
        }
        b.response.decisions.get(i).cloned()
    }

    /// Records the output of call `call_id` of `tool` in turn `turn`, for the `facts.outputs`
    /// of the turn's later batches (see [`SessionTurns::record_output`]). An allowed call
    /// whose output the policy reads as untrusted must have its output recorded before the
    /// turn's outputs are sent at all: until then a check that reads them denies.
    pub fn record_output(
        &mut self,
        policy: &Policy,
        call_id: &str,
        tool: &str,
        output: Value,
        turn: Option<&str>,
    ) {
        self.turns
            .record_output(policy, call_id, tool, output, turn);
    }

    /// Keeps the user's message of the current turn, for `facts.prompt`.
    pub fn set_prompt(&mut self, prompt: &str) {
        self.turns.set_prompt(prompt);
    }

    /// Records that `tool` ran (`ok`: it succeeded) in turn `turn` (see
    /// [`SessionTurns::record_call`]).
    pub fn record_call(&mut self, tool: &str, ok: bool, turn: Option<&str>) {
        self.turns.record_call(tool, ok, turn);
    }

    /// The latches a call of turn `turn` would be judged with now, in a response's shape for
    /// `policy` (one flag for a policy with at most one latch, else a flag for every
    /// declared latch). Changes nothing; an unseen id reads as the new turn it would start,
    /// and a turn that cannot be judged as every latch set.
    pub fn latches(&self, policy: &Policy, turn: Option<&str>) -> Latched {
        let mut probe = self.turns.clone();
        let latched = match probe.place(policy, turn, NewIds::StartTurn) {
            Ok(placed) => placed.latched,
            Err(_) => Latched::Flag(true),
        };
        shaped(policy, &latched)
    }

    /// The calls recorded in turn `turn` (`None`: the current one), oldest first; none for a
    /// turn the session does not know. Changes nothing.
    pub fn recorded(&self, policy: &Policy, turn: Option<&str>) -> Vec<&Called> {
        let mut probe = self.turns.clone();
        let number = match probe.place(policy, turn, NewIds::StartTurn) {
            Ok(Placed {
                placement: Placement::Current | Placement::Earlier,
                turn: Some(n),
                ..
            }) => Some(n),
            _ => return Vec::new(),
        };
        self.turns
            .called()
            .iter()
            .filter(|c| c.turn == number)
            .collect()
    }

    /// Every recorded call, oldest first, with how many turns ago it ran (`None` when its
    /// turn is unknown): a request's `facts.called` entries.
    pub fn called(&self) -> impl Iterator<Item = (&Called, Option<u64>)> {
        let current = self.turns.turns();
        self.turns
            .called()
            .iter()
            .map(move |c| (c, c.turn.map(|t| current.saturating_sub(t))))
    }
}

/// True when `batch` was judged by `policy`'s very revision.
fn same_policy(batch: &Batch, policy: &Policy) -> bool {
    *batch.response.policy == *policy.module() && *batch.response.revision == *policy.revision()
}

/// True when recording `new` over `had` (the turn's latches before the judgement, set
/// latches only) sets a latch that was not set. Errs towards true.
fn adds(had: &Latched, new: &Latched) -> bool {
    match (had, new) {
        (_, new) if !new.any() => false,
        (Latched::Flag(true), _) => false,
        (Latched::ByName(had), Latched::ByName(new)) => new
            .iter()
            .any(|(name, set)| *set && !had.get(name).copied().unwrap_or(false)),
        _ => true,
    }
}

/// `latched` in the shape a response gives it for `policy`.
fn shaped(policy: &Policy, latched: &Latched) -> Latched {
    let names: Vec<&str> = policy.latches().collect();
    if names.len() <= 1 {
        return Latched::Flag(latched.any());
    }
    Latched::ByName(
        names
            .into_iter()
            .map(|name| {
                let set = match latched {
                    Latched::Flag(all) => *all,
                    Latched::ByName(m) => m.get(name).copied().unwrap_or(false),
                };
                (Arc::from(name), set)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;
    use toolgate_engine::Facts;

    fn policy() -> Policy {
        Policy::compile(
            "p.gate",
            "module p\ningest fetch\nwrite send\nstage s { tools [fetch, send] }\nlatch t { set_by [fetch] blocks [send] }\n",
        )
        .unwrap()
    }

    fn batch(tools: &[(&str, &str)]) -> Request {
        let calls = tools
            .iter()
            .map(|(id, tool)| Call::new(*id, *tool, json!({})))
            .collect();
        Request::new(Facts::in_stage("s"), calls)
    }

    #[test]
    fn a_kept_verdict_answers_its_own_call_once_and_never_after_a_latch() {
        let p = policy();
        let mut s = EmbeddedTurns::default();
        s.signal(&p, Some("t1")).unwrap();
        s.judge(&p, batch(&[("c0", "send")]), Some("t1"), Some("m1".into()))
            .unwrap();
        let args = json!({});
        // Another tool, turn or arguments under the same id is another call.
        assert!(s
            .decision(&p, "c0", "fetch", &args, Some("t1"), None)
            .is_none());
        assert!(s
            .decision(&p, "c0", "send", &args, Some("t2"), None)
            .is_none());
        assert!(s
            .decision(&p, "c0", "send", &json!({"a": 1}), Some("t1"), None)
            .is_none());
        let kept = s.decision(&p, "c0", "send", &args, Some("t1"), Some("m1"));
        assert!(kept.unwrap().allow);
        assert!(s
            .decision(&p, "c0", "send", &args, Some("t1"), Some("m1"))
            .is_none());
        // A message whose judgement latches the turn drops every kept verdict.
        s.judge(&p, batch(&[("c0", "send")]), Some("t1"), Some("m2".into()))
            .unwrap();
        s.judge(&p, batch(&[("c0", "fetch")]), Some("t1"), Some("m3".into()))
            .unwrap();
        assert!(s
            .decision(&p, "c0", "send", &args, Some("t1"), Some("m2"))
            .is_none());
        let again = s
            .judge(&p, batch(&[("c0", "send")]), Some("t1"), Some("m2".into()))
            .unwrap();
        assert!(!again.decisions[0].allow, "judged again, latched");
    }

    #[test]
    fn recovering_latches_the_turn_and_drops_the_verdicts() {
        let p = policy();
        let mut s = EmbeddedTurns::default();
        s.signal(&p, Some("t1")).unwrap();
        s.judge(&p, batch(&[("c0", "send")]), Some("t1"), Some("m1".into()))
            .unwrap();
        s.recover();
        assert!(s
            .decision(&p, "c0", "send", &json!({}), Some("t1"), Some("m1"))
            .is_none());
        assert_eq!(s.latches(&p, Some("t1")), Latched::Flag(true));
        assert!(
            !s.judge(&p, batch(&[("c1", "send")]), Some("t1"), None)
                .unwrap()
                .decisions[0]
                .allow
        );
    }
}
