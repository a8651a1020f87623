//! The change gate's proof: that a new policy's rules for a tool allow nothing the old
//! policy's rules deny. `toolgate diff`, `toolgate test --against` and the server's reload
//! gate (all through `toolgate_prove::diff`) apply a change without an operator only when
//! this proof, or the exact enumeration around it, says it does not widen.
//!
//! # What is compared
//!
//! The compiled rules, never their text: a comment, a layout change or an imported module
//! cannot hide a change, and a host list is compared by its entries wherever it is named.
//!
//! A call that passes the stage and latch checks is allowed when every rule of its tool
//! allows it. Each rule is split into its requirements (the conjuncts of its condition): a
//! rule allows a call when every requirement is true, or, under `on_missing allow`, true or
//! unknown only because facts are absent. NEW allows no more than OLD when every requirement
//! of OLD's rules is implied by some requirement of NEW's rules.
//!
//! # The order the proof works in
//!
//! A requirement is compared with another in the truth order false < unknown < true of the
//! three-valued logic conditions are evaluated in (see `crate::cond`). `and` is the minimum,
//! `or` the maximum and `not` reverses the order, so a requirement built from tests each no
//! higher than the matching test of another is no higher itself; a requirement no higher
//! than another is true only where the other is. Tests on the same value are ordered by what
//! they accept: numeric bounds by the sets of numbers they admit (checked on one point of
//! each interval the bounds cut, which is exact), strings and lists by their literals,
//! regexes by their languages (decided on their DFAs, [`regex_subset`]), host lists by
//! [`crate::hosts::HostList::within`], and built-ins by their parameters (`within`, `kinds`,
//! counts, `turns`, tool names).
//!
//! `on_missing allow` lets a requirement through while it is unknown for absent facts, and
//! `or` makes an invalid operand outweigh an absent one, so the order alone does not carry
//! through it. Under `on_missing allow` a requirement that reads facts is therefore proved
//! only against an identical one, or, when both are single tests of one kind (which are
//! unknown for absent facts on exactly the same calls), by the order.
//!
//! What the proof cannot show is unproven, with the old rule and the reason; the caller
//! searches for a call that shows the change and holds the change when none is found.

mod regex_subset;

use crate::builtins::Pre;
use crate::cond::{cmp_num, Cond, Lit, Root, Seg, Test, ValuePath};
use crate::hosts::HostList;
use crate::policy::{Policy, RuleInfo};
use crate::vault::{Kinds, Permit};
use regex_subset::Inclusion;
use serde_json::Value;
use std::cell::{Cell, RefCell};
use toolgate_lang::ast::{CmpOp, TypeName};

/// The most comparisons one proof makes before it gives up (unproven).
const MAX_STEPS: u32 = 200_000;

/// What the gate proved about the rules of one tool.
#[derive(Debug, Clone, PartialEq)]
pub enum Entailment {
    /// NEW's rules allow no call OLD's rules deny.
    Proved,
    /// Not proved; which requirement of OLD's rules NEW's are not shown to imply, and why.
    Unproven(Unproven),
}

/// A requirement of an old rule that the new rules are not proved to imply.
#[derive(Debug, Clone, PartialEq)]
pub struct Unproven {
    /// The old rule.
    pub rule: String,
    /// Which of its requirements, counting from 1.
    pub requirement: usize,
    /// How many requirements the rule has.
    pub requirements: usize,
    /// Why, in words ("list `docs` accepts scheme `http`").
    pub reason: String,
    /// Values the proof found that NEW accepts and OLD does not: where a search should look.
    pub seeds: Vec<Seed>,
}

/// A value worth trying at a path: found by the proof, accepted by a new test and not by
/// the old one.
#[derive(Debug, Clone, PartialEq)]
pub struct Seed {
    /// True for a custom fact (the first step is its key), false for an argument.
    pub in_facts: bool,
    /// The path below `args` (or `facts`).
    pub path: Vec<SeedStep>,
    /// The value.
    pub value: Value,
}

/// One step of a [`Seed`]'s path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeedStep {
    /// `.key`
    Key(String),
    /// `[n]`
    Index(usize),
}

/// Whether `new`'s rules for `tool` allow nothing `old`'s rules for it deny. A tool either
/// policy does not classify has no rules there (the stage checks deny it before any rule).
pub fn entails(new: &Policy, old: &Policy, tool: &str) -> Entailment {
    let new_reqs = requirements(new, tool);
    let old_reqs = requirements(old, tool);
    let proof = Proof::default();
    for q in &old_reqs {
        proof.reasons.borrow_mut().clear();
        // The same requirement of the same rule first, so the reason given is about it.
        let counterpart = |p: &&Requirement<'_>| p.rule.name == q.rule.name && p.index == q.index;
        let mut candidates = new_reqs.iter().filter(counterpart);
        if candidates.any(|p| proof.implies(p, q))
            || new_reqs
                .iter()
                .any(|p| !counterpart(&p) && proof.implies(p, q))
        {
            continue;
        }
        let reason = proof
            .reasons
            .borrow_mut()
            .drain(..)
            .next()
            .unwrap_or_else(|| {
                if new_reqs.is_empty() {
                    format!("NEW has no rule for `{tool}`")
                } else if proof.steps.get() > MAX_STEPS {
                    "the rules are too large to compare".into()
                } else {
                    "no requirement of NEW's rules is proved to imply it".into()
                }
            });
        return Entailment::Unproven(Unproven {
            rule: q.rule.name.to_string(),
            requirement: q.index + 1,
            requirements: q.of,
            reason,
            seeds: proof.seeds.take(),
        });
    }
    Entailment::Proved
}

/// What `new` lets the executor do with `tool`'s data that `old` did not, in words: vault
/// tokens it may now unwrap (a new path or kind), and output no longer re-sanitised.
pub fn data_widenings(new: &Policy, old: &Policy, tool: &str) -> Vec<String> {
    fn info<'p>(p: &'p Policy, tool: &str) -> Option<&'p crate::policy::ToolInfo> {
        p.tool_id(tool).map(|id| &p.tools[id.index()])
    }
    let Some(n) = info(new, tool) else {
        return Vec::new();
    };
    let old_permits: &[Permit] = info(old, tool).map_or(&[], |o| &o.detokenise);
    let mut out = Vec::new();
    for permit in n.detokenise.iter() {
        let covering: Vec<&Permit> = old_permits
            .iter()
            .filter(|o| permit.path.starts_with(&o.path))
            .collect();
        let path = render_path(&permit.path);
        match &permit.kinds {
            Kinds::Any if !covering.iter().any(|o| o.kinds == Kinds::Any) => {
                out.push(format!(
                    "`{tool}` may unwrap vault tokens of any kind at `{path}`"
                ));
            }
            Kinds::Any => {}
            Kinds::Only(kinds) => {
                for kind in kinds.iter() {
                    let before = covering.iter().any(|o| match &o.kinds {
                        Kinds::Any => true,
                        Kinds::Only(ks) => ks.contains(kind),
                    });
                    if !before {
                        out.push(format!(
                            "`{tool}` may unwrap vault tokens of kind `{kind}` at `{path}`"
                        ));
                    }
                }
            }
        }
    }
    if info(old, tool).is_some_and(|o| o.sanitise_output) && !n.sanitise_output {
        out.push(format!("`{tool}`'s output is no longer re-sanitised"));
    }
    if let Some(o) = info(old, tool) {
        budget_widenings(new, n, old, o, tool, &mut out);
        provenance_widenings(new, n, old, o, tool, &mut out);
    }
    out
}

/// A latch that `blocks tainted` the tool in OLD must block it, tainted or not, in NEW (by
/// name: the latch fact is by name); and NEW may not take more of the tool's output out of
/// the index (a metadata key OLD indexed). The enumeration judges calls with no arguments
/// and no outputs, where neither shows, so these are compared here; where unsure, reported.
fn provenance_widenings(
    new: &Policy,
    n: &crate::policy::ToolInfo,
    old: &Policy,
    o: &crate::policy::ToolInfo,
    tool: &str,
    out: &mut Vec<String>,
) {
    for (i, latch) in old.latches.iter().enumerate() {
        if o.blocked_tainted & (1 << i) == 0 {
            continue;
        }
        let kept = new
            .latches
            .iter()
            .position(|l| l.name == latch.name)
            .is_some_and(|j| (n.blocked_tainted | n.blocked_by) & (1 << j) != 0);
        if !kept {
            out.push(format!(
                "latch `{}` no longer blocks `{tool}` when its arguments carry untrusted values",
                latch.name
            ));
        }
    }
    let indexed_before = |k: &str| match &o.metadata {
        Some(keys) => !keys.iter().any(|m| **m == *k),
        None => !crate::provenance::DEFAULT_METADATA.contains(&k),
    };
    let newly: Vec<&str> = match &n.metadata {
        Some(keys) => keys
            .iter()
            .map(|k| &**k)
            .filter(|k| indexed_before(k))
            .collect(),
        None => crate::provenance::DEFAULT_METADATA
            .iter()
            .copied()
            .filter(|k| indexed_before(k))
            .collect(),
    };
    for k in newly {
        out.push(format!(
            "key `{k}` of `{tool}`'s output is now metadata, so values under it no longer count as untrusted"
        ));
    }
}

/// Each budget of OLD that counts `tool` must be kept by one of NEW's for it: the same
/// measure (`count`, or `sum` of the same argument), scope and window, and a limit no higher.
/// Anything else (a budget dropped, a higher limit, another measure, scope or window) is
/// reported: a lower limit only narrows, and where a change might widen, the gate holds it.
fn budget_widenings(
    new: &Policy,
    n: &crate::policy::ToolInfo,
    old: &Policy,
    o: &crate::policy::ToolInfo,
    tool: &str,
    out: &mut Vec<String>,
) {
    for &ob in o.budgets.iter() {
        let before = &old.budgets[usize::from(ob)];
        let kept = n.budgets.iter().any(|&nb| {
            let after = &new.budgets[usize::from(nb)];
            after.sum == before.sum
                && after.scope == before.scope
                && after.window == before.window
                && after.max <= before.max
        });
        if kept {
            continue;
        }
        let same_measure = n.budgets.iter().find(|&&nb| {
            let after = &new.budgets[usize::from(nb)];
            after.sum == before.sum && after.scope == before.scope && after.window == before.window
        });
        out.push(match same_measure {
            Some(&nb) => format!(
                "`{tool}`'s budget `{}` rises from {} to {} per {}",
                before.name,
                crate::text::number(before.max),
                crate::text::number(new.budgets[usize::from(nb)].max),
                before.scope.as_str()
            ),
            None => format!(
                "`{tool}` is no longer held to budget `{}` ({} per {})",
                before.name,
                crate::text::number(before.max),
                before.scope.as_str()
            ),
        });
    }
}

/// Whether `p` is a test that admits only literals (`in [..]`, `== LIT`) on an argument, and
/// `q` a test on the same argument that is true for each of them: then every call `p` lets
/// through, `q` does (`args.n in [1, 2, 3]` within `args.n is integer`, `args.n > 0`). Each
/// literal is judged by the engine's own test, on an argument that holds just it.
fn literals_pass(p: &Requirement<'_>, q: &Requirement<'_>) -> bool {
    let (Node::Test(path, test), Node::Test(q_path, q_test)) = (&p.node, &q.node) else {
        return false;
    };
    if path != q_path || path.root != Root::Args {
        return false;
    }
    let literals: Vec<&Lit> = match test {
        Test::InList(items) => items.iter().collect(),
        Test::Cmp(CmpOp::Eq, lit) if !matches!(lit, Lit::Null) => vec![lit],
        _ => return false,
    };
    let facts = crate::wire::request::Facts::default();
    literals.into_iter().all(|lit| {
        let Some(value) = literal_value(lit) else {
            return false;
        };
        let args = place(&path.segs, value);
        let env = crate::cond::Env::new(&args, crate::wire::view::FactsRef::Owned(&facts), q.hosts);
        crate::cond::eval_test(q_path, q_test, &env) == crate::cond::Truth::True
    })
}

fn literal_value(lit: &Lit) -> Option<Value> {
    Some(match lit {
        Lit::Num(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => Value::from(*n as i64),
        Lit::Num(n) => Value::from(serde_json::Number::from_f64(*n)?),
        Lit::Str(s) => Value::String(s.to_string()),
        Lit::Bool(b) => Value::Bool(*b),
        Lit::Null => Value::Null,
    })
}

/// An arguments object holding `value` at `segs` (arrays padded with nulls).
fn place(segs: &[Seg], value: Value) -> Value {
    segs.iter().rev().fold(value, |inner, seg| match seg {
        Seg::Key(k) => {
            let mut m = serde_json::Map::new();
            m.insert(k.to_string(), inner);
            Value::Object(m)
        }
        Seg::Index(i) => {
            let mut a = vec![Value::Null; *i];
            a.push(inner);
            Value::Array(a)
        }
    })
}

fn render_path(segs: &[Seg]) -> String {
    crate::cond::segs_text("args".into(), segs)
}

/// A condition with its conjunctions and disjunctions flattened and the fused forms
/// (`SamePath`, `ArgNumber`) spelled out as the tests they stand for.
#[derive(Debug, Clone)]
enum Node {
    Const(bool),
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>),
    Test(ValuePath, Test),
    Pre(Pre),
}

impl Node {
    fn of(c: &Cond) -> Node {
        match c {
            Cond::Const(b) => Node::Const(*b),
            Cond::And(parts) => Node::and(parts.iter().map(Node::of).collect()),
            Cond::Or(parts) => Node::or(parts.iter().map(Node::of).collect()),
            Cond::Not(inner) => Node::Not(Box::new(Node::of(inner))),
            Cond::Test(path, test) => Node::Test(path.clone(), test.clone()),
            Cond::SamePath(path, tests) => Node::and(
                tests
                    .iter()
                    .map(|t| Node::Test(path.clone(), t.clone()))
                    .collect(),
            ),
            Cond::ArgNumber { key, op, bound } => {
                let path = ValuePath {
                    root: Root::Args,
                    segs: vec![Seg::Key(key.clone())].into_boxed_slice(),
                };
                Node::and(vec![
                    Node::Test(path.clone(), Test::Is(TypeName::Number)),
                    Node::Test(path, Test::Cmp(*op, Lit::Num(*bound))),
                ])
            }
            Cond::Builtin(pre) => Node::Pre(pre.clone()),
        }
    }

    fn and(parts: Vec<Node>) -> Node {
        Node::junction(parts, true)
    }

    fn or(parts: Vec<Node>) -> Node {
        Node::junction(parts, false)
    }

    /// An `and` (or an `or`) of `parts`, with nested ones of the same kind flattened and a
    /// single part standing alone.
    fn junction(parts: Vec<Node>, and: bool) -> Node {
        let mut out = Vec::new();
        for p in parts {
            match p {
                Node::And(inner) if and => out.extend(inner),
                Node::Or(inner) if !and => out.extend(inner),
                other => out.push(other),
            }
        }
        match (out.len(), and) {
            (1, _) => out.pop().unwrap_or(Node::Const(and)),
            (_, true) => Node::And(out),
            (_, false) => Node::Or(out),
        }
    }

    /// True when the node reads facts, so it can be unknown because they are absent.
    fn reads_facts(&self) -> bool {
        match self {
            Node::Const(_) => false,
            Node::And(ps) | Node::Or(ps) => ps.iter().any(Node::reads_facts),
            Node::Not(inner) => inner.reads_facts(),
            Node::Test(path, _) => path.root != Root::Args,
            Node::Pre(_) => true,
        }
    }

    fn is_single_test(&self) -> bool {
        matches!(self, Node::Test(..) | Node::Pre(_) | Node::Const(_))
    }
}

/// One requirement of a rule: a conjunct of its condition.
struct Requirement<'p> {
    node: Node,
    /// `on_missing allow`, and the requirement reads facts (else it cannot be unknown for
    /// absent ones, and the setting changes nothing).
    fail_open: bool,
    hosts: &'p [HostList],
    rule: &'p RuleInfo,
    index: usize,
    of: usize,
}

fn requirements<'p>(policy: &'p Policy, tool: &str) -> Vec<Requirement<'p>> {
    let Some(id) = policy.tool_id(tool) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for rule_id in policy.tools[id.index()].rules.iter() {
        let rule = &policy.rules[rule_id.index()];
        let parts = match Node::of(&rule.cond) {
            Node::And(parts) => parts,
            single => vec![single],
        };
        let of = parts.len();
        for (index, node) in parts.into_iter().enumerate() {
            out.push(Requirement {
                fail_open: rule.fail_open && node.reads_facts(),
                node,
                hosts: &policy.host_lists,
                rule,
                index,
                of,
            });
        }
    }
    out
}

/// One node with the host lists its policy resolves `in hosts` against.
#[derive(Clone, Copy)]
struct Side<'a> {
    node: &'a Node,
    hosts: &'a [HostList],
}

impl<'a> Side<'a> {
    fn with(self, node: &'a Node) -> Side<'a> {
        Side {
            node,
            hosts: self.hosts,
        }
    }
}

/// The state of one proof: its step budget, and what it learnt for the report.
#[derive(Default)]
struct Proof {
    steps: Cell<u32>,
    reasons: RefCell<Vec<String>>,
    seeds: RefCell<Vec<Seed>>,
}

impl Proof {
    /// Whether requirement `p` (of NEW) allowing a call means `q` (of OLD) allows it.
    fn implies(&self, p: &Requirement<'_>, q: &Requirement<'_>) -> bool {
        let (a, b) = (
            Side {
                node: &p.node,
                hosts: p.hosts,
            },
            Side {
                node: &q.node,
                hosts: q.hosts,
            },
        );
        if matches!(q.node, Node::Const(true)) {
            return true;
        }
        if !p.fail_open {
            // NEW allows only where `p` is true; OLD allows at least there when `p <= q`, or
            // when `p` admits a few literals and `q` holds for each of them.
            return self.leq(a, b) || literals_pass(p, q);
        }
        if !q.fail_open {
            // NEW also allows where `p` is unknown for absent facts; OLD does not.
            return false;
        }
        self.same(a, b) || (p.node.is_single_test() && q.node.is_single_test() && self.leq(a, b))
    }

    fn spend(&self) -> bool {
        let n = self.steps.get().saturating_add(1);
        self.steps.set(n);
        n <= MAX_STEPS
    }

    /// Whether the two nodes give the same value on every call.
    fn same(&self, a: Side<'_>, b: Side<'_>) -> bool {
        if !self.spend() {
            return false;
        }
        match (a.node, b.node) {
            (Node::Const(x), Node::Const(y)) => x == y,
            (Node::And(xs), Node::And(ys)) | (Node::Or(xs), Node::Or(ys)) => {
                xs.len() == ys.len()
                    && xs
                        .iter()
                        .zip(ys)
                        .all(|(x, y)| self.same(a.with(x), b.with(y)))
            }
            (Node::Not(x), Node::Not(y)) => self.same(a.with(x), b.with(y)),
            (Node::Test(p1, t1), Node::Test(p2, t2)) => {
                p1 == p2
                    && match (t1, t2) {
                        (Test::Cmp(o1, l1), Test::Cmp(o2, l2)) => o1 == o2 && l1 == l2,
                        (Test::InList(l1), Test::InList(l2)) => l1 == l2,
                        (Test::Matches(r1), Test::Matches(r2)) => r1.as_str() == r2.as_str(),
                        (Test::Is(x), Test::Is(y)) => x == y,
                        (Test::Exists, Test::Exists) => true,
                        (Test::From(x), Test::From(y)) | (Test::Mentions(x), Test::Mentions(y)) => {
                            x == y
                        }
                        (Test::InFact(x), Test::InFact(y)) => x == y,
                        (Test::InHosts(i), Test::InHosts(j)) => {
                            match (a.hosts.get(i.index()), b.hosts.get(j.index())) {
                                (Some(x), Some(y)) => x.within(y) && y.within(x),
                                _ => false,
                            }
                        }
                        _ => false,
                    }
            }
            (Node::Pre(x), Node::Pre(y)) => x == y,
            _ => false,
        }
    }

    /// Whether `a` is no higher than `b` in the truth order on every call: `a` true means
    /// `b` true, and `b` false means `a` false.
    fn leq(&self, a: Side<'_>, b: Side<'_>) -> bool {
        if self.same(a, b) {
            return true;
        }
        if !self.spend() {
            return false;
        }
        match (a.node, b.node) {
            (Node::Const(false), _) | (_, Node::Const(true)) => return true,
            // Exact: below a minimum means below each part; a maximum below means each part.
            (_, Node::And(qs)) => return qs.iter().all(|q| self.leq(a, b.with(q))),
            (Node::Or(ps), _) => return ps.iter().all(|p| self.leq(a.with(p), b)),
            (Node::Not(x), Node::Not(y)) => return self.leq(b.with(y), a.with(x)),
            _ => {}
        }
        // Sufficient: a minimum is below what one of its parts is below; what is below one
        // part of a maximum is below the maximum.
        if let Node::And(ps) = a.node {
            if ps.iter().any(|p| self.leq(a.with(p), b)) {
                return true;
            }
        }
        if let Node::Or(qs) = b.node {
            if qs.iter().any(|q| self.leq(a, b.with(q))) {
                return true;
            }
        }
        match (a.node, b.node) {
            (Node::Test(p1, t1), Node::Test(p2, t2)) if p1 == p2 => {
                self.test_leq(p1, (t1, a.hosts), (t2, b.hosts))
            }
            (Node::Pre(x), Node::Pre(y)) => pre_leq(x, y),
            _ => false,
        }
    }

    /// Two tests on the same value.
    fn test_leq(
        &self,
        path: &ValuePath,
        (a, a_hosts): (&Test, &[HostList]),
        (b, b_hosts): (&Test, &[HostList]),
    ) -> bool {
        match (a, b) {
            (Test::Cmp(o1, Lit::Num(x)), Test::Cmp(o2, Lit::Num(y))) => {
                let ok = numbers_within(*o1, *x, *o2, *y);
                if !ok {
                    self.reason(format!(
                        "`{}` {} {x} accepts numbers that {} {y} does not",
                        path.text(),
                        o1.as_str(),
                        o2.as_str()
                    ));
                }
                ok
            }
            (Test::Cmp(o1, l1), Test::Cmp(o2, l2)) => literal_cmp_within(*o1, l1, *o2, l2),
            (Test::InList(l1), Test::InList(l2)) => {
                let ok = l1.iter().all(|x| l2.iter().any(|y| same_literal(x, y)));
                if !ok {
                    self.reason(format!(
                        "`{}` accepts a value of the new list that the old one does not",
                        path.text()
                    ));
                }
                ok
            }
            (Test::Matches(r1), Test::Matches(r2)) => {
                match regex_subset::subset(r1.as_str(), r2.as_str()) {
                    Inclusion::Subset => true,
                    Inclusion::NotSubset(w) => {
                        let shown = w.as_deref().map_or(String::new(), |w| {
                            format!(": {} matches it", Value::String(w.to_string()))
                        });
                        self.reason(format!(
                            "`{}` matches \"{}\" where it matched \"{}\"; the new pattern accepts strings the old one does not{shown}",
                            path.text(),
                            r1.as_str(),
                            r2.as_str()
                        ));
                        if let Some(w) = w {
                            self.seed(path, Value::String(w));
                        }
                        false
                    }
                    Inclusion::Unknown => {
                        self.reason(format!(
                            "`{}` matches \"{}\" where it matched \"{}\", and whether every string the new pattern accepts the old one does is not decided",
                            path.text(),
                            r1.as_str(),
                            r2.as_str()
                        ));
                        false
                    }
                }
            }
            (Test::InHosts(i), Test::InHosts(j)) => {
                match (a_hosts.get(i.index()), b_hosts.get(j.index())) {
                    (Some(x), Some(y)) if x.within(y) => true,
                    (Some(x), Some(y)) => {
                        self.reason(format!("`{}`: {}", path.text(), x.widened_from(y)));
                        false
                    }
                    _ => false,
                }
            }
            (Test::Is(x), Test::Is(y)) => {
                x == y || (*x == TypeName::Integer && *y == TypeName::Number)
            }
            (Test::Is(_), Test::Exists) => true,
            _ => false,
        }
    }

    fn reason(&self, why: String) {
        self.reasons.borrow_mut().push(why);
    }

    fn seed(&self, path: &ValuePath, value: Value) {
        let mut steps = Vec::new();
        let in_facts = match &path.root {
            Root::Args => false,
            Root::Other(key) => {
                steps.push(SeedStep::Key(key.to_string()));
                true
            }
            Root::Principal => {
                steps.push(SeedStep::Key(crate::wire::schema::PRINCIPAL.to_string()));
                true
            }
            _ => return,
        };
        steps.extend(path.segs.iter().map(|s| match s {
            Seg::Key(k) => SeedStep::Key(k.to_string()),
            Seg::Index(i) => SeedStep::Index(*i),
        }));
        self.seeds.borrow_mut().push(Seed {
            in_facts,
            path: steps,
            value,
        });
    }
}

/// Whether every number `x OP1 b1` accepts, `x OP2 b2` accepts. Both sets are unions of
/// intervals ending at `b1` and `b2`, so one number from each interval those two points cut
/// the line into (the points themselves, the floats next to them, one between) decides it.
fn numbers_within(o1: CmpOp, b1: f64, o2: CmpOp, b2: f64) -> bool {
    let (lo, hi) = if b1 <= b2 { (b1, b2) } else { (b2, b1) };
    let mut points = vec![
        lo,
        hi,
        lo.next_down(),
        hi.next_up(),
        lo.next_up(),
        hi.next_down(),
    ];
    points.push(lo / 2.0 + hi / 2.0);
    points
        .into_iter()
        .filter(|x| x.is_finite())
        .all(|x| !cmp_num(x, o1, b1) || cmp_num(x, o2, b2))
}

/// `== LIT` / `!= LIT` on strings, booleans and null, as `crate::cond::compare` reads them:
/// every operator but `!=` tests equality. Compared on each literal and one value equal to
/// neither.
fn literal_cmp_within(o1: CmpOp, l1: &Lit, o2: CmpOp, l2: &Lit) -> bool {
    let same_kind = matches!(
        (l1, l2),
        (Lit::Str(_), Lit::Str(_)) | (Lit::Bool(_), Lit::Bool(_)) | (Lit::Null, Lit::Null)
    );
    if !same_kind {
        return false;
    }
    let holds = |op: CmpOp, lit: &Lit, v: Option<&Lit>| {
        let eq = v.is_some_and(|v| same_literal(v, lit));
        if op == CmpOp::Ne {
            !eq
        } else {
            eq
        }
    };
    // `None` stands for a value of the same kind equal to neither literal (another string,
    // a non-null value); for booleans it may not exist, which only adds a case.
    [Some(l1), Some(l2), None]
        .into_iter()
        .all(|v| !holds(o1, l1, v) || holds(o2, l2, v))
}

fn same_literal(a: &Lit, b: &Lit) -> bool {
    match (a, b) {
        (Lit::Num(x), Lit::Num(y)) => x == y,
        (Lit::Str(x), Lit::Str(y)) => x == y,
        (Lit::Bool(x), Lit::Bool(y)) => x == y,
        (Lit::Null, Lit::Null) => true,
        _ => false,
    }
}

/// Two built-ins: true where `a` holds means `b` holds, and `b` false means `a` false.
fn pre_leq(a: &Pre, b: &Pre) -> bool {
    match (a, b) {
        (
            Pre::ClientSentMedia {
                within: w1,
                kinds: k1,
            },
            Pre::ClientSentMedia {
                within: w2,
                kinds: k2,
            },
        ) => w1 <= w2 && (k2.is_empty() || (!k1.is_empty() && k1.iter().all(|k| k2.contains(k)))),
        (Pre::MinClientMessages(n1), Pre::MinClientMessages(n2)) => n1 >= n2,
        (
            Pre::CalledWithin {
                tool: t1,
                turns: n1,
            },
            Pre::CalledWithin {
                tool: t2,
                turns: n2,
            },
        ) => t1 == t2 && n1 <= n2,
        (Pre::CalledWithin { tool: t1, .. }, Pre::CalledBefore(t2)) => t1 == t2,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests;
