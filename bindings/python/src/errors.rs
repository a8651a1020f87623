//! The typed exceptions, and the diagnostic objects a `CompileError` carries.

use pyo3::exceptions::{
    PyFileNotFoundError, PyOSError, PyPermissionError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::PyList;
use toolgate_engine::{Diagnostic, Severity, SourceFile};
use toolgate_loader::LoadError;

pyo3::create_exception!(
    toolgate,
    CompileError,
    PyValueError,
    "A policy that does not compile. `str()` is every diagnostic rendered as \
     `file:line:col` with the source line, a caret and the hint; `.diagnostics` holds them \
     as `Diagnostic` objects."
);

pyo3::create_exception!(
    toolgate,
    RequestError,
    PyValueError,
    "A request that cannot be judged: not JSON, a key given twice, a field of the wrong \
     type, or a policy other than this one. `.field` names the field (`calls[0].args.amount`) \
     when there is one; `.line` and `.column` locate JSON text errors."
);

pyo3::create_exception!(
    toolgate,
    TurnError,
    PyRuntimeError,
    "A turn that cannot be judged: the policy no longer declares a latch set in it (a \
     reload, a policy swapped mid-turn), the session holds the most latched turns one \
     session may, or one turn came under too many ids. Every call of it is denied until the \
     user's next message."
);

/// One diagnostic of a policy: an error or a warning, where it is, and what to do.
#[pyclass(name = "Diagnostic", module = "toolgate", frozen, get_all)]
pub struct PyDiagnostic {
    /// `"error"` or `"warning"`.
    severity: &'static str,
    /// A short lowercase statement of the problem.
    message: String,
    /// The file the diagnostic points into (an imported module's own name).
    file: String,
    /// One-based line.
    line: usize,
    /// One-based column, in characters.
    column: usize,
    /// A hint on how to fix it, or `None`.
    help: Option<String>,
    /// The rendered `file:line:col` text of this diagnostic alone.
    rendered: String,
}

#[pymethods]
impl PyDiagnostic {
    fn __repr__(&self) -> String {
        format!(
            "Diagnostic({} at {}:{}:{}: {})",
            self.severity, self.file, self.line, self.column, self.message
        )
    }

    fn __str__(&self) -> String {
        self.rendered.clone()
    }
}

impl PyDiagnostic {
    /// The Python view of `d`, located in `source`.
    pub fn new(d: &Diagnostic, source: &SourceFile) -> Self {
        let at = source.line_col(d.span.start);
        PyDiagnostic {
            severity: match d.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            },
            message: d.message.clone(),
            file: source.name_at(d.span.start).to_string(),
            line: at.line,
            column: at.col,
            help: d.help.clone(),
            rendered: d.render(source),
        }
    }
}

/// A list of Python `Diagnostic`s.
pub fn diagnostics<'py>(
    py: Python<'py>,
    list: &[Diagnostic],
    source: &SourceFile,
) -> PyResult<Bound<'py, PyList>> {
    PyList::new(
        py,
        list.iter()
            .map(|d| PyDiagnostic::new(d, source))
            .collect::<Vec<_>>(),
    )
}

/// `toolgate.CompileError` for `e`, with its `.diagnostics`.
pub fn compile_error(py: Python<'_>, e: &toolgate_engine::CompileError) -> PyErr {
    let err = CompileError::new_err(e.render().trim_end().to_string());
    let attached = diagnostics(py, &e.diagnostics, &e.source_file)
        .and_then(|list| err.value(py).setattr("diagnostics", list));
    match attached {
        Ok(()) => err,
        Err(other) => other,
    }
}

/// `toolgate.RequestError` for `e`, with `.field`, `.line` and `.column`.
pub fn request_error(py: Python<'_>, e: &toolgate_engine::RequestError) -> PyErr {
    use toolgate_engine::RequestError as E;
    let (field, line, column) = match e {
        E::Json { line, column, .. } => (None, Some(*line), Some(*column)),
        E::DuplicateKey { path, line, column } => (Some(path.as_str()), Some(*line), Some(*column)),
        E::Schema { path, .. } => (Some(path.as_str()), None, None),
        E::WrongPolicy { .. } => (Some(toolgate_engine::schema::POLICY), None, None),
        // A kind of error newer than this match: still raised, still refusing the request,
        // with its message and no field.
        _ => (None, None, None),
    };
    let err = RequestError::new_err(e.to_string());
    let value = err.value(py);
    let attached = value
        .setattr("field", field)
        .and_then(|()| value.setattr("line", line))
        .and_then(|()| value.setattr("column", column));
    match attached {
        Ok(()) => err,
        Err(other) => other,
    }
}

/// The Python exception for a failed `load`: an `OSError` for a file that cannot be read,
/// a `CompileError` for a policy that does not compile.
pub fn load_error(py: Python<'_>, e: LoadError) -> PyErr {
    match e {
        LoadError::Io { ref source, .. } => {
            let message = e.to_string();
            match source.kind() {
                std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(message),
                std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(message),
                _ => PyOSError::new_err(message),
            }
        }
        LoadError::Compile(errors) => match errors.first() {
            Some(first) => compile_error(py, first),
            None => CompileError::new_err("policy does not compile"),
        },
        other => PyValueError::new_err(other.to_string()),
    }
}

/// `toolgate.TurnError` for `e`.
pub fn turn_error(e: &toolgate_turns::TurnError) -> PyErr {
    TurnError::new_err(e.to_string())
}
