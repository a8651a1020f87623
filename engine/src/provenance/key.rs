//! The one normal form values are compared in, for the index and for the arguments alike.
//!
//! A value's key is its text trimmed of surrounding whitespace and punctuation, in Unicode
//! NFC, lower-cased; a URL loses its `http://`/`https://` and a trailing `/`, and an IBAN
//! written in groups loses its spaces. Short numbers (under [`MIN_DIGITS`] digits) have no key:
//! an amount of 50 says nothing about where it came from.

use std::borrow::Cow;
use unicode_normalization::{is_nfc_quick, IsNormalized, UnicodeNormalization};

/// The fewest digits a number-only value needs to be indexed and matched.
pub(crate) const MIN_DIGITS: usize = 6;

/// Characters trimmed from both ends of a value.
fn is_edge(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '"' | '\''
                | '`'
                | '('
                | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | '<'
                | '>'
                | '.'
                | ','
                | ';'
                | ':'
                | '!'
                | '?'
                | '*'
                | '_'
        )
}

/// The key of `text`, or `None` when nothing distinctive is left (empty, or a short number).
pub(crate) fn of(text: &str) -> Option<Cow<'_, str>> {
    let t = text.trim_matches(is_edge);
    if t.is_empty() {
        return None;
    }
    // A short number: only a text shorter than `MIN_DIGITS` can be one.
    if t.len() < MIN_DIGITS && t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut s: Cow<'_, str> = if t.is_ascii() {
        if has_upper(t.as_bytes()) {
            Cow::Owned(t.to_ascii_lowercase())
        } else {
            Cow::Borrowed(t)
        }
    } else {
        let nfc: Cow<'_, str> = match is_nfc_quick(t.chars()) {
            IsNormalized::Yes => Cow::Borrowed(t),
            _ => Cow::Owned(t.nfc().collect()),
        };
        Cow::Owned(nfc.to_lowercase())
    };
    if let Some(rest) = strip_scheme(&s) {
        let at = s.len() - rest.len();
        let end = at + rest.trim_end_matches('/').len();
        s = match s {
            Cow::Borrowed(b) => Cow::Borrowed(&b[at..end]),
            Cow::Owned(mut o) => {
                o.truncate(end);
                o.drain(..at);
                Cow::Owned(o)
            }
        };
    }
    if looks_like_grouped_iban(&s) {
        s = Cow::Owned(s.chars().filter(|c| *c != ' ').collect());
    }
    (!s.is_empty()).then_some(s)
}

/// Whether `b` holds an ASCII capital: a branch-free test over blocks of 16 bytes, which the
/// compiler vectorises (a whole leaf of lower-case prose is read at several bytes a cycle).
fn has_upper(b: &[u8]) -> bool {
    let mut blocks = b.chunks_exact(16);
    let upper = |block: &[u8]| block.iter().fold(false, |a, c| a | c.is_ascii_uppercase());
    blocks.any(upper) || upper(blocks.remainder())
}

/// The text after `http://` or `https://`.
fn strip_scheme(s: &str) -> Option<&str> {
    s.strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
}

/// `de89 3704 0044 0532 0130 00`: two letters, two digits, then groups of letters and digits.
fn looks_like_grouped_iban(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 15
        && b[0].is_ascii_lowercase()
        && b[1].is_ascii_lowercase()
        && b[2].is_ascii_digit()
        && b[3].is_ascii_digit()
        && b.contains(&b' ')
        && b[4..]
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b' ')
}

/// The key of `text` for comparing it with one value the executor holds (`in facts.PATH`):
/// [`of`], but a short number keeps itself as its key, since equality, not provenance, is
/// asked.
pub(crate) fn loose(text: &str) -> Option<Cow<'_, str>> {
    let t = text.trim_matches(is_edge);
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Cow::Borrowed(t));
    }
    of(t)
}

/// The key of a number, when it is a whole number of at least [`MIN_DIGITS`] digits.
pub(crate) fn of_number(n: &serde_json::Number) -> Option<String> {
    let text = match (n.as_u64(), n.as_i64()) {
        (Some(u), _) => u.to_string(),
        (None, Some(i)) => i.unsigned_abs().to_string(),
        _ => return None,
    };
    (text.len() >= MIN_DIGITS).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_ignore_case_edges_schemes_and_iban_spaces() {
        assert_eq!(
            of("  Mark@Example.COM. ").as_deref(),
            Some("mark@example.com")
        );
        assert_eq!(of("https://www.X.com/").as_deref(), Some("www.x.com"));
        assert_eq!(of("http://x.com//").as_deref(), Some("x.com"));
        assert_eq!(of("(HTTP://X.com/a/)").as_deref(), Some("x.com/a"));
        assert_eq!(of("https:///"), None);
        assert_eq!(of("www.x.com").as_deref(), Some("www.x.com"));
        assert_eq!(
            of("DE89 3704 0044 0532 0130 00").as_deref(),
            Some("de89370400440532013000")
        );
        assert_eq!(of("(\"50\")"), None);
        assert_eq!(of("1234567").as_deref(), Some("1234567"));
        assert_eq!(of(" .,"), None);
        // NFC: a decomposed é is the composed one.
        assert_eq!(of("Cafe\u{301}"), of("Café"));
        assert_eq!(of("12345"), None);
        assert_eq!(of("123456").as_deref(), Some("123456"));
        assert_eq!(of("1234a").as_deref(), Some("1234a"));
        assert_eq!(of("a").as_deref(), Some("a"));
    }

    #[test]
    fn finds_a_capital_anywhere() {
        let lower = "abcdefghijklmnopqrstuvwxyz0123456789 ,.-".repeat(5);
        assert!(!has_upper(lower.as_bytes()));
        for at in 0..lower.len() {
            let mut b = lower.clone().into_bytes();
            b[at] = b'Q';
            assert!(has_upper(&b), "{at}");
            let mut b = lower.clone().into_bytes();
            b[at] = b[at].to_ascii_uppercase();
            let text = String::from_utf8(b).unwrap();
            assert_eq!(of(&text).as_deref(), Some(&*lower), "{at}");
        }
    }
}
