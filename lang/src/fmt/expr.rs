//! Rendering conditions and built-in calls on one line, in the canonical spacing.
//!
//! Tokens keep their source text (numbers as written, strings quoted or raw as written);
//! only the whitespace between them changes. Parentheses are kept where they were written,
//! except around a single test or call, where they mean nothing: `(args.x == 1)` becomes
//! `args.x == 1`, and `((a or b))` becomes `(a or b)`.

use crate::parser::Rule;
use pest::iterators::Pair;

/// A whole `require` condition.
pub(crate) fn top(p: Pair<'_, Rule>) -> String {
    match single_unary(&p) {
        Some(inner) if inner.as_rule() == Rule::expr => top(inner),
        _ => expr(p),
    }
}

/// `a or b`, with each side rendered by [`and_expr`].
fn expr(p: Pair<'_, Rule>) -> String {
    p.into_inner()
        .filter(|x| x.as_rule() != Rule::kw_or)
        .map(and_expr)
        .collect::<Vec<_>>()
        .join(" or ")
}

fn and_expr(p: Pair<'_, Rule>) -> String {
    p.into_inner()
        .filter(|x| x.as_rule() != Rule::kw_and)
        .map(unary)
        .collect::<Vec<_>>()
        .join(" and ")
}

/// When the `expr` pair `p` holds a single unary (no `and`, no `or`), that unary.
fn single_unary<'i>(p: &Pair<'i, Rule>) -> Option<Pair<'i, Rule>> {
    let mut ors = p
        .clone()
        .into_inner()
        .filter(|x| x.as_rule() != Rule::kw_or);
    let and = ors.next()?;
    if ors.next().is_some() {
        return None;
    }
    let mut ands = and.into_inner().filter(|x| x.as_rule() != Rule::kw_and);
    let only = ands.next()?;
    if ands.next().is_some() {
        return None;
    }
    Some(only)
}

fn unary(p: Pair<'_, Rule>) -> String {
    match p.as_rule() {
        // A parenthesised condition.
        Rule::expr => match single_unary(&p) {
            Some(inner) => unary(inner),
            None => format!("({})", expr(p)),
        },
        Rule::negation => {
            let inner = p.into_inner().find(|x| x.as_rule() != Rule::kw_not);
            format!("not {}", inner.map(unary).unwrap_or_default())
        }
        Rule::predicate => predicate(p),
        Rule::call => call(p),
        _ => p.as_str().to_string(),
    }
}

fn predicate(p: Pair<'_, Rule>) -> String {
    let mut inner = p.into_inner();
    let path = inner
        .next()
        .map(|x| x.as_str().to_string())
        .unwrap_or_default();
    let Some(tail) = inner.next() else {
        return path;
    };
    let parts: Vec<Pair<'_, Rule>> = tail.clone().into_inner().collect();
    let text = |x: &Pair<'_, Rule>| x.as_str().to_string();
    let rendered = match tail.as_rule() {
        Rule::compare => parts.iter().map(text).collect::<Vec<_>>().join(" "),
        Rule::in_hosts => {
            let name = parts.iter().find(|x| x.as_rule() == Rule::name);
            format!("in hosts {}", name.map(text).unwrap_or_default())
        }
        Rule::in_list => {
            let items: Vec<String> = parts
                .iter()
                .filter(|x| x.as_rule() == Rule::literal)
                .map(text)
                .collect();
            format!("in [{}]", items.join(", "))
        }
        Rule::matches => format!("matches {}", parts.iter().map(text).collect::<String>()),
        Rule::is_type => format!("is {}", parts.iter().map(text).collect::<String>()),
        Rule::in_fact => format!(
            "in {}",
            parts
                .iter()
                .find(|x| x.as_rule() == Rule::path)
                .map(text)
                .unwrap_or_default()
        ),
        // `not from ingest`, `mentions prompt`: the keywords as written, one space apart.
        Rule::from_source | Rule::mentions => parts.iter().map(text).collect::<Vec<_>>().join(" "),
        _ => tail.as_str().to_string(),
    };
    format!("{path} {rendered}")
}

fn call(p: Pair<'_, Rule>) -> String {
    let mut inner = p.into_inner();
    let name = inner
        .next()
        .map(|x| x.as_str().to_string())
        .unwrap_or_default();
    let args: Vec<String> = inner
        .map(|arg| {
            arg.into_inner()
                .map(|part| match part.as_rule() {
                    Rule::arg_label => format!("{}: ", part.as_str()),
                    _ => call_value(part),
                })
                .collect()
        })
        .collect();
    format!("{name}({})", args.join(", "))
}

fn call_value(p: Pair<'_, Rule>) -> String {
    match p.clone().into_inner().next() {
        Some(list) if list.as_rule() == Rule::value_list => {
            let items: Vec<String> = list.into_inner().map(call_value).collect();
            format!("[{}]", items.join(", "))
        }
        _ => p.as_str().to_string(),
    }
}
