//! `toolgate.TurnState`: the turn state of one session, for Python code that is shown tool
//! calls one at a time or one model message at a time (the framework adapters' `Turn` and
//! `Gate` in `toolgate.adapters.turn`).
//!
//! It is [`toolgate_turns::EmbeddedTurns`] behind a lock: `SessionTurns`, the model every
//! other surface uses (the hooks, `/v1/hooks`, the MCP proxy), with the batch judgement and
//! verdict cache the Node package shares; its contract is that crate's `session` and
//! `embedded` module docs. What it gives Python:
//!
//! - **One call judges a batch** ([`PyTurnState::judge`]): under one lock it places the
//!   batch into its turn, decides it with the placed latches and the session's earlier calls
//!   merged into the executor's facts, and records the latches the judgement set. Nothing
//!   another thread does can fall between placing, judging and latching.
//! - **Turn ids are the framework's own new-turn signal** ([`toolgate_turns::NewIds::StartTurn`]): an id
//!   never seen starts a turn, a known one goes back to its own turn and latches, whatever
//!   came in between. (An ADK `invocation_id`, a Claude `prompt_id`, an id the adapter made
//!   up when the executor started a turn.)
//! - **A verdict cache per model message** ([`PyTurnState::decision`]), for frameworks that
//!   ask about one call at a time after the adapter judged their message whole. A verdict
//!   answers only a call of the batch it was judged in (same batch id, turn, call id, tool,
//!   arguments and policy revision), and only once; every cached verdict is dropped as soon
//!   as a judgement changes any latch of the session, so a verdict judged before a latch is
//!   never served after it.
//! - **Budget counts over batches**: `per turn` and `per session` counts in the session,
//!   `per principal` and `per tenant` counts shared by every `TurnState` of the process
//!   (`toolgate_turns::Book::process`), consumed under the same lock as the judgement; they
//!   live as long as the process, and start from zero when it starts.

use crate::errors::{request_error, turn_error};
use crate::from_python;
use crate::input;
use crate::policy::{to_python, PyPolicy, DETACH_TEXT_BYTES};
use crate::store::PyPolicyStore;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use toolgate_engine::{Policy, RequestError, Response};
use toolgate_turns::{EmbeddedTurns, TurnError};

/// The turn state of one session: its recent turns (known by their ids), each turn's
/// latches, and the calls that ran. Safe to share across threads: every method takes the
/// session's lock, and `judge` holds it from placing the batch to recording its latches.
///
/// Signal each user turn (`signal`, with its id where there is one) before judging its
/// calls: before any signal the session is in its turn 0, which the first unseen id names
/// and whose recorded calls stay undated (never recent for `called_within`).
#[pyclass(name = "TurnState", module = "toolgate", frozen)]
pub struct PyTurnState {
    inner: Mutex<EmbeddedTurns>,
}

/// Why `judge` could not judge a batch.
#[derive(Debug)]
enum Failure {
    /// The request cannot be read (or is not for this policy).
    Request(RequestError),
    /// The session cannot place the batch (see [`TurnError`]).
    Turn(TurnError),
}

/// One entry of the `called` view: a request's `facts.called` entry.
#[derive(Serialize)]
struct CalledView<'a> {
    tool: &'a str,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    turns_ago: Option<u64>,
}

/// One call recorded in a turn, as `recorded` lists it.
#[derive(Serialize)]
struct RecordedView<'a> {
    tool: &'a str,
    ok: bool,
}

#[pymethods]
impl PyTurnState {
    /// A session with no turn signalled yet.
    ///
    /// `keeps_provenance=False` is for an executor that keeps the turn's prompt and tool
    /// outputs itself and sends them (`facts.prompt`, `facts.outputs`) with every batch, as
    /// the LangChain middleware does from the agent's state: a batch that leaves one out is
    /// judged without it (a check that reads it denies) instead of being given what this
    /// state kept, and `set_prompt` keeps nothing. Latches, recorded calls, kept verdicts
    /// and budget counts are kept either way.
    #[new]
    #[pyo3(signature = (*, keeps_provenance = true))]
    fn new(keeps_provenance: bool) -> Self {
        let state = if keeps_provenance {
            EmbeddedTurns::default()
        } else {
            EmbeddedTurns::without_provenance()
        };
        PyTurnState {
            inner: Mutex::new(state),
        }
    }

    /// The agent's explicit new-turn signal (a user message), with the turn's id when there
    /// is one. A signal naming a turn the session already knows changes nothing (a late or
    /// repeated event never resets the current turn); one with no id starts a turn that the
    /// first unseen id then names. `policy` is a `Policy` or a `PolicyStore`. Raises
    /// `TurnError` when the session holds the most latched turns one session may.
    #[pyo3(signature = (policy, id = None))]
    fn signal(&self, policy: &Bound<'_, PyAny>, id: Option<&str>) -> PyResult<()> {
        let policy = policy_of(policy)?;
        self.lock().signal(&policy, id).map_err(|e| turn_error(&e))
    }

    /// Judges the batch `request` (a dict, or JSON text as str or bytes, in the request
    /// schema) as a call of turn `turn` (default: the request's own `turn` field, else the
    /// current turn). An unseen turn id starts a new turn; a known one is judged with its
    /// own turn's latches.
    ///
    /// Under one lock: places the batch, decides it with the executor's `facts` plus the
    /// turn's latches (ORed into `facts.latched`) and the calls the session recorded (after
    /// the executor's `facts.called`; the fact stays absent only when neither has any),
    /// and records the latches the judgement set into the turn. Returns the response
    /// (`decide`'s shape).
    ///
    /// A budget over batches is judged with the counts the turn state keeps: `per turn` and
    /// `per session` in this session, `per principal` and `per tenant` (by
    /// `facts.principal`'s `sub` and `tenant`) in a book every `TurnState` of the process
    /// shares. What the batch's allowed calls consumed (the response's `spent`) is added
    /// under the same lock, so concurrent batches never spend one remainder twice. Counts
    /// are per process and start from zero when it starts. `spend=False` is for a judgement
    /// no call runs on (a pre-scan, a preview): judged with the counts, it adds nothing, and
    /// its allowing verdicts are not kept for `decision` (the call that runs is judged, and
    /// counted, then).
    ///
    /// With `batch` (the framework's id of the model message), the verdicts are kept for
    /// `decision`; judging the same batch again (same id, turn, calls and policy revision,
    /// and no latch changed since) returns the kept response without judging it twice (nor
    /// counting it twice).
    ///
    /// Raises `RequestError` for a request that cannot be read or that brings its own
    /// `facts.spent` (the state is unchanged) and
    /// `TurnError` for a turn that cannot be judged (a policy that no longer declares a
    /// latch set in it, too many turns or ids).
    #[pyo3(signature = (policy, request, turn = None, batch = None, *, spend = true))]
    // The Python method's arguments, one each; `spend` is a keyword there.
    #[allow(clippy::too_many_arguments)]
    fn judge<'py>(
        &self,
        py: Python<'py>,
        policy: &Bound<'py, PyAny>,
        request: &Bound<'py, PyAny>,
        turn: Option<String>,
        batch: Option<String>,
        spend: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let policy = policy_of(policy)?;
        let text = input::read(py, request)?;
        let work = || -> Result<Response, Failure> {
            let request = EmbeddedTurns::request(&policy, &text).map_err(Failure::Request)?;
            let turn = turn.or_else(|| request.turn.clone());
            let mut state = self.lock();
            // Read under the session's lock, so its batches are stamped in the order judged.
            let now = Instant::now();
            state
                .judge(&policy, request, turn.as_deref(), batch, now, spend)
                .map_err(Failure::Turn)
        };
        let judged = if text.len() > DETACH_TEXT_BYTES {
            py.detach(work)
        } else {
            work()
        };
        match judged {
            Ok(response) => to_python(py, &response),
            Err(Failure::Request(e)) => Err(request_error(py, &e)),
            Err(Failure::Turn(e)) => Err(turn_error(&e)),
        }
    }

    /// The decision a batch judged by `judge(..., batch=...)` holds for call `call_id` of
    /// `tool` with `args` (a dict, or the model's raw JSON text as str or bytes), or `None`:
    /// judge the call alone. `batch` names the batch; `None` is the batch judged last.
    ///
    /// A decision is given only for the very call it was judged as: the same batch and turn,
    /// the same call id, tool and arguments, and the same policy revision; only once (a
    /// second call under the same id is another call, even in the same message); and none
    /// once a judgement has changed a latch of the session since (those verdicts are
    /// dropped).
    #[pyo3(signature = (policy, call_id, tool, args, turn = None, batch = None))]
    // The Python method's arguments, one each; `turn` and `batch` are keywords there.
    #[allow(clippy::too_many_arguments)]
    fn decision<'py>(
        &self,
        py: Python<'py>,
        policy: &Bound<'py, PyAny>,
        call_id: &str,
        tool: &str,
        args: &Bound<'py, PyAny>,
        turn: Option<&str>,
        batch: Option<&str>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let policy = policy_of(policy)?;
        let Some(args) = args_value(args) else {
            return Ok(None);
        };
        let found = self
            .lock()
            .decision(&policy, call_id, tool, &args, turn, batch);
        found.map(|d| to_python(py, &d)).transpose()
    }

    /// Records the output of call `call_id` of `tool` in turn `turn` (default: the current
    /// one), for the `facts.outputs` of the turn's later batches (`from ingest`, a latch's
    /// `blocks tainted`). `output` is any JSON-able value; a `str` is a string output. Until
    /// every allowed call whose output the policy reads as untrusted has its output recorded,
    /// the turn's outputs are not sent, and a check that reads them denies.
    #[pyo3(signature = (policy, call_id, tool, output, turn = None))]
    fn record_output(
        &self,
        policy: &Bound<'_, PyAny>,
        call_id: &str,
        tool: &str,
        output: &Bound<'_, PyAny>,
        turn: Option<&str>,
    ) -> PyResult<()> {
        let policy = policy_of(policy)?;
        let output = if let Ok(s) = output.cast::<PyString>() {
            Value::String(s.to_cow()?.into_owned())
        } else {
            let not_json = |why: String| {
                pyo3::exceptions::PyValueError::new_err(format!("the output is not JSON: {why}"))
            };
            let text = from_python::to_json(output)
                .map_err(|e| not_json(format!("{} (at `output{}`)", e.message, e.path())))?;
            toolgate_engine::parse_json(&text).map_err(|e| not_json(e.to_string()))?
        };
        self.lock()
            .record_output(&policy, call_id, tool, output, turn);
        Ok(())
    }

    /// Keeps the user's message of turn `turn` (default: the current one), sent as
    /// `facts.prompt` with the turn's later batches (`from prompt`, and to vouch for a value
    /// the user typed), only if `turn` is the session's current turn. Returns whether it was
    /// kept.
    ///
    /// Checked and kept under the state's own lock, so no turn starts in between: a late
    /// event of an earlier turn (or of an id the state does not know) cannot make its message
    /// vouch for the current turn's values. Never starts a turn. An adapter passes the turn
    /// the message belongs to (its framework's turn id), never `None` for a message that may
    /// be late.
    #[pyo3(signature = (prompt, turn = None))]
    fn set_prompt(&self, prompt: &str, turn: Option<&str>) -> bool {
        self.lock().set_prompt(prompt, turn)
    }

    /// Records that `tool` ran (`ok`: it succeeded) in turn `turn` (default: the current
    /// one), for `called_before` and `called_within` rules. A call of a turn the session
    /// does not know is kept undated (never recent); recording never starts a turn.
    #[pyo3(signature = (tool, ok = true, turn = None))]
    fn record_call(&self, tool: &str, ok: bool, turn: Option<&str>) {
        self.lock().record_call(tool, ok, turn);
    }

    /// The latches a call of turn `turn` (default: the current one) would be judged with
    /// now, in `policy`'s names and in a response's shape: a bool for a policy with at most
    /// one latch, else a dict with every declared latch. Changes nothing; an unseen id reads
    /// as the new turn it would start. A turn that cannot be judged reads as every latch set.
    #[pyo3(signature = (policy, turn = None))]
    fn latches<'py>(
        &self,
        py: Python<'py>,
        policy: &Bound<'py, PyAny>,
        turn: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let policy = policy_of(policy)?;
        let latched = self.lock().latches(&policy, turn);
        to_python(py, &latched)
    }

    /// The calls recorded in turn `turn` (default: the current one), oldest first, as
    /// `{"tool", "ok"}` dicts; none for a turn the session does not know.
    #[pyo3(signature = (policy, turn = None))]
    fn recorded<'py>(
        &self,
        py: Python<'py>,
        policy: &Bound<'py, PyAny>,
        turn: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let policy = policy_of(policy)?;
        let state = self.lock();
        let list: Vec<RecordedView<'_>> = state
            .recorded(&policy, turn)
            .into_iter()
            .map(|c| RecordedView {
                tool: &c.tool,
                ok: c.ok,
            })
            .collect();
        to_python(py, &list)
    }

    /// The current turn's latches as stored: a bool, or a dict by latch name.
    #[getter]
    fn latched<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let latched = self.lock().turns().current_latched().clone();
        to_python(py, &latched)
    }

    /// The number of the most recent turn (0 before any signal).
    #[getter]
    fn turns(&self) -> u64 {
        self.lock().turns().turns()
    }

    /// The calls the session recorded, oldest first, as a request's `facts.called` entries
    /// dated against the current turn (`turns_ago`; absent when the call's turn is unknown).
    #[getter]
    fn called<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = self.lock();
        let list: Vec<CalledView<'_>> = state
            .called()
            .map(|(c, turns_ago)| CalledView {
                tool: &c.tool,
                ok: c.ok,
                turns_ago,
            })
            .collect();
        to_python(py, &list)
    }

    fn __repr__(&self) -> String {
        let state = self.lock();
        format!(
            "TurnState(turns={}, latched={})",
            state.turns().turns(),
            state.turns().current_latched().any()
        )
    }
}

impl PyTurnState {
    /// The session's state. A lock poisoned by a panic mid-judgement is taken back with
    /// the current turn latched and no verdict kept: the judgement may have set a latch it
    /// did not get to record.
    fn lock(&self) -> MutexGuard<'_, EmbeddedTurns> {
        match self.inner.lock() {
            Ok(state) => state,
            Err(poisoned) => {
                self.inner.clear_poison();
                let mut state = poisoned.into_inner();
                state.recover();
                state
            }
        }
    }
}

/// A call's arguments as the engine reads them: a dict, or JSON text read strictly (a key
/// given twice is no value, so it never matches a kept verdict). `None`: not a JSON value.
fn args_value(obj: &Bound<'_, PyAny>) -> Option<Value> {
    let text: Cow<'_, str> = if let Ok(s) = obj.cast::<PyString>() {
        s.to_cow().ok()?
    } else if let Ok(b) = obj.cast::<PyBytes>() {
        Cow::Borrowed(std::str::from_utf8(b.as_bytes()).ok()?)
    } else {
        Cow::Owned(from_python::to_json(obj).ok()?)
    };
    toolgate_engine::parse_json(&text).ok()
}

/// The policy a `Policy` or `PolicyStore` argument names (a store: the one in force now).
pub fn policy_of(obj: &Bound<'_, PyAny>) -> PyResult<Arc<Policy>> {
    if let Ok(policy) = obj.cast::<PyPolicy>() {
        return Ok(Arc::clone(&policy.get().inner));
    }
    if let Ok(store) = obj.cast::<PyPolicyStore>() {
        return store.get().current_policy();
    }
    Err(PyTypeError::new_err(format!(
        "a policy is a toolgate.Policy or a toolgate.PolicyStore; found {}",
        obj.get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "object".into())
    )))
}
