//! The change gate checked against a brute-force oracle (issue 21, "How it is checked").
//!
//! `toolgate diff` (and with it `test --against` and the server's reload gate) may let a
//! change through without an operator only when it does not widen the policy. This file
//! checks that promise from outside the prover:
//!
//! - **Pairs.** OLD and NEW policies are made from the shipped examples
//!   (`stdlib-rules/examples/*.gate`) and a few small policies written here, by random edits of
//!   the source found through the syntax tree's spans ([`toolgate_lang::ast`]): numbers
//!   (bounds, `max_turns`, `within:`, `turns:`, `min_client_messages`), host entries and the
//!   `userinfo`/`idn`/`schemes` lines, built-in parameters (`kinds`, the tool of
//!   `called_before`/`called_within`), regexes (anchors, `(?m)`/`(?i)`, character classes,
//!   repeats, alternations), comparison operators and literals, `on_missing`, and rule
//!   structure (a `require` dropped, `and`/`or` swapped, `not` added or removed, a rule or latch
//!   deleted), classes, stage tool lists, latch and rule selectors and `use` lines (exact in
//!   the gate today; checked all the same), plus a layout-only edit (a comment inside `in hosts
//!   NAME`) that must change nothing. One to three edits per pair; an edit that does not
//!   compile is skipped; half the pairs are swapped, so a narrowing edit is tried as a widening
//!   too.
//! - **The oracle** ([`oracle`]) judges requests with nothing but [`Policy::check_request`]
//!   and [`Policy::decide`] (a refused request counts as denied, as for a client) and looks for
//!   one that NEW allows and OLD denies. Its domain, built from both policies' syntax trees:
//!   - every tool either policy classifies, plus one neither does;
//!   - every stage either declares (also with `stage_turns` at each `max_turns` of either, one
//!     below and one above), one neither declares, and none; the latch fact false, true, and
//!     each latch both declare set alone by name (a map naming a latch only one declares is
//!     refused by the other, a change of the request's shape left out, as the gate does); the
//!     call alone, or after one call of each tool that sets a latch in either policy (the
//!     latch pre-scan is the only way one call of a batch changes another's decision);
//!   - where NEW's rules run, arguments at every path a rule of that tool reads in either
//!     policy: absent; each number constant -1, -0.5, +0, +0.5, +1, the midpoints between
//!     constants, and a numeric string; the string and list literals as written, upper and
//!     lower case, with a prefix or suffix, and `""`; strings built from each regex's syntax
//!     tree (a few it matches, choosing from each class a letter or digit, a line break, a
//!     Unicode digit or letter and the Kelvin sign where the class holds them; each with a
//!     prefix, a suffix, a second line before or after, in upper and lower case, one character
//!     short, and a character changed at either end); URLs on and off each host list of either
//!     policy (each entry's host and a subdomain, an IDN and a punycode label below it, the
//!     host as a label of an unrelated domain, under `https`, `http`, `ftp`, `wss` and every
//!     scheme named, with and without userinfo, and an unrelated host); and, for paths tested
//!     with `is`, `exists` or `null` or with no constant, a value of every JSON type;
//!   - facts for the built-ins the tool's rules call: `messages` absent, empty, and lists of
//!     client messages around each count and window (media of each kind named, and one not
//!     named, at ages 1, 2, N-1, N, N+1, 50, 51, also padded to each count and followed by a
//!     non-client message with media); `called` absent, empty, and entries for each tool named
//!     (and one not) with `ok` true or false and `turns_ago` absent, 0, 1 and N-2..N+1 around
//!     each `turns:`, alone or all together; `fields` absent, empty, and each field named
//!     filled, blank, zero-width, `0`, `false`, `null`, a list, or any value above; custom
//!     facts (`facts.KEY`) like arguments.
//!
//!   The oracle judges the stage, class and latch part with empty arguments first: a denial of
//!   kind `unclassified`, `stage` or `latch` reads no argument or fact, so where NEW denies so
//!   nothing is searched, and where OLD does, any case NEW allows is a widening. Where the
//!   product of the per-path values exceeds a budget ([`PAIR_BUDGET`] in the property test;
//!   [`EXACT_BUDGET`] for the named cases, whose domains it enumerates whole) the oracle samples
//!   it with a seeded generator, drawing each value most of the time from those that satisfy
//!   the conjuncts of NEW's rules that read that path alone (each conjunct compiled on its own,
//!   [`good_values`]), then sweeps every value of every dimension around the first cases NEW
//!   allows, so one requirement edited among five is found. What it finds is real (a request
//!   both policies judged); what it misses is outside its bounds, so it refutes the gate's "no
//!   widening" but never proves it.
//! - **The property** ([`gate_never_says_no_widening_where_the_oracle_finds_one`]): whenever
//!   the oracle finds a newly allowed request, [`gate_says_no_widening`] is false (the gate,
//!   `diff` with the configuration `toolgate diff` uses, is asked only for those pairs). A
//!   failure lists every pair it missed by its edits, and prints the first five in full: both
//!   policy texts, the edits and the oracle's request as JSON.
//! - **The completeness figure** ([`completeness_table`], ignored; run with `--ignored
//!   --nocapture`): over the same pairs, how often the gate holds a change the oracle finds no
//!   widening in.
//! - **Named cases** for each symptom of the issue: each asserts that the oracle finds the
//!   widening (so the case is a real one) and that the gate does not say "no widening".
//!
//! `TOOLGATE_GATE_PAIRS` sets the number of pairs (default [`DEFAULT_PAIRS`]);
//! `TOOLGATE_GATE_SEED` the seed; `TOOLGATE_GATE_PAIR=N` runs pair `#N` alone (the number a
//! failure names); `TOOLGATE_GATE_SHOW_QUIET` makes the table list the pairs where neither
//! found a widening (to read for widenings outside the oracle's bounds).
//!
//! **Cost** (debug build, measured 2026-12-01 on the shared 2-core machine): the property's
//! 2000 pairs take about 100 s of CPU, so about 50 s on two idle cores (104 to 157 s of wall
//! time while other builds ran). Most of it is `diff` (45 ms a pair on average; 240 ms for
//! `coding_agent`, which is why that base has half the weight), then making the pairs (15 ms,
//! mostly compiling) and the oracle (6 ms). The table asks the gate for every pair, about a
//! third more. On today's gate, of 2000 pairs the oracle finds a widening in about 1500 and the
//! gate says "no widening" for about 400 to 460 of them; every widening the gate reports, the
//! oracle finds too (the table's "gate only" is 0).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use regex_syntax::hir::{Class, Hir, HirKind};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;
use toolgate_engine::{Call, CalledTool, DenyKind, Facts, Latched, Message, Policy, Request};
use toolgate_lang::ast::{
    CallValue, Expr, ExprKind, Item, Literal, Path, PathRoot, PathSegment, Predicate, RuleDecl,
};
use toolgate_prove::{diff, Config, PolicyDiff};
use toolgate_tests::example_path;

/// The one place that says what "the gate let the change through" means.
fn gate_says_no_widening(d: &PolicyDiff) -> bool {
    d.widenings.is_empty() && d.undecided.is_empty() && d.data_widenings.is_empty()
}

/// The configuration `toolgate diff` runs with (the struct update keeps this compiling when the
/// prover's configuration gains fields).
#[allow(clippy::needless_update)]
fn gate_config() -> Config {
    Config {
        cases: toolgate_prove::diff::DEFAULT_DIFF_CASES,
        seed: toolgate_prove::invariants::DEFAULT_SEED,
        ..Config::default()
    }
}

/// Pairs the property test runs when `TOOLGATE_GATE_PAIRS` is not set.
const DEFAULT_PAIRS: usize = 2000;
/// Argument-and-fact cases the oracle tries per tool and situation group in the property test.
const PAIR_BUDGET: usize = 1500;
/// The budget of the named cases: large enough that their domains are enumerated whole.
const EXACT_BUDGET: usize = 2_000_000;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

// ---------------------------------------------------------------------------------------------
// A small seeded generator (splitmix64): the same seed gives the same pairs on any machine.

#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next() % den < num
    }
}

// ---------------------------------------------------------------------------------------------
// The oracle.

/// A request NEW allows and OLD denies (its call 0 is the changed call).
#[derive(Debug, Clone)]
struct Witness {
    request: Request,
}

impl Witness {
    fn json(&self) -> String {
        self.request.to_value().to_string()
    }
}

/// Whether `policy` allows call 0 of `request`: a refused request counts as denied.
fn allows(policy: &Policy, request: &Request) -> bool {
    policy.check_request(request).is_ok() && policy.decide(request).decisions[0].allow
}

/// What a policy made of call 0 before its rules could matter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Refused, or denied by class, stage or latch: no argument or fact changes that.
    Denied,
    /// Allowed, or denied by a rule: arguments and facts may decide.
    Rules,
}

fn reach(policy: &Policy, request: &Request) -> Reach {
    if policy.check_request(request).is_err() {
        return Reach::Denied;
    }
    let d = &policy.decide(request).decisions[0];
    match d.kind {
        _ if d.allow => Reach::Rules,
        Some(DenyKind::Unclassified | DenyKind::Stage | DenyKind::Latch) => Reach::Denied,
        _ => Reach::Rules,
    }
}

/// One step of a path (ordered, unlike the syntax tree's).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Seg {
    Key(String),
    Index(usize),
}

/// A path below `args` (true) or `facts` (false), as keys and indexes.
type PathKey = (bool, Vec<Seg>);

fn segs(path: &Path) -> Vec<Seg> {
    path.segments
        .iter()
        .map(|s| match s {
            PathSegment::Key(k) => Seg::Key(k.clone()),
            PathSegment::Index(i) => Seg::Index(*i),
        })
        .collect()
}

/// What the rules of one tool (in either policy) test at one path.
#[derive(Default, Debug)]
struct PathUse {
    numbers: Vec<f64>,
    strings: BTreeSet<String>,
    regexes: BTreeSet<String>,
    hosts: bool,
    typed: bool,
    bools: bool,
}

/// What the rules of one tool read.
#[derive(Default, Debug)]
struct Needs {
    paths: BTreeMap<PathKey, PathUse>,
    messages: bool,
    windows: BTreeSet<u64>,
    kinds: BTreeSet<String>,
    counts: BTreeSet<u64>,
    called: bool,
    called_tools: BTreeSet<String>,
    turns: BTreeSet<u64>,
    fields: BTreeMap<String, PathUse>,
    reads_stage: bool,
}

fn rule_decls(policy: &Policy) -> BTreeMap<String, RuleDecl> {
    policy
        .syntax()
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Rule(r) => Some((r.name.name.clone(), r.clone())),
            _ => None,
        })
        .collect()
}

fn call_value_name(v: &CallValue) -> Option<String> {
    match v {
        CallValue::Name(s) | CallValue::String(s) => Some(s.clone()),
        _ => None,
    }
}

fn note_expr(e: &Expr, needs: &mut Needs) {
    match &e.kind {
        ExprKind::Bool(_) => {}
        ExprKind::And(xs) | ExprKind::Or(xs) => xs.iter().for_each(|x| note_expr(x, needs)),
        ExprKind::Not(x) => note_expr(x, needs),
        ExprKind::Call(c) => {
            let positional = |i: usize, label: &str| {
                c.args
                    .iter()
                    .find(|a| a.label.as_ref().is_some_and(|l| l.name == label))
                    .or_else(|| c.args.iter().filter(|a| a.label.is_none()).nth(i))
                    .map(|a| a.value.node.clone())
            };
            match c.name.name.as_str() {
                "client_sent_media" => {
                    needs.messages = true;
                    let w = match positional(0, "within") {
                        Some(CallValue::Number(n)) => n as u64,
                        _ => 10,
                    };
                    needs.windows.insert(w);
                    if let Some(CallValue::List(ks)) = positional(1, "kinds") {
                        for k in ks {
                            if let Some(k) = call_value_name(&k.node) {
                                needs.kinds.insert(k);
                            }
                        }
                    }
                }
                "min_client_messages" => {
                    needs.messages = true;
                    if let Some(CallValue::Number(n)) = positional(0, "count") {
                        needs.counts.insert(n as u64);
                    }
                }
                "called_before" | "called_within" => {
                    needs.called = true;
                    if let Some(t) = positional(0, "tool").as_ref().and_then(call_value_name) {
                        needs.called_tools.insert(t);
                    }
                    if let Some(CallValue::Number(n)) = positional(1, "turns") {
                        needs.turns.insert(n as u64);
                    }
                }
                "field_filled" => {
                    if let Some(f) = positional(0, "name").as_ref().and_then(call_value_name) {
                        needs.fields.entry(f).or_default();
                    }
                }
                _ => {}
            }
        }
        ExprKind::Predicate(path, pred) => {
            let Some(slot) = path_slot(path, needs) else {
                return;
            };
            match pred {
                Predicate::Compare(_, lit) => note_literal(&lit.node, slot),
                Predicate::InList(lits) => lits.iter().for_each(|l| note_literal(&l.node, slot)),
                Predicate::InHosts(_) => slot.hosts = true,
                Predicate::Matches(re) => {
                    slot.regexes.insert(re.node.clone());
                }
                Predicate::Is(_) | Predicate::Exists => slot.typed = true,
                Predicate::InFact(_) | Predicate::From(_) | Predicate::Mentions(_) => {
                    slot.typed = true
                }
            }
        }
    }
}

fn note_literal(l: &Literal, slot: &mut PathUse) {
    match l {
        Literal::Number(n) => slot.numbers.push(*n),
        Literal::String(s) => {
            slot.strings.insert(s.clone());
        }
        Literal::Bool(_) => slot.bools = true,
        Literal::Null => slot.typed = true,
    }
}

/// Where a path's values go: an argument path, a field, or a custom fact.
fn path_slot<'a>(path: &Path, needs: &'a mut Needs) -> Option<&'a mut PathUse> {
    match path.root {
        PathRoot::Args => Some(needs.paths.entry((true, segs(path))).or_default()),
        PathRoot::Facts => match path.segments.first() {
            Some(PathSegment::Key(k)) if k == "stage" || k == "stage_turns" => {
                needs.reads_stage = true;
                None
            }
            Some(PathSegment::Key(k)) if k == "fields" => match path.segments.get(1) {
                Some(PathSegment::Key(f)) if path.segments.len() == 2 => {
                    Some(needs.fields.entry(f.clone()).or_default())
                }
                // A path below a field: its whole value is a custom value of the field.
                Some(PathSegment::Key(f)) => Some(needs.fields.entry(f.clone()).or_default()),
                _ => None,
            },
            Some(_) => Some(needs.paths.entry((false, segs(path))).or_default()),
            None => None,
        },
        // `principal.X` is the fact `facts.principal.X`.
        PathRoot::Principal => {
            let mut in_facts = vec![Seg::Key("principal".into())];
            in_facts.extend(segs(path));
            Some(needs.paths.entry((false, in_facts)).or_default())
        }
    }
}

/// The URLs every path tested with `in hosts` gets: on and off each list of either policy.
fn urls_of(policies: &[&Policy]) -> Vec<String> {
    let mut schemes: BTreeSet<String> = ["https", "http", "ftp", "wss"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut hosts: BTreeSet<String> = BTreeSet::new();
    for p in policies {
        for item in &p.syntax().items {
            if let Item::Hosts(h) = item {
                for s in &h.schemes {
                    schemes.insert(s.node.to_lowercase());
                }
                for e in &h.entries {
                    let bare = e.node.trim_start_matches('.').to_string();
                    if bare.starts_with('[') || bare.parse::<std::net::Ipv4Addr>().is_ok() {
                        hosts.insert(bare);
                        continue;
                    }
                    hosts.insert(format!("a.{bare}"));
                    hosts.insert(format!("b\u{fc}cher.{bare}"));
                    hosts.insert(format!("xn--bcher-kva.{bare}"));
                    hosts.insert(format!("{bare}.evil.example"));
                    hosts.insert(bare);
                }
            }
        }
    }
    hosts.insert("evil.example".into());
    hosts.insert("b\u{fc}cher.de".into());
    // Most telling first (a path's values are capped): every host under https, then http,
    // then with userinfo, then under the other schemes.
    let mut out: Vec<String> = Vec::new();
    let mut add = |u: String| {
        if !out.contains(&u) {
            out.push(u);
        }
    };
    for h in &hosts {
        add(format!("https://{h}/x"));
    }
    for h in &hosts {
        add(format!("http://{h}/x"));
    }
    for h in &hosts {
        add(format!("https://user@{h}/"));
        add(format!("https://user:pw@{h}/"));
        add(format!("http://user@{h}/"));
    }
    for s in &schemes {
        for h in &hosts {
            add(format!("{s}://{h}/x"));
        }
    }
    out
}

fn numbers_around(ns: &[f64]) -> Vec<f64> {
    let mut sorted: Vec<f64> = ns.iter().copied().filter(|n| n.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    let mut out = Vec::new();
    for n in &sorted {
        for d in [-1.0, -0.5, 0.0, 0.5, 1.0] {
            out.push(n + d);
        }
    }
    for w in sorted.windows(2) {
        out.push((w[0] + w[1]) / 2.0);
    }
    out.sort_by(f64::total_cmp);
    out.dedup();
    out
}

fn number_value(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        json!(n as i64)
    } else {
        json!(n)
    }
}

/// Strings built from a regex's syntax tree: some it matches, each with near misses.
fn regex_strings(pattern: &str) -> Vec<String> {
    let Ok(hir) = regex_syntax::parse(pattern) else {
        return vec!["x".into()];
    };
    let mut base = hir_strings(&hir);
    base.truncate(8);
    let mut out = BTreeSet::new();
    for s in base {
        let mut chars: Vec<char> = s.chars().collect();
        out.insert(s.clone());
        out.insert(format!("x{s}"));
        out.insert(format!("{s}x"));
        out.insert(format!("x\n{s}"));
        out.insert(format!("{s}\nx"));
        out.insert(s.to_uppercase());
        out.insert(s.to_lowercase());
        if chars.pop().is_some() {
            out.insert(chars.iter().collect());
            out.insert(format!("{}!", chars.iter().collect::<String>()));
            out.insert(format!("!{}", s.chars().skip(1).collect::<String>()));
        }
    }
    out.insert(String::new());
    out.into_iter().collect()
}

const CAP: usize = 6;

fn hir_strings(h: &Hir) -> Vec<String> {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => vec![String::new()],
        HirKind::Literal(l) => vec![String::from_utf8_lossy(&l.0).into_owned()],
        HirKind::Class(c) => {
            let mut out = Vec::new();
            let contains = |ch: char| match c {
                Class::Unicode(u) => u.ranges().iter().any(|r| r.start() <= ch && ch <= r.end()),
                Class::Bytes(b) => b
                    .ranges()
                    .iter()
                    .any(|r| (r.start() as char) <= ch && ch <= (r.end() as char)),
            };
            if let Some(ch) = ['a', '0', 'A', 'x', '-', ' ', '.']
                .into_iter()
                .find(|c| contains(*c))
            {
                out.push(ch.to_string());
            }
            // A line break (where `(?s)`, `\s` or a negated class lets one in); a Unicode
            // digit, letter and Kelvin sign (where `\d`, `\w` or `(?i)` read Unicode) in a
            // class narrower than "anything".
            if contains('\n') {
                out.push("\n".into());
            }
            for ch in ['\u{663}', '\u{e9}', '\u{212a}'] {
                if contains(ch) && !contains('\u{0}') {
                    out.push(ch.to_string());
                }
            }
            let (first, last) = match c {
                Class::Unicode(u) => (
                    u.ranges().first().map(|r| r.start()),
                    u.ranges().last().map(|r| r.end()),
                ),
                Class::Bytes(b) => (
                    b.ranges().first().map(|r| r.start() as char),
                    b.ranges().last().map(|r| r.end() as char),
                ),
            };
            for ch in [first, last].into_iter().flatten() {
                if (' '..='~').contains(&ch) || !ch.is_ascii() && ch != char::MAX {
                    out.push(ch.to_string());
                }
            }
            let mut seen = BTreeSet::new();
            out.retain(|c| seen.insert(c.clone()));
            out.truncate(3);
            if out.is_empty() {
                out.push(first.map(String::from).unwrap_or_default());
            }
            out
        }
        HirKind::Repetition(r) => {
            let subs = hir_strings(&r.sub);
            let min = r.min.min(12) as usize;
            let mut out = Vec::new();
            for s in subs.iter().take(2) {
                out.push(s.repeat(min));
                let more = r.max.is_none_or(|m| m > r.min);
                if more {
                    out.push(s.repeat(min + 1));
                }
            }
            out.truncate(CAP);
            out
        }
        HirKind::Capture(c) => hir_strings(&c.sub),
        HirKind::Concat(xs) => {
            let mut acc = vec![String::new()];
            for x in xs {
                let next = hir_strings(x);
                let mut prod = Vec::new();
                for a in &acc {
                    for b in &next {
                        prod.push(format!("{a}{b}"));
                    }
                }
                // Keep the first of each choice and a spread of the rest.
                prod.dedup();
                if prod.len() > CAP {
                    let step = prod.len() / CAP;
                    prod = prod.into_iter().step_by(step.max(1)).take(CAP).collect();
                }
                acc = prod;
            }
            acc
        }
        HirKind::Alternation(xs) => {
            let mut out = Vec::new();
            for x in xs {
                out.extend(hir_strings(x).into_iter().take(2));
            }
            out.truncate(CAP * 2);
            out
        }
    }
}

/// The candidate values of one path (`None`: absent).
fn path_values(u: &PathUse, urls: &[String]) -> Vec<Option<Value>> {
    let mut out: Vec<Option<Value>> = vec![None];
    let mut push = |v: Value| {
        let v = Some(v);
        if !out.contains(&v) {
            out.push(v);
        }
    };
    for n in numbers_around(&u.numbers) {
        push(number_value(n));
    }
    for s in &u.strings {
        push(json!(s));
        push(json!(s.to_uppercase()));
        push(json!(s.to_lowercase()));
        push(json!(format!("{s}x")));
        push(json!(format!("x{s}")));
        push(json!(""));
    }
    for re in &u.regexes {
        for s in regex_strings(re) {
            push(json!(s));
        }
    }
    if u.hosts {
        for url in urls {
            push(json!(url));
        }
    }
    if u.bools {
        push(json!(true));
        push(json!(false));
    }
    if u.typed || u.numbers.is_empty() && u.strings.is_empty() && u.regexes.is_empty() {
        for v in [json!(null), json!("s"), json!(1), json!(1.5), json!(true)] {
            push(v);
        }
        push(json!([]));
        push(json!({}));
    }
    if !u.numbers.is_empty() {
        push(json!("1"));
    }
    out
}

fn field_values(u: &PathUse) -> Vec<Option<Value>> {
    let mut out = path_values(u, &[]);
    for v in [
        json!("x"),
        json!(""),
        json!(" "),
        json!("\u{200b}"),
        json!(0),
        json!(false),
        json!(null),
        json!(["x"]),
    ] {
        if !out.contains(&Some(v.clone())) {
            out.push(Some(v));
        }
    }
    out
}

fn client(media: &[&str]) -> Message {
    Message::new("client", media)
}

/// The `messages` lists of the domain.
fn message_lists(n: &Needs) -> Vec<Option<Vec<Message>>> {
    let mut out: Vec<Option<Vec<Message>>> = vec![None, Some(vec![])];
    let mut kinds: Vec<String> = n.kinds.iter().cloned().collect();
    kinds.push("sticker".into());
    let mut ages: BTreeSet<u64> = [1, 2, 50, 51].into_iter().collect();
    for w in &n.windows {
        for d in [-1i64, 0, 1] {
            let a = *w as i64 + d;
            if a >= 1 {
                ages.insert(a as u64);
            }
        }
    }
    let mut counts: BTreeSet<u64> = [0, 1, 2, 3].into_iter().collect();
    for c in &n.counts {
        for d in [-1i64, 0, 1] {
            let a = *c as i64 + d;
            if a >= 0 {
                counts.insert(a as u64);
            }
        }
    }
    // Plain client messages, by count.
    for c in &counts {
        out.push(Some((0..*c).map(|_| client(&[])).collect()));
    }
    // One media message `age` client messages back (1: the newest), of each kind.
    for &age in &ages {
        for (i, k) in kinds.iter().enumerate() {
            let mut ms: Vec<Message> = (0..age).map(|_| client(&[])).collect();
            ms[0] = client(&[k.as_str()]);
            out.push(Some(ms.clone()));
            if i == 0 {
                // The same, after an assistant message with media (skipped, not counted), and
                // padded to each count.
                let mut with = ms.clone();
                with.push(Message::new("assistant", &[k.as_str()]));
                out.push(Some(with));
                for &c in &counts {
                    if c > age {
                        let mut padded: Vec<Message> =
                            (0..(c - age)).map(|_| client(&[])).collect();
                        padded.extend(ms.iter().cloned());
                        out.push(Some(padded));
                    }
                }
            }
        }
    }
    out
}

/// The `called` lists of the domain.
fn called_lists(n: &Needs, tools: &[String]) -> Vec<Option<Vec<CalledTool>>> {
    let mut out: Vec<Option<Vec<CalledTool>>> = vec![None, Some(vec![])];
    let mut names: Vec<String> = n.called_tools.iter().cloned().collect();
    if let Some(other) = tools.iter().find(|t| !n.called_tools.contains(*t)) {
        names.push(other.clone());
    }
    let mut ages: BTreeSet<Option<u64>> = [None, Some(0), Some(1)].into_iter().collect();
    for t in &n.turns {
        for d in [-2i64, -1, 0, 1] {
            let a = *t as i64 + d;
            if a >= 0 {
                ages.insert(Some(a as u64));
            }
        }
    }
    let entry = |tool: &str, ok: bool, turns_ago: Option<u64>| CalledTool {
        tool: tool.to_string(),
        ok,
        turns_ago,
    };
    for name in &names {
        for &a in &ages {
            out.push(Some(vec![entry(name, true, a)]));
        }
        out.push(Some(vec![entry(name, false, Some(0))]));
    }
    for &a in &ages {
        out.push(Some(names.iter().map(|t| entry(t, true, a)).collect()));
    }
    out
}

/// One dimension of the argument-and-fact domain.
enum Dim {
    Arg(PathKey, Vec<Option<Value>>),
    Field(String, Vec<Option<Value>>),
    FieldsMap,
    Messages(Vec<Option<Vec<Message>>>),
    Called(Vec<Option<Vec<CalledTool>>>),
}

impl Dim {
    fn len(&self) -> usize {
        match self {
            Dim::Arg(_, v) | Dim::Field(_, v) => v.len(),
            Dim::FieldsMap => 2,
            Dim::Messages(v) => v.len(),
            Dim::Called(v) => v.len(),
        }
    }
}

fn set_path(root: &mut Value, segs: &[Seg], v: Value) {
    let Some((first, rest)) = segs.split_first() else {
        *root = v;
        return;
    };
    match first {
        Seg::Key(k) => {
            if !root.is_object() {
                *root = Value::Object(Map::new());
            }
            let obj = root.as_object_mut().unwrap();
            let slot = obj.entry(k.clone()).or_insert(Value::Null);
            if rest.is_empty() {
                *slot = v;
            } else {
                set_path(slot, rest, v);
            }
        }
        Seg::Index(i) => {
            if !root.is_array() {
                *root = Value::Array(vec![]);
            }
            let arr = root.as_array_mut().unwrap();
            while arr.len() <= *i {
                arr.push(Value::Null);
            }
            set_path(&mut arr[*i], rest, v);
        }
    }
}

/// Fills a request's call 0 and facts with the case `pick` (one index per dimension).
fn fill(base: &Request, dims: &[Dim], pick: &[usize]) -> Request {
    let mut r = base.clone();
    let mut args = Value::Object(Map::new());
    let mut other = Value::Object(r.facts.other.clone());
    let mut fields = Map::new();
    let mut fields_present = false;
    for (d, &i) in dims.iter().zip(pick) {
        match d {
            Dim::Arg((is_args, segs), vs) => {
                if let Some(v) = &vs[i] {
                    if *is_args {
                        set_path(&mut args, segs, v.clone());
                    } else {
                        set_path(&mut other, segs, v.clone());
                    }
                }
            }
            Dim::Field(name, vs) => {
                if let Some(v) = &vs[i] {
                    fields.insert(name.clone(), v.clone());
                }
            }
            Dim::FieldsMap => fields_present = i == 1,
            Dim::Messages(v) => r.facts.messages = v[i].clone(),
            Dim::Called(v) => r.facts.called = v[i].clone(),
        }
    }
    if fields_present || !fields.is_empty() {
        r.facts.fields = Some(fields);
    }
    if let Value::Object(mut o) = other {
        r.facts.principal = o.remove("principal");
        r.facts.other = o;
    }
    r.calls[0].args = args;
    r
}

fn needs_of(tool: &str, policies: &[&Policy], decls: &[BTreeMap<String, RuleDecl>]) -> Needs {
    let mut needs = Needs::default();
    for (p, d) in policies.iter().zip(decls) {
        for rule in p.rules_for(tool) {
            if let Some(r) = d.get(rule) {
                for e in &r.requires {
                    note_expr(e, &mut needs);
                }
            }
        }
    }
    needs
}

fn dims_of(needs: &Needs, urls: &[String], tools: &[String]) -> Vec<Dim> {
    let mut dims = Vec::new();
    for (k, u) in &needs.paths {
        let mut vs = path_values(u, urls);
        vs.truncate(400);
        dims.push(Dim::Arg(k.clone(), vs));
    }
    if !needs.fields.is_empty() {
        dims.push(Dim::FieldsMap);
        for (f, u) in &needs.fields {
            dims.push(Dim::Field(f.clone(), field_values(u)));
        }
    }
    if needs.messages {
        dims.push(Dim::Messages(message_lists(needs)));
    }
    if needs.called {
        dims.push(Dim::Called(called_lists(needs, tools)));
    }
    dims
}

/// Searches the bounded domain for a request NEW allows and OLD denies.
fn oracle(old: &Policy, new: &Policy, budget: usize, seed: u64) -> Option<Witness> {
    let mut classified: BTreeSet<String> = old.tools().map(|(t, _)| t.to_string()).collect();
    classified.extend(new.tools().map(|(t, _)| t.to_string()));
    let tool_names: Vec<String> = classified.iter().cloned().collect();
    let mut tools = tool_names.clone();
    let mut stranger = "tool_neither_classifies".to_string();
    while classified.contains(&stranger) {
        stranger.push('_');
    }
    tools.push(stranger);

    // Stages.
    let declared: BTreeSet<String> = old.stages().chain(new.stages()).map(String::from).collect();
    let mut stages: Vec<(Option<String>, Option<u64>)> = vec![(None, None)];
    let mut undefined = "stage_neither_declares".to_string();
    while declared.contains(&undefined) {
        undefined.push('_');
    }
    stages.push((Some(undefined), None));
    for s in &declared {
        stages.push((Some(s.clone()), None));
        for p in [old, new] {
            for item in &p.syntax().items {
                if let Item::Stage(st) = item {
                    if &st.name.name == s {
                        if let Some(m) = &st.max_turns {
                            for t in [m.node.saturating_sub(1), m.node, m.node + 1] {
                                if !stages.contains(&(Some(s.clone()), Some(t))) {
                                    stages.push((Some(s.clone()), Some(t)));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    // Latch states.
    // By name, only the latches both declare: a `latched` map naming a latch one policy does
    // not declare is refused by it as malformed, so adding a latch "allows" every request that
    // names it. That is a change of the request's shape, not of a decision, and the gate leaves
    // it out on purpose; the oracle does too.
    let old_latches: BTreeSet<&str> = old.latches().collect();
    let latches: BTreeSet<String> = new
        .latches()
        .filter(|l| old_latches.contains(l))
        .map(String::from)
        .collect();
    let mut latch_states = vec![Latched::Flag(false), Latched::Flag(true)];
    for l in &latches {
        latch_states.push(Latched::ByName(BTreeMap::from([(
            Arc::<str>::from(l.as_str()),
            true,
        )])));
    }
    // Companions: every tool that sets a latch in either policy.
    let mut companions: Vec<Option<String>> = vec![None];
    for t in &tool_names {
        if old.latches_set_by(t).next().is_some() || new.latches_set_by(t).next().is_some() {
            companions.push(Some(t.clone()));
        }
    }

    let urls = urls_of(&[old, new]);
    let decls = [rule_decls(old), rule_decls(new)];
    let mut rng = Rng(seed);
    for tool in &tools {
        // Situation groups where NEW's rules run: by (stage, turns) when a rule reads them, and
        // whether OLD's rules run too.
        let needs = needs_of(tool, &[old, new], &decls);
        let mut groups: BTreeMap<(Option<String>, Option<u64>, bool), Request> = BTreeMap::new();
        for (stage, turns) in &stages {
            for latched in &latch_states {
                for companion in &companions {
                    let mut calls = vec![Call::new("c1", tool.as_str(), json!({}))];
                    if let Some(c) = companion {
                        calls.push(Call::new("c2", c.as_str(), json!({})));
                    }
                    let facts = Facts {
                        stage: stage.clone(),
                        stage_turns: *turns,
                        latched: latched.clone(),
                        ..Facts::default()
                    };
                    let request = Request::new(facts, calls);
                    if reach(new, &request) == Reach::Denied {
                        continue;
                    }
                    let old_rules = reach(old, &request) == Reach::Rules;
                    let key = if needs.reads_stage {
                        (stage.clone(), *turns, old_rules)
                    } else {
                        (None, None, old_rules)
                    };
                    groups.entry(key).or_insert(request);
                }
            }
        }
        if groups.is_empty() {
            continue;
        }
        let dims = dims_of(&needs, &urls, &tool_names);
        let total = dims
            .iter()
            .try_fold(1usize, |acc, d| acc.checked_mul(d.len().max(1)));
        let good = if total.is_some_and(|t| t <= budget) {
            vec![]
        } else {
            good_values(new, tool, &decls[1], &dims)
        };
        for base in groups.values() {
            if let Some(w) = search(old, new, base, &dims, &good, budget, &mut rng) {
                return Some(w);
            }
        }
    }
    None
}

/// The dimensions a condition reads.
fn dims_read(n: &Needs, dims: &[Dim]) -> BTreeSet<usize> {
    dims.iter()
        .enumerate()
        .filter(|(_, d)| match d {
            Dim::Arg(k, _) => n.paths.contains_key(k),
            Dim::Field(f, _) => n.fields.contains_key(f),
            Dim::FieldsMap => false,
            Dim::Messages(_) => n.messages,
            Dim::Called(_) => n.called,
        })
        .map(|(i, _)| i)
        .collect()
}

fn quoted(name: &str) -> String {
    format!("{name:?}")
}

/// For each dimension, the values that make true every conjunct of a `require` of NEW's rules
/// for `tool` that reads that dimension alone (empty: no such conjunct, or none compiles
/// alone). Each such conjunct is compiled into a one-rule policy of its own (NEW's classes and
/// host lists, `on_missing deny`) and judged on each value of its dimension with the others
/// absent. The sample draws from these values most of the time, so a case that meets every
/// requirement (which a uniform sample of five or more dimensions rarely hits) is found, and
/// the sweep around it changes one requirement at a time.
fn good_values(
    new: &Policy,
    tool: &str,
    decls: &BTreeMap<String, RuleDecl>,
    dims: &[Dim],
) -> Vec<Vec<usize>> {
    let text = new.source().text();
    let slice = |sp: toolgate_lang::Span| text.get(sp.start..sp.end).unwrap_or("");
    let mut head = String::from("module probe\n");
    for (t, c) in new.tools() {
        let _ = writeln!(head, "{} {}", c.as_str(), quoted(t));
    }
    let _ = writeln!(head, "stage probe_stage {{ tools [{}] }}", quoted(tool));
    for item in &new.syntax().items {
        if let Item::Hosts(h) = item {
            let _ = writeln!(head, "{}", slice(h.span));
        }
    }
    let mut good: Vec<Option<BTreeSet<usize>>> = vec![None; dims.len()];
    let base = Request::new(
        Facts::in_stage("probe_stage"),
        vec![Call::new("c1", tool, json!({}))],
    );
    for rule in new.rules_for(tool) {
        let Some(r) = decls.get(rule) else { continue };
        // Each conjunct of each line: all must be true for the rule to pass.
        let mut conjuncts: Vec<&Expr> = Vec::new();
        let mut todo: Vec<&Expr> = r.requires.iter().collect();
        while let Some(e) = todo.pop() {
            match &e.kind {
                ExprKind::And(xs) => todo.extend(xs.iter()),
                _ => conjuncts.push(e),
            }
        }
        for e in conjuncts {
            let mut n = Needs::default();
            note_expr(e, &mut n);
            let read = dims_read(&n, dims);
            let [i] = read.iter().copied().collect::<Vec<_>>()[..] else {
                continue;
            };
            let probe_text = format!(
                "{head}rule probe for {} {{\n  require {}\n  on_missing deny\n}}\n",
                quoted(tool),
                slice(e.span)
            );
            let Some(probe) = compiles(&probe_text) else {
                continue;
            };
            let mut pick = vec![0usize; dims.len()];
            let ok: BTreeSet<usize> = (0..dims[i].len())
                .filter(|&v| {
                    pick[i] = v;
                    allows(&probe, &fill(&base, dims, &pick))
                })
                .collect();
            good[i] = Some(match good[i].take() {
                Some(prev) => prev.intersection(&ok).copied().collect(),
                None => ok,
            });
        }
    }
    good.into_iter()
        .map(|g| g.map(|g| g.into_iter().collect()).unwrap_or_default())
        .collect()
}

/// Tries the cases of `dims` on `base`: all of them within `budget`, else a seeded sample
/// (drawing each dimension from its `good` values three times in four) and a sweep of every
/// single-dimension change around the first cases NEW allows.
fn search(
    old: &Policy,
    new: &Policy,
    base: &Request,
    dims: &[Dim],
    good: &[Vec<usize>],
    budget: usize,
    rng: &mut Rng,
) -> Option<Witness> {
    let hit = |pick: &[usize]| -> (bool, Option<Witness>) {
        let r = fill(base, dims, pick);
        if !allows(new, &r) {
            return (false, None);
        }
        if allows(old, &r) {
            return (true, None);
        }
        (true, Some(Witness { request: r }))
    };
    let total = dims
        .iter()
        .try_fold(1usize, |acc, d| acc.checked_mul(d.len().max(1)));
    match total {
        Some(total) if total <= budget => {
            let mut pick = vec![0usize; dims.len()];
            for _ in 0..total {
                if let (_, Some(w)) = hit(&pick) {
                    return Some(w);
                }
                for (i, d) in dims.iter().enumerate() {
                    pick[i] += 1;
                    if pick[i] < d.len() {
                        break;
                    }
                    pick[i] = 0;
                }
            }
            None
        }
        _ => {
            let mut seeds: Vec<Vec<usize>> = Vec::new();
            let mut pick = vec![0usize; dims.len()];
            for n in 0..budget {
                if n > 0 {
                    for (i, d) in dims.iter().enumerate() {
                        pick[i] = match good.get(i) {
                            Some(g) if !g.is_empty() && rng.chance(3, 4) => g[rng.below(g.len())],
                            _ => rng.below(d.len()),
                        };
                    }
                }
                let (new_allows, w) = hit(&pick);
                if w.is_some() {
                    return w;
                }
                if new_allows && seeds.len() < 4 {
                    seeds.push(pick.clone());
                }
            }
            for s in seeds {
                for (i, d) in dims.iter().enumerate() {
                    for v in 0..d.len() {
                        let mut p = s.clone();
                        p[i] = v;
                        if let (_, Some(w)) = hit(&p) {
                            return Some(w);
                        }
                    }
                }
            }
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The generator of policy pairs: random edits of the source, found through the syntax tree.

/// One edit of a source text: replace `start..end` with `with`.
#[derive(Debug, Clone)]
struct Edit {
    start: usize,
    end: usize,
    with: String,
    what: String,
}

impl Edit {
    fn apply(&self, text: &str) -> String {
        format!("{}{}{}", &text[..self.start], self.with, &text[self.end..])
    }
}

fn number_text(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

fn number_edits(out: &mut Vec<Edit>, span: toolgate_lang::Span, n: f64, text: &str, what: &str) {
    let mut cands = vec![
        n + 1.0,
        n - 1.0,
        n * 2.0,
        (n / 2.0).floor(),
        0.0,
        1.0,
        n + 10.0,
        50.0,
    ];
    cands.retain(|c| *c != n);
    cands.dedup();
    for c in cands {
        let with = number_text(c);
        out.push(Edit {
            start: span.start,
            end: span.end,
            what: format!("{what}: `{}` -> `{with}`", &text[span.start..span.end]),
            with,
        });
    }
}

fn replace(out: &mut Vec<Edit>, text: &str, span: toolgate_lang::Span, with: String, what: &str) {
    out.push(Edit {
        start: span.start,
        end: span.end,
        what: format!(
            "{what}: `{}` -> `{}`",
            text[span.start..span.end].replace('\n', "\\n"),
            with.replace('\n', "\\n")
        ),
        with,
    });
}

fn insert(out: &mut Vec<Edit>, at: usize, with: String, what: &str) {
    out.push(Edit {
        start: at,
        end: at,
        what: format!("{what}: insert `{}`", with.replace('\n', "\\n")),
        with,
    });
}

/// The inner text of a string literal written at `span` (`"..."` or `r"..."`): its range.
fn string_inner(text: &str, span: toolgate_lang::Span) -> Option<(usize, usize)> {
    let lit = text.get(span.start..span.end)?;
    let open = if lit.starts_with("r\"") {
        2
    } else if lit.starts_with('"') {
        1
    } else {
        return None;
    };
    if lit.len() < open + 1 || !lit.ends_with('"') {
        return None;
    }
    Some((span.start + open, span.end - 1))
}

fn regex_edits(out: &mut Vec<Edit>, text: &str, span: toolgate_lang::Span) {
    let Some((s, e)) = string_inner(text, span) else {
        return;
    };
    let inner = &text[s..e];
    let raw = text[span.start..].starts_with('r');
    let mut put = |start: usize, end: usize, with: &str, what: &str| {
        out.push(Edit {
            start,
            end,
            with: with.to_string(),
            what: format!("regex `{inner}`: {what}"),
        });
    };
    put(s, s, "(?m)", "add (?m)");
    put(s, s, "(?i)", "add (?i)");
    put(s, s, "(?s)", "add (?s)");
    if inner.starts_with('^') {
        put(s, s + 1, "", "drop ^");
    } else {
        put(s, s, "^", "add ^");
    }
    if inner.ends_with('$') && !inner.ends_with("\\$") {
        put(e - 1, e, "", "drop $");
    } else {
        put(e, e, "$", "add $");
    }
    put(e, e, "|zz", "add an alternative");
    put(s, e, ".*", "replace by .*");
    put(s, e, "@", "replace by @");
    for (from, to) in [
        ("[0-9]", "[0-9a-z]"),
        ("[0-9]", "[0-8]"),
        ("[0-9]", if raw { "\\d" } else { "\\\\d" }),
        ("[.]", "."),
        ("\\.", "."),
        ("+", "*"),
        ("{6}", "{5,6}"),
        ("{6}", "{6,}"),
        ("[a-z]", "[a-zA-Z]"),
        ("--", "-"),
        ("|", "|x|"),
    ] {
        if let Some(i) = inner.find(from) {
            put(
                s + i,
                s + i + from.len(),
                to,
                &format!("`{from}` -> `{to}`"),
            );
        }
    }
    if let Some(i) = inner.find('|') {
        put(s, s + i + 1, "", "drop the first alternative");
    }
    // Drop a literal run at the start (after ^): a shorter prefix.
    let lead = usize::from(inner.starts_with('^'));
    if inner.len() > lead + 2 && inner.is_char_boundary(lead + 1) {
        put(s + lead, s + lead + 1, "", "drop the first atom");
    }
}

fn expr_edits(out: &mut Vec<Edit>, text: &str, e: &Expr, tools: &[String], lists: &[String]) {
    let t = |sp: toolgate_lang::Span| text[sp.start..sp.end].to_string();
    // Negate any condition, and remove a `not`.
    replace(out, text, e.span, format!("not ({})", t(e.span)), "add not");
    match &e.kind {
        ExprKind::Bool(b) => replace(out, text, e.span, (!b).to_string(), "flip literal"),
        ExprKind::And(xs) | ExprKind::Or(xs) => {
            let (from, to) = if matches!(e.kind, ExprKind::And(_)) {
                ("and", "or")
            } else {
                ("or", "and")
            };
            for w in xs.windows(2) {
                let gap = &text[w[0].span.end..w[1].span.start];
                if let Some(i) = gap.find(from) {
                    let at = w[0].span.end + i;
                    out.push(Edit {
                        start: at,
                        end: at + from.len(),
                        with: to.into(),
                        what: format!("`{from}` -> `{to}` after `{}`", t(w[0].span)),
                    });
                }
            }
            for (i, x) in xs.iter().enumerate() {
                // Drop one operand.
                let (start, end) = if i + 1 < xs.len() {
                    (x.span.start, xs[i + 1].span.start)
                } else {
                    (xs[i - 1].span.end, x.span.end)
                };
                out.push(Edit {
                    start,
                    end,
                    with: if i + 1 < xs.len() {
                        String::new()
                    } else {
                        " ".into()
                    },
                    what: format!("drop operand `{}`", t(x.span)),
                });
                expr_edits(out, text, x, tools, lists);
            }
        }
        ExprKind::Not(x) => {
            replace(out, text, e.span, format!("({})", t(x.span)), "remove not");
            expr_edits(out, text, x, tools, lists);
        }
        ExprKind::Call(c) => {
            for (i, a) in c.args.iter().enumerate() {
                match &a.value.node {
                    CallValue::Number(n) => {
                        number_edits(out, a.value.span, *n, text, &format!("{}()", c.name.name))
                    }
                    CallValue::Name(_) | CallValue::String(_)
                        if i == 0 && c.name.name == "field_filled" =>
                    {
                        for f in ["phone", "email"] {
                            replace(out, text, a.value.span, f.into(), "field_filled() field");
                        }
                    }
                    CallValue::Name(_) | CallValue::String(_) if i == 0 => {
                        for tool in tools {
                            replace(
                                out,
                                text,
                                a.value.span,
                                tool.clone(),
                                &format!("{}() tool", c.name.name),
                            );
                        }
                    }
                    CallValue::List(ks) => {
                        if let Some(last) = ks.last() {
                            insert(out, last.span.end, ", video".into(), "kinds");
                            replace(out, text, last.span, "video".into(), "kinds");
                        }
                        if ks.len() > 1 {
                            out.push(Edit {
                                start: ks[0].span.start,
                                end: ks[1].span.start,
                                with: String::new(),
                                what: format!("drop kind `{}`", t(ks[0].span)),
                            });
                        }
                        if i > 0 {
                            out.push(Edit {
                                start: c.args[i - 1].value.span.end,
                                end: a.value.span.end,
                                with: String::new(),
                                what: "drop kinds".into(),
                            });
                        }
                    }
                    _ => {}
                }
            }
        }
        ExprKind::Predicate(path, pred) => {
            replace(out, text, path.span, format!("{}x", t(path.span)), "path");
            match pred {
                Predicate::Compare(_, lit) => {
                    let gap = toolgate_lang::Span::new(path.span.end, lit.span.start);
                    for op in ["<", "<=", "==", "!=", ">=", ">"] {
                        replace(out, text, gap, format!(" {op} "), "operator");
                    }
                    literal_edits(out, text, lit.span, &lit.node);
                }
                Predicate::InList(lits) => {
                    if let Some(last) = lits.last() {
                        insert(out, last.span.end, ", \"USD\"".into(), "list");
                        insert(out, last.span.end, ", 7".into(), "list");
                        literal_edits(out, text, last.span, &last.node);
                    }
                    if lits.len() > 1 {
                        out.push(Edit {
                            start: lits[0].span.start,
                            end: lits[1].span.start,
                            with: String::new(),
                            what: format!("drop `{}` from the list", t(lits[0].span)),
                        });
                    }
                }
                Predicate::InHosts(name) => {
                    for l in lists {
                        if *l != name.name {
                            replace(out, text, name.span, l.clone(), "host list");
                        }
                    }
                }
                Predicate::Matches(re) => regex_edits(out, text, re.span),
                Predicate::Is(ty) => {
                    for other in ["string", "number", "integer", "bool", "null"] {
                        if other != ty.node.as_str() {
                            replace(out, text, ty.span, other.into(), "type");
                        }
                    }
                }
                Predicate::Exists => {}
                Predicate::InFact(_) => {}
                Predicate::From(source) | Predicate::Mentions(source) => {
                    let other = match source.node {
                        toolgate_lang::ast::Source::Ingest => "prompt",
                        toolgate_lang::ast::Source::Prompt => "ingest",
                    };
                    replace(out, text, source.span, other.into(), "source");
                }
            }
        }
    }
}

fn literal_edits(out: &mut Vec<Edit>, text: &str, span: toolgate_lang::Span, lit: &Literal) {
    match lit {
        Literal::Number(n) => number_edits(out, span, *n, text, "bound"),
        Literal::String(s) => {
            for with in [
                format!("{:?}", s.to_uppercase()),
                format!("{:?}", format!("{s}x")),
                "\"\"".to_string(),
            ] {
                replace(out, text, span, with, "string");
            }
        }
        Literal::Bool(b) => replace(out, text, span, (!b).to_string(), "bool"),
        Literal::Null => replace(out, text, span, "\"\"".into(), "null"),
    }
}

/// A selector replaced by each class and by a few of the policy's tools.
fn selector_edits(
    out: &mut Vec<Edit>,
    text: &str,
    span: toolgate_lang::Span,
    tools: &[String],
    what: &str,
) {
    for with in ["write", "egress", "ingest", "read"]
        .into_iter()
        .chain(tools.iter().take(4).map(String::as_str))
    {
        if text.get(span.start..span.end) != Some(with) {
            replace(out, text, span, with.to_string(), what);
        }
    }
}

/// Every semantic edit the generator may make to `text`.
fn edits_of(text: &str) -> Vec<Edit> {
    let Ok(ast) = toolgate_lang::parse(text) else {
        return vec![];
    };
    let mut tools = Vec::new();
    let mut lists = Vec::new();
    for item in &ast.items {
        match item {
            Item::Class(c) => tools.extend(c.tools.iter().map(|t| t.name.clone())),
            Item::Hosts(h) => lists.push(h.name.name.clone()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for item in &ast.items {
        match item {
            Item::Class(c) => {
                for k in ["write", "ingest", "read", "egress"] {
                    if k != c.class.node.as_str() {
                        replace(&mut out, text, c.class.span, k.into(), "class");
                    }
                }
            }
            Item::Stage(s) => {
                if let Some(m) = &s.max_turns {
                    number_edits(&mut out, m.span, m.node as f64, text, "max_turns");
                }
                match s.tools.last() {
                    Some(last) => {
                        for t in tools
                            .iter()
                            .filter(|t| !s.tools.iter().any(|x| &x.name == *t))
                        {
                            insert(&mut out, last.span.end, format!(", {t}"), "stage tools");
                        }
                        for (i, t) in s.tools.iter().enumerate() {
                            if i + 1 < s.tools.len() {
                                out.push(Edit {
                                    start: t.span.start,
                                    end: s.tools[i + 1].span.start,
                                    with: String::new(),
                                    what: format!("drop `{}` from stage `{}`", t.name, s.name.name),
                                });
                            }
                        }
                    }
                    None => {
                        if let (Some(t), Some(at)) = (
                            tools.first(),
                            text[s.span.start..s.span.end]
                                .find('{')
                                .map(|i| s.span.start + i + 1),
                        ) {
                            insert(&mut out, at, format!(" tools [{t}] "), "stage tools");
                        }
                    }
                }
            }
            Item::Latch(l) => {
                out.push(Edit {
                    start: l.span.start,
                    end: l.span.end,
                    with: String::new(),
                    what: format!("delete latch `{}`", l.name.name),
                });
                for sel in l.set_by.iter().chain(&l.blocks) {
                    selector_edits(&mut out, text, sel.span(), &tools, "latch selector");
                }
            }
            Item::Use(u) => out.push(Edit {
                start: u.span.start,
                end: u.span.end,
                with: String::new(),
                what: format!("delete `use {}`", u.display()),
            }),
            Item::Hosts(h) => {
                let open = text[h.span.start..h.span.end]
                    .find('{')
                    .map(|i| h.span.start + i + 1);
                if let Some(last) = h.entries.last() {
                    for e in ["pastebin.com", ".amazon.com", "evil.example", ".docs.rs"] {
                        insert(&mut out, last.span.end, format!(", \"{e}\""), "host entry");
                    }
                }
                for (i, e) in h.entries.iter().enumerate() {
                    let bare = e.node.trim_start_matches('.');
                    let mut alts = vec![format!("\"evil.example\""), format!("\"a.{bare}\"")];
                    if e.node.starts_with('.') {
                        alts.push(format!("\"{bare}\""));
                    } else {
                        alts.push(format!("\".{bare}\""));
                    }
                    for a in alts {
                        replace(&mut out, text, e.span, a, "host entry");
                    }
                    if h.entries.len() > 1 {
                        let (start, end) = if i + 1 < h.entries.len() {
                            (e.span.start, h.entries[i + 1].span.start)
                        } else {
                            (h.entries[i - 1].span.end, e.span.end)
                        };
                        out.push(Edit {
                            start,
                            end,
                            with: String::new(),
                            what: format!("drop host `{}`", e.node),
                        });
                    }
                }
                for (word, slot) in [("userinfo", &h.userinfo), ("idn", &h.idn)] {
                    match slot {
                        Some(v) => {
                            let with = format!("{word} {}", if v.node { "deny" } else { "allow" });
                            replace(&mut out, text, v.span, with, word);
                        }
                        None => {
                            if let Some(at) = open {
                                insert(&mut out, at, format!("\n  {word} allow"), word);
                            }
                        }
                    }
                }
                if h.schemes_given {
                    if let Some(last) = h.schemes.last() {
                        insert(&mut out, last.span.end, ", http".into(), "schemes");
                        replace(&mut out, text, last.span, "http".into(), "schemes");
                    }
                } else if let Some(at) = open {
                    insert(&mut out, at, "\n  schemes [https, http]".into(), "schemes");
                }
            }
            Item::Rule(r) => {
                out.push(Edit {
                    start: r.span.start,
                    end: r.span.end,
                    with: String::new(),
                    what: format!("delete rule `{}`", r.name.name),
                });
                for sel in &r.targets {
                    selector_edits(&mut out, text, sel.span(), &tools, "rule target");
                }
                match &r.on_missing {
                    Some(m) => {
                        let word = if text[m.span.start..m.span.end].contains("allow") {
                            "deny"
                        } else {
                            "allow"
                        };
                        replace(
                            &mut out,
                            text,
                            m.span,
                            format!("on_missing {word}"),
                            "on_missing",
                        );
                    }
                    None => {
                        if text[..r.span.end].ends_with('}') {
                            for word in ["allow", "deny"] {
                                insert(
                                    &mut out,
                                    r.span.end - 1,
                                    format!("  on_missing {word}\n"),
                                    "on_missing",
                                );
                            }
                        }
                    }
                }
                if r.requires.len() > 1 {
                    for e in &r.requires {
                        if let Some(at) = text[..e.span.start].rfind("require") {
                            out.push(Edit {
                                start: at,
                                end: e.span.end,
                                with: String::new(),
                                what: format!("drop `require {}`", &text[e.span.start..e.span.end]),
                            });
                        }
                    }
                }
                for e in &r.requires {
                    expr_edits(&mut out, text, e, &tools, &lists);
                }
            }
            _ => {}
        }
    }
    out.retain(|e| e.start <= e.end && e.end <= text.len() && text.is_char_boundary(e.start));
    out
}

/// Layout-only edits: a comment inside `in hosts NAME`, which must change nothing.
fn layout_edits(text: &str) -> Vec<Edit> {
    let Ok(ast) = toolgate_lang::parse(text) else {
        return vec![];
    };
    let mut out = Vec::new();
    fn walk(e: &Expr, out: &mut Vec<Edit>) {
        match &e.kind {
            ExprKind::And(xs) | ExprKind::Or(xs) => xs.iter().for_each(|x| walk(x, out)),
            ExprKind::Not(x) => walk(x, out),
            ExprKind::Predicate(_, Predicate::InHosts(name)) => insert(
                out,
                name.span.start,
                "// note\n    ".into(),
                "comment in `in hosts`",
            ),
            _ => {}
        }
    }
    for item in &ast.items {
        if let Item::Rule(r) = item {
            r.requires.iter().for_each(|e| walk(e, &mut out));
        }
    }
    out
}

/// Small policies beside the examples, with the shapes the examples lack: rules true without
/// their argument, several `require` lines, dated `called` entries, a commented `in hosts`.
const EXTRA_BASES: [&str; 4] = [
    r#"module extra_args
write send_email, pay
ingest fetch
read lookup
stage s { tools [send_email, pay, fetch, lookup] }
hosts docs {
  schemes [https]
  allow ["docs.rs", ".aws.amazon.com"]
}
rule cc_internal for send_email {
  require not args.cc exists or args.cc matches "@ours[.]com$"
}
rule doc_source for fetch {
  require not args.url exists or args.url in hosts docs
}
rule payout for pay {
  require args.amount is number and args.amount > 0
  require args.amount <= 250
  require args.currency in ["GBP", "EUR"]
  require args.policy matches "^POL-[0-9]{6}$"
  require args.note is string
}
"#,
    r#"module extra_facts
write payout, send_invoice, book
read verify_identity, lookup_lead
stage chat { tools [payout, send_invoice, book, verify_identity, lookup_lead] }
rule fresh_identity for payout {
  require called_within(verify_identity, turns: 2)
}
rule once_per_turn for send_invoice {
  require not called_within(send_invoice, 1) and field_filled(phone)
  on_missing deny
}
rule conversation for book {
  require min_client_messages(2) and client_sent_media(within: 5, kinds: [image])
}
"#,
    r#"module extra_hosts
ingest fetch, fetch_repo
read look
stage s { tools [fetch, fetch_repo, look] max_turns 3 }
hosts docs {
  schemes [https]
  allow [".aws.amazon.com", "docs.rs"]
}
hosts repos {
  schemes [https]
  userinfo deny
  allow ["git.example.com"]
}
rule doc for fetch { require args.url in hosts // note
    docs }
rule repo for fetch_repo { require args.url in hosts repos and facts.tier == "gold" }
"#,
    r#"module extra_logic
write w
read r
stage s { tools [w, r] }
rule limits for w {
  require (args.n > 1 and args.n < 10) or args.ok == true
  require not args.tag in ["x", "y"]
  on_missing deny
}
"#,
];

fn bases() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = [
        "coach",
        "coding_agent",
        "messenger_payments",
        "motor_claims",
        "support_desk",
    ]
    .iter()
    .map(|n| {
        (
            n.to_string(),
            std::fs::read_to_string(example_path(n)).unwrap(),
        )
    })
    .collect();
    for (i, t) in EXTRA_BASES.iter().enumerate() {
        out.push((format!("extra{i}"), t.to_string()));
    }
    out
}

/// One generated pair.
struct Pair {
    /// Its number in the run (`TOOLGATE_GATE_PAIR` remakes it alone).
    index: usize,
    base: String,
    old_text: String,
    new_text: String,
    edits: Vec<String>,
    old: Policy,
    new: Policy,
}

fn compiles(text: &str) -> Option<Policy> {
    Policy::compile("pair.gate", text).ok()
}

/// Applies up to `n` random edits, each one that still compiles; returns the text and, when
/// any edit applied, its policy.
fn random_edits(
    text: &str,
    n: usize,
    rng: &mut Rng,
    log: &mut Vec<String>,
) -> (String, Option<Policy>) {
    let mut cur = text.to_string();
    let mut compiled = None;
    for _ in 0..n {
        let cands = edits_of(&cur);
        for _attempt in 0..20 {
            if cands.is_empty() {
                break;
            }
            let e = &cands[rng.below(cands.len())];
            let next = e.apply(&cur);
            if next == cur {
                continue;
            }
            if let Some(p) = compiles(&next) {
                log.push(e.what.replace('\n', "\\n"));
                cur = next;
                compiled = Some(p);
                break;
            }
        }
    }
    (cur, compiled)
}

/// The base of a pair: each equally likely, except `coding_agent`, at half the weight. Its
/// thirty tools and long regexes make it the slowest to diff (about 240 ms in a debug build,
/// against 1 to 80 ms for the others) and it has the fewest rule shapes.
fn pick_base<'a>(bases: &'a [(String, String)], rng: &mut Rng) -> &'a (String, String) {
    let weight = |name: &str| if name == "coding_agent" { 1 } else { 2 };
    let total: usize = bases.iter().map(|(n, _)| weight(n)).sum();
    let mut at = rng.below(total);
    for b in bases {
        if at < weight(&b.0) {
            return b;
        }
        at -= weight(&b.0);
    }
    &bases[0]
}

fn make_pair(bases: &[(String, String)], rng: &mut Rng) -> Option<Pair> {
    let (name, text) = pick_base(bases, rng);
    let mut log = Vec::new();
    let mut old_text = text.clone();
    if rng.chance(1, 4) {
        let l = layout_edits(&old_text);
        if !l.is_empty() {
            let e = &l[rng.below(l.len())];
            log.push(format!("OLD: {}", e.what.replace('\n', "\\n")));
            old_text = e.apply(&old_text);
        }
    }
    let n = 1 + rng.below(3);
    let (new_text, new) = random_edits(&old_text, n, rng, &mut log);
    let new = new?;
    if new_text == old_text {
        return None;
    }
    let old = compiles(&old_text)?;
    let (mut old_text, mut new_text, mut old, mut new) = (old_text, new_text, old, new);
    if rng.chance(1, 2) {
        std::mem::swap(&mut old_text, &mut new_text);
        std::mem::swap(&mut old, &mut new);
        log.push("(swapped: OLD is the edited one)".into());
    }
    Some(Pair {
        index: 0,
        base: name.clone(),
        old,
        new,
        old_text,
        new_text,
        edits: log,
    })
}

/// Pair `index` of the run seeded `seed`: each pair has its own generator, so pairs can be made
/// on several threads and one can be remade alone.
fn pair(bases: &[(String, String)], seed: u64, index: usize) -> Pair {
    let mut rng = Rng(seed ^ (index as u64).wrapping_mul(0xd134_2543_de82_ef95));
    loop {
        if let Some(mut p) = make_pair(bases, &mut rng) {
            p.index = index;
            return p;
        }
    }
}

fn pairs(count: usize, seed: u64) -> Vec<Pair> {
    let bases = bases();
    (0..count).map(|i| pair(&bases, seed, i)).collect()
}

/// What the oracle and the gate made of one pair.
struct Outcome {
    witness: Option<Witness>,
    gate_widenings: usize,
    /// The first widening the gate reported, as a line and its request.
    gate_first: Option<String>,
    no_widening: bool,
}

/// The oracle's and the gate's answers for a pair; with `always_diff` false the gate is asked
/// only where the oracle found a widening (the property says nothing about the other pairs).
fn judge(p: &Pair, seed: u64, always_diff: bool) -> Outcome {
    let witness = oracle(&p.old, &p.new, PAIR_BUDGET, seed);
    if witness.is_none() && !always_diff {
        return Outcome {
            witness,
            gate_widenings: 0,
            gate_first: None,
            no_widening: true,
        };
    }
    let d = diff(&p.old, &p.new, &gate_config());
    Outcome {
        witness,
        gate_widenings: d.widenings.len(),
        gate_first: d
            .widenings
            .first()
            .map(|c| format!("{} {}", c.summary(), c.request.to_value())),
        no_widening: gate_says_no_widening(&d),
    }
}

/// Makes and judges `count` pairs, on as many threads as the machine has (at most 4).
fn run(count: usize, seed: u64, always_diff: bool) -> Vec<(Pair, Outcome)> {
    let bases = bases();
    // One pair alone, to reproduce a failure.
    let only: Option<usize> = std::env::var("TOOLGATE_GATE_PAIR")
        .ok()
        .and_then(|v| v.trim().parse().ok());
    let (first, count) = match only {
        Some(i) => (i, i + 1),
        None => (0, count),
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let next = std::sync::atomic::AtomicUsize::new(first);
    let mut out: Vec<(usize, Pair, Outcome)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if i >= count {
                            return mine;
                        }
                        let p = pair(&bases, seed, i);
                        let o = judge(&p, seed ^ i as u64, always_diff);
                        mine.push((i, p, o));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    out.sort_by_key(|(i, _, _)| *i);
    out.into_iter().map(|(_, p, o)| (p, o)).collect()
}

/// What kind of edit a log line describes: its words up to the first `:` or backquote.
fn edit_kind(what: &str) -> String {
    if let Some(rest) = what.strip_prefix("regex `") {
        // `regex `...`: add (?m)`: the change, not the pattern.
        let change = rest.rsplit_once("`: ").map_or(rest, |(_, c)| c);
        return format!("regex: {change}");
    }
    if what.starts_with('`') {
        // "`and` -> `or` after ...": the swap itself.
        return what.split(" after").next().unwrap_or(what).to_string();
    }
    let end = what.find([':', '`']).unwrap_or(what.len());
    what[..end].trim().to_string()
}

fn report(p: &Pair, w: &Witness) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "pair #{} (TOOLGATE_GATE_PAIR={} remakes it), base `{}`; edits:",
        p.index, p.index, p.base
    );
    for e in &p.edits {
        let _ = writeln!(s, "  - {e}");
    }
    let _ = writeln!(s, "--- OLD ---\n{}", p.old_text);
    let _ = writeln!(s, "--- NEW ---\n{}", p.new_text);
    let _ = writeln!(s, "NEW allows and OLD denies call c1 of:\n{}", w.json());
    s
}

fn seed() -> u64 {
    env_usize("TOOLGATE_GATE_SEED", 0x6a7e_0021) as u64
}

#[test]
fn gate_never_says_no_widening_where_the_oracle_finds_one() {
    let count = env_usize("TOOLGATE_GATE_PAIRS", DEFAULT_PAIRS);
    let start = std::time::Instant::now();
    let results = run(count, seed(), false);
    let mut failures = Vec::new();
    let mut lines = Vec::new();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for (p, o) in &results {
        if let (Some(w), true) = (&o.witness, o.no_widening) {
            failures.push(report(p, w));
            lines.push(format!("  #{} {}: {}", p.index, p.base, p.edits.join("; ")));
            let semantic: Vec<&String> = p
                .edits
                .iter()
                .filter(|e| !e.starts_with("OLD:") && !e.starts_with("(swapped"))
                .collect();
            if let [one] = semantic[..] {
                let swapped = p.edits.iter().any(|e| e.starts_with("(swapped"));
                let key = format!(
                    "{}{}",
                    edit_kind(one),
                    if swapped { " (reversed)" } else { "" }
                );
                *kinds.entry(key).or_default() += 1;
            }
        }
    }
    let found = results.iter().filter(|(_, o)| o.witness.is_some()).count();
    eprintln!(
        "{count} pairs in {:.1} s: the oracle found a widening in {found}, the gate missed {}",
        start.elapsed().as_secs_f64(),
        failures.len()
    );
    if !failures.is_empty() {
        let shown: Vec<&String> = failures.iter().take(5).collect();
        lines.truncate(60);
        let by_kind: Vec<String> = kinds
            .iter()
            .map(|(k, n)| format!("  {n:>4}  {k}"))
            .collect();
        panic!(
            "the gate said \"no widening\" for {} of {count} pairs where the oracle found a \
             newly allowed request:\n{}\n\nthe pairs of a single edit among them, by edit:\n{}\
             \n\nthe first {} in full:\n\n{}",
            failures.len(),
            lines.join("\n"),
            by_kind.join("\n"),
            shown.len(),
            shown
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n====================\n")
        );
    }
}

#[test]
#[ignore = "a figure, not a check: run with --ignored --nocapture"]
fn completeness_table() {
    let count = env_usize("TOOLGATE_GATE_PAIRS", DEFAULT_PAIRS);
    let results = run(count, seed(), true);
    let mut by_base: BTreeMap<&str, [usize; 7]> = BTreeMap::new();
    for (p, o) in &results {
        let row = by_base.entry(p.base.as_str()).or_default();
        row[0] += 1;
        row[1] += usize::from(o.witness.is_some());
        row[2] += usize::from(o.gate_widenings > 0);
        row[3] += usize::from(!o.no_widening && o.witness.is_none());
        row[4] += usize::from(o.no_widening && o.witness.is_some());
        row[5] += usize::from(o.no_widening && o.witness.is_none());
        row[6] += usize::from(o.gate_widenings > 0 && o.witness.is_none());
    }
    let blind: Vec<String> = results
        .iter()
        .filter(|(_, o)| o.witness.is_none())
        .filter_map(|(p, o)| {
            let g = o.gate_first.as_ref()?;
            Some(format!(
                "  {}: {}\n    gate: {g}",
                p.base,
                p.edits.join("; ")
            ))
        })
        .collect();
    let mut all = [0usize; 7];
    println!(
        "{:<20} {:>6} {:>7} {:>6} {:>15} {:>7} {:>11} {:>10}",
        "base", "pairs", "oracle", "gate", "held, no proof", "missed", "both quiet", "gate only"
    );
    for (b, row) in &by_base {
        for (a, r) in all.iter_mut().zip(row) {
            *a += r;
        }
        print_row(b, row);
    }
    print_row("all", &all);
    println!(
        "oracle: the oracle found a widening; gate: the gate reported one; held, no proof: the \
         gate held the change (not \"no widening\") and the oracle found none; missed: \"no \
         widening\" where the oracle found one; both quiet: neither found one; gate only: the \
         gate found a (replayed, real) widening the oracle's bounds missed."
    );
    if !blind.is_empty() {
        println!(
            "gate only (outside the oracle's bounds):\n{}",
            blind.join("\n")
        );
    }
    if std::env::var_os("TOOLGATE_GATE_SHOW_QUIET").is_some() {
        println!("both quiet:");
        for (p, o) in &results {
            if o.no_widening && o.witness.is_none() {
                println!("  {}: {}", p.base, p.edits.join("; "));
            }
        }
    }
}

fn print_row(name: &str, r: &[usize; 7]) {
    println!(
        "{:<20} {:>6} {:>7} {:>6} {:>15} {:>7} {:>11} {:>10}",
        name, r[0], r[1], r[2], r[3], r[4], r[5], r[6]
    );
}

// ---------------------------------------------------------------------------------------------
// Named cases: each symptom of the issue, a real widening the gate must not pass.

fn assert_gate_holds(old_text: &str, new_text: &str) {
    let old = compiles(old_text).unwrap_or_else(|| panic!("OLD does not compile:\n{old_text}"));
    let new = compiles(new_text).unwrap_or_else(|| panic!("NEW does not compile:\n{new_text}"));
    let w = oracle(&old, &new, EXACT_BUDGET, 1).unwrap_or_else(|| {
        panic!("the oracle finds no widening, so the case is not one:\n{old_text}\n---\n{new_text}")
    });
    assert!(allows(&new, &w.request) && !allows(&old, &w.request));
    let d = diff(&old, &new, &gate_config());
    assert!(
        !gate_says_no_widening(&d),
        "the gate says \"no widening\", but NEW allows and OLD denies:\n\
            {}\n\
            --- OLD ---\n\
            {old_text}\n\
            --- NEW ---\n\
            {new_text}",
        w.json()
    );
}

/// `module m`, classes and one stage holding every tool, then `rest`.
fn policy(write: &str, read: &str, rest: &str) -> String {
    let tools: Vec<&str> = write
        .split(", ")
        .chain(read.split(", "))
        .filter(|t| !t.is_empty())
        .collect();
    let mut out = String::from("module m\n");
    for (class, list) in [("write", write), ("read", read)] {
        if !list.is_empty() {
            let _ = writeln!(out, "{class} {list}");
        }
    }
    let _ = write!(out, "stage s {{ tools [{}] }}\n{rest}", tools.join(", "));
    out
}

#[test]
fn a_wider_media_window_is_held() {
    let rule = |w: u32| {
        format!(
            "rule receipt for confirm_payment {{\n\
                  require client_sent_media(within: {w}, kinds: [image, document])\n\
                }}\n"
        )
    };
    assert_gate_holds(
        &policy("confirm_payment", "look", &rule(10)),
        &policy("confirm_payment", "look", &rule(50)),
    );
}

#[test]
fn fewer_client_messages_are_held() {
    let rule =
        |n: u32| format!("rule real for book_slot {{\n  require min_client_messages({n})\n}}\n");
    assert_gate_holds(
        &policy("book_slot", "look", &rule(2)),
        &policy("book_slot", "look", &rule(1)),
    );
}

#[test]
fn another_tool_in_called_before_is_held() {
    let rule = |t: &str| {
        format!("rule identity for modify_booking {{\n  require called_before({t})\n}}\n")
    };
    assert_gate_holds(
        &policy(
            "modify_booking",
            "verify_identity, lookup_lead",
            &rule("verify_identity"),
        ),
        &policy(
            "modify_booking",
            "verify_identity, lookup_lead",
            &rule("lookup_lead"),
        ),
    );
}

#[test]
fn a_longer_called_within_is_held() {
    let rule = |n: u32| {
        format!(
            "rule fresh for payout {{\n  require called_within(verify_identity, turns: {n})\n}}\n"
        )
    };
    assert_gate_holds(
        &policy("payout", "verify_identity", &rule(2)),
        &policy("payout", "verify_identity", &rule(30)),
    );
}

#[test]
fn a_looser_regex_on_an_optional_argument_is_held() {
    let rule = |re: &str| {
        format!(
            "rule cc for send_email {{\n\
                  require not args.cc exists or args.cc matches \"{re}\"\n\
                }}\n"
        )
    };
    assert_gate_holds(
        &policy("send_email", "look", &rule("@ours[.]com$")),
        &policy("send_email", "look", &rule("@")),
    );
}

fn optional_url(schemes: &str, hosts: &str) -> String {
    policy(
        "",
        "fetch",
        &format!(
            "hosts docs {{\n\
                  schemes [{schemes}]\n\
                  allow [{hosts}]\n\
                }}\n\
                rule doc for fetch {{\n\
                  require not args.url exists or args.url in hosts docs\n\
                }}\n"
        ),
    )
}

#[test]
fn a_host_added_to_an_optional_url_is_held() {
    assert_gate_holds(
        &optional_url("https", "\"docs.rs\""),
        &optional_url("https", "\"docs.rs\", \"pastebin.com\""),
    );
}

#[test]
fn http_added_to_an_optional_url_is_held() {
    assert_gate_holds(
        &optional_url("https", "\"docs.rs\""),
        &optional_url("https, http", "\"docs.rs\""),
    );
}

#[test]
fn a_list_edited_behind_a_comment_in_in_hosts_is_held() {
    let with = |hosts: &str| {
        policy(
            "",
            "fetch",
            &format!(
                "hosts docs {{\n\
                      schemes [https]\n\
                      allow [{hosts}]\n\
                    }}\n\
                    rule doc for fetch {{\n\
                      require args.url in hosts // note\n\
                        docs\n\
                    }}\n"
            ),
        )
    };
    assert_gate_holds(&with("\"docs.rs\""), &with("\"docs.rs\", \"pastebin.com\""));
}

#[test]
fn idn_allowed_on_a_subdomain_list_is_held() {
    let with = |idn: &str| {
        policy(
            "",
            "fetch",
            &format!(
                "hosts aws {{\n\
                      schemes [https]\n\
                    {idn}  allow [\"aws.amazon.com\", \".aws.amazon.com\"]\n\
                    }}\n\
                    rule doc for fetch {{\n\
                      require args.url in hosts aws\n\
                    }}\n"
            ),
        )
    };
    assert_gate_holds(&with(""), &with("  idn allow\n"));
}

#[test]
fn multi_line_mode_on_an_anchored_regex_is_held() {
    let rule = |flags: &str| {
        format!(
            "rule reference for pay {{\n\
                  require args.policy matches \"{flags}^POL-[0-9]{{6}}$\"\n\
                }}\n"
        )
    };
    assert_gate_holds(
        &policy("pay", "look", &rule("")),
        &policy("pay", "look", &rule("(?m)")),
    );
}

#[test]
fn one_requirement_edited_among_five_is_held() {
    let rule = |currencies: &str| {
        format!(
            "rule payout for pay {{\n\
                  require args.amount is number and args.amount > 0\n\
                  require args.amount <= 250\n\
                  require args.currency in [{currencies}]\n\
                  require args.policy matches \"^POL-[0-9]{{6}}$\"\n\
                  require args.note is string\n\
                }}\n"
        )
    };
    assert_gate_holds(
        &policy("pay", "look", &rule("\"GBP\", \"EUR\"")),
        &policy("pay", "look", &rule("\"GBP\", \"EUR\", \"USD\"")),
    );
}

// ---------------------------------------------------------------------------------------------
// The oracle itself.

#[test]
fn the_oracle_finds_nothing_between_a_policy_and_itself_or_a_narrowing() {
    for (name, text) in bases() {
        let (a, b) = (compiles(&text).unwrap(), compiles(&text).unwrap());
        assert!(oracle(&a, &b, PAIR_BUDGET, 7).is_none(), "{name}");
    }
    // A narrowing: the oracle looks only for what NEW newly allows.
    let wide = optional_url("https", "\"docs.rs\", \"pastebin.com\"");
    let narrow = optional_url("https", "\"docs.rs\"");
    let (w, n) = (compiles(&wide).unwrap(), compiles(&narrow).unwrap());
    assert!(oracle(&w, &n, EXACT_BUDGET, 7).is_none());
    assert!(oracle(&n, &w, EXACT_BUDGET, 7).is_some());
    // Where today's gate finds a widening, so does the oracle.
    let coach = std::fs::read_to_string(example_path("coach")).unwrap();
    let wider = coach.replace(
        "\"developers.cloudflare.com\"]",
        "\"developers.cloudflare.com\", \"pastebin.com\"]",
    );
    let (old, new) = (compiles(&coach).unwrap(), compiles(&wider).unwrap());
    assert!(!diff(&old, &new, &gate_config()).widenings.is_empty());
    let w = oracle(&old, &new, PAIR_BUDGET, 7).expect("the oracle finds the added host");
    assert!(w.json().contains("pastebin.com"), "{}", w.json());
}

#[test]
fn the_generator_makes_compiling_pairs_that_differ() {
    let ps = pairs(40, 3);
    assert_eq!(ps.len(), 40);
    assert!(ps.iter().all(|p| p.old_text != p.new_text));
    let bases: BTreeSet<&str> = ps.iter().map(|p| p.base.as_str()).collect();
    assert!(bases.len() >= 4, "{bases:?}");
}
