//! Diagnostics: what went wrong, where, and what to do about it.

use crate::span::{SourceFile, Span};
use std::fmt::Write as _;

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The policy cannot be compiled.
    Error,
    /// The policy compiles, but probably not into what its author meant.
    Warning,
}

impl Severity {
    fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One message about a policy source, anchored to a span.
///
/// Messages are lowercase and say what is wrong; `help` says what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// A short lowercase statement of the problem.
    pub message: String,
    /// Where in the source the problem is.
    pub span: Span,
    /// Text printed beside the caret, if any.
    pub label: Option<String>,
    /// A hint on how to fix it, if any.
    pub help: Option<String>,
    /// A second location that explains the first (e.g. where a name was first declared),
    /// with the text printed beside its caret. It may lie in another file of the source.
    pub note: Option<(Span, String)>,
}

impl Diagnostic {
    /// An error at `span`.
    pub fn error(span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span,
            label: None,
            help: None,
            note: None,
        }
    }

    /// A warning at `span`.
    pub fn warning(span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(span, message)
        }
    }

    /// Adds the text printed beside the caret.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// Adds a second location, shown with its own `file:line:col` and caret.
    pub fn with_note(mut self, span: Span, text: impl Into<String>) -> Self {
        self.note = Some((span, text.into()));
        self
    }

    /// Adds a hint.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// True for errors.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Renders the diagnostic for a person:
    ///
    /// ```text
    /// policy.gate:3:7: error: tool `x` is classified twice
    ///   |
    /// 3 | read x
    ///   |      ^ classified again here
    ///   = help: give each tool exactly one class
    /// ```
    pub fn render(&self, source: &SourceFile) -> String {
        let mut out = format!(
            "{}: {}: {}\n",
            source.location(self.span.start),
            self.severity.as_str(),
            self.message
        );
        let mut gutter = source.line_col(self.span.start).line.to_string().len();
        if let Some((span, _)) = &self.note {
            gutter = gutter.max(source.line_col(span.start).line.to_string().len());
        }
        snippet(&mut out, source, self.span, self.label.as_deref(), gutter);
        if let Some((span, text)) = &self.note {
            let _ = writeln!(out, "{}: note: {text}", source.location(span.start));
            snippet(&mut out, source, *span, None, gutter);
        }
        if let Some(help) = &self.help {
            let _ = writeln!(out, "{} = help: {help}", " ".repeat(gutter));
        }
        out
    }
}

/// The source line of `span`, and a caret under it with an optional label.
fn snippet(out: &mut String, source: &SourceFile, span: Span, label: Option<&str>, gutter: usize) {
    let start = source.line_col(span.start);
    let (line_text, line_start) = source.line_at(span.start);
    let pad = " ".repeat(gutter);
    // Caret width: the span's characters on its first line, at least one.
    let span_end_on_line = span.end.min(line_start + line_text.len()).max(span.start);
    let width = source
        .text()
        .get(span.start..span_end_on_line)
        .map_or(1, |s| s.chars().count())
        .max(1);
    let indent: String = line_text
        .chars()
        .take(start.col - 1)
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    let _ = writeln!(out, "{pad} |");
    let _ = writeln!(out, "{:>gutter$} | {}", start.line, line_text);
    let carets = "^".repeat(width);
    match label {
        Some(label) => {
            let _ = writeln!(out, "{pad} | {indent}{carets} {label}");
        }
        None => {
            let _ = writeln!(out, "{pad} | {indent}{carets}");
        }
    }
}

/// Renders every diagnostic in order, separated by blank lines.
pub fn render_all(diagnostics: &[Diagnostic], source: &SourceFile) -> String {
    diagnostics
        .iter()
        .map(|d| d.render(source))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_location_caret_and_help() {
        let src = SourceFile::new("p.gate", "module m\nread x\nread x\n");
        let d = Diagnostic::error(Span::new(21, 22), "tool `x` is classified twice")
            .with_label("classified again here")
            .with_help("give each tool exactly one class");
        assert_eq!(
            d.render(&src),
            "p.gate:3:6: error: tool `x` is classified twice\n  |\n3 | read x\n  |      ^ classified again here\n  = help: give each tool exactly one class\n"
        );
    }
}
