//! Turns policy text into an [`ast::Policy`], reporting syntax errors with friendly names.
//!
//! A syntax error does not stop the parse: the parser resumes at the next line that starts a
//! declaration, so one run reports every broken declaration. The tree is only returned when
//! there were no errors.

use crate::ast::*;
use crate::diagnostic::Diagnostic;
use crate::rule_names::friendly;
use crate::span::Span;
use pest::iterators::{Pair, Pairs};
use pest::Parser as _;
use std::sync::{Mutex, PoisonError};

#[derive(pest_derive::Parser)]
#[grammar = "grammar.pest"]
pub(crate) struct GateParser;

/// Keywords that start a top-level declaration; recovery resumes at a line starting with one.
const ITEM_KEYWORDS: &[&str] = &[
    "module",
    "use",
    "egress",
    "write",
    "ingest",
    "read",
    "stage",
    "latch",
    "hosts",
    "rule",
    "invariant",
    "invariants",
    "detokenise",
    "sanitise_output",
];

/// pest's error-detail switch is one process-wide flag, read when a parse starts; this lock
/// pairs each parse with the setting it asked for.
static PEST: Mutex<()> = Mutex::new(());

/// Runs pest for `rule`. Without `detail` pest skips the bookkeeping behind friendly error
/// messages, which is most of its cost, so a text is first parsed without it and only a text
/// that fails is parsed again with it (see [`parse_with_detail_on_error`]).
pub(crate) fn run_pest(
    rule: Rule,
    text: &str,
    detail: bool,
) -> Result<Pairs<'_, Rule>, pest::error::Error<Rule>> {
    let _one_at_a_time = PEST.lock().unwrap_or_else(PoisonError::into_inner);
    pest::set_error_detail(detail);
    GateParser::parse(rule, text)
}

/// The fast parse, then, only on failure, the detailed one whose error explains itself.
fn parse_with_detail_on_error(
    rule: Rule,
    text: &str,
) -> Result<Pairs<'_, Rule>, pest::error::Error<Rule>> {
    run_pest(rule, text, false).or_else(|_| run_pest(rule, text, true))
}

/// Parses a whole policy. Returns every syntax error found when it fails.
pub fn parse(text: &str) -> Result<Policy, Vec<Diagnostic>> {
    parse_at(text, 0)
}

/// Parses a whole policy whose spans start at byte `base` rather than 0: an imported module
/// placed after the importing file in one [`crate::SourceFile`]. Diagnostics are shifted too.
pub fn parse_at(text: &str, base: usize) -> Result<Policy, Vec<Diagnostic>> {
    match parse_with_detail_on_error(Rule::file, text) {
        Ok(mut pairs) => {
            let file = pairs.next().ok_or_else(|| vec![internal(text)])?;
            let mut b = Builder::new(base);
            let policy = b.file(file);
            if b.errors.is_empty() {
                Ok(policy)
            } else {
                Err(b.errors)
            }
        }
        Err(err) => {
            let mut diags = recover(text, err);
            for d in &mut diags {
                d.span = Span::new(d.span.start + base, d.span.end + base);
            }
            Err(diags)
        }
    }
}

/// Parses a separate invariants file (`invariants for MODULE`, then `hosts` and `invariant`
/// declarations). Returns every syntax error found when it fails.
pub fn parse_invariants(text: &str) -> Result<InvariantsFile, Vec<Diagnostic>> {
    match parse_with_detail_on_error(Rule::invariants_file, text) {
        Ok(mut pairs) => {
            let file = pairs.next().ok_or_else(|| vec![internal(text)])?;
            let mut b = Builder::new(0);
            // The same shape as a policy: a header naming the module, then declarations.
            let Policy {
                module: policy,
                items,
            } = b.file(file);
            if b.errors.is_empty() {
                Ok(InvariantsFile { policy, items })
            } else {
                Err(b.errors)
            }
        }
        Err(err) => Err(recover(text, err)),
    }
}

fn internal(text: &str) -> Diagnostic {
    Diagnostic::error(
        Span::new(0, text.len().min(1)),
        "the parser produced no tree",
    )
}

/// Collects the first error, then re-parses each later declaration on its own.
fn recover(text: &str, first: pest::error::Error<Rule>) -> Vec<Diagnostic> {
    let first = syntax_error(text, 0, &first);
    let resume_from = first.span.start;
    let mut errors = vec![first];
    let starts: Vec<usize> = item_starts(text)
        .into_iter()
        .filter(|&s| s >= resume_from && s > 0)
        .collect();
    // The first error's own declaration ends at the first start strictly after it.
    let mut bounds = starts.clone();
    bounds.push(text.len());
    for (i, &start) in starts.iter().enumerate() {
        let end = bounds[i + 1];
        let slice = &text[start..end];
        let first_word = slice.split_whitespace().next().unwrap_or("");
        if first_word == "module" || first_word == "invariants" {
            continue;
        }
        match run_pest(Rule::item_only, slice, true) {
            Ok(pairs) => {
                // Still run the builder: it reports non-syntax problems such as bad escapes.
                let mut b = Builder::new(start);
                for p in pairs {
                    for inner in p.into_inner() {
                        if inner.as_rule() != Rule::EOI {
                            let _ = b.item(inner);
                        }
                    }
                }
                errors.extend(b.errors);
            }
            Err(e) => errors.push(syntax_error(text, start, &e)),
        }
    }
    errors
}

/// Byte offsets of lines whose first word is a declaration keyword.
fn item_starts(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let word_end = trimmed
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(trimmed.len());
        if ITEM_KEYWORDS.contains(&&trimmed[..word_end]) {
            out.push(offset + indent);
        }
        offset += line.len();
    }
    out
}

/// Converts a pest error into a diagnostic with friendly names and an absolute span.
fn syntax_error(text: &str, base: usize, err: &pest::error::Error<Rule>) -> Diagnostic {
    let pos = match err.location {
        pest::error::InputLocation::Pos(p) => p,
        pest::error::InputLocation::Span((s, _)) => s,
    } + base;
    let mut expected: Vec<String> = Vec::new();
    if let pest::error::ErrorVariant::ParsingError { positives, .. } = &err.variant {
        for r in positives {
            push_unique(&mut expected, friendly(*r).to_string());
        }
    }
    if let Some(attempts) = err.parse_attempts() {
        for token in attempts.expected_tokens() {
            // Only punctuation: keywords already show up through their rules' names.
            let token = token.to_string();
            // Character ranges (`a..z`, inside strings and comments) are no help to a reader;
            // the grammar has no `..` token of its own.
            if token.chars().count() >= 3 && token.contains("..") {
                continue;
            }
            let noise = token.trim().is_empty()
                || matches!(token.as_str(), "#" | "//" | "_" | "-" | "\"" | "\\");
            let covered = (expected
                .iter()
                .any(|e| e.starts_with("a comparison operator"))
                && "<>=!".contains(&token[..1.min(token.len())]))
                || (token == "\"" && expected.iter().any(|e| e == "a string"));
            let named = expected.iter().any(|e| e.contains(&format!("`{token}`")));
            if !noise && !covered && !named && token.chars().all(|c| !c.is_alphanumeric()) {
                push_unique(&mut expected, format!("`{token}`"));
            }
        }
    }
    let found = found_at(text, pos);
    let message = if expected.is_empty() {
        format!("unexpected {found}")
    } else {
        format!("expected {}, found {found}", join_or(&expected))
    };
    let end = pos + found_len(text, pos);
    let mut d = Diagnostic::error(Span::new(pos, end), message);
    if let Some(help) = help_for(text, pos, &expected) {
        d = d.with_help(help);
    }
    d
}

fn push_unique(v: &mut Vec<String>, s: String) {
    if !v.contains(&s) {
        v.push(s);
    }
}

fn join_or(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {}", init.join(", "), last),
    }
}

fn found_len(text: &str, pos: usize) -> usize {
    let rest = text.get(pos..).unwrap_or("");
    let word: usize = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .map(char::len_utf8)
        .sum();
    if word > 0 {
        word
    } else {
        rest.chars().next().map_or(0, char::len_utf8)
    }
}

fn found_at(text: &str, pos: usize) -> String {
    let rest = text.get(pos..).unwrap_or("");
    match rest.chars().next() {
        None => "end of file".to_string(),
        Some('\n') | Some('\r') => "end of line".to_string(),
        Some(_) => format!("`{}`", &rest[..found_len(text, pos)]),
    }
}

fn help_for(text: &str, pos: usize, expected: &[String]) -> Option<String> {
    // Every syntax error carries a hint; the most specific one wins.
    let found = &text.get(pos..).unwrap_or("")[..found_len(text, pos)];
    if pos == 0 || expected.iter().any(|e| e == "`module NAME`") {
        return Some("a policy starts with `module NAME`".into());
    }
    if expected.iter().any(|e| e == "`}`") && ITEM_KEYWORDS.contains(&found) {
        return Some("the block above is not closed: add `}` before this line".into());
    }
    if found == "=" {
        return Some("compare with `==`".into());
    }
    if found == "&" || found == "|" {
        return Some("combine conditions with `and`, `or` and `not`".into());
    }
    if found == "'" {
        return Some("strings use double quotes".into());
    }
    let line_rest = text.get(pos..).unwrap_or("").lines().next().unwrap_or("");
    if found == "\"" && line_rest[1..].find('"').is_none() {
        return Some("this string is not closed: add `\"` before the end of the line".into());
    }
    if found.is_empty() {
        return Some(
            "the file ends inside a declaration: finish it, and close any `{` with `}`".into(),
        );
    }
    if expected.iter().any(|e| e.starts_with("`never allow")) {
        return Some(
            "an invariant reads `never allow TOOLS [when CONDITION] [unless CONDITION]`".into(),
        );
    }
    if expected.iter().any(|e| e == "a whole number") {
        return Some("write a whole number, e.g. `max_turns 2`".into());
    }
    if expected.iter().any(|e| e == "`allow` or `deny`") {
        return Some("write `on_missing allow` or `on_missing deny`".into());
    }
    if expected
        .iter()
        .any(|e| e == "a condition" || e == "an `args.` or `facts.` path")
    {
        return Some(
            "a condition is a test on `args.PATH` or `facts.PATH`, a built-in such as `field_filled(phone)`, or `true`/`false`".into(),
        );
    }
    if expected.iter().any(|e| e == "`}`") {
        return Some("close the block with `}`".into());
    }
    if expected.iter().any(|e| e.contains("`stage`")) {
        return Some(
            "declarations are `write|ingest|read TOOLS`, `stage`, `latch`, `hosts` and `rule` blocks".into(),
        );
    }
    Some("see docs/language.md for the syntax of this declaration".into())
}

/// Walks pest pairs into the AST, collecting non-syntax errors (bad escapes, duplicate entries).
struct Builder {
    base: usize,
    errors: Vec<Diagnostic>,
    depth: usize,
    too_deep: bool,
}

/// How deeply conditions may nest; deeper trees are refused so that no later pass can
/// exhaust the stack on a hostile policy.
pub const MAX_NESTING: usize = 64;

impl Builder {
    fn new(base: usize) -> Self {
        Builder {
            base,
            errors: Vec::new(),
            depth: 0,
            too_deep: false,
        }
    }

    fn span(&self, p: &Pair<'_, Rule>) -> Span {
        Span::from_pest(p.as_span(), self.base)
    }

    fn ident(&mut self, p: Pair<'_, Rule>) -> Ident {
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

    fn string_ident(&mut self, p: Pair<'_, Rule>) -> Ident {
        let span = self.span(&p);
        Ident {
            name: self.string_value(p).unwrap_or_default(),
            span,
        }
    }

    fn file(&mut self, p: Pair<'_, Rule>) -> Policy {
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

    fn item(&mut self, p: Pair<'_, Rule>) -> Option<Item> {
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
            _ => return None,
        })
    }

    fn use_decl(&mut self, p: Pair<'_, Rule>) -> UseDecl {
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

    fn class_decl(&mut self, p: Pair<'_, Rule>) -> ClassDecl {
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

    fn duplicate(&mut self, what: &str, span: Span) {
        self.errors.push(
            Diagnostic::error(span, format!("`{what}` is given twice in this block"))
                .with_label("given again here")
                .with_help(format!("write `{what}` once")),
        );
    }

    /// A declaration's name, or an empty one at the declaration's span when the tree lacks
    /// it (only after a syntax error already reported).
    fn name_or_empty(&mut self, name: Option<Pair<'_, Rule>>, span: Span) -> Ident {
        name.map(|n| self.ident(n)).unwrap_or_else(|| Ident {
            name: String::new(),
            span,
        })
    }

    fn stage_decl(&mut self, p: Pair<'_, Rule>) -> StageDecl {
        let span = self.span(&p);
        let mut inner = p.into_inner();
        let name = self.name_or_empty(inner.next(), span);
        let mut stage = StageDecl {
            name,
            tools: Vec::new(),
            max_turns: None,
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

    fn latch_decl(&mut self, p: Pair<'_, Rule>) -> LatchDecl {
        let span = self.span(&p);
        let mut inner = p.into_inner();
        let name = self.name_or_empty(inner.next(), span);
        let mut latch = LatchDecl {
            name,
            set_by: Vec::new(),
            blocks: Vec::new(),
            refusal: None,
            span,
        };
        let (mut set_seen, mut blocks_seen) = (false, false);
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

    fn selectors(&mut self, p: Option<Pair<'_, Rule>>) -> Vec<Selector> {
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

    fn hosts_decl(&mut self, p: Pair<'_, Rule>) -> HostsDecl {
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

    fn detokenise_decl(&mut self, p: Pair<'_, Rule>) -> DetokeniseDecl {
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
    fn detokenise_path(&mut self, p: Pair<'_, Rule>) -> DetokenisePath {
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

    fn rule_decl(&mut self, p: Pair<'_, Rule>) -> RuleDecl {
        let span = self.span(&p);
        let mut inner = p.into_inner();
        let name = self.name_or_empty(inner.next(), span);
        let targets = self.selectors(inner.next());
        let mut rule = RuleDecl {
            name,
            targets,
            requires: Vec::new(),
            refusal: None,
            on_missing: None,
            span,
        };
        for entry in inner {
            let espan = self.span(&entry);
            match entry.as_rule() {
                Rule::require => {
                    if let Some(e) = entry.into_inner().next() {
                        rule.requires.push(self.expr(e));
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

    fn refusal(&mut self, p: Pair<'_, Rule>) -> Option<Spanned<String>> {
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

    fn int(&mut self, p: Pair<'_, Rule>) -> Option<Spanned<u64>> {
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

    fn number(&mut self, p: &Pair<'_, Rule>) -> f64 {
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
    fn string_value(&mut self, p: Pair<'_, Rule>) -> Option<String> {
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
    fn too_deep(&mut self, span: Span, help: &str) -> bool {
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

    fn expr(&mut self, p: Pair<'_, Rule>) -> Expr {
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

    fn expr_inner(&mut self, p: Pair<'_, Rule>, span: Span) -> Expr {
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

    fn collapse(
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

    fn call(&mut self, p: Pair<'_, Rule>) -> Call {
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

    fn call_value(&mut self, p: Pair<'_, Rule>) -> Spanned<CallValue> {
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
    fn path_or_empty(&mut self, p: Option<Pair<'_, Rule>>, span: Span) -> Path {
        match p {
            Some(path) => self.path(path),
            None => Path {
                root: PathRoot::Args,
                segments: Vec::new(),
                span,
            },
        }
    }

    fn predicate(&mut self, p: Pair<'_, Rule>) -> Expr {
        let span = self.span(&p);
        let mut inner = p.into_inner();
        let path = self.path_or_empty(inner.next(), span);
        let pred = match inner.next() {
            Some(t) => self.predicate_tail(t),
            None => Predicate::Exists,
        };
        Expr {
            kind: ExprKind::Predicate(path, pred),
            span,
        }
    }

    fn path(&mut self, p: Pair<'_, Rule>) -> Path {
        let span = self.span(&p);
        let mut root = PathRoot::Args;
        let mut segments = Vec::new();
        for part in p.into_inner() {
            match part.as_rule() {
                Rule::path_root => {
                    root = if part.as_str() == "facts" {
                        PathRoot::Facts
                    } else {
                        PathRoot::Args
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

    fn predicate_tail(&mut self, p: Pair<'_, Rule>) -> Predicate {
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
            _ => Predicate::Exists,
        }
    }

    fn literal(&mut self, p: Pair<'_, Rule>) -> Spanned<Literal> {
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

/// Invariant declarations and their conditions.
impl Builder {
    fn invariant_decl(&mut self, p: Pair<'_, Rule>) -> InvariantDecl {
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

    fn inv_clause(&mut self, p: Pair<'_, Rule>) -> Option<InvExpr> {
        let e = p.into_inner().find(|x| x.as_rule() == Rule::inv_expr)?;
        Some(self.inv_expr(e))
    }

    fn inv_selector(&mut self, p: Pair<'_, Rule>) -> InvSelector {
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
    fn selectors_one(&mut self, p: Pair<'_, Rule>) -> Selector {
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

    fn inv_expr(&mut self, p: Pair<'_, Rule>) -> InvExpr {
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

    fn inv_expr_inner(&mut self, p: Pair<'_, Rule>, span: Span) -> InvExpr {
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
