//! `toolgate._native`: the toolgate engine as a CPython extension module.
//!
//! The Python package `toolgate` re-exports everything here; the adapters for agent
//! frameworks are pure Python on top. A denial is a result (a decision with `allow: false`),
//! never an exception: the only exceptions are a policy that does not compile
//! ([`errors::CompileError`]), a request that cannot be read ([`errors::RequestError`]) and
//! a turn whose state cannot judge it ([`errors::TurnError`], from [`turns::PyTurnState`]).

mod errors;
mod from_python;
mod input;
mod policy;
mod store;
mod turns;

use policy::PyPolicy;
use pyo3::prelude::*;
use std::path::PathBuf;
use toolgate_engine::{ImportError, ImportTarget, ModuleText, Policy};

/// Compiles policy `source`, naming it `filename` in diagnostics.
///
/// Only `use stdlib::NAME` imports resolve here; a `use "FILE"` import is refused with its
/// location, because text has no directory to resolve a file against (use `load`).
#[pyfunction]
#[pyo3(signature = (source, filename = "policy.gate"))]
fn compile(py: Python<'_>, source: &str, filename: &str) -> PyResult<PyPolicy> {
    let compiled = py.detach(|| Policy::compile_with(filename, source, &stdlib_only));
    compiled
        .map(PyPolicy::new)
        .map_err(|e| errors::compile_error(py, &e))
}

/// Reads and compiles the policy file at `path`, resolving `use "FILE"` imports relative to
/// it, as the `toolgate` CLI and server do.
#[pyfunction]
fn load(py: Python<'_>, path: PathBuf) -> PyResult<PyPolicy> {
    let loaded = py.detach(|| toolgate_loader::load_file(&path));
    loaded
        .map(PyPolicy::new)
        .map_err(|e| errors::load_error(py, e))
}

/// The import resolver of `compile`: the embedded standard library only.
fn stdlib_only(target: &ImportTarget<'_>) -> Result<ModuleText, ImportError> {
    match target {
        ImportTarget::Stdlib(_) => toolgate_engine::resolve_stdlib(target),
        ImportTarget::File { path, .. } => Err(ImportError::NoFiles {
            path: (*path).to_string(),
            hint: "`toolgate.compile` reads no files; use `toolgate.load(path)` to import files relative to a policy file",
        }),
    }
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_class::<PyPolicy>()?;
    m.add_class::<store::PyPolicyStore>()?;
    m.add_class::<turns::PyTurnState>()?;
    m.add_class::<errors::PyDiagnostic>()?;
    let py = m.py();
    m.add("CompileError", py.get_type::<errors::CompileError>())?;
    m.add("RequestError", py.get_type::<errors::RequestError>())?;
    m.add("TurnError", py.get_type::<errors::TurnError>())?;
    Ok(())
}
