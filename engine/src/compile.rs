//! The compiler: checks a parsed policy and lowers it into the tables of [`Policy`].
//!
//! Everything that can be decided before a request arrives is decided here: names are
//! interned to ids, stage whitelists become bit sets, regexes and host matchers are built,
//! each tool gets the list of its own rules, and every refusal text is written.

use crate::builtins::{self, Arg, Param, ParamKind};
use crate::cond::{Cond, Lit, Root, Seg, Test, ValuePath};
use crate::error::CompileError;
use crate::hosts::{parse_entry, HostList};
use crate::ids::{HostListId, RuleId, StageId, ToolId, MAX_LATCHES};
use crate::imports::{ImportTarget, Imported, ModuleText};
use crate::name_table::NameTable;
use crate::policy::{FixedRefusals, LatchInfo, Policy, RuleInfo, StageInfo, ToolInfo};
use crate::refusal;
use crate::response::DenyKind;
use crate::schema;
use crate::strict_url::{self, Ambiguity};
use crate::tool_set::ToolSet;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;
use toolgate_lang::ast::{
    self, CallValue, CmpOp, ExprKind, Item, Literal, PathRoot, PathSegment, Selector, Spanned,
    ToolClass,
};
use toolgate_lang::{Diagnostic, SourceFile, Span};

mod checks;
mod detokenise;

use crate::builtins::{clamp_window, DEFAULT_WINDOW, MAX_WINDOW};

/// The largest policy source accepted, in bytes.
pub const MAX_SOURCE_BYTES: usize = 4 << 20;
/// How many unknown tool names get a did-you-mean search, per policy.
const MAX_SUGGESTIONS: usize = 8;
/// The size limit handed to the regex compiler for each `matches` pattern.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

impl Policy {
    /// Compiles policy `text`, naming it `file_name` in diagnostics.
    ///
    /// On success the policy may still carry [`Policy::warnings`]. On failure the error holds
    /// every diagnostic found, each with a span into the source.
    pub fn compile(file_name: &str, text: &str) -> Result<Policy, CompileError> {
        Policy::compile_with(file_name, text, &crate::imports::resolve_stdlib)
    }

    /// Compiles policy `text` like [`Policy::compile`], resolving each `use` with `resolve`:
    /// it is handed `stdlib::NAME` or a file path with the importing file's name, and returns
    /// the module's text or why it cannot. The engine itself never reads a file.
    /// [`resolve_stdlib`](crate::resolve_stdlib) resolves the embedded standard library.
    pub fn compile_with(
        file_name: &str,
        text: &str,
        resolve: &dyn Fn(&ImportTarget<'_>) -> Result<ModuleText, String>,
    ) -> Result<Policy, CompileError> {
        let source = SourceFile::new(file_name, text);
        if text.len() > MAX_SOURCE_BYTES {
            return Err(CompileError {
                diagnostics: vec![Diagnostic::error(
                    Span::new(0, 0),
                    format!("policy is larger than {} MiB", MAX_SOURCE_BYTES >> 20),
                )
                .with_help("split it into several policies")],
                source_file: source,
            });
        }
        let mut ast = match toolgate_lang::parse(text) {
            Ok(ast) => ast,
            Err(diagnostics) => {
                return Err(CompileError {
                    source_file: source,
                    diagnostics,
                })
            }
        };
        let (source, imported) = match crate::imports::expand(&mut ast, source, resolve) {
            Ok(done) => done,
            Err((source_file, diagnostics)) => {
                return Err(CompileError {
                    source_file,
                    diagnostics,
                })
            }
        };
        let text = source.text().to_string();
        let text = text.as_str();
        let mut c = Compiler {
            source: source.clone(),
            diags: Vec::new(),
            tool_index: HashMap::new(),
            tools: Vec::new(),
            host_index: HashMap::new(),
            host_lists: Vec::new(),
            host_spans: HashMap::new(),
            in_untargeted_rule: false,
            suggestions_left: MAX_SUGGESTIONS,
        };
        let built = c.policy(&ast);
        c.check_imports(&imported);
        let (errors, warnings): (Vec<_>, Vec<_>) =
            c.diags.into_iter().partition(Diagnostic::is_error);
        match built {
            Some(parts) if errors.is_empty() => {
                let mut warnings = warnings;
                warnings.sort_by_key(|d| d.span.start);
                let mut policy = parts.finish(&ast, text, warnings, source.clone());
                // Invariants are compiled against the finished tables; they never change them.
                crate::invariant::attach_inline(&mut policy, &ast).map_err(|diagnostics| {
                    CompileError {
                        source_file: source,
                        diagnostics,
                    }
                })?;
                Ok(policy)
            }
            _ => {
                let mut diagnostics = errors;
                diagnostics.extend(warnings);
                diagnostics.sort_by_key(|d| (d.span.start, !d.is_error()));
                Err(CompileError {
                    source_file: source,
                    diagnostics,
                })
            }
        }
    }
}

pub(crate) struct Compiler {
    source: SourceFile,
    diags: Vec<Diagnostic>,
    tool_index: HashMap<String, ToolId>,
    tools: Vec<(String, ToolClass, Span)>,
    host_index: HashMap<String, HostListId>,
    host_lists: Vec<HostList>,
    host_spans: HashMap<String, Span>,
    /// True while lowering the conditions of a rule that applies to no tool.
    in_untargeted_rule: bool,
    /// How many more did-you-mean searches may run (see `unclassified_diagnostic`).
    suggestions_left: usize,
}

/// Everything compiled, before it is frozen into a [`Policy`].
struct Parts {
    tool_index: HashMap<String, ToolId>,
    tools: Vec<ToolInfo>,
    stage_index: HashMap<String, StageId>,
    stages: Vec<StageInfo>,
    latches: Vec<LatchInfo>,
    rules: Vec<RuleInfo>,
    host_lists: Vec<HostList>,
}

impl Parts {
    fn finish(
        self,
        ast: &ast::Policy,
        text: &str,
        warnings: Vec<Diagnostic>,
        source: SourceFile,
    ) -> Policy {
        let digest = Sha256::digest(text.as_bytes());
        let revision: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        let vault_aware = self.tools.iter().any(|t| !t.detokenise.is_empty());
        let mut custom_facts = Vec::new();
        for rule in &self.rules {
            rule.cond.collect_custom_facts(&mut custom_facts);
        }
        Policy {
            module: ast.module.name.as_str().into(),
            revision: revision.into(),
            tool_index: NameTable::new(self.tool_index.iter().map(|(k, v)| (k.as_str(), v.0))),
            tools: self.tools,
            stage_index: NameTable::new(self.stage_index.iter().map(|(k, v)| (k.as_str(), v.0))),
            stages: self.stages,
            latches: self.latches,
            rules: self.rules,
            host_lists: self.host_lists,
            custom_facts: custom_facts.into_boxed_slice(),
            vault_aware,
            fixed: FixedRefusals {
                unclassified: refusal::unclassified().into(),
                unknown_stage: refusal::unknown_stage().into(),
                no_stage: refusal::no_stage().into(),
                rule_unclassified: "unclassified".into(),
                rule_no_stage: "stage".into(),
            },
            warnings,
            source,
            syntax: ast.clone(),
            invariants: crate::invariant::Invariants::default(),
        }
    }
}

/// The hooks `invariant.rs` compiles invariants with: the policy's names, host lists and
/// condition lowering, without a second copy of any of them.
impl Compiler {
    /// A compiler that knows the tools and host lists of an already compiled policy.
    pub(crate) fn for_policy(policy: &Policy, source: SourceFile) -> Compiler {
        let tools: Vec<(String, ToolClass, Span)> = policy
            .tools
            .iter()
            .map(|t| (t.name.to_string(), t.class, Span::default()))
            .collect();
        Compiler {
            source,
            diags: Vec::new(),
            tool_index: policy
                .tools
                .iter()
                .enumerate()
                .map(|(i, t)| (t.name.to_string(), ToolId(i as u32)))
                .collect(),
            tools,
            host_index: policy
                .host_lists
                .iter()
                .enumerate()
                .map(|(i, h)| (h.name.to_string(), HostListId(i as u32)))
                .collect(),
            host_lists: policy.host_lists.clone(),
            host_spans: HashMap::new(),
            in_untargeted_rule: false,
            suggestions_left: MAX_SUGGESTIONS,
        }
    }

    /// Lowers a rule-language condition, reporting errors like a rule's `require` would.
    pub(crate) fn lower_condition(&mut self, e: &ast::Expr) -> Option<Cond> {
        self.cond(e, &mut Categories::default())
    }

    /// Declares a host list (an invariants file may declare its own).
    pub(crate) fn declare_host_list(&mut self, decl: &ast::HostsDecl) {
        self.host_list(decl);
    }

    /// Reports an error (a hint is added when it has none).
    pub(crate) fn report(&mut self, d: Diagnostic) {
        self.error(d);
    }

    /// Reports a warning.
    pub(crate) fn report_warning(&mut self, span: Span, message: String, help: &str) {
        self.warn(span, message, help);
    }

    /// The id of a classified tool.
    pub(crate) fn tool_id(&self, name: &str) -> Option<ToolId> {
        self.tool_index.get(name).copied()
    }

    /// The diagnostics and the host lists (the policy's, then any declared since).
    pub(crate) fn into_results(self) -> (Vec<Diagnostic>, Vec<HostList>) {
        (self.diags, self.host_lists)
    }
}

impl Compiler {
    fn error(&mut self, d: Diagnostic) {
        let d = if d.help.is_none() {
            let help = fallback_help(&d.message);
            d.with_help(help)
        } else {
            d
        };
        self.diags.push(d);
    }

    fn warn(&mut self, span: Span, message: impl Into<String>, help: impl Into<String>) {
        self.diags
            .push(Diagnostic::warning(span, message).with_help(help));
    }

    fn policy(&mut self, ast: &ast::Policy) -> Option<Parts> {
        // Pass 1: classes and host lists, which everything else refers to.
        for item in &ast.items {
            match item {
                Item::Class(decl) => self.classify(decl),
                Item::Hosts(decl) => self.host_list(decl),
                _ => {}
            }
        }
        let n = self.tools.len();
        let mut tools: Vec<ToolInfo> = self
            .tools
            .iter()
            .map(|(name, class, _)| ToolInfo {
                name: name.as_str().into(),
                class: *class,
                rules: Box::new([]),
                sets: 0,
                blocked_by: 0,
                detokenise: Box::new([]),
                // Third-party content can carry identifiers the vault never saw.
                sanitise_output: *class == ToolClass::Ingest,
            })
            .collect();
        let mut tool_rules: Vec<Vec<RuleId>> = vec![Vec::new(); n];
        let mut staged = vec![false; n];
        let mut stage_index: HashMap<String, StageId> = HashMap::new();
        let mut stage_spans: HashMap<String, Span> = HashMap::new();
        let mut stages = Vec::new();
        let mut latches: Vec<LatchInfo> = Vec::new();
        let mut latch_spans: HashMap<String, Span> = HashMap::new();
        let mut rules: Vec<RuleInfo> = Vec::new();
        let mut rule_spans: HashMap<String, Span> = HashMap::new();
        let mut detokenise_spans: HashMap<ToolId, Span> = HashMap::new();
        // Per rule: true when it fails open without the author having said `on_missing allow`.
        let mut open_by_default: Vec<bool> = Vec::new();

        // Pass 2: stages, latches and rules in source order.
        for item in &ast.items {
            match item {
                Item::Stage(decl) => {
                    if let Some(first) = stage_spans.get(&decl.name.name) {
                        let first = *first;
                        self.duplicate_name("stage", &decl.name, first);
                        continue;
                    }
                    stage_spans.insert(decl.name.name.clone(), decl.name.span);
                    let mut set = ToolSet::with_capacity(n);
                    let mut seen: HashMap<&str, Span> = HashMap::new();
                    for t in &decl.tools {
                        if seen.insert(&t.name, t.span).is_some() {
                            self.warn(
                                t.span,
                                format!(
                                    "tool `{}` is listed twice in stage `{}`",
                                    t.name, decl.name.name
                                ),
                                "list each tool once",
                            );
                        }
                        match self.tool_index.get(&t.name) {
                            Some(id) => {
                                set.insert(*id);
                                staged[id.index()] = true;
                            }
                            None => {
                                self.unclassified_tool(t, &format!("stage `{}`", decl.name.name))
                            }
                        }
                    }
                    let name = &decl.name.name;
                    let whitelist_refusal: Arc<str> = match &decl.refusal {
                        Some(r) => r.node.as_str().into(),
                        None => refusal::stage_whitelist(name).into(),
                    };
                    let turns_refusal: Arc<str> = match (&decl.refusal, &decl.max_turns) {
                        (Some(r), _) => r.node.as_str().into(),
                        (None, Some(m)) => refusal::stage_turns(name, m.node).into(),
                        (None, None) => whitelist_refusal.clone(),
                    };
                    stage_index.insert(name.clone(), StageId(stages.len() as u32));
                    stages.push(StageInfo {
                        id: StageId(stages.len() as u32),
                        name: name.as_str().into(),
                        tools: set,
                        max_turns: decl.max_turns.as_ref().map(|m| m.node),
                        whitelist_refusal,
                        turns_refusal,
                    });
                }
                Item::Latch(decl) => {
                    if let Some(first) = latch_spans.get(&decl.name.name) {
                        let first = *first;
                        self.duplicate_name("latch", &decl.name, first);
                        continue;
                    }
                    latch_spans.insert(decl.name.name.clone(), decl.name.span);
                    if latches.len() == MAX_LATCHES {
                        self.error(
                            Diagnostic::error(
                                decl.name.span,
                                format!("a policy may declare at most {MAX_LATCHES} latches"),
                            )
                            .with_help("merge latches that block the same tools"),
                        );
                        continue;
                    }
                    let bit = 1u64 << latches.len();
                    if decl.set_by.is_empty() {
                        self.warn(decl.name.span, format!("latch `{}` has no `set_by`, so it is only ever set by the `latched` fact", decl.name.name), "add `set_by ingest` or name the tools that set it");
                    }
                    if decl.blocks.is_empty() {
                        self.warn(
                            decl.name.span,
                            format!("latch `{}` blocks nothing", decl.name.name),
                            "add `blocks write` or name the tools it blocks",
                        );
                    }
                    let what = format!("latch `{}`", decl.name.name);
                    for id in self.select(&decl.set_by, &what) {
                        tools[id.index()].sets |= bit;
                    }
                    for id in self.select(&decl.blocks, &what) {
                        tools[id.index()].blocked_by |= bit;
                    }
                    let refusal: Arc<str> = match &decl.refusal {
                        Some(r) => r.node.as_str().into(),
                        None => refusal::latch(&decl.name.name).into(),
                    };
                    latches.push(LatchInfo {
                        name: decl.name.name.as_str().into(),
                        refusal,
                    });
                }
                Item::Rule(decl) => {
                    if let Some(first) = rule_spans.get(&decl.name.name) {
                        let first = *first;
                        self.duplicate_name("rule", &decl.name, first);
                        continue;
                    }
                    rule_spans.insert(decl.name.name.clone(), decl.name.span);
                    if let Some(rule) = self.rule(decl) {
                        let id = RuleId(rules.len() as u32);
                        let what = format!("rule `{}`", decl.name.name);
                        for t in self.select(&decl.targets, &what) {
                            if !tool_rules[t.index()].contains(&id) {
                                tool_rules[t.index()].push(id);
                            }
                        }
                        open_by_default.push(rule.fail_open && decl.on_missing.is_none());
                        rules.push(rule);
                    }
                }
                Item::Detokenise(decl) => {
                    let Some(id) = self.tool_index.get(&decl.tool.name).copied() else {
                        self.unclassified_tool(&decl.tool, "`detokenise`");
                        continue;
                    };
                    if let Some(first) = detokenise_spans.insert(id, decl.tool.span) {
                        self.duplicate_name("`detokenise` for tool", &decl.tool, first);
                        continue;
                    }
                    let mut permits = Vec::new();
                    for p in &decl.paths {
                        if let Some(permit) = self.detokenise_path(p) {
                            permits.push(permit);
                        }
                    }
                    tools[id.index()].detokenise = permits.into_boxed_slice();
                }
                Item::SanitiseOutput(decl) => {
                    for t in self.select(&decl.targets, "`sanitise_output`") {
                        tools[t.index()].sanitise_output = true;
                    }
                }
                Item::Class(_) | Item::Hosts(_) | Item::Invariant(_) | Item::Use(_) => {}
            }
        }

        for (i, (name, _, span)) in self.tools.clone().iter().enumerate() {
            if !staged[i] {
                self.warn(
                    *span,
                    format!("tool `{name}` is classified but allowed in no stage"),
                    "add it to a stage's `tools [..]`, or remove it if the agent no longer has it",
                );
            }
        }
        self.check_fail_open_guards(&tool_rules, &rules, &open_by_default);
        for (t, r) in tools.iter_mut().zip(tool_rules) {
            t.rules = r.into_boxed_slice();
        }
        let mut slots = 0..crate::decide::MEMO_SLOTS as u8;
        for rule in rules
            .iter_mut()
            .filter(|r| !r.cond.reads_args() && !r.cond.tests_hosts())
        {
            rule.memo = slots.next();
        }
        Some(Parts {
            tool_index: self.tool_index.clone(),
            tools,
            stage_index,
            stages,
            latches,
            rules,
            host_lists: std::mem::take(&mut self.host_lists),
        })
    }

    fn duplicate_name(&mut self, what: &str, name: &ast::Ident, first: Span) {
        self.error(
            Diagnostic::error(
                name.span,
                format!("{what} `{}` is declared twice", name.name),
            )
            .with_label("declared again here")
            .with_note(first, "first declared here")
            .with_help(format!(
                "first declared at {}; merge the two or rename one (an imported module's names are declared where it is imported; import single items with `use stdlib::MODULE::NAME`)",
                self.source.location(first.start)
            )),
        );
    }

    /// Warns about an import whose latches or rules select a class the policy never uses.
    fn check_imports(&mut self, imported: &[Imported]) {
        for imp in imported {
            for class in &imp.classes {
                let any = self.tools.iter().any(|(_, c, _)| c.selected_by(*class));
                if !any {
                    let c = class.as_str();
                    self.warn(
                        imp.use_span,
                        format!("`{}` applies to `{c}` tools, but this policy classifies none", imp.shown),
                        format!("classify the tools it is meant to cover as `{c}`; until then it has no effect"),
                    );
                }
            }
        }
    }

    fn classify(&mut self, decl: &ast::ClassDecl) {
        for t in &decl.tools {
            if let Some(id) = self.tool_index.get(&t.name) {
                let (_, class, _) = &self.tools[id.index()];
                let class = *class;
                self.error(
                    Diagnostic::error(t.span, format!("tool `{}` is classified twice", t.name))
                        .with_label("classified again here")
                        .with_help(format!(
                            "it is already `{}`; every tool has exactly one class",
                            class.as_str()
                        )),
                );
                continue;
            }
            if t.name.is_empty() {
                self.error(Diagnostic::error(t.span, "tool name is empty"));
                continue;
            }
            self.tool_index
                .insert(t.name.clone(), ToolId(self.tools.len() as u32));
            self.tools.push((t.name.clone(), decl.class.node, t.span));
        }
    }

    fn host_list(&mut self, decl: &ast::HostsDecl) {
        if let Some(first) = self.host_spans.get(&decl.name.name).copied() {
            self.duplicate_name("host list", &decl.name, first);
            return;
        }
        self.host_spans
            .insert(decl.name.name.clone(), decl.name.span);
        if self.host_index.contains_key(&decl.name.name) {
            self.error(
                Diagnostic::error(
                    decl.name.span,
                    format!("host list `{}` is declared twice", decl.name.name),
                )
                .with_help("merge the two lists or rename one"),
            );
            return;
        }
        let mut schemes = Vec::new();
        for s in &decl.schemes {
            let lower = s.node.to_ascii_lowercase();
            let valid = lower.starts_with(|c: char| c.is_ascii_lowercase())
                && lower
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c));
            if !valid {
                self.error(
                    Diagnostic::error(s.span, format!("`{}` is not a URL scheme", s.node))
                        .with_help("write schemes bare, e.g. `schemes [https]`"),
                );
                continue;
            }
            self.check_scheme(&lower, s.span);
            schemes.push(lower);
        }
        if !decl.schemes_given {
            schemes.push("https".into());
        } else if decl.schemes.is_empty() {
            self.warn(
                decl.name.span,
                format!(
                    "host list `{}` accepts no scheme, so every URL is denied",
                    decl.name.name
                ),
                "add `schemes [https]`",
            );
        }
        let options = strict_url::Options {
            userinfo: decl.userinfo.as_ref().is_some_and(|o| o.node),
            idn: decl.idn.as_ref().is_some_and(|o| o.node),
        };
        let mut patterns = Vec::new();
        for e in &decl.entries {
            match parse_entry(&e.node) {
                Ok(p) if p.is_idn() && !options.idn => self.error(
                    Diagnostic::error(
                        e.span,
                        format!(
                            "host entry `{}` is an internationalised name, but list `{}` does not accept them",
                            e.node, decl.name.name
                        ),
                    )
                    .with_help("add `idn allow` to the list: URL readers map such names differently, so they are refused unless the list opts in"),
                ),
                Ok(p) => patterns.push(p),
                Err(why) => self.error(
                    Diagnostic::error(e.span, format!("bad host entry `{}`: {why}", e.node))
                        .with_help(
                        "write `example.com` for that host only, `.example.com` for its subdomains",
                    ),
                ),
            }
        }
        if decl.entries.is_empty() {
            self.warn(
                decl.name.span,
                format!(
                    "host list `{}` has no entries, so every URL is denied",
                    decl.name.name
                ),
                "add hosts with `allow [\"example.com\"]`",
            );
        }
        self.host_index.insert(
            decl.name.name.clone(),
            HostListId(self.host_lists.len() as u32),
        );
        self.host_lists
            .push(HostList::new(&decl.name.name, schemes, patterns, options));
    }

    /// Only `http` and `https` fetch from the host a list vouches for in the way every client
    /// agrees on; `file`, `data` and `javascript` URLs never do, so naming them is an error.
    fn check_scheme(&mut self, scheme: &str, span: Span) {
        let why = match scheme {
            "http" | "https" => return,
            "file" => "a `file` URL reads the executor's own disk, whatever host it names",
            "data" => "a `data` URL carries its content in the URL itself and names no host",
            "javascript" => "a `javascript` URL is code, and names no host",
            _ => {
                self.warn(
                    span,
                    format!("scheme `{scheme}` is not http or https: URL readers and the clients for it may treat its host differently"),
                    "accept only `http` and `https` unless the tool really fetches this scheme",
                );
                return;
            }
        };
        self.error(
            Diagnostic::error(
                span,
                format!("a host list cannot accept scheme `{scheme}`: {why}"),
            )
            .with_help("accept only `http` and `https`"),
        );
    }

    /// Resolves selectors to tool ids; a tool name that is never classified is an error.
    fn select(&mut self, selectors: &[Selector], what: &str) -> Vec<ToolId> {
        let mut out = Vec::new();
        for sel in selectors {
            match sel {
                Selector::Class(c) => {
                    out.extend(
                        self.tools
                            .iter()
                            .enumerate()
                            .filter(|(_, (_, class, _))| class.selected_by(c.node))
                            .map(|(i, _)| ToolId(i as u32)),
                    );
                }
                Selector::Tool(t) => match self.tool_index.get(&t.name) {
                    Some(id) => out.push(*id),
                    None => self.unclassified_tool(t, what),
                },
            }
        }
        out
    }

    fn rule(&mut self, decl: &ast::RuleDecl) -> Option<RuleInfo> {
        if decl.requires.is_empty() {
            self.error(
                Diagnostic::error(
                    decl.name.span,
                    format!("rule `{}` has no `require`", decl.name.name),
                )
                .with_help("add `require CONDITION`"),
            );
            return None;
        }
        if decl.targets.is_empty() {
            self.warn(
                decl.name.span,
                format!("rule `{}` applies to no tool", decl.name.name),
                "name its tools after `for`",
            );
        }
        for e in &decl.requires {
            self.check_always_true(e, &decl.name.name);
            self.check_patterns(e, true);
        }
        let mut cats = Categories::default();
        let mut conds = Vec::new();
        // Each requirement (a line's conjuncts) compiled once: together the rule's condition,
        // apart what lets a denial name the one that failed.
        let mut parts = Vec::new();
        self.in_untargeted_rule = decl.targets.is_empty();
        for e in &decl.requires {
            let cond = match &e.kind {
                ExprKind::And(ps) => {
                    let line: Vec<_> = ps.iter().map(|p| self.cond(p, &mut cats)).collect();
                    parts.extend(line.iter().cloned().zip(ps.iter()));
                    line.into_iter().collect::<Option<Vec<_>>>().map(Cond::all)
                }
                _ => {
                    let cond = self.cond(e, &mut cats);
                    parts.push((cond.clone(), e));
                    cond
                }
            };
            conds.push(cond);
        }
        self.in_untargeted_rule = false;
        let conds: Vec<Cond> = conds.into_iter().collect::<Option<_>>()?;
        let kind = cats.kind();
        let cond = Cond::all(conds);
        let fail_open = match &decl.on_missing {
            Some(m) => m.node == ast::OnMissing::Allow,
            None => kind == DenyKind::Precondition,
        };
        let mut custom = Vec::new();
        cond.collect_custom_facts(&mut custom);
        if let (Some(m), Some(first)) = (&decl.on_missing, custom.first()) {
            if m.node == ast::OnMissing::Allow {
                self.warn(
                    m.span,
                    format!(
                        "rule `{}` reads custom facts (`facts.{first}`) and fails open: a request that leaves them out is allowed",
                        decl.name.name
                    ),
                    "custom facts come only from the executor, and one that fails to send them should not open the tool; drop the line (rules that read facts fail closed by default)",
                );
            }
        }
        if fail_open && !cats.reads_facts() {
            if let Some(m) = &decl.on_missing {
                self.warn(
                    m.span,
                    format!(
                        "rule `{}` reads no facts, so `on_missing allow` never applies",
                        decl.name.name
                    ),
                    "a missing argument always denies; drop the line",
                );
            }
        }
        let hosts = refusal::HostLookup {
            index: &self.host_index,
            lists: &self.host_lists,
        };
        let refusal: Arc<str> = match &decl.refusal {
            Some(r) => r.node.as_str().into(),
            None => refusal::rule(&decl.name.name, kind, &decl.requires, &hosts).into(),
        };
        let requirement = refusal::requirement(&decl.requires, &hosts);
        let parts = match decl.refusal {
            None => refusal::parts(&decl.name.name, kind, parts, &hosts),
            Some(_) => Box::default(),
        };
        let url_refusals = if cond.tests_hosts() {
            let custom = decl.refusal.as_ref().map(|r| r.node.as_str());
            Ambiguity::ALL
                .iter()
                .map(|why| {
                    refusal::ambiguous_url(&decl.name.name, custom, &requirement, *why).into()
                })
                .collect()
        } else {
            Box::default()
        };
        Some(RuleInfo {
            name: decl.name.name.as_str().into(),
            kind,
            cond,
            fail_open,
            refusal,
            url_refusals,
            requirement: requirement.into(),
            parts,
            memo: None,
        })
    }

    fn cond(&mut self, e: &ast::Expr, cats: &mut Categories) -> Option<Cond> {
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

    fn path(&mut self, path: &ast::Path) -> Option<ValuePath> {
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
            other => Some(ValuePath {
                root: Root::Other(other.into()),
                segs: rest.into(),
            }),
        }
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
        Some((entry.lower)(&mut builtins::Lowered(args)))
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
                ParamKind::Count | ParamKind::Word | ParamKind::Tool => {
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

    fn word(&mut self, v: &Spanned<CallValue>, what: &str) -> Option<String> {
        match &v.node {
            CallValue::Name(s) | CallValue::String(s) if !s.is_empty() => Some(s.clone()),
            _ => {
                self.error(Diagnostic::error(v.span, format!("expected {what}")));
                None
            }
        }
    }
}

/// A hint for errors whose site gave none, so every diagnostic tells the author what to do.
fn fallback_help(message: &str) -> String {
    if message.contains("has no fields") {
        "`facts.stage` and `facts.stage_turns` are single values; compare them directly".into()
    } else if message.contains("given twice") {
        "give each parameter once".into()
    } else if message.contains("needs") {
        format!("the built-ins are {}", builtins::signatures())
    } else if message.contains("tool name is empty") {
        "write a tool name, quoted if it has unusual characters".into()
    } else {
        "see docs/language.md for this construct".into()
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
struct Categories {
    args: bool,
    host: bool,
    precondition: bool,
    facts: bool,
}

impl Categories {
    fn kind(&self) -> DenyKind {
        match (self.host, self.args, self.precondition, self.facts) {
            (true, false, false, false) => DenyKind::Host,
            (false, true, false, false) => DenyKind::Args,
            (false, false, true, false) => DenyKind::Precondition,
            (false, false, false, false) => DenyKind::Args,
            _ => DenyKind::Rule,
        }
    }

    fn reads_facts(&self) -> bool {
        self.precondition || self.facts
    }
}
