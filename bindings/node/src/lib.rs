//! toolgate for Node.js: the engine in-process, as a Node-API addon built with napi-rs.
//!
//! The JavaScript entry point (`index.js`) wraps this addon: it turns the plain failure
//! objects and coded errors thrown here into the `CompileError` and `RequestError` classes.
//! Requests cross the boundary as JSON text and answers come back as JSON text: the engine
//! reads a request in one pass (refusing a key given twice), and the wrapper's
//! `JSON.stringify`/`JSON.parse` were measured faster than walking the objects through
//! Node-API calls (see docs/integration.md). Everything that decides is the engine's code.
//!
//! [`TurnState`] (`turns.rs`) is the turn state of one session: the `toolgate-turns` model
//! every surface shares, which the adapters' `Turn` delegates to.

use napi::bindgen_prelude::Either;
use napi::Error;
use napi_derive::napi;
use std::path::Path;
use toolgate_engine::{Diagnostic, Request, RequestError, Severity, SourceFile};
use toolgate_loader::LoadError;

/// The error code prefix the JavaScript wrapper recognises as a request error; the field path
/// (possibly empty) follows it.
const REQUEST_ERROR: &str = "TOOLGATE_REQUEST_ERROR:";

mod turns;
pub use turns::TurnState;

/// One diagnostic of a policy that does not compile (or of a warning), as plain data.
#[napi(object)]
pub struct DiagnosticInfo {
    /// `"error"` or `"warning"`.
    pub severity: String,
    /// The lowercase statement of the problem.
    pub message: String,
    /// The file the diagnostic points into (an imported module's own name for its lines).
    pub file: String,
    /// One-based line.
    pub line: u32,
    /// One-based column, counted in Unicode scalar values.
    pub column: u32,
    /// The text printed beside the caret, if any.
    pub label: Option<String>,
    /// What to do about it, if anything.
    pub help: Option<String>,
}

/// Why a policy did not compile: the rendered text and the structured list. The JavaScript
/// wrapper throws it as a `CompileError`.
#[napi(object)]
pub struct CompileFailure {
    /// Every diagnostic rendered with `file:line:col`, the source line and a caret.
    pub rendered: String,
    /// The diagnostics, errors and any warnings found with them, in source order.
    pub diagnostics: Vec<DiagnosticInfo>,
}

/// A compiled policy. Read-only and cheap to share; every method is a pure function of the
/// policy and its argument.
#[napi]
pub struct Policy {
    inner: toolgate_engine::Policy,
}

#[napi]
impl Policy {
    /// The policy's module name.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.module().to_owned()
    }

    /// The content hash of the policy source (imports included).
    #[napi(getter)]
    pub fn revision(&self) -> String {
        self.inner.revision().to_owned()
    }

    /// How long, in milliseconds, a person's approval of one of this policy's asks may be
    /// used once given: the policy's `approvals { valid_for .. }`, ten minutes when it sets
    /// none. The engine reads no clock; the keeper of approvals (the adapters' `Turn`) drops
    /// an approval older than this before it reaches `facts.approvals`.
    #[napi(getter, js_name = "approvalWindowMs")]
    pub fn approval_window_ms(&self) -> u32 {
        // At most 24 hours (86 400 000 ms), well inside a u32; saturate rather than wrap.
        u32::try_from(self.inner.approval_window().as_millis()).unwrap_or(u32::MAX)
    }

    /// Whether some latch or rule of this policy can ask a person (`asks`, `ask when`): an
    /// executor with no one to ask can tell at load time that every ask will be a denial.
    #[napi(getter, js_name = "mayAsk")]
    pub fn may_ask(&self) -> bool {
        self.inner.may_ask()
    }

    /// The warnings the policy compiled with.
    #[napi(getter)]
    pub fn warnings(&self) -> Vec<DiagnosticInfo> {
        diagnostics(self.inner.warnings(), self.inner.source())
    }

    /// Judges a batch given as JSON text (a request object is turned into text by the
    /// JavaScript wrapper, which measured faster than reading it through Node-API) and
    /// answers the response as JSON text, as the decision server writes it. A denial is a
    /// result; only a request that cannot be judged throws (with the field at fault).
    #[napi(js_name = "decideText")]
    pub fn decide_text(&self, request: String) -> Result<String, Error<String>> {
        to_text(self.inner.decide_json(&request))
    }

    /// The tool definitions to show the model, for an offer request (`facts`, `tools`) as
    /// JSON text, like the server's `POST /v1/offer`; the offer as JSON text.
    #[napi(js_name = "offerText")]
    pub fn offer_text(&self, request: String) -> Result<String, Error<String>> {
        to_text(self.inner.offer_json(&request))
    }

    /// Every check the judge ran for each call of a request given as JSON text, in order,
    /// with the decision `decide` makes; JSON text. For people and logs, not the hot path.
    #[napi(js_name = "explainText")]
    pub fn explain_text(&self, request: String) -> Result<String, Error<String>> {
        to_text(Request::from_json(&request).and_then(|r| {
            self.inner.check_request(&r)?;
            Ok(self.inner.explain(&r))
        }))
    }
}

/// An answer as JSON text, or the request error as a coded JavaScript error.
fn to_text<T: serde::Serialize>(answer: Result<T, RequestError>) -> Result<String, Error<String>> {
    let answer = answer.map_err(request_error)?;
    serde_json::to_string(&answer).map_err(|e| Error::new("GenericFailure".into(), e.to_string()))
}

/// Compiles policy `source`, naming it `filename` in diagnostics. Imports: `stdlib::` only
/// (a file import needs a file to be relative to: use `load`).
#[napi]
pub fn compile(source: String, filename: Option<String>) -> Either<Policy, CompileFailure> {
    let name = filename.as_deref().unwrap_or("policy.gate");
    match toolgate_engine::Policy::compile(name, &source) {
        Ok(inner) => Either::A(Policy { inner }),
        Err(e) => Either::B(compile_failure(&e)),
    }
}

/// Reads and compiles the policy file at `path`, resolving `use "FILE"` imports relative to
/// it, as the command line does.
#[napi]
pub fn load(path: String) -> napi::Result<Either<Policy, CompileFailure>> {
    match toolgate_loader::load_file(Path::new(&path)) {
        Ok(inner) => Ok(Either::A(Policy { inner })),
        Err(LoadError::Compile(errors)) => {
            let mut failure = CompileFailure {
                rendered: String::new(),
                diagnostics: Vec::new(),
            };
            for e in &errors {
                let one = compile_failure(e);
                failure.rendered.push_str(&one.rendered);
                failure.diagnostics.extend(one.diagnostics);
            }
            Ok(Either::B(failure))
        }
        Err(other) => Err(Error::from_reason(other.to_string())),
    }
}

fn compile_failure(e: &toolgate_engine::CompileError) -> CompileFailure {
    CompileFailure {
        rendered: e.render(),
        diagnostics: diagnostics(&e.diagnostics, &e.source_file),
    }
}

fn diagnostics(list: &[Diagnostic], source: &SourceFile) -> Vec<DiagnosticInfo> {
    list.iter()
        .map(|d| {
            let at = source.line_col(d.span.start);
            DiagnosticInfo {
                severity: match d.severity {
                    Severity::Error => "error",
                    Severity::Warning => "warning",
                }
                .to_owned(),
                message: d.message.clone(),
                file: source.name_at(d.span.start).to_owned(),
                line: u32::try_from(at.line).unwrap_or(u32::MAX),
                column: u32::try_from(at.col).unwrap_or(u32::MAX),
                label: d.label.clone(),
                help: d.help.clone(),
            }
        })
        .collect()
}

/// A request error as a coded JavaScript error: the code carries the field path, which the
/// wrapper moves to `RequestError.field`.
fn request_error(e: RequestError) -> Error<String> {
    let field = match &e {
        RequestError::DuplicateKey { path, .. } | RequestError::Schema { path, .. } => {
            path.as_str()
        }
        // `Json`, `WrongPolicy`, and a kind newer than this match: still a RequestError (the
        // request is refused), with no field.
        _ => "",
    };
    Error::new(format!("{REQUEST_ERROR}{field}"), e.to_string())
}
