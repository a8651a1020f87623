//! `check --tools`: does the policy classify every tool the executor has?
//!
//! Classifying every tool is a standing obligation: a tool added to the
//! executor without being classified is silently denied (or, in an executor without toolgate,
//! silently unguarded). This turns it into a build-time error.
//!
//! MCP tool annotations are checked too, as warnings: a hint is the server's untrusted
//! claim, so it never classifies a tool, but a class that is *less strict* than what the
//! server itself says (a `read` tool it calls destructive) is worth a second look.

use super::tools_file::{Hints, ToolsFile};
use std::collections::HashSet;
use toolgate_engine::{Policy, ToolClass};
use toolgate_lang::ast::Item;
use toolgate_lang::{Diagnostic, Span};

/// Prints the coverage diagnostics of `policy` against `tools` on stderr and a summary line on
/// stdout. Returns true when there is an error (an executor tool the policy never classified,
/// or with `deny_warnings` a policy tool the executor lacks).
pub fn report(policy: &Policy, tools: &ToolsFile, deny_warnings: bool) -> bool {
    let file = policy.source().name();
    let module = policy.module();
    let mut errors = Vec::new();
    let mut seen = HashSet::new();
    for (i, tool) in tools.tools.iter().enumerate() {
        if policy.class_of(&tool.name).is_some() || !seen.insert(tool.name.as_str()) {
            continue;
        }
        let message = format!(
            "tool `{}` is not classified by policy `{module}` ({file})",
            tool.name
        );
        let help = format!(
            "classify it in {file} as `write`, `ingest` or `read` and list it in the stages where it may run; until then every call to it is denied"
        );
        errors.push(match tools.name_span(i) {
            Some(span) => Diagnostic::error(span, message)
                .with_label("the executor has this tool")
                .with_help(help)
                .render(&tools.source),
            None => format!(
                "{}: error: {message} (tool {i} of the list)\n  = help: {help}\n",
                tools.source.name()
            ),
        });
    }

    let executor: HashSet<&str> = tools.tools.iter().map(|t| t.name.as_str()).collect();
    let spans = class_spans(policy);
    let mut warnings = Vec::new();
    for (name, class) in policy.tools() {
        if executor.contains(name) {
            continue;
        }
        let message = format!(
            "tool `{name}` is classified `{}` but the executor's tool list ({}) does not have it",
            class.as_str(),
            tools.source.name()
        );
        let help = "if it was renamed, rename it here too; otherwise remove it from the policy";
        let (diagnostic, severity) = if deny_warnings {
            (Diagnostic::error as fn(Span, String) -> Diagnostic, "error")
        } else {
            (
                Diagnostic::warning as fn(Span, String) -> Diagnostic,
                "warning",
            )
        };
        warnings.push(match spans.iter().find(|(n, _)| n == name) {
            Some((_, span)) => diagnostic(*span, message)
                .with_label("classified here")
                .with_help(help)
                .render(policy.source()),
            None => format!("{file}: {severity}: {message}\n  = help: {help}\n"),
        });
    }

    let mut against_hints = Vec::new();
    let mut checked = HashSet::new();
    for (i, (tool, hints)) in tools.tools.iter().zip(&tools.hints).enumerate() {
        let Some(class) = policy.class_of(&tool.name) else {
            continue;
        };
        if !checked.insert(tool.name.as_str()) {
            continue;
        }
        for (message, help) in hint_contradictions(&tool.name, class, hints) {
            against_hints.push(match tools.name_span(i) {
                Some(span) => Diagnostic::warning(span, message)
                    .with_label("the server's annotations say otherwise")
                    .with_help(help)
                    .render(&tools.source),
                None => format!(
                    "{}: warning: {message} (tool {i} of the list)\n  = help: {help}\n",
                    tools.source.name()
                ),
            });
        }
    }
    if tools.more_pages {
        warnings.push(format!(
            "{}: warning: the list says more pages follow (`nextCursor`); tools on later pages were not checked\n  = help: save every page of `tools/list` into one list\n",
            tools.source.name()
        ));
    }

    let rendered: Vec<&String> = errors
        .iter()
        .chain(&against_hints)
        .chain(&warnings)
        .collect();
    if !rendered.is_empty() {
        eprintln!(
            "{}",
            rendered
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    println!(
        "{}: {} tools checked against module `{module}`: {} unclassified, {} in the policy only, {} against an annotation hint",
        tools.source.name(),
        tools.tools.len(),
        errors.len(),
        warnings.len() - usize::from(tools.more_pages),
        against_hints.len()
    );
    !errors.is_empty() || (deny_warnings && !warnings.is_empty())
}

/// Where a tool's class is less strict than its MCP annotations claim: warnings as
/// (message, help). Only hints the server states are read; a stricter class than the hints
/// suggest (`write` on a read-only tool) fails closed and is not reported.
///
/// - `read` on a tool marked `destructiveHint: true` or `readOnlyHint: false`: a latch that
///   blocks `write` does not block a read, so a tool that changes things must be `write`.
/// - `read` on a tool marked `openWorldHint: true`: what it returns comes from outside
///   (web pages, mail, issues) and is untrusted, so it should be `ingest` and set the latch.
/// - `ingest` on a tool marked `destructiveHint: true` or `readOnlyHint: false`: nor does
///   it block an `ingest` tool, so a tool that also writes must be `write`.
/// - `write` on a tool marked `openWorldHint: true`: it reaches outside, so if it sends data
///   out it is `egress`, and a latch that blocks `egress` does not block a plain `write`.
pub fn hint_contradictions(tool: &str, class: ToolClass, hints: &Hints) -> Vec<(String, String)> {
    let modifies = match (hints.destructive, hints.read_only) {
        (Some(true), _) => Some("`destructiveHint: true`"),
        (_, Some(false)) => Some("`readOnlyHint: false`"),
        _ => None,
    };
    let mut found = Vec::new();
    match class {
        ToolClass::Read | ToolClass::Ingest => {
            if let Some(hint) = modifies {
                found.push((
                    format!(
                        "tool `{tool}` is classified `{}` but its server says it modifies its environment ({hint})",
                        class.as_str()
                    ),
                    format!(
                        "a latch that blocks `write` does not block a `{}` tool: if it can change or send anything, classify it `write` (annotations are the server's claim and never classify a tool)",
                        class.as_str()
                    ),
                ));
            }
            if class == ToolClass::Read && hints.open_world == Some(true) {
                found.push((
                    format!(
                        "tool `{tool}` is classified `read` but its server says it reaches an open world (`openWorldHint: true`)"
                    ),
                    "content from outside (web pages, mail, issues) is untrusted: classify it `ingest` so it sets the latch".to_string(),
                ));
            }
        }
        ToolClass::Write => {
            if hints.open_world == Some(true) {
                found.push((
                    format!(
                        "tool `{tool}` is classified `write` but its server says it reaches an open world (`openWorldHint: true`)"
                    ),
                    "if it sends data out (mail, messages, posts, uploads), classify it `egress`: a latch that blocks `egress` does not block a plain `write`".to_string(),
                ));
            }
        }
        ToolClass::Egress => {}
    }
    found
}

/// Where each tool is classified in the policy source, by a fresh parse of it.
fn class_spans(policy: &Policy) -> Vec<(String, Span)> {
    let Ok(ast) = toolgate_lang::parse(policy.source().own_text()) else {
        return Vec::new();
    };
    ast.items
        .iter()
        .filter_map(|item| match item {
            Item::Class(decl) => Some(decl),
            _ => None,
        })
        .flat_map(|decl| decl.tools.iter().map(|t| (t.name.clone(), t.span)))
        .collect()
}
