//! Default refusal texts, generated from the declarations when the author gives none.
//!
//! Every refusal tells the model what was missing, that the action did NOT happen, and what
//! to do instead, so it corrects itself rather than telling the user the action succeeded.

use crate::hosts::HostList;
use crate::ids::HostListId;
use std::collections::HashMap;

/// Finds host lists by name while the compiler still owns them.
pub(crate) struct HostLookup<'a> {
    pub(crate) index: &'a HashMap<String, HostListId>,
    pub(crate) lists: &'a [HostList],
}

impl<'a> HostLookup<'a> {
    fn get(&self, name: &str) -> Option<&'a HostList> {
        self.index
            .get(name)
            .and_then(|id| self.lists.get(id.index()))
    }
}
use crate::response::DenyKind;
use crate::strict_url::Ambiguity;
use toolgate_lang::ast::{CallValue, Expr, ExprKind, Literal, Predicate};

const NOT_HAPPENED: &str = "This did NOT happen. Do not tell the user it did.";

/// For a call to a tool the policy does not classify.
pub(crate) fn unclassified() -> String {
    format!("Blocked: this tool is not classified by the policy, so it may not run. {NOT_HAPPENED} Carry on without it.")
}

/// For a tool outside the stage's whitelist.
pub(crate) fn stage_whitelist(stage: &str) -> String {
    format!(
        "Blocked: this tool is not available in the current stage `{stage}`. {NOT_HAPPENED} Use only the tools this stage offers."
    )
}

/// For a stage that has used up its turns.
pub(crate) fn stage_turns(stage: &str, max: u64) -> String {
    format!(
        "Blocked: stage `{stage}` allows at most {max} turns and they are used up. {NOT_HAPPENED} Answer from what you have and return to the main task."
    )
}

/// For a stage the policy does not define.
pub(crate) fn unknown_stage() -> String {
    format!("Blocked: the conversation is in a stage this policy does not define, so no tool is available. {NOT_HAPPENED}")
}

/// For a request that names no stage.
pub(crate) fn no_stage() -> String {
    format!("Blocked: the request names no stage, so no tool is available. {NOT_HAPPENED}")
}

/// For a tool blocked by a latch.
pub(crate) fn latch(name: &str) -> String {
    format!(
        "Blocked: this turn has read untrusted content (latch `{name}`), so this tool is disabled by design until the user's next message. {NOT_HAPPENED} Answer from what you have, and ask the user to send the request again."
    )
}

/// For a rule, from its conditions.
pub(crate) fn rule(
    name: &str,
    kind: DenyKind,
    requires: &[Expr],
    hosts: &HostLookup<'_>,
) -> String {
    let desc = requirement(requires, hosts);
    match kind {
        DenyKind::Precondition => format!(
            "Blocked: {desc}. This did NOT happen. Do not tell the customer it did. Ask for it, then call this function again."
        ),
        DenyKind::Args => format!(
            "Blocked: the arguments break rule `{name}`: {desc}. {NOT_HAPPENED} Correct the arguments and call again, or explain why it cannot be done."
        ),
        DenyKind::Host => format!("Blocked: {desc}. {NOT_HAPPENED} Use an allowed source instead."),
        _ => format!("Blocked by rule `{name}`: {desc}. {NOT_HAPPENED}"),
    }
}

/// For a rule that denied because a URL it checks is ambiguous: what is ambiguous, then the
/// author's refusal, or else what the rule requires.
pub(crate) fn ambiguous_url(
    name: &str,
    custom: Option<&str>,
    requirement: &str,
    why: Ambiguity,
) -> String {
    let why = why.text();
    match custom {
        Some(text) => format!("{text} (The URL was refused because {why}.)"),
        None => format!(
            "Blocked: {why}, so the host it names cannot be checked. {NOT_HAPPENED} Rule `{name}`: {requirement}. Write the URL plainly, as scheme://host/path, and call again."
        ),
    }
}

/// What a rule requires, in words: its `require` lines described and joined with `, and `.
///
/// The WHAT of a generated refusal, and the requirement appended to a tool's description
/// when it is offered to the model.
pub(crate) fn requirement(requires: &[Expr], hosts: &HostLookup<'_>) -> String {
    requires
        .iter()
        .map(|e| describe(e, hosts))
        .collect::<Vec<_>>()
        .join(", and ")
}

/// A plain-English statement of what a condition requires.
pub(crate) fn describe(e: &Expr, hosts: &HostLookup<'_>) -> String {
    match &e.kind {
        ExprKind::Bool(true) => "nothing".into(),
        ExprKind::Bool(false) => "this call is never allowed".into(),
        ExprKind::And(parts) => parts
            .iter()
            .map(|p| describe(p, hosts))
            .collect::<Vec<_>>()
            .join(" and "),
        ExprKind::Or(parts) => format!(
            "either {}",
            parts
                .iter()
                .map(|p| describe(p, hosts))
                .collect::<Vec<_>>()
                .join(", or ")
        ),
        ExprKind::Not(inner) => format!("this must not hold: ({})", describe(inner, hosts)),
        ExprKind::Predicate(path, pred) => {
            let p = path.display();
            match pred {
                Predicate::Compare(op, lit) => {
                    format!("`{p}` must be {} {}", op.as_str(), literal(&lit.node))
                }
                Predicate::InList(items) => format!(
                    "`{p}` must be one of {}",
                    items
                        .iter()
                        .map(|l| literal(&l.node))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Predicate::Matches(re) => format!("`{p}` must match `{}`", re.node),
                Predicate::Is(t) => format!("`{p}` must be {}", article(t.node.as_str())),
                Predicate::Exists => format!("`{p}` must be present"),
                Predicate::InHosts(list) => match hosts.get(&list.name) {
                    Some(h) => format!(
                        "`{p}` must be a {} URL on a host in allowlist `{}` ({})",
                        h.schemes().collect::<Vec<_>>().join("/"),
                        list.name,
                        h.describe_entries().join(", ")
                    ),
                    None => format!("`{p}` must be a URL on a host in allowlist `{}`", list.name),
                },
            }
        }
        ExprKind::Call(call) => match crate::builtins::find(&call.name.name) {
            Some(b) => (b.requirement)(&b.written(call)),
            None => format!("`{}` must hold", call.name.name),
        },
    }
}

pub(crate) fn value_text(v: &CallValue) -> String {
    match v {
        CallValue::Number(n) => format_number(*n),
        CallValue::String(s) | CallValue::Name(s) => s.clone(),
        CallValue::List(items) => items
            .iter()
            .map(|i| value_text(&i.node))
            .collect::<Vec<_>>()
            .join("/"),
    }
}

fn literal(l: &Literal) -> String {
    match l {
        Literal::Number(n) => format_number(*n),
        Literal::String(s) => format!("{s:?}"),
        Literal::Bool(b) => b.to_string(),
        Literal::Null => "null".into(),
    }
}

fn format_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

pub(crate) fn article_word(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

fn article(word: &str) -> String {
    format!("{} {word}", article_word(word))
}
