//! Typed errors of the engine's public API.

use toolgate_lang::{render_all, Diagnostic, SourceFile};

/// A policy that does not compile, with every diagnostic found.
///
/// `Display` renders every diagnostic (`file:line:col`, the source line, a caret and the hint),
/// and so does `Debug`, so `?` in a `main` returning `Result<_, Box<dyn Error>>` prints the
/// diagnostics, not the internals of the [`SourceFile`].
#[derive(Clone, thiserror::Error)]
#[error("{}", rendered(.source_file, .diagnostics))]
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

impl std::fmt::Debug for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&rendered(&self.source_file, &self.diagnostics))
    }
}

/// Every diagnostic rendered, without the last line break; the file name alone when there
/// is none (a hand-built error).
fn rendered(source: &SourceFile, diagnostics: &[Diagnostic]) -> String {
    if diagnostics.is_empty() {
        return format!("{}: policy does not compile", source.name());
    }
    render_all(diagnostics, source).trim_end().to_string()
}

/// A request that cannot be judged: bad JSON, or JSON that does not fit the schema.
/// Non-exhaustive: a later version may add a kind; any kind means the request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::Policy;

    const TWO_ERRORS: &str =
        "module m\nread x\nstage s { tools [x, y] }\nrule r for z { require args.a exists }\n";

    #[test]
    fn display_shows_every_diagnostic_with_its_location() {
        let e = Policy::compile("two.gate", TWO_ERRORS).unwrap_err();
        assert!(e.errors().count() >= 2, "{}", e.render());
        let shown = e.to_string();
        for d in e.errors() {
            assert!(shown.contains(&d.message), "{shown}");
        }
        assert!(shown.contains("two.gate:3:"), "{shown}");
        assert!(shown.contains("two.gate:4:"), "{shown}");
    }

    #[test]
    fn debug_is_the_rendering_not_the_source_file_internals() {
        let e = Policy::compile("two.gate", TWO_ERRORS).unwrap_err();
        let debug = format!("{e:?}");
        assert_eq!(debug, e.to_string());
        assert!(!debug.contains("line_starts"), "{debug}");
        assert!(!debug.contains("SourceFile"), "{debug}");
        // What `?` in `main` prints goes through `Debug` of the boxed error.
        let boxed: Box<dyn std::error::Error> = Box::new(e);
        assert_eq!(format!("{boxed:?}"), debug);
    }
}
