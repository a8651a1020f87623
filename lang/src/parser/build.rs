//! Building the AST from pest pairs: the declarations. Conditions are in `conditions.rs`,
//! invariants in `invariants.rs`; all three extend the one [`Builder`].

use super::Rule;
use crate::ast::*;
use crate::diagnostic::Diagnostic;
use crate::span::Span;
use pest::iterators::Pair;

/// Walks pest pairs into the AST, collecting non-syntax errors (bad escapes, duplicate entries).
pub(super) struct Builder {
    pub(super) base: usize,
    pub(super) errors: Vec<Diagnostic>,
    pub(super) depth: usize,
    pub(super) too_deep: bool,
}

/// How deeply conditions may nest; deeper trees are refused so that no later pass can
/// exhaust the stack on a hostile policy.
pub const MAX_NESTING: usize = 64;

impl Builder {
    pub(super) fn new(base: usize) -> Self {
        Builder {
            base,
            errors: Vec::new(),
            depth: 0,
            too_deep: false,
        }
    }

    pub(super) fn span(&self, p: &Pair<'_, Rule>) -> Span {
        Span::from_pest(p.as_span(), self.base)
    }

    pub(super) fn ident(&mut self, p: Pair<'_, Rule>) -> Ident {
        let span = self.span(&p);
        let name = match p.as_rule() {
            Rule::tool_ref | Rule::scheme => {
                let inner = p.into_inner().next();
                match inner {
                    Some(i) if i.as_rule() == Rule::string => return self.string_ident(i),
                    Some(i) => i.as_str().to_string(),
                    None => String::new(),
                }
            }
            _ => p.as_str().to_string(),
        };
        Ident { name, span }
    }

    pub(super) fn string_ident(&mut self, p: Pair<'_, Rule>) -> Ident {
        let span = self.span(&p);
        Ident {
            name: self.string_value(p).unwrap_or_default(),
            span,
        }
    }

    pub(super) fn file(&mut self, p: Pair<'_, Rule>) -> Policy {
        let mut module = Ident {
            name: String::new(),
            span: Span::default(),
        };
        let mut items = Vec::new();
        for inner in p.into_inner() {
            match inner.as_rule() {
                Rule::module_decl | Rule::invariants_for => {
                    if let Some(n) = inner.into_inner().next() {
                        module = self.ident(n);
                    }
                }
                Rule::EOI => {}
                _ => {
                    if let Some(item) = self.item(inner) {
                        items.push(item);
                    }
                }
            }
        }
        Policy { module, items }
    }

    pub(super) fn item(&mut self, p: Pair<'_, Rule>) -> Option<Item> {
        Some(match p.as_rule() {
            Rule::use_decl => Item::Use(self.use_decl(p)),
            Rule::class_decl => Item::Class(self.class_decl(p)),
            Rule::stage_decl => Item::Stage(self.stage_decl(p)),
            Rule::latch_decl => Item::Latch(self.latch_decl(p)),
            Rule::hosts_decl => Item::Hosts(self.hosts_decl(p)),
            Rule::rule_decl => Item::Rule(self.rule_decl(p)),
            Rule::invariant_decl => Item::Invariant(self.invariant_decl(p)),
            Rule::detokenise_decl => Item::Detokenise(self.detokenise_decl(p)),
            Rule::sanitise_decl => {
                let span = self.span(&p);
                let targets = self.selectors(p.into_inner().next());
                Item::SanitiseOutput(SanitiseDecl { targets, span })
            }
            Rule::approvals_decl => Item::Approvals(self.approvals_decl(p)),
            Rule::budget_decl => Item::Budget(self.budget_decl(p)),
            Rule::provenance_decl => Item::Provenance(self.provenance_decl(p)),
            _ => return None,
        })
    }

    /// `provenance for TOOLS { metadata [KEY, ..] }`.
    pub(super) fn provenance_decl(&mut self, p: Pair<'_, Rule>) -> ProvenanceDecl {
        let span = self.span(&p);
        let mut inner = p.into_inner();
        let targets = self.selectors(inner.next());
        let mut metadata: Vec<Spanned<String>> = Vec::new();
        let mut seen = false;
        for entry in inner.filter(|e| e.as_rule() == Rule::metadata) {
            if seen {
                self.duplicate("metadata", self.span(&entry));
            }
            seen = true;
            for key in entry.into_inner() {
                let kspan = self.span(&key);
                let Some(k) = key.into_inner().next() else {
                    continue;
                };
                let node = match k.as_rule() {
                    Rule::string => self.string_value(k).unwrap_or_default(),
                    _ => k.as_str().to_string(),
                };
                if let Some(first) = metadata.iter().find(|m| m.node == node) {
                    let first = first.span;
                    self.errors.push(
                        Diagnostic::error(kspan, format!("metadata key `{node}` is listed twice"))
                            .with_label("listed again here")
                            .with_note(first, "first listed here")
                            .with_help("list each key once"),
                    );
                    continue;
                }
                metadata.push(Spanned { node, span: kspan });
            }
        }
        ProvenanceDecl {
            targets,
            metadata,
            span,
        }
    }

    pub(super) fn approvals_decl(&mut self, p: Pair<'_, Rule>) -> ApprovalsDecl {
        let span = self.span(&p);
        let mut valid_for: Option<Spanned<Duration>> = None;
        for entry in p.into_inner() {
            if entry.as_rule() != Rule::valid_for {
                continue;
            }
            if valid_for.is_some() {
                self.duplicate("valid_for", self.span(&entry));
            }
            if let Some(d) = entry.into_inner().next() {
                valid_for = self.duration(&d).or(valid_for);
            }
        }
        ApprovalsDecl { valid_for, span }
    }

    /// A `duration` (`30s`, `10m`, `24h`); a count past u64 is refused where it is written.
    fn duration(&mut self, d: &Pair<'_, Rule>) -> Option<Spanned<Duration>> {
        let text = d.as_str();
        let (digits, unit) = text.split_at(text.len() - 1);
        let unit = match unit {
            "s" => DurationUnit::Seconds,
            "m" => DurationUnit::Minutes,
            _ => DurationUnit::Hours,
        };
        // The grammar admits digits only.
        match digits.parse::<u64>() {
            Ok(count) => Some(Spanned {
                node: Duration { count, unit },
                span: self.span(d),
            }),
            Err(_) => {
                self.errors.push(
                    Diagnostic::error(self.span(d), "this duration is too long")
                        .with_help("write it in a larger unit (`s`, `m` or `h`)"),
                );
                None
            }
        }
    }

    pub(super) fn budget_decl(&mut self, p: Pair<'_, Rule>) -> BudgetDecl {
        let span = self.span(&p);
        let mut inner = p.into_inner();
        let name = self.name_or_empty(inner.next(), span);
        let targets = self.selectors(inner.next());
        let mut budget = BudgetDecl {
            name,
            targets,
            limit: None,
            refusal: None,
            span,
        };
        for entry in inner {
            let espan = self.span(&entry);
            match entry.as_rule() {
                Rule::budget_limit => {
                    if budget.limit.is_some() {
                        self.duplicate("a limit", espan);
                    }
                    budget.limit = self.budget_limit(entry).or(budget.limit);
                }
                Rule::refusal => {
                    if budget.refusal.is_some() {
                        self.duplicate("refusal", espan);
                    }
                    budget.refusal = self.refusal(entry);
                }
                _ => {}
            }
        }
        budget
    }

    fn budget_limit(&mut self, p: Pair<'_, Rule>) -> Option<BudgetLimit> {
        let span = self.span(&p);
        let mut measure = None;
        let mut max = None;
        let mut within = None;
        let mut per = None;
        for part in p.into_inner() {
            match part.as_rule() {
                Rule::budget_measure => {
                    let m = part.into_inner().next()?;
                    measure = Some(match m.as_rule() {
                        Rule::budget_sum => {
                            let path = m.into_inner().find(|x| x.as_rule() == Rule::path)?;
                            BudgetMeasure::Sum(self.path(path))
                        }
                        _ => BudgetMeasure::Count,
                    });
                }
                Rule::number => {
                    max = Some(Spanned {
                        node: self.number(&part),
                        span: self.span(&part),
                    })
                }
                Rule::budget_within => {
                    within = part.into_inner().next().and_then(|d| self.duration(&d));
                }
                Rule::budget_per => {
                    let s = part.into_inner().next()?;
                    let node = match s.as_str() {
                        "batch" => BudgetScope::Batch,
                        "turn" => BudgetScope::Turn,
                        "session" => BudgetScope::Session,
                        "principal" => BudgetScope::Principal,
                        _ => BudgetScope::Tenant,
                    };
                    per = Some(Spanned {
                        node,
                        span: self.span(&s),
                    });
                }
                _ => {}
            }
        }
        Some(BudgetLimit {
            measure: measure?,
            max: max?,
            within,
            per: per?,
            span,
        })
    }

    pub(super) fn use_decl(&mut self, p: Pair<'_, Rule>) -> UseDecl {
        let span = self.span(&p);
        let mut source = UseSource::File(Spanned {
            node: String::new(),
            span,
        });
        let mut item = None;
        let mut retarget = None;
        for inner in p.into_inner() {
            match inner.as_rule() {
                Rule::use_source => {
                    let Some(s) = inner.into_inner().next() else {
                        continue;
                    };
                    source = if s.as_rule() == Rule::stdlib_path {
                        match s.into_inner().next() {
                            Some(n) => UseSource::Stdlib(self.ident(n)),
                            None => source,
                        }
                    } else {
                        let at = self.span(&s);
                        UseSource::File(Spanned {
                            node: self.string_value(s).unwrap_or_default(),
                            span: at,
                        })
                    };
                }
                Rule::use_item => item = inner.into_inner().next().map(|n| self.ident(n)),
                Rule::use_for => retarget = Some(self.selectors(inner.into_inner().next())),
                _ => {}
            }
        }
        UseDecl {
            source,
            item,
            retarget,
            span,
        }
    }

    pub(super) fn class_decl(&mut self, p: Pair<'_, Rule>) -> ClassDecl {
        let mut inner = p.into_inner();
        let class_pair = inner.next();
        let class = match class_pair {
            Some(c) => Spanned {
                span: self.span(&c),
                node: ToolClass::from_keyword(c.as_str()).unwrap_or(ToolClass::Read),
            },
            None => Spanned {
                node: ToolClass::Read,
                span: Span::default(),
            },
        };
        let tools = inner.map(|t| self.ident(t)).collect();
        ClassDecl { class, tools }
    }

    pub(super) fn duplicate(&mut self, what: &str, span: Span) {
        self.errors.push(
            Diagnostic::error(span, format!("`{what}` is given twice in this block"))
                .with_label("given again here")
                .with_help(format!("write `{what}` once")),
        );
    }

    /// A declaration's name, or an empty one at the declaration's span when the tree lacks
    /// it (only after a syntax error already reported).
    pub(super) fn name_or_empty(&mut self, name: Option<Pair<'_, Rule>>, span: Span) -> Ident {
        name.map(|n| self.ident(n)).unwrap_or_else(|| Ident {
            name: String::new(),
            span,
        })
    }

    pub(super) fn stage_decl(&mut self, p: Pair<'_, Rule>) -> StageDecl {
        let span = self.span(&p);
        let mut inner = p.into_inner();
        let name = self.name_or_empty(inner.next(), span);
        let mut stage = StageDecl {
            name,
            tools: Vec::new(),
            max_turns: None,
            requires: Vec::new(),
            refusal: None,
            span,
        };
        let mut tools_seen = false;
        for entry in inner {
            let espan = self.span(&entry);
            match entry.as_rule() {
                Rule::stage_tools => {
                    if tools_seen {
                        self.duplicate("tools", espan);
                    }
                    tools_seen = true;
                    stage
                        .tools
                        .extend(entry.into_inner().map(|t| self.ident(t)));
                }
                Rule::max_turns => {
                    if stage.max_turns.is_some() {
                        self.duplicate("max_turns", espan);
                    }
                    if let Some(n) = entry.into_inner().next() {
                        stage.max_turns = self.int(n);
                    }
                }
                Rule::require => {
                    if let Some(e) = entry.into_inner().next() {
                        stage.requires.push(self.expr(e));
                    }
                }
                Rule::refusal => {
                    if stage.refusal.is_some() {
                        self.duplicate("refusal", espan);
                    }
                    stage.refusal = self.refusal(entry);
                }
                _ => {}
            }
        }
        stage
    }

    pub(super) fn latch_decl(&mut self, p: Pair<'_, Rule>) -> LatchDecl {
        let span = self.span(&p);
        let mut inner = p.into_inner();
        let name = self.name_or_empty(inner.next(), span);
        let mut latch = LatchDecl {
            name,
            set_by: Vec::new(),
            blocks: Vec::new(),
            blocks_tainted: Vec::new(),
            asks: Vec::new(),
            refusal: None,
            span,
        };
        let (mut set_seen, mut blocks_seen, mut asks_seen) = (false, false, false);
        let mut tainted_seen = false;
        for entry in inner {
            let espan = self.span(&entry);
            match entry.as_rule() {
                Rule::set_by => {
                    if set_seen {
                        self.duplicate("set_by", espan);
                    }
                    set_seen = true;
                    let sel = self.selectors(entry.into_inner().next());
                    latch.set_by.extend(sel);
                }
                Rule::blocks => {
                    if blocks_seen {
                        self.duplicate("blocks", espan);
                    }
                    blocks_seen = true;
                    let sel = self.selectors(entry.into_inner().next());
                    latch.blocks.extend(sel);
                }
                Rule::blocks_tainted => {
                    if tainted_seen {
                        self.duplicate("blocks tainted", espan);
                    }
                    tainted_seen = true;
                    let sel =
                        self.selectors(entry.into_inner().find(|x| x.as_rule() == Rule::selectors));
                    latch.blocks_tainted.extend(sel);
                }
                Rule::asks => {
                    if asks_seen {
                        self.duplicate("asks", espan);
                    }
                    asks_seen = true;
                    let sel = self.selectors(entry.into_inner().next());
                    latch.asks.extend(sel);
                }
                Rule::refusal => {
                    if latch.refusal.is_some() {
                        self.duplicate("refusal", espan);
                    }
                    latch.refusal = self.refusal(entry);
                }
                _ => {}
            }
        }
        latch
    }

    pub(super) fn selectors(&mut self, p: Option<Pair<'_, Rule>>) -> Vec<Selector> {
        let Some(p) = p else { return Vec::new() };
        p.into_inner()
            .filter_map(|sel| sel.into_inner().next())
            .map(|s| match s.as_rule() {
                Rule::tool_class => Selector::Class(Spanned {
                    span: self.span(&s),
                    node: ToolClass::from_keyword(s.as_str()).unwrap_or(ToolClass::Read),
                }),
                _ => Selector::Tool(self.ident(s)),
            })
            .collect()
    }

    pub(super) fn hosts_decl(&mut self, p: Pair<'_, Rule>) -> HostsDecl {
        let span = self.span(&p);
        let mut inner = p.into_inner();
        let name = self.name_or_empty(inner.next(), span);
        let mut hosts = HostsDecl {
            name,
            schemes: Vec::new(),
            entries: Vec::new(),
            schemes_given: false,
            userinfo: None,
            idn: None,
            span,
        };
        let mut allow_seen = false;
        for entry in inner {
            let espan = self.span(&entry);
            match entry.as_rule() {
                Rule::schemes => {
                    if hosts.schemes_given {
                        self.duplicate("schemes", espan);
                    }
                    hosts.schemes_given = true;
                    for s in entry.into_inner() {
                        let id = self.ident(s);
                        hosts.schemes.push(Spanned {
                            node: id.name,
                            span: id.span,
                        });
                    }
                }
                Rule::userinfo | Rule::idn => {
                    let (slot, word) = if entry.as_rule() == Rule::userinfo {
                        (&mut hosts.userinfo, "userinfo")
                    } else {
                        (&mut hosts.idn, "idn")
                    };
                    let given = slot.is_some();
                    *slot = entry.into_inner().next().map(|m| Spanned {
                        node: m.as_str() == "allow",
                        span: espan,
                    });
                    if given {
                        self.duplicate(word, espan);
                    }
                }
                Rule::allow_hosts => {
                    if allow_seen {
                        self.duplicate("allow", espan);
                    }
                    allow_seen = true;
                    for s in entry.into_inner() {
                        let span = self.span(&s);
                        if let Some(v) = self.string_value(s) {
                            hosts.entries.push(Spanned { node: v, span });
                        }
                    }
                }
                _ => {}
            }
        }
        hosts
    }

    pub(super) fn detokenise_decl(&mut self, p: Pair<'_, Rule>) -> DetokeniseDecl {
        let span = self.span(&p);
        let mut inner = p.into_inner();
        let tool = self.name_or_empty(inner.next(), span);
        let paths = inner
            .next()
            .map(|args| args.into_inner().map(|p| self.detokenise_path(p)).collect())
            .unwrap_or_default();
        DetokeniseDecl { tool, paths, span }
    }

    /// `args.PATH [: KIND | : [KIND, ..]]`.
    pub(super) fn detokenise_path(&mut self, p: Pair<'_, Rule>) -> DetokenisePath {
        let span = self.span(&p);
        let mut inner = p.into_inner();
        let path = self.path_or_empty(inner.next(), span);
        let kinds = inner.next().map(|kinds| {
            let kspan = self.span(&kinds);
            let list = kinds
                .into_inner()
                .map(|k| {
                    let span = self.span(&k);
                    let node = match k.into_inner().next() {
                        Some(w) if w.as_rule() == Rule::kw_any => TokenKind::Any,
                        Some(w) if w.as_rule() == Rule::string => {
                            TokenKind::Named(self.string_value(w).unwrap_or_default())
                        }
                        Some(w) => TokenKind::Named(w.as_str().to_string()),
                        None => TokenKind::Named(String::new()),
                    };
                    Spanned { node, span }
                })
                .collect();
            Spanned {
                node: list,
                span: kspan,
            }
        });
        DetokenisePath { path, kinds }
    }

    pub(super) fn rule_decl(&mut self, p: Pair<'_, Rule>) -> RuleDecl {
        let span = self.span(&p);
        let mut inner = p.into_inner();
        let name = self.name_or_empty(inner.next(), span);
        let targets = self.selectors(inner.next());
        let mut rule = RuleDecl {
            name,
            targets,
            requires: Vec::new(),
            asks: Vec::new(),
            refusal: None,
            on_missing: None,
            shadow: None,
            span,
        };
        for entry in inner {
            let espan = self.span(&entry);
            match entry.as_rule() {
                Rule::shadow_mark => {
                    if rule.shadow.is_some() {
                        self.duplicate("shadow", espan);
                    }
                    rule.shadow = Some(espan);
                }
                Rule::require => {
                    if let Some(e) = entry.into_inner().next() {
                        rule.requires.push(self.expr(e));
                    }
                }
                Rule::ask_when => {
                    if let Some(e) = entry.into_inner().find(|p| p.as_rule() == Rule::expr) {
                        rule.asks.push(self.expr(e));
                    }
                }
                Rule::refusal => {
                    if rule.refusal.is_some() {
                        self.duplicate("refusal", espan);
                    }
                    rule.refusal = self.refusal(entry);
                }
                Rule::on_missing => {
                    if rule.on_missing.is_some() {
                        self.duplicate("on_missing", espan);
                    }
                    let mode = entry.into_inner().next();
                    rule.on_missing = mode.map(|m| Spanned {
                        span: self.span(&m),
                        node: if m.as_str() == "allow" {
                            OnMissing::Allow
                        } else {
                            OnMissing::Deny
                        },
                    });
                }
                _ => {}
            }
        }
        rule
    }

    pub(super) fn refusal(&mut self, p: Pair<'_, Rule>) -> Option<Spanned<String>> {
        let s = p.into_inner().next()?;
        let span = self.span(&s);
        let text = self.string_value(s)?;
        if text.trim().is_empty() {
            self.errors.push(
                Diagnostic::error(span, "refusal text is empty")
                    .with_help("say what was missing, that the action did NOT happen, and what to do instead; or drop the line to get a generated refusal"),
            );
        }
        Some(Spanned { node: text, span })
    }

    pub(super) fn int(&mut self, p: Pair<'_, Rule>) -> Option<Spanned<u64>> {
        let span = self.span(&p);
        match p.as_str().parse::<u64>() {
            Ok(n) => Some(Spanned { node: n, span }),
            Err(_) => {
                self.errors.push(
                    Diagnostic::error(span, "number is too large")
                        .with_help("use a whole number below 2^64"),
                );
                None
            }
        }
    }

    pub(super) fn number(&mut self, p: &Pair<'_, Rule>) -> f64 {
        match p.as_str().parse::<f64>() {
            Ok(n) if n.is_finite() => n,
            _ => {
                let span = self.span(p);
                self.errors.push(
                    Diagnostic::error(span, "number is out of range")
                        .with_help("numbers must be finite 64-bit floats"),
                );
                0.0
            }
        }
    }

    /// The unescaped contents of a `string` pair.
    pub(super) fn string_value(&mut self, p: Pair<'_, Rule>) -> Option<String> {
        let span = self.span(&p);
        let inner = if p.as_rule() == Rule::string {
            p.into_inner().next()?
        } else {
            p
        };
        let raw = inner.as_str();
        if inner.as_rule() == Rule::raw_string {
            return Some(raw[2..raw.len() - 1].to_string());
        }
        let body = &raw[1..raw.len() - 1];
        let mut out = String::with_capacity(body.len());
        let mut chars = body.char_indices();
        while let Some((i, c)) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next().map(|(_, e)| e) {
                Some('"') => out.push('"'),
                Some('\\') => out.push('\\'),
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                other => {
                    let at = span.start + 1 + i;
                    let len = 1 + other.map_or(0, char::len_utf8);
                    self.errors.push(
                        Diagnostic::error(Span::new(at, at + len), "unknown escape in string")
                            .with_help("use `\\\"`, `\\\\`, `\\n` or `\\t`; for a regex write a raw string r\"..\""),
                    );
                    return None;
                }
            }
        }
        Some(out)
    }

    /// True when a condition at `span` would nest past [`MAX_NESTING`]; the first time, it
    /// reports the error (once per file, however deep the text goes) with `help`.
    pub(super) fn too_deep(&mut self, span: Span, help: &str) -> bool {
        if self.depth < MAX_NESTING {
            return false;
        }
        if !self.too_deep {
            self.too_deep = true;
            self.errors.push(
                Diagnostic::error(
                    span,
                    format!("condition is nested more than {MAX_NESTING} levels deep"),
                )
                .with_help(help),
            );
        }
        true
    }
}
