//! `check --tools`: does the policy classify every tool the executor has?
//!
//! Source document 001 calls the classification a standing obligation: a tool added to the
//! executor without being classified is silently denied (or, in an executor without toolgate,
//! silently unguarded). This turns it into a build-time error.

use super::tools_file::ToolsFile;
use std::collections::HashSet;
use toolgate_engine::Policy;
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

    let rendered: Vec<&String> = errors.iter().chain(&warnings).collect();
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
        "{}: {} tools checked against module `{module}`: {} unclassified, {} in the policy only",
        tools.source.name(),
        tools.tools.len(),
        errors.len(),
        warnings.len()
    );
    !errors.is_empty() || (deny_warnings && !warnings.is_empty())
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
