//! Comparing syntax trees while ignoring where things were written.
//!
//! Two sources mean the same policy when their trees are equal once every span is erased;
//! the formatter checks its own output this way, and the tests use it as their oracle.

use crate::ast::*;
use crate::span::Span;

impl Policy {
    /// A copy of the tree with every span set to `Span::default()`, so that two trees parsed
    /// from differently laid out sources compare equal exactly when they say the same thing.
    pub fn without_spans(&self) -> Policy {
        let mut p = self.clone();
        erase_policy(&mut p);
        p
    }
}

impl Expr {
    /// A copy of the condition with every span erased, for comparing two conditions by
    /// meaning (`x or not x`).
    pub fn without_spans(&self) -> Expr {
        let mut e = self.clone();
        expr(&mut e);
        e
    }
}

fn erase_policy(p: &mut Policy) {
    ident(&mut p.module);
    for item in &mut p.items {
        match item {
            Item::Use(u) => {
                u.span = Span::default();
                match &mut u.source {
                    UseSource::Stdlib(n) => ident(n),
                    UseSource::File(f) => f.span = Span::default(),
                }
                if let Some(i) = &mut u.item {
                    ident(i);
                }
                if let Some(t) = &mut u.retarget {
                    t.iter_mut().for_each(selector);
                }
            }
            Item::Class(c) => {
                c.class.span = Span::default();
                c.tools.iter_mut().for_each(ident);
            }
            Item::Stage(s) => {
                s.span = Span::default();
                ident(&mut s.name);
                s.tools.iter_mut().for_each(ident);
                if let Some(m) = &mut s.max_turns {
                    m.span = Span::default();
                }
                s.requires.iter_mut().for_each(expr);
                opt(&mut s.refusal);
            }
            Item::Latch(l) => {
                l.span = Span::default();
                ident(&mut l.name);
                l.set_by.iter_mut().for_each(selector);
                l.blocks.iter_mut().for_each(selector);
                l.blocks_tainted.iter_mut().for_each(selector);
                l.asks.iter_mut().for_each(selector);
                opt(&mut l.refusal);
            }
            Item::Hosts(h) => {
                h.span = Span::default();
                ident(&mut h.name);
                h.schemes.iter_mut().for_each(|s| s.span = Span::default());
                h.entries.iter_mut().for_each(|s| s.span = Span::default());
                for option in [&mut h.userinfo, &mut h.idn].into_iter().flatten() {
                    option.span = Span::default();
                }
            }
            Item::Rule(r) => {
                r.span = Span::default();
                ident(&mut r.name);
                r.targets.iter_mut().for_each(selector);
                r.requires.iter_mut().for_each(expr);
                r.asks.iter_mut().for_each(expr);
                opt(&mut r.refusal);
                if let Some(m) = &mut r.on_missing {
                    m.span = Span::default();
                }
                if let Some(s) = &mut r.shadow {
                    *s = Span::default();
                }
            }
            Item::Detokenise(d) => {
                d.span = Span::default();
                ident(&mut d.tool);
                for p in &mut d.paths {
                    p.path.span = Span::default();
                    if let Some(kinds) = &mut p.kinds {
                        kinds.span = Span::default();
                        kinds.node.iter_mut().for_each(|k| k.span = Span::default());
                    }
                }
            }
            Item::Provenance(d) => {
                d.span = Span::default();
                d.targets.iter_mut().for_each(selector);
                d.metadata.iter_mut().for_each(|m| m.span = Span::default());
            }
            Item::SanitiseOutput(d) => {
                d.span = Span::default();
                d.targets.iter_mut().for_each(selector);
            }
            Item::Budget(b) => {
                b.span = Span::default();
                ident(&mut b.name);
                b.targets.iter_mut().for_each(selector);
                opt(&mut b.refusal);
                if let Some(l) = &mut b.limit {
                    l.span = Span::default();
                    l.max.span = Span::default();
                    l.per.span = Span::default();
                    if let Some(w) = &mut l.within {
                        w.span = Span::default();
                    }
                    if let BudgetMeasure::Sum(path) = &mut l.measure {
                        path.span = Span::default();
                    }
                }
            }
            Item::Approvals(d) => {
                d.span = Span::default();
                if let Some(v) = &mut d.valid_for {
                    v.span = Span::default();
                }
            }
            Item::Invariant(i) => {
                i.span = Span::default();
                ident(&mut i.name);
                i.subjects.iter_mut().for_each(inv_selector);
                i.when
                    .iter_mut()
                    .chain(i.unless.iter_mut())
                    .for_each(inv_expr);
            }
        }
    }
}

fn ident(i: &mut Ident) {
    i.span = Span::default();
}

fn opt(s: &mut Option<Spanned<String>>) {
    if let Some(s) = s {
        s.span = Span::default();
    }
}

fn selector(s: &mut Selector) {
    match s {
        Selector::Class(c) => c.span = Span::default(),
        Selector::Tool(t) => ident(t),
    }
}

fn expr(e: &mut Expr) {
    e.span = Span::default();
    match &mut e.kind {
        ExprKind::Bool(_) => {}
        ExprKind::And(xs) | ExprKind::Or(xs) => xs.iter_mut().for_each(expr),
        ExprKind::Not(x) => expr(x),
        ExprKind::Call(c) => {
            ident(&mut c.name);
            for a in &mut c.args {
                if let Some(l) = &mut a.label {
                    ident(l);
                }
                call_value(&mut a.value);
            }
        }
        ExprKind::Predicate(path, pred) => {
            path.span = Span::default();
            match pred {
                Predicate::Compare(_, l) => l.span = Span::default(),
                Predicate::InHosts(n) => ident(n),
                Predicate::InList(ls) => ls.iter_mut().for_each(|l| l.span = Span::default()),
                Predicate::Matches(s) => s.span = Span::default(),
                Predicate::Is(t) => t.span = Span::default(),
                Predicate::Exists => {}
                Predicate::InFact(p) => p.span = Span::default(),
                Predicate::From(s) | Predicate::Mentions(s) => s.span = Span::default(),
            }
        }
    }
}

fn inv_selector(s: &mut InvSelector) {
    match s {
        InvSelector::Selector(s) => selector(s),
        InvSelector::Unclassified(sp) | InvSelector::Any(sp) => *sp = Span::default(),
    }
}

fn inv_expr(e: &mut InvExpr) {
    e.span = Span::default();
    match &mut e.kind {
        InvExprKind::And(xs) | InvExprKind::Or(xs) => xs.iter_mut().for_each(inv_expr),
        InvExprKind::Not(x) => inv_expr(x),
        InvExprKind::Cond(x) => expr(x),
        InvExprKind::Stage { stages, .. } => stages.iter_mut().for_each(ident),
        InvExprKind::BatchHas(s) => inv_selector(s),
        InvExprKind::Latched | InvExprKind::FailOpen => {}
    }
}

fn call_value(v: &mut Spanned<CallValue>) {
    v.span = Span::default();
    if let CallValue::List(items) = &mut v.node {
        items.iter_mut().for_each(call_value);
    }
}

#[cfg(test)]
mod tests {
    use crate::parse;

    #[test]
    fn layout_does_not_matter_but_content_does() {
        let a = parse("module m\nwrite a\nrule r for a { require args.x == 1 }").unwrap();
        let b = parse("module   m\n\n write a\nrule r for [a] {\n  require (args.x == 1)\n}\n")
            .unwrap();
        let c = parse("module m\nwrite a\nrule r for a { require args.x == 2 }").unwrap();
        assert_ne!(a, b, "spans differ");
        assert_eq!(a.without_spans(), b.without_spans());
        assert_ne!(a.without_spans(), c.without_spans());
    }
}
