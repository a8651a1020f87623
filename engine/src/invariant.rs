//! Invariants: statements about every possible request, such as "the payout tool is never
//! allowed outside its stage". They are compiled against a policy's names but never read by
//! `decide`; the checker (`toolgate-prove`, `toolgate test`) judges requests and then asks
//! here whether any allowed call breaks one.
//!
//! `never allow SUBJECTS [when C] [unless U]` is broken by an allowed call whose tool matches
//! a subject, when `C` holds and `U` does not. Conditions are three-valued like rules, and an
//! unknown counts against the policy: an unknown `when` applies the invariant, an unknown
//! `unless` does not excuse the call.

use crate::compile::Compiler;
use crate::cond::{Cond, Env, Truth};
use crate::error::CompileError;
use crate::hosts::HostList;
use crate::ids::ToolId;
use crate::policy::Policy;
use crate::request::{Latched, Request};
use crate::response::{Decision, Response};
use std::collections::HashMap;
use std::sync::Arc;
use toolgate_lang::ast::{self, InvExprKind, InvSelector, Item, Selector, ToolClass};
use toolgate_lang::{Diagnostic, SourceFile, Span};

/// A compiled set of invariants for one policy.
#[derive(Debug, Default)]
pub struct Invariants {
    list: Vec<Invariant>,
    /// The host lists conditions refer to: the policy's, then the invariants file's own.
    hosts: Vec<HostList>,
    source: Option<SourceFile>,
    warnings: Vec<Diagnostic>,
}

#[derive(Debug)]
struct Invariant {
    name: Arc<str>,
    subjects: Vec<Subject>,
    when: Option<InvCond>,
    unless: Option<InvCond>,
    span: Span,
}

/// What a subject or `batch has` selector matches.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Subject {
    Tool(ToolId),
    Class(ToolClass),
    Unclassified,
    Any,
}

#[derive(Debug)]
enum InvCond {
    And(Vec<InvCond>),
    Or(Vec<InvCond>),
    Not(Box<InvCond>),
    Cond(Cond),
    Stage { names: Vec<Box<str>>, negated: bool },
    BatchHas(Subject),
    Latched,
    FailOpen,
}

/// A call that breaks an invariant.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// The invariant's name.
    pub invariant: Arc<str>,
    /// The index of the offending call in the request.
    pub call: usize,
    /// The decision that allowed it.
    pub decision: Decision,
}

/// Whether an invariant applies to a call whatever its arguments and non-structural facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applies {
    /// Never: the subject does not match, `when` is false or `unless` is true for every
    /// possible argument and fact.
    No,
    /// Always: the subject matches, `when` is true and `unless` false whatever the arguments.
    Yes,
    /// It depends on arguments, facts or whether the decision failed open.
    Maybe,
}

/// Kleene truth without the engine's reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum K {
    T,
    F,
    U,
}

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

    /// How many invariants there are.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The invariants' names, in declaration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.list.iter().map(|i| &*i.name)
    }

    /// Where invariant `index` is declared, as `file:line:col`.
    pub fn location(&self, index: usize) -> String {
        match (self.list.get(index), &self.source) {
            (Some(inv), Some(src)) => src.location(inv.span.start),
            _ => String::new(),
        }
    }

    /// Warnings found while compiling a separate invariants file.
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// The source of the invariants (the policy's own source for inline ones).
    pub fn source(&self) -> Option<&SourceFile> {
        self.source.as_ref()
    }

    /// Judges `request` with `policy` and returns the response and every violation.
    pub fn check(&self, policy: &Policy, request: &Request) -> (Response, Vec<Violation>) {
        let response = policy.decide(request);
        let violations = self.violations(policy, request, &response);
        (response, violations)
    }

    /// The allowed calls of `response` (the answer to `request`) that break an invariant.
    pub fn violations(
        &self,
        policy: &Policy,
        request: &Request,
        response: &Response,
    ) -> Vec<Violation> {
        let mut out = Vec::new();
        for (i, decision) in response.decisions.iter().enumerate() {
            if !decision.allow {
                continue;
            }
            for inv in &self.list {
                let ctx = Ctx {
                    policy,
                    request,
                    call: i,
                    decision: Some(decision),
                    hosts: &self.hosts,
                };
                if ctx.subject(&inv.subjects) && ctx.guard(inv) == K::T {
                    out.push(Violation {
                        invariant: inv.name.clone(),
                        call: i,
                        decision: decision.clone(),
                    });
                }
            }
        }
        out
    }

    /// Whether invariant `index` applies to call `call` of `request` for every possible
    /// argument and every value of the facts a condition reads. Only the stage, the
    /// `latched` fact and the batch's tools are looked at.
    pub fn applies(
        &self,
        index: usize,
        policy: &Policy,
        request: &Request,
        call: usize,
    ) -> Applies {
        let Some(inv) = self.list.get(index) else {
            return Applies::No;
        };
        let ctx = Ctx {
            policy,
            request,
            call,
            decision: None,
            hosts: &self.hosts,
        };
        if !ctx.subject(&inv.subjects) {
            return Applies::No;
        }
        match ctx.guard(inv) {
            K::T => Applies::Yes,
            K::F => Applies::No,
            K::U => Applies::Maybe,
        }
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

/// One call being looked at; `decision: None` means arguments and facts are unknown.
struct Ctx<'a> {
    policy: &'a Policy,
    request: &'a Request,
    call: usize,
    decision: Option<&'a Decision>,
    hosts: &'a [HostList],
}

impl Ctx<'_> {
    fn matches(&self, subject: Subject, tool: &str) -> bool {
        let id = self.policy.tool_id(tool);
        match subject {
            Subject::Any => true,
            Subject::Unclassified => id.is_none(),
            Subject::Tool(t) => id == Some(t),
            Subject::Class(c) => {
                id.is_some_and(|i| self.policy.tools[i.index()].class.selected_by(c))
            }
        }
    }

    fn subject(&self, subjects: &[Subject]) -> bool {
        let Some(call) = self.request.calls.get(self.call) else {
            return false;
        };
        subjects.iter().any(|s| self.matches(*s, &call.tool))
    }

    /// `when` (unknown counts as true) and not `unless` (unknown counts as false).
    fn guard(&self, inv: &Invariant) -> K {
        let concrete = self.decision.is_some();
        let when = inv.when.as_ref().map_or(K::T, |w| self.eval(w));
        let unless = inv.unless.as_ref().map_or(K::F, |u| self.eval(u));
        let (when, unless) = if concrete {
            (
                if when == K::F { K::F } else { K::T },
                if unless == K::T { K::T } else { K::F },
            )
        } else {
            (when, unless)
        };
        and(when, not(unless))
    }

    fn eval(&self, c: &InvCond) -> K {
        match c {
            InvCond::And(parts) => parts.iter().fold(K::T, |acc, p| and(acc, self.eval(p))),
            InvCond::Or(parts) => parts.iter().fold(K::F, |acc, p| or(acc, self.eval(p))),
            InvCond::Not(inner) => not(self.eval(inner)),
            InvCond::Latched => from_bool(match &self.request.facts.latched {
                Latched::Flag(b) => *b,
                Latched::ByName(m) => m.values().any(|b| *b),
            }),
            InvCond::FailOpen => match self.decision {
                Some(d) => from_bool(d.fail_open),
                None => K::U,
            },
            InvCond::Stage { names, negated } => {
                let inside = self
                    .request
                    .facts
                    .stage
                    .as_deref()
                    .is_some_and(|s| names.iter().any(|n| **n == *s));
                from_bool(inside != *negated)
            }
            InvCond::BatchHas(sel) => from_bool(
                self.request
                    .calls
                    .iter()
                    .enumerate()
                    .any(|(i, c)| i != self.call && self.matches(*sel, &c.tool)),
            ),
            InvCond::Cond(cond) => {
                if self.decision.is_none() {
                    return K::U;
                }
                let Some(call) = self.request.calls.get(self.call) else {
                    return K::U;
                };
                let env = Env::new(
                    &call.args,
                    crate::view::FactsRef::Owned(&self.request.facts),
                    self.hosts,
                );
                match cond.eval(&env) {
                    Truth::True => K::T,
                    Truth::False => K::F,
                    Truth::Unknown(_) => K::U,
                }
            }
        }
    }
}

fn from_bool(b: bool) -> K {
    if b {
        K::T
    } else {
        K::F
    }
}

fn not(k: K) -> K {
    match k {
        K::T => K::F,
        K::F => K::T,
        K::U => K::U,
    }
}

fn and(a: K, b: K) -> K {
    match (a, b) {
        (K::F, _) | (_, K::F) => K::F,
        (K::T, K::T) => K::T,
        _ => K::U,
    }
}

fn or(a: K, b: K) -> K {
    match (a, b) {
        (K::T, _) | (_, K::T) => K::T,
        (K::F, K::F) => K::F,
        _ => K::U,
    }
}
