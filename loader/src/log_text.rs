//! Text from outside (archive entry names, manifest fields, header values, policy source
//! excerpts) on its way into a log line: control characters and the Unicode controls that
//! reorder or hide text are written as escapes, so a name can neither start a line of its
//! own (a forged `toolgate: loaded generation 9`) nor drive the terminal (ANSI `ESC [`).

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a log line as itself: C0 and C1 controls (newline, carriage
/// return, `ESC`, `DEL`...), and the bidirectional and zero-width format characters that
/// make text read differently from what it holds.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

fn escape_where(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| unsafe_char(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_char(c) && !keep(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether `s` holds any character [`escape`] would rewrite.
pub fn needs_escape(s: &str) -> bool {
    s.chars().any(unsafe_char)
}

/// `s` for one log line: every unsafe character (newlines included) as `\u{..}`.
pub fn escape(s: &str) -> Cow<'_, str> {
    escape_where(s, |_| false)
}

/// `s` for a multi-line log message (rendered diagnostics): newlines and tabs stay, every
/// other unsafe character is escaped.
pub fn escape_keeping_lines(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| c == '\n' || c == '\t')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newlines_escapes_and_bidi_controls_are_escaped() {
        assert_eq!(escape("gate.gate"), "gate.gate");
        assert_eq!(
            escape("a\ntoolgate: loaded\u{1b}[2K"),
            "a\\u{a}toolgate: loaded\\u{1b}[2K"
        );
        assert_eq!(escape("x\u{202e}y\r"), "x\\u{202e}y\\u{d}");
        assert_eq!(escape("café ✓"), "café ✓");
        assert_eq!(escape_keeping_lines("a\n\tb\u{1b}c"), "a\n\tb\\u{1b}c");
    }
}
