//! Building the AST from pest pairs: invariant declarations and their conditions.

use super::build::Builder;
use super::Rule;
use crate::ast::*;
use crate::span::Span;
use pest::iterators::Pair;

/// Invariant declarations and their conditions.
impl Builder {
    pub(super) fn invariant_decl(&mut self, p: Pair<'_, Rule>) -> InvariantDecl {
        let span = self.span(&p);
        let mut decl = InvariantDecl {
            name: Ident {
                name: String::new(),
                span,
            },
            subjects: Vec::new(),
            when: None,
            unless: None,
            span,
        };
        for part in p.into_inner() {
            match part.as_rule() {
                Rule::name => decl.name = self.ident(part),
                Rule::never_allow => {
                    for entry in part.into_inner() {
                        match entry.as_rule() {
                            Rule::inv_selectors => {
                                decl.subjects =
                                    entry.into_inner().map(|s| self.inv_selector(s)).collect();
                            }
                            Rule::inv_when => decl.when = self.inv_clause(entry),
                            Rule::inv_unless => decl.unless = self.inv_clause(entry),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        decl
    }

    pub(super) fn inv_clause(&mut self, p: Pair<'_, Rule>) -> Option<InvExpr> {
        let e = p.into_inner().find(|x| x.as_rule() == Rule::inv_expr)?;
        Some(self.inv_expr(e))
    }

    pub(super) fn inv_selector(&mut self, p: Pair<'_, Rule>) -> InvSelector {
        let span = self.span(&p);
        let Some(inner) = p.into_inner().next() else {
            return InvSelector::Any(span);
        };
        match inner.as_rule() {
            Rule::kw_unclassified => InvSelector::Unclassified(span),
            Rule::kw_any => InvSelector::Any(span),
            _ => {
                let sel = self.selectors_one(inner);
                InvSelector::Selector(sel)
            }
        }
    }

    /// One `selector` pair: a class keyword or a tool.
    pub(super) fn selectors_one(&mut self, p: Pair<'_, Rule>) -> Selector {
        let span = self.span(&p);
        match p.into_inner().next() {
            Some(i) if i.as_rule() == Rule::tool_class => Selector::Class(Spanned {
                span: self.span(&i),
                node: ToolClass::from_keyword(i.as_str()).unwrap_or(ToolClass::Read),
            }),
            Some(i) => Selector::Tool(self.ident(i)),
            None => Selector::Tool(Ident {
                name: String::new(),
                span,
            }),
        }
    }

    pub(super) fn inv_expr(&mut self, p: Pair<'_, Rule>) -> InvExpr {
        let span = self.span(&p);
        if self.too_deep(span, "split the invariant into several invariants") {
            return InvExpr {
                kind: InvExprKind::Cond(Expr {
                    kind: ExprKind::Bool(false),
                    span,
                }),
                span,
            };
        }
        self.depth += 1;
        let e = self.inv_expr_inner(p, span);
        self.depth -= 1;
        e
    }

    pub(super) fn inv_expr_inner(&mut self, p: Pair<'_, Rule>, span: Span) -> InvExpr {
        let kind = match p.as_rule() {
            Rule::inv_expr | Rule::inv_and => {
                let is_or = p.as_rule() == Rule::inv_expr;
                let mut parts: Vec<InvExpr> = p
                    .into_inner()
                    .filter(|x| !matches!(x.as_rule(), Rule::kw_or | Rule::kw_and))
                    .map(|x| self.inv_expr(x))
                    .collect();
                if parts.len() == 1 {
                    if let Some(only) = parts.pop() {
                        return only;
                    }
                }
                if is_or {
                    InvExprKind::Or(parts)
                } else {
                    InvExprKind::And(parts)
                }
            }
            Rule::inv_not => {
                let inner = p.into_inner().find(|x| x.as_rule() != Rule::kw_not);
                let e = match inner {
                    Some(i) => self.inv_expr(i),
                    None => InvExpr {
                        kind: InvExprKind::Cond(Expr {
                            kind: ExprKind::Bool(false),
                            span,
                        }),
                        span,
                    },
                };
                InvExprKind::Not(Box::new(e))
            }
            Rule::kw_latched => InvExprKind::Latched,
            Rule::kw_fail_open => InvExprKind::FailOpen,
            Rule::stage_test => {
                let mut stages = Vec::new();
                let mut negated = false;
                for part in p.into_inner() {
                    match part.as_rule() {
                        Rule::stage_cmp => {
                            for x in part.into_inner() {
                                match x.as_rule() {
                                    Rule::stage_op => negated = x.as_str() == "!=",
                                    Rule::name => stages.push(self.ident(x)),
                                    _ => {}
                                }
                            }
                        }
                        Rule::stage_in => {
                            for x in part.into_inner() {
                                if x.as_rule() == Rule::name {
                                    stages.push(self.ident(x));
                                }
                            }
                        }
                        _ => {}
                    }
                }
                InvExprKind::Stage { stages, negated }
            }
            Rule::batch_has => {
                let sel = p.into_inner().find(|x| x.as_rule() == Rule::inv_selector);
                match sel {
                    Some(s) => InvExprKind::BatchHas(self.inv_selector(s)),
                    None => InvExprKind::BatchHas(InvSelector::Any(span)),
                }
            }
            _ => {
                // `true`/`false`, a predicate or a built-in call: the rule language.
                InvExprKind::Cond(self.expr(p))
            }
        };
        InvExpr { kind, span }
    }
}
