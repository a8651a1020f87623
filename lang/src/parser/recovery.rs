//! Error recovery: after the first syntax error, each later declaration is parsed on its own,
//! so one run reports every broken declaration, each with friendly names for what was expected.

use super::build::Builder;
use super::rule_names::friendly;
use super::{run_pest_detailed, Rule, ITEM_KEYWORDS};
use crate::diagnostic::Diagnostic;
use crate::span::Span;

/// Collects the first error, then re-parses each later declaration on its own.
pub(super) fn recover(text: &str, first: pest::error::Error<Rule>) -> Vec<Diagnostic> {
    let first = syntax_error(text, 0, &first);
    let resume_from = first.span.start;
    let mut errors = vec![first];
    let starts: Vec<usize> = item_starts(text)
        .into_iter()
        .filter(|&s| s >= resume_from && s > 0)
        .collect();
    // The first error's own declaration ends at the first start strictly after it.
    let mut bounds = starts.clone();
    bounds.push(text.len());
    for (i, &start) in starts.iter().enumerate() {
        let end = bounds[i + 1];
        let slice = &text[start..end];
        let first_word = slice.split_whitespace().next().unwrap_or("");
        if first_word == "module" || first_word == "invariants" {
            continue;
        }
        match run_pest_detailed(Rule::item_only, slice) {
            Ok(pairs) => {
                // Still run the builder: it reports non-syntax problems such as bad escapes.
                let mut b = Builder::new(start);
                for p in pairs {
                    for inner in p.into_inner() {
                        if inner.as_rule() != Rule::EOI {
                            let _ = b.item(inner);
                        }
                    }
                }
                errors.extend(b.errors);
            }
            Err(e) => errors.push(syntax_error(text, start, &e)),
        }
    }
    errors
}

/// Byte offsets of lines whose first word is a declaration keyword.
fn item_starts(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let word_end = trimmed
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(trimmed.len());
        if ITEM_KEYWORDS.contains(&&trimmed[..word_end]) {
            out.push(offset + indent);
        }
        offset += line.len();
    }
    out
}

/// Converts a pest error into a diagnostic with friendly names and an absolute span.
fn syntax_error(text: &str, base: usize, err: &pest::error::Error<Rule>) -> Diagnostic {
    let pos = match err.location {
        pest::error::InputLocation::Pos(p) => p,
        pest::error::InputLocation::Span((s, _)) => s,
    } + base;
    let mut expected: Vec<String> = Vec::new();
    if let pest::error::ErrorVariant::ParsingError { positives, .. } = &err.variant {
        for r in positives {
            push_unique(&mut expected, friendly(*r).to_string());
        }
    }
    if let Some(attempts) = err.parse_attempts() {
        for token in attempts.expected_tokens() {
            // Only punctuation: keywords already show up through their rules' names.
            let token = token.to_string();
            // Character ranges (`a..z`, inside strings and comments) are no help to a reader;
            // the grammar has no `..` token of its own.
            if token.chars().count() >= 3 && token.contains("..") {
                continue;
            }
            let noise = token.trim().is_empty()
                || matches!(token.as_str(), "#" | "//" | "_" | "-" | "\"" | "\\");
            let covered = (expected
                .iter()
                .any(|e| e.starts_with("a comparison operator"))
                && "<>=!".contains(&token[..1.min(token.len())]))
                || (token == "\"" && expected.iter().any(|e| e == "a string"));
            let named = expected.iter().any(|e| e.contains(&format!("`{token}`")));
            if !noise && !covered && !named && token.chars().all(|c| !c.is_alphanumeric()) {
                push_unique(&mut expected, format!("`{token}`"));
            }
        }
    }
    let found = found_at(text, pos);
    let message = if expected.is_empty() {
        format!("unexpected {found}")
    } else {
        format!("expected {}, found {found}", join_or(&expected))
    };
    let end = pos + found_len(text, pos);
    let mut d = Diagnostic::error(Span::new(pos, end), message);
    if let Some(help) = help_for(text, pos, &expected) {
        d = d.with_help(help);
    }
    d
}

fn push_unique(v: &mut Vec<String>, s: String) {
    if !v.contains(&s) {
        v.push(s);
    }
}

fn join_or(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {}", init.join(", "), last),
    }
}

fn found_len(text: &str, pos: usize) -> usize {
    let rest = text.get(pos..).unwrap_or("");
    let word: usize = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .map(char::len_utf8)
        .sum();
    if word > 0 {
        word
    } else {
        rest.chars().next().map_or(0, char::len_utf8)
    }
}

fn found_at(text: &str, pos: usize) -> String {
    let rest = text.get(pos..).unwrap_or("");
    match rest.chars().next() {
        None => "end of file".to_string(),
        Some('\n') | Some('\r') => "end of line".to_string(),
        Some(_) => format!("`{}`", &rest[..found_len(text, pos)]),
    }
}

fn help_for(text: &str, pos: usize, expected: &[String]) -> Option<String> {
    // Every syntax error carries a hint; the most specific one wins.
    let found = &text.get(pos..).unwrap_or("")[..found_len(text, pos)];
    if pos == 0 || expected.iter().any(|e| e == "`module NAME`") {
        return Some("a policy starts with `module NAME`".into());
    }
    if expected.iter().any(|e| e == "`}`") && ITEM_KEYWORDS.contains(&found) {
        return Some("the block above is not closed: add `}` before this line".into());
    }
    if found == "=" {
        return Some("compare with `==`".into());
    }
    if found == "&" || found == "|" {
        return Some("combine conditions with `and`, `or` and `not`".into());
    }
    if found == "'" {
        return Some("strings use double quotes".into());
    }
    let line_rest = text.get(pos..).unwrap_or("").lines().next().unwrap_or("");
    if found == "\"" && line_rest[1..].find('"').is_none() {
        return Some("this string is not closed: add `\"` before the end of the line".into());
    }
    if found.is_empty() {
        return Some(
            "the file ends inside a declaration: finish it, and close any `{` with `}`".into(),
        );
    }
    if expected.iter().any(|e| e.starts_with("`never allow")) {
        return Some(
            "an invariant reads `never allow TOOLS [when CONDITION] [unless CONDITION]`".into(),
        );
    }
    if expected.iter().any(|e| e == "a whole number") {
        return Some("write a whole number, e.g. `max_turns 2`".into());
    }
    if expected.iter().any(|e| e == "`allow` or `deny`") {
        return Some("write `on_missing allow` or `on_missing deny`".into());
    }
    if expected
        .iter()
        .any(|e| e == "a condition" || e == "an `args.` or `facts.` path")
    {
        return Some(
            "a condition is a test on `args.PATH` or `facts.PATH`, a built-in such as `field_filled(phone)`, or `true`/`false`".into(),
        );
    }
    if expected.iter().any(|e| e == "`}`") {
        return Some("close the block with `}`".into());
    }
    if expected.iter().any(|e| e.contains("`stage`")) {
        return Some(
            "declarations are `write|ingest|read TOOLS`, `stage`, `latch`, `hosts` and `rule` blocks".into(),
        );
    }
    Some("see docs/language.md for the syntax of this declaration".into())
}
