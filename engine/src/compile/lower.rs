//! Lowering a rule-language condition into a [`Cond`]: paths, comparisons, built-ins and
//! their arguments. The one copy, used by the policy compiler for rules and by the invariant
//! compiler (through [`Compiler::lower_condition`]) for invariants.

use super::*;

impl Compiler {
    pub(super) fn cond(&mut self, e: &ast::Expr, cats: &mut Categories) -> Option<Cond> {
        Some(match &e.kind {
            // A literal counts with the argument tests (docs/language.md): a rule that mixes
            // one with built-in preconditions is a `rule`, and fails closed, not open.
            ExprKind::Bool(b) => {
                cats.args = true;
                Cond::Const(*b)
            }
            ExprKind::And(parts) => Cond::all(self.conds(parts, cats)?.into_vec()),
            ExprKind::Or(parts) => Cond::Or(self.conds(parts, cats)?),
            ExprKind::Not(inner) => Cond::Not(Box::new(self.cond(inner, cats)?)),
            ExprKind::Call(call) => {
                cats.precondition = true;
                self.builtin(call)?
            }
            ExprKind::Predicate(path, pred) => {
                let vp = self.path(path)?;
                match (
                    vp.root == Root::Args,
                    matches!(pred, ast::Predicate::InHosts(_)),
                ) {
                    (true, true) => cats.host = true,
                    (true, false) => cats.args = true,
                    (false, _) => cats.facts = true,
                }
                let test = match pred {
                    ast::Predicate::Compare(op, lit) => {
                        let l = lower_literal(&lit.node);
                        let ordering = !matches!(op, CmpOp::Eq | CmpOp::Ne);
                        if ordering && !matches!(l, Lit::Num(_)) {
                            self.error(
                                Diagnostic::error(lit.span, format!("`{}` compares numbers only", op.as_str()))
                                    .with_help("use `==`/`!=` for strings, bools and null, or `matches` for patterns"),
                            );
                            return None;
                        }
                        Test::Cmp(*op, l)
                    }
                    ast::Predicate::InHosts(name) => {
                        match self.host_index.get(&name.name) {
                            Some(id) => Test::InHosts(*id),
                            None => {
                                let known: Vec<&str> =
                                    self.host_index.keys().map(String::as_str).collect();
                                self.error(
                                    Diagnostic::error(name.span, format!("no host list named `{}`", name.name))
                                        .with_help(if known.is_empty() {
                                            "declare it with `hosts NAME { schemes [https] allow [..] }`".to_string()
                                        } else {
                                            format!("declared lists: {}", known.join(", "))
                                        }),
                                );
                                return None;
                            }
                        }
                    }
                    ast::Predicate::InList(items) => {
                        if items.is_empty() {
                            self.warn(e.span, "`in []` is never true", "list the accepted values");
                        }
                        Test::InList(items.iter().map(|l| lower_literal(&l.node)).collect())
                    }
                    ast::Predicate::Matches(re) => match regex::RegexBuilder::new(&re.node)
                        .size_limit(REGEX_SIZE_LIMIT)
                        .build()
                    {
                        Ok(r) => Test::Matches(r),
                        Err(err) => {
                            let msg = err.to_string();
                            let last = msg
                                .lines()
                                .rfind(|l| !l.trim().is_empty())
                                .unwrap_or("invalid regex")
                                .trim()
                                .to_string();
                            self.error(
                                Diagnostic::error(re.span, format!("invalid regex: {}", last.trim_start_matches("error: ")))
                                    .with_help("regexes use Rust `regex` syntax; anchor with ^ and $ to match the whole value"),
                            );
                            return None;
                        }
                    },
                    ast::Predicate::Is(t) => Test::Is(t.node),
                    ast::Predicate::Exists => Test::Exists,
                    ast::Predicate::InFact(fact) => {
                        let fp = self.path(fact)?;
                        if fp.root == Root::Args {
                            self.error(
                                Diagnostic::error(fact.span, "`in` takes a fact here, not an argument")
                                    .with_help("compare with a list the executor supplies: `args.to in facts.contacts`"),
                            );
                            return None;
                        }
                        cats.facts = true;
                        Test::InFact(fp)
                    }
                    ast::Predicate::From(source) => Test::From(source.node),
                    ast::Predicate::Mentions(source) => Test::Mentions(source.node),
                };
                Cond::Test(vp, test)
            }
        })
    }

    fn conds(&mut self, parts: &[ast::Expr], cats: &mut Categories) -> Option<Box<[Cond]>> {
        let mut out = Vec::with_capacity(parts.len());
        for p in parts {
            out.push(self.cond(p, cats));
        }
        out.into_iter()
            .collect::<Option<Vec<_>>>()
            .map(Vec::into_boxed_slice)
    }

    pub(super) fn path(&mut self, path: &ast::Path) -> Option<ValuePath> {
        let segs: Box<[Seg]> = path
            .segments
            .iter()
            .map(|s| match s {
                PathSegment::Key(k) => Seg::Key(k.as_str().into()),
                PathSegment::Index(i) => Seg::Index(*i),
            })
            .collect();
        if path.root == PathRoot::Args {
            return Some(ValuePath {
                root: Root::Args,
                segs,
            });
        }
        if path.root == PathRoot::Principal {
            return self.principal_path(path, segs);
        }
        let Some((Seg::Key(first), rest)) = segs.split_first() else {
            self.error(
                Diagnostic::error(path.span, "a `facts` path needs a key")
                    .with_help("write `facts.NAME`"),
            );
            return None;
        };
        let scalar_root = |root: Root, this: &mut Self| {
            if rest.is_empty() {
                Some(ValuePath {
                    root,
                    segs: Box::new([]),
                })
            } else {
                this.error(Diagnostic::error(
                    path.span,
                    format!("`facts.{first}` has no fields"),
                ));
                None
            }
        };
        match &**first {
            schema::STAGE => scalar_root(Root::Stage, self),
            schema::STAGE_TURNS => scalar_root(Root::StageTurns, self),
            schema::FIELDS => {
                if rest.is_empty() {
                    self.error(
                        Diagnostic::error(path.span, "`facts.fields` needs a field name")
                            .with_help("write `facts.fields.NAME`, or `field_filled(NAME)`"),
                    );
                    return None;
                }
                Some(ValuePath {
                    root: Root::Fields,
                    segs: rest.into(),
                })
            }
            schema::MESSAGES | schema::CALLED | schema::LATCHED => {
                self.error(
                    Diagnostic::error(path.span, format!("`facts.{first}` cannot be read by path"))
                        .with_help(format!(
                            "use the built-in preconditions: {}",
                            builtins::signatures()
                        )),
                );
                None
            }
            schema::PROMPT | schema::OUTPUTS => {
                self.error(
                    Diagnostic::error(path.span, format!("`facts.{first}` cannot be read by path"))
                        .with_help("ask where an argument came from: `args.to not from ingest`, `args.to from prompt`, `args.body not mentions ingest`"),
                );
                None
            }
            schema::SPENT => {
                self.error(
                    Diagnostic::error(path.span, "`facts.spent` cannot be read by path")
                        .with_help("budget counts are judged by the engine itself: write a `budget NAME for TOOLS { .. }`"),
                );
                None
            }
            schema::PRINCIPAL => {
                let written = path.display();
                self.error(
                    Diagnostic::error(path.span, format!("`{written}` is written `principal.…`"))
                        .with_help(format!("write `{}`", written.trim_start_matches("facts."))),
                );
                None
            }
            schema::APPROVALS => {
                self.error(
                    Diagnostic::error(path.span, "`facts.approvals` cannot be read by path")
                        .with_help("approvals are matched by the engine itself: write `ask when CONDITION` in a rule, or `asks [..]` in a latch, and an approval of the ask lets the call run"),
                );
                None
            }
            other => Some(ValuePath {
                root: Root::Other(other.into()),
                segs: rest.into(),
            }),
        }
    }

    /// Lowers `principal.sub`, `principal.tenant` or `principal.claims.NAME…`; any other
    /// part is an error with a did-you-mean.
    fn principal_path(&mut self, path: &ast::Path, segs: Box<[Seg]>) -> Option<ValuePath> {
        let parts = "`principal.sub`, `principal.tenant` or `principal.claims.NAME`";
        let first = match segs.first() {
            Some(Seg::Key(k)) => k.clone(),
            _ => {
                self.error(
                    Diagnostic::error(path.span, "a `principal` path needs a part")
                        .with_help(format!("write {parts}")),
                );
                return None;
            }
        };
        let scalar = matches!(&*first, schema::SUB | schema::TENANT);
        if scalar && segs.len() > 1 {
            self.error(
                Diagnostic::error(path.span, format!("`principal.{first}` has no fields"))
                    .with_help("a principal's own claims are read as `principal.claims.NAME`"),
            );
            return None;
        }
        if &*first == schema::CLAIMS && segs.len() < 2 {
            self.error(
                Diagnostic::error(path.span, "`principal.claims` needs a claim name")
                    .with_help("write `principal.claims.NAME`, e.g. `principal.claims.role`"),
            );
            return None;
        }
        if !scalar && &*first != schema::CLAIMS {
            let mut d = Diagnostic::error(path.span, format!("a principal has no part `{first}`"));
            d = match crate::wire::principal::meant(&first) {
                Some(meant) => d.with_help(format!("did you mean `principal.{meant}`?")),
                None => d.with_help(format!(
                    "write {parts}; other claims of a token are under `principal.claims`"
                )),
            };
            self.error(d);
            return None;
        }
        Some(ValuePath {
            root: Root::Principal,
            segs,
        })
    }

    /// Lowers a call of a built-in: binds its arguments to the registry entry's parameters
    /// (by label, else by position), checks and lowers each by its kind, then lets the entry
    /// build the precondition.
    fn builtin(&mut self, call: &ast::Call) -> Option<Cond> {
        let name = call.name.name.as_str();
        let Some(entry) = builtins::find(name) else {
            self.error(
                Diagnostic::error(call.name.span, format!("unknown built-in `{name}`"))
                    .with_help(format!("the built-ins are {}", builtins::signatures())),
            );
            return None;
        };
        let spec: Vec<&str> = entry.params.iter().map(|p| p.label).collect();
        // Match labelled and positional arguments to the parameter list.
        let mut slots: Vec<Option<&Spanned<CallValue>>> = vec![None; spec.len()];
        for (pos, arg) in call.args.iter().enumerate() {
            let idx = match &arg.label {
                Some(l) => match spec.iter().position(|p| *p == l.name) {
                    Some(i) => i,
                    None => {
                        self.error(
                            Diagnostic::error(
                                l.span,
                                format!("`{name}` has no parameter `{}`", l.name),
                            )
                            .with_help(format!("its parameters are: {}", spec.join(", "))),
                        );
                        return None;
                    }
                },
                None => pos,
            };
            if idx >= spec.len() {
                self.error(
                    Diagnostic::error(
                        arg.value.span,
                        format!(
                            "`{name}` takes {} argument{}",
                            spec.len(),
                            if spec.len() == 1 { "" } else { "s" }
                        ),
                    )
                    .with_help(format!("its parameters are: {}", spec.join(", "))),
                );
                return None;
            }
            if slots[idx].is_some() {
                self.error(Diagnostic::error(
                    arg.value.span,
                    format!("parameter `{}` is given twice", spec[idx]),
                ));
                return None;
            }
            slots[idx] = Some(&arg.value);
        }
        let mut args = Vec::with_capacity(slots.len());
        for (param, slot) in entry.params.iter().zip(slots) {
            args.push(self.builtin_arg(name, param, slot, call.name.span)?);
        }
        Some(Cond::Builtin((entry.lower)(&mut builtins::Lowered(args))))
    }

    /// Checks and lowers one argument of built-in `name` by its parameter's kind; `given` is
    /// `None` when the call leaves it out.
    fn builtin_arg(
        &mut self,
        name: &str,
        param: &Param,
        given: Option<&Spanned<CallValue>>,
        call_span: Span,
    ) -> Option<Arg> {
        let Some(v) = given else {
            return match param.kind {
                ParamKind::Window => Some(Arg::Window(DEFAULT_WINDOW)),
                ParamKind::MediaKinds => Some(Arg::Words(Box::new([]))),
                ParamKind::Count | ParamKind::Word | ParamKind::Tool | ParamKind::Turns => {
                    self.error(Diagnostic::error(
                        call_span,
                        format!("`{name}` needs {}", param.what),
                    ));
                    None
                }
            };
        };
        match param.kind {
            ParamKind::Window => self.window(v).map(Arg::Window),
            ParamKind::Count => self.whole(v).map(Arg::Count),
            ParamKind::Turns => self.turns(v).map(Arg::Count),
            ParamKind::Word => Some(Arg::Word(self.word(v, param.what)?.into())),
            ParamKind::Tool => {
                let word = self.word(v, param.what)?;
                // A rule that applies to no tool (a library module's `for []`) is never
                // evaluated; its names are checked where it is imported for a tool.
                if !self.tool_index.contains_key(&word) && !self.in_untargeted_rule {
                    let t = ast::Ident {
                        name: word.clone(),
                        span: v.span,
                    };
                    self.unclassified_tool(&t, &format!("`{name}`"));
                    return None;
                }
                Some(Arg::Word(word.into()))
            }
            ParamKind::MediaKinds => match &v.node {
                CallValue::List(items) => {
                    let mut out = Vec::new();
                    for i in items {
                        out.push(self.word(i, "a media kind")?.into_boxed_str());
                    }
                    if out.is_empty() {
                        self.error(Diagnostic::error(v.span, "`kinds` is empty").with_help("list the media kinds, e.g. `kinds: [image, document]`, or drop it to accept any"));
                        return None;
                    }
                    Some(Arg::Words(out.into_boxed_slice()))
                }
                _ => {
                    self.error(
                        Diagnostic::error(v.span, "`kinds` takes a list")
                            .with_help("write `kinds: [image, document]`"),
                    );
                    None
                }
            },
        }
    }

    fn whole(&mut self, v: &Spanned<CallValue>) -> Option<u64> {
        match v.node {
            CallValue::Number(n) if n >= 0.0 && n.fract() == 0.0 && n < 1e15 => Some(n as u64),
            _ => {
                self.error(
                    Diagnostic::error(v.span, "expected a whole number")
                        .with_help("write e.g. `10`"),
                );
                None
            }
        }
    }

    /// A number of turns: 0 would make the precondition never hold, so it is refused.
    fn turns(&mut self, v: &Spanned<CallValue>) -> Option<u64> {
        let n = self.whole(v)?;
        if n == 0 {
            self.error(
                Diagnostic::error(v.span, "`turns: 0` never holds").with_help(
                    "`turns: 1` is the current turn, `turns: 2` this turn and the one before",
                ),
            );
            return None;
        }
        Some(n)
    }

    fn window(&mut self, v: &Spanned<CallValue>) -> Option<usize> {
        let n = self.whole(v)?;
        if n == 0 {
            self.error(
                Diagnostic::error(v.span, "a window of 0 messages is never satisfied")
                    .with_help(format!("use a window of 1 to {MAX_WINDOW}")),
            );
            return None;
        }
        if n > MAX_WINDOW as u64 {
            self.warn(v.span, format!("window of {n} messages is clamped to {MAX_WINDOW}"), format!("windows are capped at {MAX_WINDOW} so a precondition can never become a table scan"));
        }
        Some(clamp_window(n))
    }

    pub(super) fn word(&mut self, v: &Spanned<CallValue>, what: &str) -> Option<String> {
        match &v.node {
            CallValue::Name(s) | CallValue::String(s) if !s.is_empty() => Some(s.clone()),
            _ => {
                self.error(Diagnostic::error(v.span, format!("expected {what}")));
                None
            }
        }
    }
}

fn lower_literal(l: &Literal) -> Lit {
    match l {
        Literal::Number(n) => Lit::Num(*n),
        Literal::String(s) => Lit::Str(s.as_str().into()),
        Literal::Bool(b) => Lit::Bool(*b),
        Literal::Null => Lit::Null,
    }
}

/// Which kinds of test a rule contains, to name the kind of its denials.
#[derive(Default)]
pub(super) struct Categories {
    args: bool,
    host: bool,
    precondition: bool,
    facts: bool,
}

impl Categories {
    pub(super) fn kind(&self) -> DenyKind {
        match (self.host, self.args, self.precondition, self.facts) {
            (true, false, false, false) => DenyKind::Host,
            (false, true, false, false) => DenyKind::Args,
            (false, false, true, false) => DenyKind::Precondition,
            (false, false, false, false) => DenyKind::Args,
            _ => DenyKind::Rule,
        }
    }

    pub(super) fn reads_facts(&self) -> bool {
        self.precondition || self.facts
    }
}
