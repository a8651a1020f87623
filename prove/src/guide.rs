//! What the search is guided by: every literal, path, host, regex, window and name the policy
//! and its invariants mention, read from their syntax trees.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use toolgate_engine::unstable::builtins::{self, Guidance, ParamKind};
use toolgate_engine::{clamp_window, DEFAULT_WINDOW};
use toolgate_lang::ast::{
    self, CallValue, Expr, ExprKind, InvExpr, InvExprKind, Item, Literal, PathRoot, PathSegment,
    Predicate,
};

/// The values worth trying, gathered from a policy and its invariants.
#[derive(Debug, Default, Clone)]
pub struct Guide {
    /// `args.PATH` paths (as segment lists) with the values to try there.
    pub args: BTreeMap<Vec<Seg>, Vec<Value>>,
    /// Custom `facts.KEY...` paths with values to try.
    pub facts: BTreeMap<Vec<Seg>, Vec<Value>>,
    /// Field names read by `field_filled` or `facts.fields.NAME`.
    pub fields: Vec<String>,
    /// Message windows (`client_sent_media(within: N)`) and counts (`min_client_messages(N)`).
    pub windows: Vec<usize>,
    /// Media kinds named anywhere.
    pub kinds: Vec<String>,
    /// Tools named by `called_before` and `called_within`.
    pub called: Vec<String>,
    /// Turn bounds of `called_within`.
    pub turns: Vec<u64>,
    /// Regexes used with `matches` on each `args.` path, for matching strings and near misses.
    pub arg_regexes: BTreeMap<Vec<Seg>, Vec<String>>,
    /// Regexes used with `matches` on each custom `facts.` path.
    pub fact_regexes: BTreeMap<Vec<Seg>, Vec<String>>,
    /// `max_turns` per stage.
    pub max_turns: BTreeMap<String, u64>,
    /// Whether the policy or its invariants read where values came from (`from`,
    /// `mentions`, a latch's `blocks tainted`): then the search also plants the arguments'
    /// values in generated `facts.outputs` (untrusted) and `facts.prompt` (trusted).
    pub provenance: bool,
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Seg {
    /// `.key`
    Key(String),
    /// `[n]`
    Index(usize),
}

impl Guide {
    /// Reads a policy's and (optionally) a separate invariants file's syntax trees.
    pub fn new(policy: &ast::Policy, invariants: Option<&ast::InvariantsFile>) -> Self {
        let mut g = Guide::default();
        let mut hosts: Vec<String> = Vec::new();
        let items = policy
            .items
            .iter()
            .chain(invariants.iter().flat_map(|f| f.items.iter()));
        let items: Vec<&Item> = items.collect();
        for item in &items {
            if let Item::Hosts(h) = item {
                hosts.extend(h.entries.iter().map(|e| e.node.clone()));
            }
            if let Item::Stage(s) = item {
                if let Some(m) = &s.max_turns {
                    g.max_turns.insert(s.name.name.clone(), m.node);
                }
            }
            if let Item::Latch(l) = item {
                g.provenance |= !l.blocks_tainted.is_empty();
            }
        }
        let urls = url_candidates(&hosts);
        for item in &items {
            match item {
                Item::Rule(r) => r
                    .requires
                    .iter()
                    .chain(&r.asks)
                    .for_each(|e| g.expr(e, &urls)),
                Item::Stage(s) => s.requires.iter().for_each(|e| g.expr(e, &urls)),
                Item::Invariant(i) => {
                    for c in [&i.when, &i.unless].into_iter().flatten() {
                        g.inv_expr(c, &urls);
                    }
                }
                _ => {}
            }
        }
        for v in g.args.values_mut().chain(g.facts.values_mut()) {
            dedup(v);
        }
        g.fields.sort();
        g.fields.dedup();
        g.windows.sort_unstable();
        g.windows.dedup();
        g.kinds.sort();
        g.kinds.dedup();
        g.called.sort();
        g.called.dedup();
        g.turns.sort_unstable();
        g.turns.dedup();
        g
    }

    fn inv_expr(&mut self, e: &InvExpr, urls: &[Value]) {
        match &e.kind {
            InvExprKind::And(p) | InvExprKind::Or(p) => {
                p.iter().for_each(|x| self.inv_expr(x, urls))
            }
            InvExprKind::Not(x) => self.inv_expr(x, urls),
            InvExprKind::Cond(c) => self.expr(c, urls),
            _ => {}
        }
    }

    fn expr(&mut self, e: &Expr, urls: &[Value]) {
        match &e.kind {
            ExprKind::Bool(_) => {}
            ExprKind::And(p) | ExprKind::Or(p) => p.iter().for_each(|x| self.expr(x, urls)),
            ExprKind::Not(x) => self.expr(x, urls),
            ExprKind::Call(call) => self.builtin(call),
            ExprKind::Predicate(path, pred) => {
                let segs: Vec<Seg> = path
                    .segments
                    .iter()
                    .map(|s| match s {
                        PathSegment::Key(k) => Seg::Key(k.clone()),
                        PathSegment::Index(i) => Seg::Index(*i),
                    })
                    .collect();
                self.provenance |= matches!(pred, Predicate::From(_) | Predicate::Mentions(_));
                let values = candidates(pred, urls);
                let regex = match pred {
                    Predicate::Matches(re) => Some(re.node.clone()),
                    _ => None,
                };
                match path.root {
                    PathRoot::Args => {
                        if let Some(re) = regex {
                            self.arg_regexes.entry(segs.clone()).or_default().push(re);
                        }
                        self.args.entry(segs).or_default().extend(values)
                    }
                    PathRoot::Facts => match segs.first() {
                        Some(Seg::Key(k)) if k == "fields" => {
                            if let Some(Seg::Key(f)) = segs.get(1) {
                                self.fields.push(f.clone());
                            }
                        }
                        Some(Seg::Key(k)) if k == "stage" || k == "stage_turns" => {}
                        Some(_) => {
                            if let Some(re) = regex {
                                self.fact_regexes.entry(segs.clone()).or_default().push(re);
                            }
                            self.facts.entry(segs).or_default().extend(values)
                        }
                        None => {}
                    },
                    // Searched as the fact it reads: `facts.principal.…`.
                    PathRoot::Principal => {
                        let mut in_facts =
                            vec![Seg::Key(toolgate_engine::schema::PRINCIPAL.into())];
                        in_facts.extend(segs);
                        if let Some(re) = regex {
                            self.fact_regexes
                                .entry(in_facts.clone())
                                .or_default()
                                .push(re);
                        }
                        self.facts.entry(in_facts).or_default().extend(values)
                    }
                }
            }
        }
    }

    /// What a built-in call tells the search, by its registry entry's [`Guidance`] per
    /// parameter.
    fn builtin(&mut self, call: &ast::Call) {
        let words = |v: &CallValue, out: &mut Vec<String>| match v {
            CallValue::Name(s) | CallValue::String(s) => out.push(s.clone()),
            CallValue::List(items) => {
                for i in items {
                    if let CallValue::Name(s) | CallValue::String(s) = &i.node {
                        out.push(s.clone());
                    }
                }
            }
            CallValue::Number(_) => {}
        };
        let number = |v: &CallValue| match v {
            CallValue::Number(n) if *n >= 0.0 && *n < 1000.0 => Some(*n as usize),
            _ => None,
        };
        let Some(entry) = builtins::find(&call.name.name) else {
            return;
        };
        for (param, given) in entry.params.iter().zip(entry.written(call)) {
            match param.guides {
                Guidance::Window => {
                    let default = (param.kind == ParamKind::Window).then_some(DEFAULT_WINDOW);
                    let window = match given.and_then(number) {
                        Some(n) => Some(n),
                        None => default,
                    };
                    if let Some(n) = window {
                        self.windows.push(clamp_window(n as u64));
                    }
                }
                Guidance::MediaKinds => given.into_iter().for_each(|v| words(v, &mut self.kinds)),
                Guidance::Field => given.into_iter().for_each(|v| words(v, &mut self.fields)),
                Guidance::Tool => given.into_iter().for_each(|v| words(v, &mut self.called)),
                Guidance::Turns => self.turns.extend(given.and_then(number).map(|n| n as u64)),
            }
        }
    }
}

fn dedup(v: &mut Vec<Value>) {
    let mut seen = std::collections::HashSet::new();
    v.retain(|x| seen.insert(x.to_string()));
}

/// Values at, around and beside what a predicate tests for.
fn candidates(pred: &Predicate, urls: &[Value]) -> Vec<Value> {
    let mut out = vec![
        json!(null),
        json!(""),
        json!(0),
        json!(true),
        json!([]),
        json!({}),
    ];
    match pred {
        Predicate::Compare(_, lit) => out.extend(literal_neighbours(&lit.node)),
        Predicate::InList(items) => {
            for l in items {
                out.extend(literal_neighbours(&l.node));
            }
        }
        Predicate::Matches(re) => {
            out.push(json!(re.node.clone()));
            out.extend(regex_seeds(&re.node).into_iter().map(Value::from));
        }
        Predicate::InHosts(_) => out.extend(urls.iter().cloned()),
        Predicate::Is(_) | Predicate::Exists => {
            out.extend([json!("x"), json!(1), json!(1.5), json!(false)]);
        }
        // A value, a list of values and text with a destination inside: what `from` and
        // `mentions` look for in outputs and the prompt.
        Predicate::InFact(_) | Predicate::From(_) | Predicate::Mentions(_) => out.extend([
            json!("x@example.com"),
            json!(["x@example.com"]),
            json!("see https://example.com/x"),
        ]),
    }
    out
}

fn literal_neighbours(l: &Literal) -> Vec<Value> {
    match l {
        Literal::Number(n) => {
            let n = *n;
            let mut v: Vec<Value> = [n - 1.0, n - 0.5, n, n + 0.5, n + 1.0, -n]
                .iter()
                .map(|x| number(*x))
                .collect();
            v.push(json!(n.to_string()));
            v
        }
        Literal::String(s) => vec![
            json!(s),
            json!(format!("{s}x")),
            json!(format!(" {s}")),
            json!(s.to_uppercase()),
        ],
        Literal::Bool(b) => vec![json!(b), json!(!b), json!(b.to_string())],
        Literal::Null => vec![json!(null), json!("null")],
    }
}

/// Strings built from the literal text of a regex (`@ourcompany` in `^[a-z]+@ourcompany\\.com$`)
/// in each case variant, alone, glued together and with a character around them: the values
/// a random string almost never hits, where a pattern's edges (and case-sensitivity bugs) are.
pub fn regex_seeds(pattern: &str) -> Vec<String> {
    let Ok(hir) = regex_syntax::Parser::new().parse(pattern) else {
        return Vec::new();
    };
    let mut runs = Vec::new();
    let mut current = String::new();
    literal_runs(&hir, &mut current, &mut runs);
    flush(&mut current, &mut runs);
    if runs.len() > 1 {
        runs.push(runs.concat());
        runs.push(runs[..runs.len() - 1].join("a"));
    }
    let mut out = Vec::new();
    for run in &runs {
        // The first letter upper case, the rest lower (`@Ourcompany.com`).
        let mut capitalised = run.to_lowercase();
        if let Some((i, c)) = capitalised.char_indices().find(|(_, c)| c.is_alphabetic()) {
            capitalised.replace_range(i..i + c.len_utf8(), &c.to_uppercase().to_string());
        }
        for v in [
            run.clone(),
            run.to_uppercase(),
            run.to_lowercase(),
            capitalised,
        ] {
            out.push(format!("a{v}"));
            out.push(format!("{v}a"));
            out.push(v);
        }
    }
    out.sort();
    out.dedup();
    out
}

fn flush(current: &mut String, runs: &mut Vec<String>) {
    if !current.is_empty() {
        runs.push(std::mem::take(current));
    }
}

/// Appends each maximal run of literal characters in `hir` to `runs`.
fn literal_runs(hir: &regex_syntax::hir::Hir, current: &mut String, runs: &mut Vec<String>) {
    use regex_syntax::hir::HirKind;
    match hir.kind() {
        HirKind::Literal(l) => current.push_str(&String::from_utf8_lossy(&l.0)),
        HirKind::Concat(parts) => parts.iter().for_each(|p| literal_runs(p, current, runs)),
        HirKind::Capture(c) => literal_runs(&c.sub, current, runs),
        HirKind::Alternation(alts) => {
            flush(current, runs);
            for a in alts {
                literal_runs(a, current, runs);
                flush(current, runs);
            }
        }
        HirKind::Repetition(r) => {
            flush(current, runs);
            literal_runs(&r.sub, current, runs);
            flush(current, runs);
        }
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Class(_) => flush(current, runs),
    }
}

/// A JSON number, integral when it can be.
fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// URLs on and around each allowlist entry: the entry itself, a subdomain, and adversarial
/// neighbours (glue before and after, userinfo, ports, case, extra dots, other schemes, IPs).
pub fn url_candidates(entries: &[String]) -> Vec<Value> {
    let mut out: Vec<String> = vec![
        "https://127.0.0.1/".into(),
        "https://0x7f.1/".into(),
        "https://2130706433/".into(),
        "https://[::1]/".into(),
        "https://evil.example/".into(),
        "not a url".into(),
        String::new(),
    ];
    for e in entries {
        let h = e.trim_start_matches('.').trim_end_matches('.');
        if h.is_empty() {
            continue;
        }
        out.extend([
            format!("https://{h}/"),
            format!("https://{h}/docs/page?q=1"),
            format!("https://sub.{h}/"),
            format!("https://a.b.{h}/"),
            format!("http://{h}/"),
            format!("ftp://{h}/"),
            format!("HTTPS://{}/", h.to_uppercase()),
            format!("https://{h}./"),
            format!("https://{h}:8443/"),
            format!("https://{h}:443/"),
            format!("https://{h}.evil.example/"),
            format!("https://evil{h}/"),
            format!("https://evil-{h}/"),
            format!("https://{h}evil.example/"),
            format!("https://user@{h}/"),
            format!("https://{h}@evil.example/"),
            format!("https://{h}%2eevil.example/"),
            format!("https://evil.example/{h}"),
            format!("https://evil.example/?u=https://{h}/"),
            format!("https://{h}..evil.example/"),
            format!("//{h}/"),
            h.to_string(),
        ]);
    }
    out.into_iter().map(Value::from).collect()
}
