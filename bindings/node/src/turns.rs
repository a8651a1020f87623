//! `TurnState`: the turn state of one session, for JavaScript code that is shown tool calls
//! one at a time or one model message at a time (the adapters' `Turn`, `adapters/turn.js`).
//!
//! It is [`toolgate_turns::EmbeddedTurns`]: `SessionTurns`, the model every other surface
//! uses (the hooks, `/v1/hooks`, the MCP proxy), with the batch judgement and verdict cache
//! the Python package's `TurnState` shares; its contract is that crate's `session` and
//! `embedded` module docs. What it gives JavaScript:
//!
//! - **One call judges a batch** ([`TurnState::judge_text`]): it places the batch into its
//!   turn, decides it with the placed latches and the session's earlier calls merged into the
//!   executor's facts, and records the latches the judgement set. Node runs JavaScript on one
//!   thread and this call never calls back into it, so nothing can fall between placing,
//!   judging and latching.
//! - **Turn ids are the executor's own new-turn signal** ([`toolgate_turns::NewIds::StartTurn`]): an id never
//!   seen starts a turn, a known one goes back to its own turn and latches, whatever came in
//!   between.
//! - **A verdict cache per model message** ([`TurnState::decision_text`]), for frameworks
//!   that ask about one call at a time after the adapter judged their message whole. A
//!   verdict answers only a call of the batch it was judged in (same batch id, turn, call id,
//!   tool, arguments and policy revision), and only once; every cached verdict is dropped as
//!   soon as a judgement changes any latch of the session, so a verdict judged before a latch
//!   is never served after it.
//! - **Budget counts over batches**: `per turn` and `per session` counts in the session,
//!   `per principal` and `per tenant` counts shared by every `TurnState` of the process
//!   (worker threads included: `toolgate_turns::Book::process`, behind its own lock); they
//!   live as long as the process, and start from zero when it starts.
//!
//! Requests, verdicts and reads cross as JSON text, as for `Policy` (see the crate docs);
//! `index.js` gives the object forms (`judge`, `decision`, `latches`, ...).

use crate::{request_error, Policy};
use napi::{Error, Status};
use napi_derive::napi;
use serde::Serialize;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;
use toolgate_engine::RequestError;
use toolgate_turns::{EmbeddedTurns, TurnError};

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
    /// The turn model, with its kept verdicts.
    inner: EmbeddedTurns,
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
        self.inner
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
    /// A budget over batches is judged with the counts the turn state keeps: `per turn` and
    /// `per session` in this session, `per principal` and `per tenant` (by
    /// `facts.principal`'s `sub` and `tenant`) in a book every `TurnState` of the process
    /// shares; what the batch's allowed calls consumed (the response's `spent`) is added in
    /// the same call. Counts are per process and start from zero when it starts. `spend`
    /// false is for a judgement no call runs on (a pre-scan, a preview): judged with the
    /// counts, it adds nothing, and its allowing verdicts are not kept for `decisionText`.
    ///
    /// With `batch` (the framework's id of the model message), the verdicts are kept for
    /// `decisionText`; judging the same batch again (same id, turn, calls and policy
    /// revision, and no latch changed since) answers the kept response without judging it
    /// (or counting it) twice.
    ///
    /// Throws a request error for a request that cannot be read or that brings its own
    /// `facts.spent` (the state is unchanged) and
    /// a turn error for a turn that cannot be judged (a policy that no longer declares a
    /// latch set in it, too many turns or ids).
    #[napi(js_name = "judgeText")]
    pub fn judge_text(
        &mut self,
        policy: &Policy,
        request: String,
        turn: Option<String>,
        batch: Option<String>,
        spend: Option<bool>,
    ) -> Result<String, Error<String>> {
        let policy = &policy.inner;
        let spend = spend.unwrap_or(true);
        let judged = EmbeddedTurns::request(policy, &request)
            .map_err(Failure::Request)
            .and_then(|request| {
                let turn = turn.or_else(|| request.turn.clone());
                // A panic inside the engine must not leave a judgement half-recorded: the
                // turn is latched and no verdict kept, as the Python package does for a lock
                // a panic poisoned.
                catch_unwind(AssertUnwindSafe(|| {
                    self.inner
                        .judge(
                            policy,
                            request,
                            turn.as_deref(),
                            batch,
                            Instant::now(),
                            spend,
                        )
                        .map_err(Failure::Turn)
                }))
                .unwrap_or(Err(Failure::Panic))
            });
        match judged {
            Ok(response) => serde_json::to_string(&response)
                .map_err(|e| Error::new("GenericFailure".into(), e.to_string())),
            Err(Failure::Request(e)) => Err(request_error(e)),
            Err(Failure::Turn(e)) => Err(turn_error(&e)),
            Err(Failure::Panic) => {
                self.inner.recover();
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
        let found = self.inner.decision(
            &policy.inner,
            &call_id,
            &tool,
            &args,
            turn.as_deref(),
            batch.as_deref(),
        )?;
        serde_json::to_string(&found).ok()
    }

    /// Records the output of call `call_id` of `tool` in turn `turn` (default: the current
    /// one), given as JSON text, for the `facts.outputs` of the turn's later batches (`from
    /// ingest`, a latch's `blocks tainted`). Text that is not JSON is refused (the output is
    /// not recorded, so the turn's outputs stay incomplete and a check that reads them denies).
    #[napi(js_name = "recordOutputText")]
    pub fn record_output_text(
        &mut self,
        policy: &Policy,
        call_id: String,
        tool: String,
        output: String,
        turn: Option<String>,
    ) -> Result<(), Error> {
        let output = toolgate_engine::parse_json(&output).map_err(|e| {
            Error::new(
                Status::InvalidArg,
                format!("recordOutput: the output is not JSON: {e}"),
            )
        })?;
        self.inner
            .record_output(&policy.inner, &call_id, &tool, output, turn.as_deref());
        Ok(())
    }

    /// Keeps the user's message of turn `turn` (default: the current one), sent as
    /// `facts.prompt` with the turn's later batches (`from prompt`, and to vouch for a value
    /// the user typed), only if `turn` is the session's current turn; answers whether it was
    /// kept. A late message of an earlier turn, or of an id the session does not know, is
    /// refused, so it cannot vouch for the current turn's values. Never starts a turn.
    #[napi(js_name = "setPrompt")]
    pub fn set_prompt(&mut self, prompt: String, turn: Option<String>) -> bool {
        self.inner.set_prompt(&prompt, turn.as_deref())
    }

    /// Records that `tool` ran (`ok`: it succeeded) in turn `turn` (default: the current
    /// one), for `called_before` and `called_within` rules. A call of a turn the session does
    /// not know is kept undated (never recent); recording never starts a turn.
    #[napi(js_name = "recordCall")]
    pub fn record_call(&mut self, tool: String, ok: bool, turn: Option<String>) {
        self.inner.record_call(&tool, ok, turn.as_deref());
    }

    /// The latches a call of turn `turn` (default: the current one) would be judged with
    /// now, in `policy`'s names and in a response's shape, as JSON text: a boolean for a
    /// policy with at most one latch, else an object with every declared latch. Changes
    /// nothing; an unseen id reads as the new turn it would start. A turn that cannot be
    /// judged reads as every latch set.
    #[napi(js_name = "latchesText")]
    pub fn latches_text(&self, policy: &Policy, turn: Option<String>) -> Result<String, Error> {
        to_json(&self.inner.latches(&policy.inner, turn.as_deref()))
    }

    /// The calls recorded in turn `turn` (default: the current one), oldest first, as JSON
    /// text: a list of `{"tool", "ok"}`; empty for a turn the session does not know.
    #[napi(js_name = "recordedText")]
    pub fn recorded_text(&self, policy: &Policy, turn: Option<String>) -> Result<String, Error> {
        let list: Vec<RecordedView<'_>> = self
            .inner
            .recorded(&policy.inner, turn.as_deref())
            .into_iter()
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
        to_json(self.inner.turns().current_latched())
    }

    /// The number of the most recent turn (0 before any signal).
    #[napi(getter)]
    pub fn turns(&self) -> i64 {
        i64::try_from(self.inner.turns().turns()).unwrap_or(i64::MAX)
    }

    /// The calls the session recorded, oldest first, as JSON text: a request's
    /// `facts.called` entries dated against the current turn (`turns_ago`; absent when the
    /// call's turn is unknown).
    #[napi(getter, js_name = "calledText")]
    pub fn called_text(&self) -> Result<String, Error> {
        let list: Vec<CalledView<'_>> = self
            .inner
            .called()
            .map(|(c, turns_ago)| CalledView {
                tool: &c.tool,
                ok: c.ok,
                turns_ago,
            })
            .collect();
        to_json(&list)
    }
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
        // A kind newer than this match: still a TurnError (every call of the turn is
        // denied), with `kind` null.
        _ => "",
    };
    Error::new(format!("{TURN_ERROR}{kind}"), e.to_string())
}
