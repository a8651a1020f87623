//! Vault tokens in call arguments: which ones the executor may unwrap, which stay opaque.
//!
//! Executors that keep personal data in a vault hand the model opaque tokens such as
//! `<VAULT:NHS_NUMBER_01>`. A policy says, per tool, which argument paths may receive the
//! cleartext and of which token kinds (`detokenise TOOL { args [args.nhs_number: NHS_NUMBER] }`);
//! for an allowed call the decision lists every argument path that carries a token, split
//! into those the executor may unwrap and those it must pass on still wrapped. A token in the
//! wrong place, or of the wrong kind, never denies a call: wrapped, it is harmless.
//!
//! The executor unwraps a listed path as a whole string, so a string is unwrappable only
//! when every token in it is of a kind its path accepts, and nothing in it merely looks like
//! a token (`<VAULT:` that does not start a well-formed token, in any letter case): a reader
//! of tokens more lenient than this one would otherwise unwrap what toolgate never judged.

use crate::cond::Seg;
use serde_json::Value;

/// What starts a vault token.
pub const TOKEN_PREFIX: &str = "<VAULT:";

/// The token kinds one `detokenise` path accepts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kinds {
    /// `any`: every kind.
    Any,
    /// These kinds only (each a token name without its trailing `_NN` index).
    Only(Box<[Box<str>]>),
}

impl Kinds {
    fn accepts(&self, kind: &str) -> bool {
        match self {
            Kinds::Any => true,
            Kinds::Only(kinds) => kinds.iter().any(|k| **k == *kind),
        }
    }
}

/// One compiled `detokenise` path: where cleartext may go, and of which kinds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Permit {
    /// The argument path below `args`; it covers its whole subtree.
    pub(crate) path: Box<[Seg]>,
    /// The kinds it accepts.
    pub(crate) kinds: Kinds,
}

/// The length of the well-formed token name at the start of `body` (the text after
/// `<VAULT:`), when `body` continues with a name of `A-Z a-z 0-9 _ - :` and then `>`.
fn token_name_len(body: &str) -> Option<usize> {
    let len = body
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':'))
        .count();
    (len > 0 && body.as_bytes().get(len) == Some(&b'>')).then_some(len)
}

/// True when `kind` can be the kind of some token: non-empty, of token-name characters.
pub(crate) fn is_token_kind(kind: &str) -> bool {
    token_name_len(&format!("{kind}>")) == Some(kind.len())
}

/// True when `s` contains a token: `<VAULT:` then one or more of `A-Z a-z 0-9 _ - :`, then `>`.
pub(crate) fn has_token(s: &str) -> bool {
    let mut rest = s;
    while let Some(i) = rest.find(TOKEN_PREFIX) {
        let body = &rest[i + TOKEN_PREFIX.len()..];
        if token_name_len(body).is_some() {
            return true;
        }
        rest = body;
    }
    false
}

/// The kind of a token name: the name without a trailing `_` and one or more ASCII digits
/// (`SORT_CODE_01` → `SORT_CODE`, `email_7` → `email`, `NHS_NUMBER` → `NHS_NUMBER`).
pub(crate) fn kind_of(name: &str) -> &str {
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
    let head = &name[..name.len() - digits];
    match head.strip_suffix('_') {
        Some(kind) if digits > 0 => kind,
        _ => name,
    }
}

/// True when every token in `s` is of a kind some permit in `covering` accepts, and every
/// `<VAULT:` (in any letter case) starts a well-formed token.
fn unwrappable(s: &str, covering: &[&Permit]) -> bool {
    let bytes = s.as_bytes();
    let prefix = TOKEN_PREFIX.as_bytes();
    let mut i = 0;
    while let Some(off) = bytes[i..]
        .windows(prefix.len())
        .position(|w| w.eq_ignore_ascii_case(prefix))
    {
        let at = i + off;
        let exact = &bytes[at..at + prefix.len()] == prefix;
        let body = &s[at + prefix.len()..];
        let Some(len) = token_name_len(body).filter(|_| exact) else {
            return false;
        };
        let kind = kind_of(&body[..len]);
        if !covering.iter().any(|p| p.kinds.accepts(kind)) {
            return false;
        }
        i = at + prefix.len() + len + 1;
    }
    true
}

/// One step of the path being walked.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// Sorts every token-carrying string in `args` by its path (`args.patient.nhs_number`,
/// `args.to[1]`) into `unwrap` (covered by a permit that accepts every token in it) or
/// `opaque`.
pub(crate) fn sort_tokens(
    args: &Value,
    permitted: &[Permit],
    unwrap: &mut Vec<String>,
    opaque: &mut Vec<String>,
) {
    let mut stack = Vec::new();
    walk(args, &mut stack, permitted, unwrap, opaque);
}

fn walk<'a>(
    v: &'a Value,
    stack: &mut Vec<Step<'a>>,
    permitted: &[Permit],
    unwrap: &mut Vec<String>,
    opaque: &mut Vec<String>,
) {
    match v {
        Value::String(s) if has_token(s) => {
            let covering: Vec<&Permit> = permitted
                .iter()
                .filter(|p| covers(&p.path, stack))
                .collect();
            let out = if !covering.is_empty() && unwrappable(s, &covering) {
                unwrap
            } else {
                opaque
            };
            out.push(render(stack));
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                stack.push(Step::Index(i));
                walk(item, stack, permitted, unwrap, opaque);
                stack.pop();
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                stack.push(Step::Key(k));
                walk(item, stack, permitted, unwrap, opaque);
                stack.pop();
            }
        }
        _ => {}
    }
}

/// A permitted path covers the value at its own path and everything below it.
fn covers(permitted: &[Seg], at: &[Step<'_>]) -> bool {
    permitted.len() <= at.len()
        && permitted.iter().zip(at).all(|(p, s)| match (p, s) {
            (Seg::Key(a), Step::Key(b)) => **a == **b,
            (Seg::Index(a), Step::Index(b)) => a == b,
            _ => false,
        })
}

fn render(stack: &[Step<'_>]) -> String {
    let mut out = String::from("args");
    for step in stack {
        match step {
            Step::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn recognises_tokens_only_in_their_exact_form() {
        assert!(has_token("<VAULT:NHS_NUMBER_01>"));
        assert!(has_token(
            "Dear <VAULT:NAME_2>, your number is <VAULT:NHS_NUMBER_01>."
        ));
        assert!(!has_token("<VAULT:>"));
        assert!(!has_token("<VAULT:NHS NUMBER>"));
        assert!(!has_token("<vault:NHS_NUMBER_01>"));
        assert!(!has_token("<VAULT:NHS_NUMBER_01"));
        assert!(has_token("<VAULT:<VAULT:X>"));
    }

    #[test]
    fn a_kind_is_the_name_without_its_trailing_index() {
        for (name, kind) in [
            ("SORT_CODE_01", "SORT_CODE"),
            ("NHS_NUMBER_1", "NHS_NUMBER"),
            ("email_123", "email"),
            ("NHS_NUMBER", "NHS_NUMBER"),
            ("SORT_CODE01", "SORT_CODE01"),
            ("SORT_CODE_", "SORT_CODE_"),
            ("A_1_2", "A_1"),
            ("_01", ""),
            ("01", "01"),
            ("NHS:NUMBER_07", "NHS:NUMBER"),
            ("x-y_9", "x-y"),
        ] {
            assert_eq!(kind_of(name), kind, "{name}");
        }
    }

    fn only(path: &[&str], kinds: &[&str]) -> Permit {
        Permit {
            path: path.iter().map(|k| Seg::Key((*k).into())).collect(),
            kinds: Kinds::Only(kinds.iter().map(|k| (*k).into()).collect()),
        }
    }

    #[test]
    fn sorts_paths_by_permission_subtree_and_kind() {
        let args = json!({
            "nhs_number": "<VAULT:NHS_NUMBER_01>",
            "patient": {"email": "<VAULT:EMAIL_1>", "name": "plain", "nhs": "<VAULT:NHS_NUMBER_02>"},
            "to": ["gp@example.org", "<VAULT:EMAIL_2>"],
            "note": "call <VAULT:PHONE_3> back",
            "sort_code": "<VAULT:NHS_NUMBER_01>",
        });
        let permitted = vec![
            only(&["nhs_number"], &["NHS_NUMBER"]),
            only(&["patient"], &["EMAIL", "NAME"]),
            only(&["sort_code"], &["SORT_CODE"]),
        ];
        let (mut unwrap, mut opaque) = (Vec::new(), Vec::new());
        sort_tokens(&args, &permitted, &mut unwrap, &mut opaque);
        assert_eq!(unwrap, ["args.nhs_number", "args.patient.email"]);
        assert_eq!(
            opaque,
            [
                "args.note",
                "args.patient.nhs",
                "args.sort_code",
                "args.to[1]"
            ]
        );
    }

    #[test]
    fn one_foreign_or_malformed_token_keeps_the_whole_string_wrapped() {
        let permit = only(&[], &["SORT_CODE"]);
        let covering = [&permit];
        for (s, ok) in [
            ("<VAULT:SORT_CODE_01>", true),
            ("<VAULT:SORT_CODE_01><VAULT:SORT_CODE_02>", true),
            ("a <VAULT:SORT_CODE_01> b <VAULT:SORT_CODE_9> c", true),
            ("<VAULT:SORT_CODE>", true),
            ("<VAULT:SORT_CODE_01> <VAULT:NHS_NUMBER_01>", false),
            ("<VAULT:NHS_NUMBER_01> <VAULT:SORT_CODE_01>", false),
            ("<VAULT:SORT_CODE_01> <vault:NHS_NUMBER_01>", false),
            ("<VAULT:SORT_CODE_01> <Vault:NHS_NUMBER_01>", false),
            ("<VAULT:SORT_CODE_01> <VAULT:NHS NUMBER_01>", false),
            ("<VAULT:SORT_CODE_01> <VAULT:", false),
            ("<VAULT:<VAULT:SORT_CODE_01>", false),
            ("<VAULT:sort_code_01>", false),
            ("<VAULT:SORT_CODE_01_02>", false),
            ("<VAULT:SORT_CODES_01>", false),
            ("<VAULT:XSORT_CODE_01>", false),
        ] {
            assert_eq!(unwrappable(s, &covering), ok, "{s}");
        }
        let any = Permit {
            path: Box::new([]),
            kinds: Kinds::Any,
        };
        assert!(unwrappable("<VAULT:x_1> <VAULT:Y>", &[&any]));
        assert!(!unwrappable("<VAULT:x_1> <vault:Y>", &[&any]));
    }
}
