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

/// Longest source line shown whole, in characters; a longer one (a one-line JSON dump, say)
/// is cut to a window around the caret, so one error does not print the whole line.
const MAX_SHOWN: usize = 120;
/// Characters shown before the caret in a cut line.
const BEFORE_CARET: usize = 40;
/// What stands for the characters a cut line leaves out.
const CUT: &str = "...";

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
    let chars: Vec<char> = line_text.chars().collect();
    let caret_at = (start.col - 1).min(chars.len());
    // The window of the line shown, in characters, and the caret's column within it.
    let (from, to) = if chars.len() <= MAX_SHOWN {
        (0, chars.len())
    } else {
        let from = caret_at.saturating_sub(BEFORE_CARET);
        (from, (from + MAX_SHOWN).min(chars.len()))
    };
    let lead = if from > 0 { CUT } else { "" };
    let tail = if to < chars.len() { CUT } else { "" };
    let shown: String = chars[from..to].iter().collect();
    let indent: String = std::iter::repeat_n(' ', lead.len())
        .chain(
            chars[from..caret_at]
                .iter()
                .map(|c| if *c == '\t' { '\t' } else { ' ' }),
        )
        .collect();
    let width = width.min(to.saturating_sub(caret_at).max(1));
    let _ = writeln!(out, "{pad} |");
    let _ = writeln!(out, "{:>gutter$} | {lead}{shown}{tail}", start.line);
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
    fn a_long_line_is_cut_around_the_caret() {
        let line = format!("{}BAD{}", "a".repeat(500), "b".repeat(500));
        let src = SourceFile::new("tools.json", format!("{line}\n"));
        let d = Diagnostic::error(Span::new(500, 503), "bad");
        let text = d.render(&src);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[2].len() < 140, "{}", lines[2]);
        assert!(
            lines[2].contains("...") && lines[2].contains("BAD"),
            "{}",
            lines[2]
        );
        // The caret sits under BAD.
        let at = lines[2].find("BAD").unwrap();
        assert_eq!(lines[3].find('^'), Some(at), "{text}");
        assert_eq!(lines[3].matches('^').count(), 3);
    }

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
