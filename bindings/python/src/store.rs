//! `toolgate.PolicyStore`: the hot-swap holder, on the engine's `PolicyStore` (`arc-swap`).

use crate::policy::PyPolicy;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use std::sync::Arc;
use toolgate_engine::{Policy, PolicySet, PolicyStore};

/// Holds the policy in force and swaps it while other threads keep deciding.
///
/// `current()` never blocks: it returns the policy in force at that moment, and a decision
/// made with it is judged by that one revision to the end, whatever a concurrent `swap`
/// does. A swap replaces the policy whole or not at all.
#[pyclass(name = "PolicyStore", module = "toolgate", frozen)]
pub struct PyPolicyStore {
    inner: PolicyStore,
}

#[pymethods]
impl PyPolicyStore {
    /// A store serving `policy`.
    #[new]
    fn new(policy: &PyPolicy) -> PyResult<Self> {
        Ok(PyPolicyStore {
            inner: PolicyStore::new(one(policy, 0)?),
        })
    }

    /// The policy in force.
    fn current(&self) -> PyResult<PyPolicy> {
        Ok(PyPolicy {
            inner: self.current_policy()?,
        })
    }

    /// Puts `policy` in force. Decisions already holding the previous policy finish with it.
    fn swap(&self, policy: &PyPolicy) -> PyResult<()> {
        let generation = self.inner.snapshot().generation() + 1;
        // The set this returns was retired by the swap before; dropping it here frees it on
        // the swapping thread, not on a reader.
        drop(self.inner.swap(one(policy, generation)?));
        Ok(())
    }

    fn __repr__(&self) -> PyResult<String> {
        let current = self.current()?;
        Ok(format!(
            "PolicyStore(name={:?}, revision={:?})",
            current.inner.module(),
            current.inner.revision()
        ))
    }
}

impl PyPolicyStore {
    /// The policy in force, shared.
    pub(crate) fn current_policy(&self) -> PyResult<Arc<Policy>> {
        let set = self.inner.snapshot();
        set.only()
            .map(Arc::clone)
            .ok_or_else(|| PyRuntimeError::new_err("the store holds no policy"))
    }
}

fn one(policy: &PyPolicy, generation: u64) -> PyResult<PolicySet> {
    PolicySet::with_shared(vec![Arc::clone(&policy.inner)], generation)
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))
}
