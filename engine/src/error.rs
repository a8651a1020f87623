//! Typed errors of the engine's public API.

use toolgate_lang::{render_all, Diagnostic, SourceFile};

/// A policy that does not compile, with every diagnostic found.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", summary(.source_file, .diagnostics))]
pub struct CompileError {
    /// The source the diagnostics point into.
    pub source_file: SourceFile,
    /// Errors (and any warnings found alongside them), in source order.
    pub diagnostics: Vec<Diagnostic>,
}

impl CompileError {
    /// Every diagnostic rendered with file, line, column, caret and hint.
    pub fn render(&self) -> String {
        render_all(&self.diagnostics, &self.source_file)
    }

    /// Only the errors.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.is_error())
    }
}

fn summary(source: &SourceFile, diagnostics: &[Diagnostic]) -> String {
    let errors: Vec<&Diagnostic> = diagnostics.iter().filter(|d| d.is_error()).collect();
    match errors.first() {
        None => format!("{}: policy does not compile", source.name()),
        Some(first) => {
            let at = source.location(first.span.start);
            let more = match errors.len() {
                1 => String::new(),
                n => format!(
                    " (and {} more error{})",
                    n - 1,
                    if n == 2 { "" } else { "s" }
                ),
            };
            format!("{at}: {}{more}", first.message)
        }
    }
}

/// A request that cannot be judged: bad JSON, or JSON that does not fit the schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The text is not JSON.
    #[error("request is not valid JSON at line {line}, column {column}: {message}")]
    Json {
        /// One-based line.
        line: usize,
        /// One-based column.
        column: usize,
        /// serde_json's description.
        message: String,
    },
    /// A key appears twice in one object. JSON readers disagree on which one counts, so the
    /// executor might run a different call from the one judged.
    #[error(
        "request has the key `{path}` twice (line {line}, column {column}); JSON readers \
         disagree on which one counts, so the request is ambiguous"
    )]
    DuplicateKey {
        /// The repeated key's path, e.g. `calls[0].args.amount`.
        path: String,
        /// One-based line of the second occurrence.
        line: usize,
        /// One-based column of the second occurrence.
        column: usize,
    },
    /// The JSON does not fit the request schema.
    #[error("request field `{path}`: {message}")]
    Schema {
        /// Where in the request, e.g. `facts.messages[2].from`.
        path: String,
        /// What is wrong there.
        message: String,
    },
    /// The request names a policy other than the one asked to judge it.
    #[error("request is for policy `{requested}`, but the policy loaded is `{loaded}`")]
    WrongPolicy {
        /// The module the request names.
        requested: String,
        /// The module that was asked to judge it.
        loaded: String,
    },
}
