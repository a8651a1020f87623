//! `TurnState`: the turn state of one session, for JavaScript code that is shown tool calls
//! one at a time or one model message at a time (the adapters' `Turn`, `adapters/turn.js`).
//!
//! It is [`toolgate_turns::SessionTurns`], the model every other surface uses (the hooks,
//! `/v1/hooks`, the MCP proxy, the Python package's `TurnState`); its contract is that
//! crate's `session` module docs. What this wrapper adds, as the Python one does:
//!
//! - **One call judges a batch** ([`TurnState::judge_text`]): it places the batch into its
//!   turn, decides it with the placed latches and the session's earlier calls merged into the
//!   executor's facts, and records the latches the judgement set. Node runs JavaScript on one
//!   thread and this call never calls back into it, so nothing can fall between placing,
//!   judging and latching.
//! - **Turn ids are the executor's own new-turn signal** ([`NewIds::StartTurn`]): an id never
//!   seen starts a turn, a known one goes back to its own turn and latches, whatever came in
//!   between.
//! - **A verdict cache per model message** ([`TurnState::decision_text`]), for frameworks
//!   that ask about one call at a time after the adapter judged their message whole. A
//!   verdict answers only a call of the batch it was judged in (same batch id, turn, call id,
//!   tool, arguments and policy revision), and only once; every cached verdict is dropped as
//!   soon as a judgement changes any latch of the session, so a verdict judged before a latch
//!   is never served after it.
//!
//! Requests, verdicts and reads cross as JSON text, as for `Policy` (see the crate docs);
//! `index.js` gives the object forms (`judge`, `decision`, `latches`, ...).

use crate::{request_error, Policy};
use napi::Error;
use napi_derive::napi;
use serde::Serialize;
use serde_json::Value;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use toolgate_engine::{Call, Decision, Latched, Request, RequestError, Response};
use toolgate_turns::{NewIds, Placed, Placement, SessionTurns, TurnError, TurnKey};

/// How many judged batches a session keeps verdicts of; the oldest goes first. A batch
/// whose verdicts are gone is judged again, call by call: never allowed by default.
pub const MAX_BATCHES: usize = 64;

/// The error code prefix the JavaScript wrapper recognises as a turn error; the kind
/// (`policy_changed`, `too_many_turns`, `too_many_ids`) follows it.
const TURN_ERROR: &str = "TOOLGATE_TURN_ERROR:";

/// The turn state of one session: its recent turns (known by their ids), each turn's
/// latches, and the calls that ran.
///
/// Signal each user turn (`signal`, with its id where there is one) before judging its
/// calls: before any signal the session is in its turn 0, which the first unseen id names
/// and whose recorded calls stay undated (never recent for `called_within`).
#[napi]
#[derive(Default)]
pub struct TurnState {
    /// The turn model.
    turns: SessionTurns,
    /// Verdicts of batches judged with a batch id, oldest first, at most [`MAX_BATCHES`].
    /// Emptied whenever a judgement changes a latch.
    batches: VecDeque<Batch>,
}

/// One batch judged whole, and what it was judged as.
struct Batch {
    /// The caller's id of the model message.
    id: String,
    /// The turn it was judged in (the fingerprint of its id), `None` for no id.
    turn: Option<TurnKey>,
    /// Its calls as the engine read them (ids, tools, arguments).
    calls: Vec<Call>,
    /// The response, one decision per call in the same order.
    response: Response,
    /// Which calls' decisions `decision_text` has given: each is given once.
    served: Vec<bool>,
}

/// Why `judge_text` could not judge a batch.
enum Failure {
    /// The request cannot be read (or is not for this policy).
    Request(RequestError),
    /// The session cannot place the batch (see [`TurnError`]).
    Turn(TurnError),
    /// The engine panicked; the current turn was latched.
    Panic,
}

/// One entry of the `called` view: a request's `facts.called` entry.
#[derive(Serialize)]
struct CalledView<'a> {
    tool: &'a str,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    turns_ago: Option<u64>,
}

/// One call recorded in a turn, as `recordedText` lists it.
#[derive(Serialize)]
struct RecordedView<'a> {
    tool: &'a str,
    ok: bool,
}

#[napi]
impl TurnState {
    /// A session with no turn signalled yet.
    #[napi(constructor)]
    pub fn new() -> Self {
        TurnState::default()
    }

    /// The agent's explicit new-turn signal (a user message), with the turn's id when there
    /// is one. A signal naming a turn the session already knows changes nothing (a late or
    /// repeated event never resets the current turn); one with no id starts a turn that the
    /// first unseen id then names. Throws a turn error when the session holds the most
    /// latched turns one session may.
    #[napi]
    pub fn signal(&mut self, policy: &Policy, id: Option<String>) -> Result<(), Error<String>> {
        self.turns
            .signal(&policy.inner, id.as_deref())
            .map_err(|e| turn_error(&e))
    }

    /// Judges the batch `request` (JSON text in the request schema) as a call of turn `turn`
    /// (default: the request's own `turn` field, else the current turn), and answers the
    /// response as JSON text. An unseen turn id starts a new turn; a known one is judged with
    /// its own turn's latches.
    ///
    /// Places the batch, decides it with the executor's `facts` plus the turn's latches (ORed
    /// into `facts.latched`) and the calls the session recorded (after the executor's
    /// `facts.called`; the fact stays absent only when neither has any), and records the
    /// latches the judgement set into the turn.
    ///
    /// With `batch` (the framework's id of the model message), the verdicts are kept for
    /// `decisionText`; judging the same batch again (same id, turn, calls and policy
    /// revision, and no latch changed since) answers the kept response without judging it
    /// twice.
    ///
    /// Throws a request error for a request that cannot be read (the state is unchanged) and
    /// a turn error for a turn that cannot be judged (a policy that no longer declares a
    /// latch set in it, too many turns or ids).
    #[napi(js_name = "judgeText")]
    pub fn judge_text(
        &mut self,
        policy: &Policy,
        request: String,
        turn: Option<String>,
        batch: Option<String>,
    ) -> Result<String, Error<String>> {
        let policy = &policy.inner;
        let judged = Request::from_json(&request)
            .and_then(|r| policy.check_request(&r).map(|()| r))
            .map_err(Failure::Request)
            .and_then(|request| {
                let turn = turn.or_else(|| request.turn.clone());
                // A panic inside the engine must not leave a judgement half-recorded: the
                // turn is latched and no verdict kept, as the Python package does for a lock
                // a panic poisoned.
                catch_unwind(AssertUnwindSafe(|| {
                    self.judge(policy, request, turn.as_deref(), batch)
                }))
                .unwrap_or(Err(Failure::Panic))
            });
        match judged {
            Ok(response) => serde_json::to_string(&response)
                .map_err(|e| Error::new("GenericFailure".into(), e.to_string())),
            Err(Failure::Request(e)) => Err(request_error(e)),
            Err(Failure::Turn(e)) => Err(turn_error(&e)),
            Err(Failure::Panic) => {
                self.turns.latch_current();
                self.batches.clear();
                Err(Error::new(
                    "GenericFailure".into(),
                    "toolgate failed while judging this batch; the current turn is now latched",
                ))
            }
        }
    }

    /// The decision a batch judged by `judgeText(..., batch)` holds for call `callId` of
    /// `tool` with `args` (JSON text, read strictly), as JSON text, or null: judge the call
    /// alone. `batch` names the batch; none is the batch judged last.
    ///
    /// A decision is given only for the very call it was judged as: the same batch and turn,
    /// the same call id, tool and arguments, and the same policy revision; only once (a
    /// second call under the same id is another call, even in the same message); and none
    /// once a judgement has changed a latch of the session since (those verdicts are
    /// dropped).
    #[napi(js_name = "decisionText")]
    pub fn decision_text(
        &mut self,
        policy: &Policy,
        call_id: String,
        tool: String,
        args: String,
        turn: Option<String>,
        batch: Option<String>,
    ) -> Option<String> {
        // A key given twice is no value, so it never matches a kept verdict.
        let args = toolgate_engine::parse_json(&args).ok()?;
        let found = self.decision(
            &policy.inner,
            &call_id,
            &tool,
            &args,
            turn.as_deref(),
            batch.as_deref(),
        )?;
        serde_json::to_string(&found).ok()
    }

    /// Records that `tool` ran (`ok`: it succeeded) in turn `turn` (default: the current
    /// one), for `called_before` and `called_within` rules. A call of a turn the session does
    /// not know is kept undated (never recent); recording never starts a turn.
    #[napi(js_name = "recordCall")]
    pub fn record_call(&mut self, tool: String, ok: bool, turn: Option<String>) {
        self.turns.record_call(&tool, ok, turn.as_deref());
    }

    /// The latches a call of turn `turn` (default: the current one) would be judged with
    /// now, in `policy`'s names and in a response's shape, as JSON text: a boolean for a
    /// policy with at most one latch, else an object with every declared latch. Changes
    /// nothing; an unseen id reads as the new turn it would start. A turn that cannot be
    /// judged reads as every latch set.
    #[napi(js_name = "latchesText")]
    pub fn latches_text(&self, policy: &Policy, turn: Option<String>) -> Result<String, Error> {
        let policy = &policy.inner;
        let mut probe = self.turns.clone();
        let latched = match probe.place(policy, turn.as_deref(), NewIds::StartTurn) {
            Ok(placed) => placed.latched,
            Err(_) => Latched::Flag(true),
        };
        to_json(&shaped(policy, &latched))
    }

    /// The calls recorded in turn `turn` (default: the current one), oldest first, as JSON
    /// text: a list of `{"tool", "ok"}`; empty for a turn the session does not know.
    #[napi(js_name = "recordedText")]
    pub fn recorded_text(&self, policy: &Policy, turn: Option<String>) -> Result<String, Error> {
        let mut probe = self.turns.clone();
        let number = match probe.place(&policy.inner, turn.as_deref(), NewIds::StartTurn) {
            Ok(Placed {
                placement: Placement::Current | Placement::Earlier,
                turn: Some(n),
                ..
            }) => Some(n),
            _ => None,
        };
        let list: Vec<RecordedView<'_>> = self
            .turns
            .called()
            .iter()
            .filter(|c| number.is_some() && c.turn == number)
            .map(|c| RecordedView {
                tool: &c.tool,
                ok: c.ok,
            })
            .collect();
        to_json(&list)
    }

    /// The current turn's latches as stored, as JSON text: a boolean, or an object by latch
    /// name.
    #[napi(getter, js_name = "latchedText")]
    pub fn latched_text(&self) -> Result<String, Error> {
        to_json(self.turns.current_latched())
    }

    /// The number of the most recent turn (0 before any signal).
    #[napi(getter)]
    pub fn turns(&self) -> i64 {
        i64::try_from(self.turns.turns()).unwrap_or(i64::MAX)
    }

    /// The calls the session recorded, oldest first, as JSON text: a request's
    /// `facts.called` entries dated against the current turn (`turns_ago`; absent when the
    /// call's turn is unknown).
    #[napi(getter, js_name = "calledText")]
    pub fn called_text(&self) -> Result<String, Error> {
        let current = self.turns.turns();
        let list: Vec<CalledView<'_>> = self
            .turns
            .called()
            .iter()
            .map(|c| CalledView {
                tool: &c.tool,
                ok: c.ok,
                turns_ago: c.turn.map(|t| current.saturating_sub(t)),
            })
            .collect();
        to_json(&list)
    }
}

impl TurnState {
    /// Places, judges and latches one batch (see [`TurnState::judge_text`]).
    fn judge(
        &mut self,
        policy: &toolgate_engine::Policy,
        mut request: Request,
        turn: Option<&str>,
        batch: Option<String>,
    ) -> Result<Response, Failure> {
        let key = turn.map(TurnKey::of);
        if let Some(id) = batch.as_deref() {
            let kept = self.batches.iter().find(|b| {
                b.id == id && b.turn == key && b.calls == request.calls && same_policy(b, policy)
            });
            if let Some(b) = kept {
                return Ok(b.response.clone());
            }
        }
        let placed = self
            .turns
            .place(policy, turn, NewIds::StartTurn)
            .map_err(Failure::Turn)?;
        let facts = &mut request.facts;
        facts.latched = placed.latched.or(&facts.latched);
        let recorded = self.turns.called_facts();
        if !recorded.is_empty() {
            facts.called.get_or_insert_with(Vec::new).extend(recorded);
        }
        let response = policy.decide(&request);
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
        policy: &toolgate_engine::Policy,
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

    /// The kept decision for one call (see [`TurnState::decision_text`]).
    fn decision(
        &mut self,
        policy: &toolgate_engine::Policy,
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
}

/// True when `batch` was judged by `policy`'s very revision.
fn same_policy(batch: &Batch, policy: &toolgate_engine::Policy) -> bool {
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

/// `latched` in the shape a response gives it for `policy`: one flag for a policy with at
/// most one latch, else a flag for every declared latch.
fn shaped(policy: &toolgate_engine::Policy, latched: &Latched) -> Latched {
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

/// A value as JSON text.
fn to_json<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    serde_json::to_string(value).map_err(|e| Error::from_reason(e.to_string()))
}

/// A turn error as a coded JavaScript error: the code carries the kind, which the wrapper
/// moves to `TurnError.kind`.
fn turn_error(e: &TurnError) -> Error<String> {
    let kind = match e {
        TurnError::PolicyChanged { .. } => "policy_changed",
        TurnError::TooManyTurns => "too_many_turns",
        TurnError::TooManyIds => "too_many_ids",
    };
    Error::new(format!("{TURN_ERROR}{kind}"), e.to_string())
}
