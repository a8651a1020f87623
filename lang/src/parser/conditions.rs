//! Building the AST from pest pairs: conditions, paths, predicates and literals.

use super::build::Builder;
use super::Rule;
use crate::ast::*;
use crate::diagnostic::Diagnostic;
use crate::span::Span;
use pest::iterators::Pair;

/// Conditions and their parts.
impl Builder {
    pub(super) fn expr(&mut self, p: Pair<'_, Rule>) -> Expr {
        let span = self.span(&p);
        if self.too_deep(
            span,
            "split the condition into several `require` lines or rules",
        ) {
            return Expr {
                kind: ExprKind::Bool(false),
                span,
            };
        }
        self.depth += 1;
        let e = self.expr_inner(p, span);
        self.depth -= 1;
        e
    }

    pub(super) fn expr_inner(&mut self, p: Pair<'_, Rule>, span: Span) -> Expr {
        match p.as_rule() {
            Rule::expr => {
                let parts: Vec<Expr> = p
                    .into_inner()
                    .filter(|x| x.as_rule() != Rule::kw_or)
                    .map(|x| self.expr(x))
                    .collect();
                self.collapse(parts, span, ExprKind::Or)
            }
            Rule::and_expr => {
                let parts: Vec<Expr> = p
                    .into_inner()
                    .filter(|x| x.as_rule() != Rule::kw_and)
                    .map(|x| self.expr(x))
                    .collect();
                self.collapse(parts, span, ExprKind::And)
            }
            Rule::negation => {
                let inner = p.into_inner().find(|x| x.as_rule() != Rule::kw_not);
                let e = match inner {
                    Some(i) => self.expr(i),
                    None => Expr {
                        kind: ExprKind::Bool(false),
                        span,
                    },
                };
                Expr {
                    kind: ExprKind::Not(Box::new(e)),
                    span,
                }
            }
            Rule::bool_lit => Expr {
                kind: ExprKind::Bool(p.as_str().starts_with('t')),
                span,
            },
            Rule::call => Expr {
                kind: ExprKind::Call(self.call(p)),
                span,
            },
            Rule::predicate => self.predicate(p),
            _ => Expr {
                kind: ExprKind::Bool(false),
                span,
            },
        }
    }

    pub(super) fn collapse(
        &mut self,
        mut parts: Vec<Expr>,
        span: Span,
        make: fn(Vec<Expr>) -> ExprKind,
    ) -> Expr {
        if parts.len() == 1 {
            if let Some(only) = parts.pop() {
                return only;
            }
        }
        Expr {
            kind: make(parts),
            span,
        }
    }

    pub(super) fn call(&mut self, p: Pair<'_, Rule>) -> Call {
        let mut inner = p.into_inner();
        let name = match inner.next() {
            Some(n) => self.ident(n),
            None => Ident {
                name: String::new(),
                span: Span::default(),
            },
        };
        let mut args = Vec::new();
        for arg in inner {
            let mut label = None;
            let mut value = None;
            for part in arg.into_inner() {
                match part.as_rule() {
                    Rule::arg_label => label = part.into_inner().next().map(|n| self.ident(n)),
                    Rule::call_value => value = Some(self.call_value(part)),
                    _ => {}
                }
            }
            if let Some(value) = value {
                args.push(CallArg { label, value });
            }
        }
        Call { name, args }
    }

    pub(super) fn call_value(&mut self, p: Pair<'_, Rule>) -> Spanned<CallValue> {
        let span = self.span(&p);
        let inner = p.into_inner().next();
        let node = match inner {
            Some(i) => match i.as_rule() {
                Rule::number => CallValue::Number(self.number(&i)),
                Rule::string => CallValue::String(self.string_value(i).unwrap_or_default()),
                Rule::value_list => {
                    CallValue::List(i.into_inner().map(|v| self.call_value(v)).collect())
                }
                _ => CallValue::Name(i.as_str().to_string()),
            },
            None => CallValue::List(Vec::new()),
        };
        Spanned { node, span }
    }

    /// The path in `p`, or an empty `args` path at `span` when the grammar gave none.
    pub(super) fn path_or_empty(&mut self, p: Option<Pair<'_, Rule>>, span: Span) -> Path {
        match p {
            Some(path) => self.path(path),
            None => Path {
                root: PathRoot::Args,
                segments: Vec::new(),
                span,
            },
        }
    }

    pub(super) fn predicate(&mut self, p: Pair<'_, Rule>) -> Expr {
        let span = self.span(&p);
        let mut inner = p.into_inner();
        let path = self.path_or_empty(inner.next(), span);
        let Some(tail) = inner.next() else {
            return Expr {
                kind: ExprKind::Predicate(path, Predicate::Exists),
                span,
            };
        };
        // `P not from ingest` is `not (P from ingest)`: the negation is written infix.
        let negated = matches!(tail.as_rule(), Rule::from_source | Rule::mentions)
            && tail
                .clone()
                .into_inner()
                .any(|x| x.as_rule() == Rule::kw_not);
        let test = Expr {
            kind: ExprKind::Predicate(path, self.predicate_tail(tail)),
            span,
        };
        if negated {
            Expr {
                kind: ExprKind::Not(Box::new(test)),
                span,
            }
        } else {
            test
        }
    }

    pub(super) fn path(&mut self, p: Pair<'_, Rule>) -> Path {
        let span = self.span(&p);
        let mut root = PathRoot::Args;
        let mut segments = Vec::new();
        for part in p.into_inner() {
            match part.as_rule() {
                Rule::path_root => {
                    root = match part.as_str() {
                        "facts" => PathRoot::Facts,
                        "principal" => PathRoot::Principal,
                        _ => PathRoot::Args,
                    }
                }
                Rule::path_key => segments.push(PathSegment::Key(part.as_str().to_string())),
                Rule::int => match part.as_str().parse::<usize>() {
                    Ok(i) => segments.push(PathSegment::Index(i)),
                    Err(_) => {
                        let s = self.span(&part);
                        self.errors.push(
                            Diagnostic::error(s, "index is too large")
                                .with_help("array indexes are whole numbers below 2^64"),
                        );
                    }
                },
                _ => {}
            }
        }
        Path {
            root,
            segments,
            span,
        }
    }

    pub(super) fn predicate_tail(&mut self, p: Pair<'_, Rule>) -> Predicate {
        match p.as_rule() {
            Rule::compare => {
                let mut inner = p.into_inner();
                let op = match inner.next().map(|o| o.as_str().to_string()).as_deref() {
                    Some("<") => CmpOp::Lt,
                    Some("<=") => CmpOp::Le,
                    Some("!=") => CmpOp::Ne,
                    Some(">=") => CmpOp::Ge,
                    Some(">") => CmpOp::Gt,
                    _ => CmpOp::Eq,
                };
                let lit = match inner.next() {
                    Some(l) => self.literal(l),
                    None => Spanned {
                        node: Literal::Null,
                        span: Span::default(),
                    },
                };
                Predicate::Compare(op, lit)
            }
            Rule::in_hosts => {
                let name = p.into_inner().find(|x| x.as_rule() == Rule::name);
                Predicate::InHosts(match name {
                    Some(n) => self.ident(n),
                    None => Ident {
                        name: String::new(),
                        span: Span::default(),
                    },
                })
            }
            Rule::in_list => Predicate::InList(
                p.into_inner()
                    .filter(|x| x.as_rule() == Rule::literal)
                    .map(|l| self.literal(l))
                    .collect(),
            ),
            Rule::matches => {
                let span = self.span(&p);
                let s = p.into_inner().next();
                let (node, span) = match s {
                    Some(s) => {
                        let sp = self.span(&s);
                        (self.string_value(s).unwrap_or_default(), sp)
                    }
                    None => (String::new(), span),
                };
                Predicate::Matches(Spanned { node, span })
            }
            Rule::is_type => {
                let t = p.into_inner().next();
                let (node, span) = match t {
                    Some(t) => (
                        match t.as_str() {
                            "string" => TypeName::String,
                            "number" => TypeName::Number,
                            "integer" => TypeName::Integer,
                            "bool" => TypeName::Bool,
                            "array" => TypeName::Array,
                            "object" => TypeName::Object,
                            _ => TypeName::Null,
                        },
                        self.span(&t),
                    ),
                    None => (TypeName::Null, Span::default()),
                };
                Predicate::Is(Spanned { node, span })
            }
            Rule::in_fact => {
                let span = self.span(&p);
                let path = p.into_inner().find(|x| x.as_rule() == Rule::path);
                Predicate::InFact(self.path_or_empty(path, span))
            }
            Rule::from_source | Rule::mentions => {
                let from = p.as_rule() == Rule::from_source;
                let source = p.into_inner().find(|x| x.as_rule() == Rule::source);
                let node = Spanned {
                    span: source.as_ref().map_or(Span::default(), |s| self.span(s)),
                    node: match source.as_ref().map(|s| s.as_str()) {
                        Some("prompt") => Source::Prompt,
                        _ => Source::Ingest,
                    },
                };
                if from {
                    Predicate::From(node)
                } else {
                    Predicate::Mentions(node)
                }
            }
            _ => Predicate::Exists,
        }
    }

    pub(super) fn literal(&mut self, p: Pair<'_, Rule>) -> Spanned<Literal> {
        let span = self.span(&p);
        let inner = p.into_inner().next();
        let node = match inner {
            Some(i) => match i.as_rule() {
                Rule::number => Literal::Number(self.number(&i)),
                Rule::string => Literal::String(self.string_value(i).unwrap_or_default()),
                Rule::kw_true => Literal::Bool(true),
                Rule::kw_false => Literal::Bool(false),
                _ => Literal::Null,
            },
            None => Literal::Null,
        };
        Spanned { node, span }
    }
}
