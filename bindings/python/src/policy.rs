//! `toolgate.Policy`: a compiled policy, immutable and safe to share across threads.

use crate::errors::{diagnostics, request_error};
use crate::input;
use pyo3::prelude::*;
use pyo3::types::PyList;
use pythonize::pythonize;
use serde::Serialize;
use std::sync::Arc;
use toolgate_engine::Policy;

/// Above this many bytes of JSON text (a `dict` is written as text first), `decide` releases
/// the GIL while the engine reads and judges it. Below it there is little to free: the
/// engine's part of a batch of 4 is 2-3 µs, and converting the input and building the
/// response need the GIL anyway (`bench/README.md`).
pub const DETACH_TEXT_BYTES: usize = 16 * 1024;

/// A compiled policy. Compile one with `toolgate.compile` or `toolgate.load`; it never
/// changes, so one `Policy` may serve every thread at once.
#[pyclass(name = "Policy", module = "toolgate", frozen)]
pub struct PyPolicy {
    pub(crate) inner: Arc<Policy>,
}

impl PyPolicy {
    /// Wraps a compiled policy.
    pub fn new(policy: Policy) -> Self {
        PyPolicy {
            inner: Arc::new(policy),
        }
    }
}

#[pymethods]
impl PyPolicy {
    /// The policy's module name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.module()
    }

    /// The content hash of the policy source; every response names it.
    #[getter]
    fn revision(&self) -> &str {
        self.inner.revision()
    }

    /// How long a person's approval of one of this policy's asks may be used once given,
    /// in seconds (a `float`): the policy's `approvals { valid_for .. }`, 600.0 (ten
    /// minutes) when it sets none. The engine reads no clock; whoever keeps approvals (the
    /// adapters' `Turn`) drops an approval older than this before it reaches
    /// `facts.approvals`.
    #[getter]
    fn approval_window(&self) -> f64 {
        self.inner.approval_window().as_secs_f64()
    }

    /// Whether some latch or rule of this policy can ask a person (`asks`, `ask when`).
    #[getter]
    fn may_ask(&self) -> bool {
        self.inner.may_ask()
    }

    /// The warnings the policy compiled with, as `Diagnostic` objects.
    #[getter]
    fn warnings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        diagnostics(py, self.inner.warnings(), self.inner.source())
    }

    /// Judges a batch of tool calls. `request` is a dict, or JSON text as str or bytes,
    /// in the request schema (`{"facts": {...}, "calls": [{"id", "tool", "args"}]}`).
    ///
    /// Returns a dict of the JSON response's shape: `policy`, `revision`, `latched` and one
    /// decision per call in request order. A denial is a decision with `allow: False` and
    /// its `reason`, never an exception; `RequestError` is raised only for a request that
    /// cannot be read.
    fn decide<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let policy = &*self.inner;
        let text = input::read(py, request)?;
        let response = if text.len() > DETACH_TEXT_BYTES {
            py.detach(|| policy.decide_json(&text))
        } else {
            policy.decide_json(&text)
        }
        .map_err(|e| request_error(py, &e))?;
        to_python(py, &response)
    }

    /// The tool definitions to show the model for one turn. `request` is a dict or JSON
    /// text in the offer schema (`{"facts": {...}, "tools": [{"name", "description",
    /// "input_schema"}]}`); returns a dict of `/v1/offer`'s shape: `tools` to send, the
    /// `disabled` ones, and the `withheld` ones with why (for logs, never for the model).
    fn offer<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let policy = &*self.inner;
        let offer = input::offer_request(policy, &input::read(py, request)?)
            .map_err(|e| request_error(py, &e))?;
        to_python(py, &policy.offer(&offer.facts, &offer.tools))
    }

    /// Explains the decision for every call of `request` (the same input as `decide`): a
    /// list, in request order, of `{"decision": {...}, "steps": [{"check", "passed",
    /// "detail"}]}`, the checks the judge ran in its own order.
    fn explain<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let policy = &*self.inner;
        let request = input::request(policy, &input::read(py, request)?)
            .map_err(|e| request_error(py, &e))?;
        to_python(py, &policy.explain(&request))
    }

    fn __repr__(&self) -> String {
        format!(
            "Policy(name={:?}, revision={:?})",
            self.inner.module(),
            self.inner.revision()
        )
    }
}

/// A response, offer or explanation as Python objects, through the engine's own `Serialize`.
pub(crate) fn to_python<'py, T: Serialize>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    pythonize(py, value).map_err(PyErr::from)
}
