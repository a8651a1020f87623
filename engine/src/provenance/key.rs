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
    let digits = t.bytes().filter(u8::is_ascii_digit).count();
    if digits == t.len() && digits < MIN_DIGITS {
        return None;
    }
    let mut s: Cow<'_, str> = if t.is_ascii() {
        if t.bytes().any(|b| b.is_ascii_uppercase()) {
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
        let rest = rest.trim_end_matches('/');
        s = Cow::Owned(rest.to_string());
    }
    if looks_like_grouped_iban(&s) {
        s = Cow::Owned(s.chars().filter(|c| *c != ' ').collect());
    }
    (!s.is_empty()).then_some(s)
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
        && b.contains(&b' ')
        && b[0].is_ascii_lowercase()
        && b[1].is_ascii_lowercase()
        && b[2].is_ascii_digit()
        && b[3].is_ascii_digit()
        && b[4..]
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b' ')
}

/// The key of `text` for matching against the prompt: [`of`], but a short number keeps its
/// key (the user typed "send 50 to Bob").
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
    }
}
