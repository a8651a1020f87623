//! A regex in words, for refusals and offered requirements: `^POL-[0-9]{6}$` becomes
//! `"POL-" followed by 6 digits`. The model reads refusals; a raw regex is easy to misread
//! and invites guessing, so a pattern is put into words where its shape is a common one
//! (literals, character classes, counted repeats, anchors, a choice of literals), and
//! otherwise named only as "the format the policy requires".

use regex_syntax::hir::{Class, Hir, HirKind, Look, Repetition};

/// Where a pattern is anchored, which decides the verb: be, start with, end with, contain.
pub(crate) struct Words {
    start: bool,
    end: bool,
    body: Option<String>,
}

impl Words {
    /// The pattern's words; a pattern that does not parse is described as a format only.
    pub(crate) fn of(pattern: &str) -> Words {
        let Ok(hir) = regex_syntax::Parser::new().parse(pattern) else {
            return Words {
                start: true,
                end: true,
                body: None,
            };
        };
        let mut parts: Vec<&Hir> = match hir.kind() {
            HirKind::Concat(items) => items.iter().collect(),
            _ => vec![&hir],
        };
        let is_start = |h: &Hir| matches!(h.kind(), HirKind::Look(Look::Start | Look::StartLF));
        let is_end = |h: &Hir| matches!(h.kind(), HirKind::Look(Look::End | Look::EndLF));
        let start = parts.first().is_some_and(|h| is_start(h));
        if start {
            parts.remove(0);
        }
        let end = parts.last().is_some_and(|h| is_end(h));
        if end {
            parts.pop();
        }
        let body = sequence(&parts);
        Words { start, end, body }
    }

    /// `"`args.x` must …"`, or `must not …` when `negated`.
    pub(crate) fn sentence(&self, path: &str, negated: bool) -> String {
        let not = if negated { "not " } else { "" };
        let Some(body) = &self.body else {
            return format!("`{path}` must {not}be in the format the policy requires");
        };
        let verb = match (self.start, self.end) {
            (true, true) => "be",
            (true, false) => "start with",
            (false, true) => "end with",
            (false, false) => "contain",
        };
        format!("`{path}` must {not}{verb} {body}")
    }
}

/// A run of pieces joined with "followed by"; adjacent literal characters become one quoted
/// text.
fn sequence(parts: &[&Hir]) -> Option<String> {
    let mut out: Vec<String> = Vec::new();
    let mut text = String::new();
    for h in parts {
        if let Some(c) = literal(h) {
            text.push_str(&c);
            continue;
        }
        if !text.is_empty() {
            out.push(format!("{text:?}"));
            text.clear();
        }
        out.push(piece(h)?);
    }
    if !text.is_empty() {
        out.push(format!("{text:?}"));
    }
    if out.is_empty() {
        return None;
    }
    Some(out.join(" followed by "))
}

/// The text of a literal piece (a single character or a run of them).
fn literal(h: &Hir) -> Option<String> {
    match h.kind() {
        HirKind::Literal(l) => String::from_utf8(l.0.to_vec()).ok(),
        HirKind::Capture(c) => literal(&c.sub),
        _ => None,
    }
}

/// One piece that is not plain text.
fn piece(h: &Hir) -> Option<String> {
    match h.kind() {
        HirKind::Class(c) => Some(format!("{} {}", article(&class(c)?), class(c)?)),
        HirKind::Repetition(r) => repetition(r),
        HirKind::Capture(c) => match c.sub.kind() {
            HirKind::Concat(items) => sequence(&items.iter().collect::<Vec<_>>()),
            _ => piece(&c.sub).or_else(|| literal(&c.sub).map(|t| format!("{t:?}"))),
        },
        HirKind::Alternation(options) => {
            let texts: Option<Vec<String>> = options
                .iter()
                .map(|o| literal(o).map(|t| format!("{t:?}")))
                .collect();
            let texts = texts?;
            let (last, rest) = texts.split_last()?;
            Some(format!("{} or {last}", rest.join(", ")))
        }
        HirKind::Concat(items) => sequence(&items.iter().collect::<Vec<_>>()),
        _ => None,
    }
}

fn article(noun: &str) -> &'static str {
    if noun.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// A repeated class or literal: `6 digits`, `2 to 4 letters`, `one or more digits`.
fn repetition(r: &Repetition) -> Option<String> {
    let (one, many) = match r.sub.kind() {
        HirKind::Class(c) => {
            let name = class(c)?;
            (format!("{} {name}", article(&name)), plural(&name))
        }
        _ => {
            let text = literal(&r.sub)?;
            let quoted = format!("{text:?}");
            (quoted.clone(), format!("{quoted}s"))
        }
    };
    Some(match (r.min, r.max) {
        (0, Some(1)) => format!("optionally {one}"),
        (1, Some(1)) => one,
        (0, None) => format!("any number of {many}"),
        (1, None) => format!("one or more {many}"),
        (n, None) => format!("{n} or more {many}"),
        (n, Some(m)) if n == m => format!("{n} {many}"),
        (n, Some(m)) => format!("{n} to {m} {many}"),
    })
}

fn plural(noun: &str) -> String {
    match noun.strip_suffix("character") {
        Some(head) => format!("{head}characters"),
        None => format!("{noun}s"),
    }
}

/// A character class by name, when it is a common one.
fn class(c: &Class) -> Option<String> {
    let Class::Unicode(u) = c else {
        return None;
    };
    let ranges: Vec<(char, char)> = u.ranges().iter().map(|r| (r.start(), r.end())).collect();
    let has = |a: char, b: char| ranges.contains(&(a, b));
    let known = [
        (&[('0', '9')][..], "digit"),
        (&[('a', 'z')][..], "lowercase letter"),
        (&[('A', 'Z')][..], "uppercase letter"),
        (&[('A', 'Z'), ('a', 'z')][..], "letter"),
        (&[('0', '9'), ('A', 'Z'), ('a', 'z')][..], "letter or digit"),
        (&[('0', '9'), ('a', 'z')][..], "lowercase letter or digit"),
        (&[('0', '9'), ('A', 'Z')][..], "uppercase letter or digit"),
        (&[('0', '9'), ('A', 'F'), ('a', 'f')][..], "hex digit"),
        (&[('0', '9'), ('a', 'f')][..], "lowercase hex digit"),
        (
            &[('0', '9'), ('A', 'Z'), ('_', '_'), ('a', 'z')][..],
            "letter, digit or underscore",
        ),
    ];
    for (want, name) in known {
        if ranges.len() == want.len() && want.iter().all(|(a, b)| has(*a, *b)) {
            return Some(name.to_string());
        }
    }
    // A few single characters: name them.
    let singles: Option<Vec<char>> = ranges.iter().map(|(a, b)| (a == b).then_some(*a)).collect();
    match singles {
        Some(chars) if !chars.is_empty() && chars.len() <= 6 => Some(format!(
            "character from {}",
            chars
                .iter()
                .map(|c| format!("{:?}", c.to_string()))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::Words;

    fn words(p: &str) -> String {
        Words::of(p).sentence("args.x", false)
    }

    #[test]
    fn common_shapes_read_as_words() {
        assert_eq!(
            words("^POL-[0-9]{6}$"),
            "`args.x` must be \"POL-\" followed by 6 digits"
        );
        assert_eq!(
            words("@ourcompany\\.com$"),
            "`args.x` must end with \"@ourcompany.com\""
        );
        assert_eq!(words("^https://"), "`args.x` must start with \"https://\"");
        assert_eq!(words("secret"), "`args.x` must contain \"secret\"");
        assert_eq!(
            words("^[a-z]+$"),
            "`args.x` must be one or more lowercase letters"
        );
        assert_eq!(
            words("^(eu|us)-[0-9]{2,3}$"),
            "`args.x` must be \"eu\" or \"us\" followed by \"-\" followed by 2 to 3 digits"
        );
        assert_eq!(
            Words::of("^[0-9]+$").sentence("args.x", true),
            "`args.x` must not be one or more digits"
        );
    }

    #[test]
    fn other_patterns_are_never_shown_raw() {
        for p in ["^(a+)+b(?:c|d*)\\1?$", "(?i)x.*y", "\\bword\\b", "["] {
            let s = words(p);
            assert!(!s.contains(p), "{s}");
            assert!(!s.contains('\\') && !s.contains('*'), "{s}");
        }
    }
}
