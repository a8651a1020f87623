//! Vault tokens in call arguments: which ones the executor may unwrap, which stay opaque.
//!
//! Executors that keep personal data in a vault hand the model opaque tokens such as
//! `<VAULT:NHS_NUMBER_01>`. A policy says, per tool, which argument paths may receive the
//! cleartext (`detokenise TOOL { args [args.nhs_number] }`); for an allowed call the decision
//! lists every argument path that carries a token, split into those the executor may unwrap
//! and those it must pass on still wrapped. A token in the wrong place never denies a call:
//! wrapped, it is harmless.

use crate::cond::Seg;
use serde_json::Value;

/// What starts a vault token.
pub const TOKEN_PREFIX: &str = "<VAULT:";

/// True when `s` contains a token: `<VAULT:` then one or more of `A-Z a-z 0-9 _ - :`, then `>`.
pub(crate) fn has_token(s: &str) -> bool {
    let mut rest = s;
    while let Some(i) = rest.find(TOKEN_PREFIX) {
        let body = &rest[i + TOKEN_PREFIX.len()..];
        let len = body
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':'))
            .count();
        if len > 0 && body.as_bytes().get(len) == Some(&b'>') {
            return true;
        }
        rest = body;
    }
    false
}

/// One step of the path being walked.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// Sorts every token-carrying string in `args` by its path (`args.patient.nhs_number`,
/// `args.to[1]`) into `unwrap` (covered by one of `permitted`) or `opaque`.
pub(crate) fn sort_tokens(
    args: &Value,
    permitted: &[Box<[Seg]>],
    unwrap: &mut Vec<String>,
    opaque: &mut Vec<String>,
) {
    let mut stack = Vec::new();
    walk(args, &mut stack, permitted, unwrap, opaque);
}

fn walk<'a>(
    v: &'a Value,
    stack: &mut Vec<Step<'a>>,
    permitted: &[Box<[Seg]>],
    unwrap: &mut Vec<String>,
    opaque: &mut Vec<String>,
) {
    match v {
        Value::String(s) if has_token(s) => {
            let covered = permitted.iter().any(|p| covers(p, stack));
            let out = if covered { unwrap } else { opaque };
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
    fn sorts_paths_by_permission_and_subtree() {
        let args = json!({
            "nhs_number": "<VAULT:NHS_NUMBER_01>",
            "patient": {"email": "<VAULT:EMAIL_1>", "name": "plain"},
            "to": ["gp@example.org", "<VAULT:EMAIL_2>"],
            "note": "call <VAULT:PHONE_3> back",
        });
        let permitted: Vec<Box<[Seg]>> = vec![
            Box::new([Seg::Key("nhs_number".into())]),
            Box::new([Seg::Key("patient".into())]),
        ];
        let (mut unwrap, mut opaque) = (Vec::new(), Vec::new());
        sort_tokens(&args, &permitted, &mut unwrap, &mut opaque);
        assert_eq!(unwrap, ["args.nhs_number", "args.patient.email"]);
        assert_eq!(opaque, ["args.note", "args.to[1]"]);
    }
}
