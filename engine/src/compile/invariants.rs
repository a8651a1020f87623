//! Compiling invariants: those written inside a policy ([`attach_inline`], a step of
//! `Policy::compile`) and a separate invariants file ([`Invariants::compile`]), against the
//! policy's own tables and with its compiler, so a condition means what it means in a rule.
//! What they compile to, and how they are checked, is `crate::invariant`.

use super::Compiler;
use crate::error::CompileError;
use crate::invariant::{InvCond, Invariant, Invariants, Subject};
use crate::policy::Policy;
use std::collections::HashMap;
use toolgate_lang::ast::{self, InvExprKind, InvSelector, Item, Selector};
use toolgate_lang::{Diagnostic, SourceFile, Span};

impl Invariants {
    /// Compiles a separate invariants file (`invariants for MODULE`, then `hosts` and
    /// `invariant` declarations) against `policy`.
    pub fn compile(policy: &Policy, file_name: &str, text: &str) -> Result<Self, CompileError> {
        let source = SourceFile::new(file_name, text);
        let fail = |diagnostics| CompileError {
            source_file: source.clone(),
            diagnostics,
        };
        let file = toolgate_lang::parse_invariants(text).map_err(fail)?;
        if file.policy.name != policy.module() {
            return Err(fail(vec![Diagnostic::error(
                file.policy.span,
                format!(
                    "these invariants are for policy `{}`, but the policy is `{}`",
                    file.policy.name,
                    policy.module()
                ),
            )
            .with_help(format!(
                "write `invariants for {}`, or check them against the right policy",
                policy.module()
            ))]));
        }
        build(policy, source.clone(), &file.items, true).map_err(fail)
    }
}

/// Compiles the invariants written inside a policy and stores them on it.
pub(crate) fn attach_inline(policy: &mut Policy, ast: &ast::Policy) -> Result<(), Vec<Diagnostic>> {
    if !ast.items.iter().any(|i| matches!(i, Item::Invariant(_))) {
        return Ok(());
    }
    let invariants = build(policy, policy.cold.source.clone(), &ast.items, false)?;
    policy
        .cold
        .warnings
        .extend(invariants.warnings.iter().cloned());
    policy.cold.invariants = invariants;
    Ok(())
}

/// Compiles the `invariant` items of `items`, and for a `separate` file its `hosts` lists
/// (inside a policy, those are already the policy's).
fn build(
    policy: &Policy,
    source: SourceFile,
    items: &[Item],
    separate: bool,
) -> Result<Invariants, Vec<Diagnostic>> {
    let mut c = Compiler::for_policy(policy, source.clone());
    if separate {
        for item in items {
            if let Item::Hosts(decl) = item {
                c.declare_host_list(decl);
            }
        }
    }
    let mut list = Vec::new();
    let mut seen: HashMap<&str, Span> = HashMap::new();
    for item in items {
        let Item::Invariant(decl) = item else {
            continue;
        };
        if let Some(first) = seen.get(decl.name.name.as_str()) {
            let at = source.location(first.start);
            c.report(
                Diagnostic::error(
                    decl.name.span,
                    format!("invariant `{}` is declared twice", decl.name.name),
                )
                .with_label("declared again here")
                .with_note(*first, "first declared here")
                .with_help(format!("first declared at {at}; rename one")),
            );
            continue;
        }
        seen.insert(&decl.name.name, decl.name.span);
        let mut lower = Lowering { c: &mut c, policy };
        if decl.subjects.is_empty() {
            lower.c.report_warning(
                decl.name.span,
                format!(
                    "invariant `{}` names no tool, so it always holds",
                    decl.name.name
                ),
                "name tools, classes, `unclassified` or `any` after `never allow`",
            );
        }
        let subjects: Vec<Option<Subject>> =
            decl.subjects.iter().map(|s| lower.subject(s)).collect();
        let when = decl.when.as_ref().map(|w| lower.cond(w));
        let unless = decl.unless.as_ref().map(|u| lower.cond(u));
        let (Some(subjects), Some(when), Some(unless)) = (
            subjects.into_iter().collect::<Option<Vec<_>>>(),
            when.map_or(Some(None), |w| w.map(Some)),
            unless.map_or(Some(None), |u| u.map(Some)),
        ) else {
            continue;
        };
        list.push(Invariant {
            name: decl.name.name.as_str().into(),
            subjects,
            when,
            unless,
            span: decl.span,
        });
    }
    let (diags, hosts) = c.into_results();
    let (errors, warnings): (Vec<_>, Vec<_>) = diags.into_iter().partition(Diagnostic::is_error);
    if !errors.is_empty() {
        let mut all = errors;
        all.extend(warnings);
        all.sort_by_key(|d| (d.span.start, !d.is_error()));
        return Err(all);
    }
    Ok(Invariants {
        list,
        hosts,
        source: Some(source),
        warnings,
    })
}

struct Lowering<'a> {
    c: &'a mut Compiler,
    policy: &'a Policy,
}

impl Lowering<'_> {
    fn subject(&mut self, s: &InvSelector) -> Option<Subject> {
        Some(match s {
            InvSelector::Any(_) => Subject::Any,
            InvSelector::Unclassified(_) => Subject::Unclassified,
            InvSelector::Selector(Selector::Class(c)) => Subject::Class(c.node),
            InvSelector::Selector(Selector::Tool(t)) => match self.c.tool_id(&t.name) {
                Some(id) => Subject::Tool(id),
                None => {
                    let mut d = self.c.unclassified_diagnostic(t, "an invariant");
                    d.help = d.help.map(|h| {
                        format!("{h} (write `unclassified` to mean every tool the policy does not classify)")
                    });
                    self.c.report(d);
                    return None;
                }
            },
        })
    }

    fn cond(&mut self, e: &ast::InvExpr) -> Option<InvCond> {
        Some(match &e.kind {
            InvExprKind::And(parts) => InvCond::And(self.conds(parts)?),
            InvExprKind::Or(parts) => InvCond::Or(self.conds(parts)?),
            InvExprKind::Not(inner) => InvCond::Not(Box::new(self.cond(inner)?)),
            InvExprKind::Cond(expr) => InvCond::Cond(self.c.lower_condition(expr)?),
            InvExprKind::Latched => InvCond::Latched,
            InvExprKind::FailOpen => InvCond::FailOpen,
            InvExprKind::BatchHas(sel) => InvCond::BatchHas(self.subject(sel)?),
            InvExprKind::Stage { stages, negated } => {
                let mut names = Vec::new();
                for s in stages {
                    if self.policy.stage_id(s.name.as_str()).is_some() {
                        names.push(s.name.as_str().into());
                    } else {
                        let declared: Vec<&str> = self.policy.stages().collect();
                        self.c.report(
                            Diagnostic::error(
                                s.span,
                                format!("the policy declares no stage `{}`", s.name),
                            )
                            .with_help(format!("declared stages: {}", declared.join(", "))),
                        );
                        return None;
                    }
                }
                InvCond::Stage {
                    names,
                    negated: *negated,
                }
            }
        })
    }

    fn conds(&mut self, parts: &[ast::InvExpr]) -> Option<Vec<InvCond>> {
        let out: Vec<Option<InvCond>> = parts.iter().map(|p| self.cond(p)).collect();
        out.into_iter().collect()
    }
}
