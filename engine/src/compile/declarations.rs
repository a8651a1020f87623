//! The policy compiler's passes over the declarations: classes and host lists first, then
//! stages, latches, rules and vault paths, then the checks that would silently unguard a tool.

use super::*;

impl Compiler {
    pub(super) fn policy(&mut self, ast: &ast::Policy) -> Option<Parts> {
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
                blocked_tainted: 0,
                latch_mask: 0,
                metadata: None,
                asked_by: 0,
                may_ask: false,
                detokenise: Box::new([]),
                // Third-party content can carry identifiers the vault never saw.
                sanitise_output: *class == ToolClass::Ingest,
                budgets: Box::new([]),
                shadow_rules: Box::new([]),
            })
            .collect();
        let mut tool_rules: Vec<Vec<RuleId>> = vec![Vec::new(); n];
        let mut tool_shadow: Vec<Vec<RuleId>> = vec![Vec::new(); n];
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
                    let require = self.stage_require(decl);
                    let hosts = refusal::HostLookup {
                        index: &self.host_index,
                        lists: &self.host_lists,
                    };
                    let requirement = refusal::requirement(&decl.requires, &hosts);
                    let require_refusal: Arc<str> = match &decl.refusal {
                        Some(r) => r.node.as_str().into(),
                        None => refusal::stage_require(name, &requirement).into(),
                    };
                    stage_index.insert(name.clone(), StageId(stages.len() as u32));
                    stages.push(StageInfo {
                        id: StageId(stages.len() as u32),
                        name: name.as_str().into(),
                        tools: set,
                        max_turns: decl.max_turns.as_ref().map(|m| m.node),
                        whitelist_refusal,
                        turns_refusal,
                        require,
                        require_refusal,
                        requirement: requirement.into(),
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
                    if decl.blocks.is_empty()
                        && decl.blocks_tainted.is_empty()
                        && decl.asks.is_empty()
                    {
                        self.warn(
                            decl.name.span,
                            format!("latch `{}` blocks nothing", decl.name.name),
                            "add `blocks write` or name the tools it blocks",
                        );
                    }
                    let what = format!("latch `{}`", decl.name.name);
                    let setters = self.select(&decl.set_by, &what);
                    for id in &setters {
                        tools[id.index()].sets |= bit;
                    }
                    for id in self.select(&decl.blocks, &what) {
                        tools[id.index()].blocked_by |= bit;
                    }
                    for id in self.select(&decl.blocks_tainted, &what) {
                        if tools[id.index()].blocked_by & bit != 0 {
                            let tool = tools[id.index()].name.clone();
                            self.error(
                                Diagnostic::error(
                                    decl.name.span,
                                    format!("latch `{}` both blocks and blocks tainted `{tool}`", decl.name.name),
                                )
                                .with_help("`blocks` denies every call while the latch is set, `blocks tainted` only calls carrying a value from untrusted output: keep one"),
                            );
                        }
                        tools[id.index()].blocked_tainted |= bit;
                    }
                    for id in &setters {
                        let info = &tools[id.index()];
                        if info.blocked_by & bit != 0 {
                            let tool = info.name.clone();
                            self.warn(
                                decl.name.span,
                                format!("latch `{}` blocks `{tool}`, which sets it, so `{tool}` can never run", decl.name.name),
                                "a batch's setters latch it before any call is judged: take the tool out of `blocks`, or use `blocks tainted`",
                            );
                        }
                    }
                    for id in self.select(&decl.asks, &what) {
                        if tools[id.index()].blocked_by & bit != 0 {
                            let tool = tools[id.index()].name.clone();
                            self.error(
                                Diagnostic::error(
                                    decl.name.span,
                                    format!("latch `{}` both blocks and asks for `{tool}`", decl.name.name),
                                )
                                .with_help("a latch either blocks a tool or asks a person before it runs: take it out of `blocks` or out of `asks`"),
                            );
                        }
                        tools[id.index()].asked_by |= bit;
                    }
                    let refusal: Arc<str> = match &decl.refusal {
                        Some(r) => r.node.as_str().into(),
                        None => refusal::latch(&decl.name.name).into(),
                    };
                    let tainted_refusal: Arc<str> = match &decl.refusal {
                        Some(r) => r.node.as_str().into(),
                        None => refusal::latch_tainted(&decl.name.name).into(),
                    };
                    latches.push(LatchInfo {
                        name: decl.name.name.as_str().into(),
                        refusal,
                        tainted_refusal,
                        ask_reason: refusal::latch_ask(&decl.name.name).into(),
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
                        // A shadow rule is judged only to report; it is on no tool's list of
                        // rules that decide.
                        let lists = if rule.shadow {
                            &mut tool_shadow
                        } else {
                            &mut tool_rules
                        };
                        for t in self.select(&decl.targets, &what) {
                            if !lists[t.index()].contains(&id) {
                                lists[t.index()].push(id);
                            }
                        }
                        open_by_default
                            .push(rule.fail_open && decl.on_missing.is_none() && !rule.shadow);
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
                Item::Provenance(decl) => {
                    let keys: Box<[Box<str>]> = decl
                        .metadata
                        .iter()
                        .map(|m| Box::from(m.node.as_str()))
                        .collect();
                    for t in self.select(&decl.targets, "`provenance`") {
                        let info = &mut tools[t.index()];
                        if info.class == ToolClass::Read {
                            let tool = info.name.clone();
                            self.warn(
                                decl.span,
                                format!("`provenance` for `{tool}` changes nothing: the output of a `read` tool is trusted whole"),
                                "metadata keys matter for `ingest` tools, whose outputs are untrusted",
                            );
                        }
                        let merged: Vec<Box<str>> = info
                            .metadata
                            .iter()
                            .flatten()
                            .chain(keys.iter())
                            .cloned()
                            .collect();
                        info.metadata = Some(merged.into_boxed_slice());
                    }
                }
                Item::SanitiseOutput(decl) => {
                    for t in self.select(&decl.targets, "`sanitise_output`") {
                        tools[t.index()].sanitise_output = true;
                    }
                }
                Item::Class(_)
                | Item::Hosts(_)
                | Item::Invariant(_)
                | Item::Use(_)
                | Item::Approvals(_)
                | Item::Budget(_) => {}
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
        for ((t, r), s) in tools.iter_mut().zip(tool_rules).zip(tool_shadow) {
            t.latch_mask = t.blocked_by | t.blocked_tainted;
            t.may_ask = t.asked_by != 0 || r.iter().any(|id| rules[id.index()].ask.is_some());
            t.rules = r.into_boxed_slice();
            t.shadow_rules = s.into_boxed_slice();
        }
        let mut slots = 0..crate::limits::MEMO_SLOTS as u8;
        for rule in rules
            .iter_mut()
            .filter(|r| !r.shadow && !r.cond.reads_args() && !r.cond.tests_hosts())
        {
            rule.memo = slots.next();
        }
        let approval_window = self.approval_window(ast);
        let budgets = self.budgets(ast, &mut tools);
        Some(Parts {
            approval_window,
            budgets,
            tool_index: self.tool_index.clone(),
            tools,
            stage_index,
            stages,
            latches,
            rules,
            host_lists: std::mem::take(&mut self.host_lists),
        })
    }

    pub(super) fn duplicate_name(&mut self, what: &str, name: &ast::Ident, first: Span) {
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
    pub(super) fn check_imports(&mut self, imported: &[Imported]) {
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

    pub(super) fn host_list(&mut self, decl: &ast::HostsDecl) {
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
    pub(super) fn select(&mut self, selectors: &[Selector], what: &str) -> Vec<ToolId> {
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

    /// A stage's `require`s compiled into one condition (`None` without any). They decide who
    /// may be in the stage, once per batch, so reading the call's arguments (or values from
    /// its provenance, or a URL argument's host) is an error: that is a rule's job.
    fn stage_require(&mut self, decl: &ast::StageDecl) -> Option<Cond> {
        let mut conds = Vec::new();
        for e in &decl.requires {
            self.check_always_true(e, &format!("stage `{}`", decl.name.name));
            self.check_patterns(e, true);
            let mut cats = Categories::default();
            let cond = self.cond(e, &mut cats)?;
            if cond.reads_args() || cond.reads_provenance() || cond.tests_hosts() {
                self.error(
                    Diagnostic::error(
                        e.span,
                        format!(
                            "stage `{}`'s `require` reads the call's arguments",
                            decl.name.name
                        ),
                    )
                    .with_help("a stage's `require` says who may be in the stage (`principal.…`, `facts.…`, built-ins); test arguments in a `rule` for the tools"),
                );
                return None;
            }
            conds.push(cond);
        }
        (!conds.is_empty()).then(|| Cond::all(conds))
    }

    fn rule(&mut self, decl: &ast::RuleDecl) -> Option<RuleInfo> {
        if let (Some(at), Some(ask)) = (decl.shadow, decl.asks.first()) {
            self.error(
                Diagnostic::error(ask.span, format!("shadow rule `{}` cannot ask", decl.name.name))
                    .with_note(at, "marked `shadow` here")
                    .with_help("a shadow rule only reports what it would deny; try the ask in a rule of its own, or drop `shadow`"),
            );
            return None;
        }
        if decl.requires.is_empty() && decl.asks.is_empty() {
            self.error(
                Diagnostic::error(
                    decl.name.span,
                    format!("rule `{}` has no `require`", decl.name.name),
                )
                .with_help("add `require CONDITION` (or `ask when CONDITION`)"),
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
            self.check_always_true(e, &format!("rule `{}`", decl.name.name));
            self.check_patterns(e, true);
        }
        // An `ask when` that holds less often lets more through without a person: the same
        // widening patterns warn.
        for e in &decl.asks {
            self.check_patterns(e, false);
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
        // Its own categories: an ask never denies, so it does not decide the rule's kind.
        let mut ask_cats = Categories::default();
        let asks: Option<Vec<Cond>> = decl
            .asks
            .iter()
            .map(|e| self.cond(e, &mut ask_cats))
            .collect();
        self.in_untargeted_rule = false;
        let conds: Vec<Cond> = conds.into_iter().collect::<Option<_>>()?;
        let ask = match asks? {
            v if v.is_empty() => None,
            mut v if v.len() == 1 => v.pop(),
            v => Some(Cond::Or(v.into_boxed_slice())),
        };
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
            reads_provenance: cond.reads_provenance(),
            cond,
            fail_open,
            refusal,
            url_refusals,
            requirement: requirement.into(),
            parts,
            memo: None,
            ask,
            ask_reason: refusal::rule_ask(&decl.name.name).into(),
            shadow: decl.shadow.is_some(),
        })
    }
}
