//! Compiled conditions and their three-valued evaluation.
//!
//! A condition is true, false, or unknown. Unknown carries why: the facts it reads are
//! absent from the request (`ABSENT`, which a rule may let through with `on_missing allow`),
//! or an operand is missing or of the wrong type (`INVALID`, which always denies).
//! `and`/`or`/`not` follow Kleene logic, so `not` can never turn a missing argument into a pass.

use crate::hosts::HostList;
use crate::ids::HostListId;
use crate::strict_url::Ambiguity;
use crate::wire::view::FactsRef;
use regex::Regex;
use serde_json::Value;
use std::cell::Cell;
use toolgate_lang::ast::{CmpOp, Source, TypeName};

pub(crate) use crate::truth::{Truth, ABSENT, AMBIGUOUS, INVALID};

/// A compiled condition.
#[derive(Debug, Clone)]
pub(crate) enum Cond {
    Const(bool),
    And(Box<[Cond]>),
    Or(Box<[Cond]>),
    Not(Box<Cond>),
    Test(ValuePath, Test),
    /// A conjunction of tests on one path (`args.amount is number and args.amount <= 250`),
    /// so the path is looked up once. Built by [`Cond::all`]; same value as the `And`.
    SamePath(ValuePath, Box<[Test]>),
    /// `args.KEY is number and args.KEY OP BOUND`, the usual argument limit, evaluated
    /// without the generic test machinery. Built by [`Cond::all`]; same value as the
    /// `SamePath` it replaces (false when the argument is missing or not a number).
    ArgNumber {
        key: Box<str>,
        op: CmpOp,
        bound: f64,
    },
    /// A built-in precondition (`crate::builtins`), which reads only the standard facts.
    Builtin(crate::builtins::Pre),
}

/// Where a path starts, resolved at compile time.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Root {
    Args,
    Stage,
    StageTurns,
    Fields,
    /// `facts.principal`, written `principal.…`.
    Principal,
    /// A custom fact, by its top-level key.
    Other(Box<str>),
}

/// One step after the root.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Seg {
    Key(Box<str>),
    Index(usize),
}

/// A compiled path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ValuePath {
    pub(crate) root: Root,
    pub(crate) segs: Box<[Seg]>,
}

impl ValuePath {
    /// The path as written (`args.to[0]`, `facts.stage`).
    pub(crate) fn text(&self) -> String {
        let root = match &self.root {
            Root::Args => "args".to_string(),
            Root::Stage => "facts.stage".to_string(),
            Root::StageTurns => "facts.stage_turns".to_string(),
            Root::Fields => "facts.fields".to_string(),
            Root::Principal => "principal".to_string(),
            Root::Other(k) => format!("facts.{k}"),
        };
        segs_text(root, &self.segs)
    }
}

/// `start` followed by the steps, as written (`args` and `[to, 0]` give `args.to[0]`).
pub(crate) fn segs_text(start: String, segs: &[Seg]) -> String {
    let mut s = start;
    for seg in segs {
        match seg {
            Seg::Key(k) => {
                s.push('.');
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// A literal in a compiled test.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lit {
    Num(f64),
    Str(Box<str>),
    Bool(bool),
    Null,
}

/// The test applied to a path's value.
#[derive(Debug, Clone)]
pub(crate) enum Test {
    Cmp(CmpOp, Lit),
    InHosts(HostListId),
    InList(Box<[Lit]>),
    Matches(Regex),
    Is(TypeName),
    Exists,
    /// `in facts.PATH`: one of the fact's elements (each element, for a list value).
    InFact(ValuePath),
    /// `from SOURCE` (`crate::provenance`).
    From(Source),
    /// `mentions SOURCE` (`crate::provenance`).
    Mentions(Source),
}

impl Test {
    /// Whether the test reads the request's provenance index.
    pub(crate) fn reads_provenance(&self) -> bool {
        matches!(self, Test::From(_) | Test::Mentions(_))
    }
}

/// A value found at a path.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Found<'a> {
    Json(&'a Value),
    Str(&'a str),
    Num(u64),
}

/// What looking up a path gave.
#[derive(Clone, Copy)]
pub(crate) enum Lookup<'a> {
    Found(Found<'a>),
    /// A fact the request does not supply.
    Absent,
    /// An argument the call does not carry.
    Missing,
}

/// What a condition is evaluated against.
pub(crate) struct Env<'a> {
    pub(crate) args: &'a Value,
    pub(crate) facts: FactsRef<'a>,
    pub(crate) hosts: &'a [HostList],
    /// What the last ambiguous URL seen was ambiguous about (see [`AMBIGUOUS`]).
    pub(crate) ambiguity: Cell<Option<Ambiguity>>,
    /// The request's provenance index, built on first use; `None` where no request is
    /// judged (a provenance test is then unknown, as with absent outputs).
    pub(crate) provenance: Option<&'a crate::provenance::Lazy<'a>>,
}

impl<'a> Env<'a> {
    /// An environment for one call, with no provenance index (a provenance test is then
    /// unknown).
    pub(crate) fn new(args: &'a Value, facts: FactsRef<'a>, hosts: &'a [HostList]) -> Self {
        Env::judging(args, facts, hosts, None)
    }

    /// An environment for one call of a request being judged, with its provenance index.
    #[inline(always)]
    pub(crate) fn judging(
        args: &'a Value,
        facts: FactsRef<'a>,
        hosts: &'a [HostList],
        provenance: Option<&'a crate::provenance::Lazy<'a>>,
    ) -> Self {
        Env {
            args,
            facts,
            hosts,
            ambiguity: Cell::new(None),
            provenance,
        }
    }
}

impl Cond {
    pub(crate) fn eval(&self, env: &Env<'_>) -> Truth {
        match self {
            Cond::Const(b) => Truth::from_bool(*b),
            Cond::And(parts) => all_of(parts.iter().map(|p| p.eval(env))),
            Cond::Or(parts) => any_of(parts.iter().map(|p| p.eval(env))),
            Cond::Not(inner) => match inner.eval(env) {
                Truth::True => Truth::False,
                Truth::False => Truth::True,
                u => u,
            },
            Cond::Test(path, test) => eval_test(path, test, env),
            Cond::SamePath(path, tests) => {
                let found = lookup(path, env);
                all_of(tests.iter().map(|t| apply(found, t, env)))
            }
            Cond::ArgNumber { key, op, bound } => match env.args {
                Value::Object(args) => match args.get(&**key) {
                    Some(Value::Number(n)) => match n.as_f64() {
                        Some(a) => Truth::from_bool(cmp_num(a, *op, *bound)),
                        None => Truth::Unknown(INVALID),
                    },
                    _ => Truth::False,
                },
                _ => Truth::False,
            },
            Cond::Builtin(pre) => pre.eval(env.facts),
        }
    }

    /// The conjunction of `parts`, with each run of adjacent tests on one path fused into
    /// one [`Cond::SamePath`]. Kleene `and` does not depend on the order or grouping of its
    /// parts, so the value is unchanged; only the lookups are shared.
    pub(crate) fn all(parts: Vec<Cond>) -> Cond {
        let mut out: Vec<Cond> = Vec::with_capacity(parts.len());
        for part in parts {
            let Cond::Test(path, test) = part else {
                out.push(part);
                continue;
            };
            match out.last_mut() {
                Some(Cond::SamePath(p, tests)) if *p == path => {
                    let mut v = std::mem::take(tests).into_vec();
                    v.push(test);
                    *tests = v.into_boxed_slice();
                }
                Some(Cond::Test(p, _)) if *p == path => {
                    // The arm's guard just saw this test at the end of `out`.
                    if let Some(Cond::Test(p, first)) = out.pop() {
                        out.push(Cond::SamePath(p, vec![first, test].into_boxed_slice()));
                    }
                }
                _ => out.push(Cond::Test(path, test)),
            }
        }
        let mut out: Vec<Cond> = out.into_iter().map(Cond::arg_number).collect();
        if out.len() == 1 {
            out.pop().unwrap_or(Cond::Const(true))
        } else {
            Cond::And(out.into_boxed_slice())
        }
    }

    /// `args.KEY is number and args.KEY OP NUMBER` as [`Cond::ArgNumber`]; anything else
    /// unchanged.
    fn arg_number(self) -> Cond {
        let Cond::SamePath(path, tests) = self else {
            return self;
        };
        match (&path.root, &*path.segs, &*tests) {
            (
                Root::Args,
                [Seg::Key(key)],
                [Test::Is(TypeName::Number), Test::Cmp(op, Lit::Num(bound))],
            ) => Cond::ArgNumber {
                key: key.clone(),
                op: *op,
                bound: *bound,
            },
            _ => Cond::SamePath(path, tests),
        }
    }

    /// True when the condition reads the call's arguments. One that does not has the same
    /// value for every call of a batch, so the evaluator computes it once per batch.
    pub(crate) fn reads_args(&self) -> bool {
        match self {
            Cond::And(parts) | Cond::Or(parts) => parts.iter().any(Cond::reads_args),
            Cond::Not(inner) => inner.reads_args(),
            Cond::Test(path, _) | Cond::SamePath(path, _) => path.root == Root::Args,
            Cond::ArgNumber { .. } => true,
            Cond::Const(_) | Cond::Builtin(_) => false,
        }
    }

    /// True when the condition has a `from` or `mentions` test. Such a rule is never memoised
    /// across calls (its value depends on the call's arguments anyway) and its denial is put
    /// into words with the value's source.
    pub(crate) fn reads_provenance(&self) -> bool {
        match self {
            Cond::And(parts) | Cond::Or(parts) => parts.iter().any(Cond::reads_provenance),
            Cond::Not(inner) => inner.reads_provenance(),
            Cond::Test(_, t) => t.reads_provenance(),
            Cond::SamePath(_, tests) => tests.iter().any(Test::reads_provenance),
            Cond::Const(_) | Cond::ArgNumber { .. } | Cond::Builtin(_) => false,
        }
    }

    /// Each `from ingest` / `mentions ingest` test of the condition, with its path (the
    /// denial's words search them for the value that came from untrusted output).
    pub(crate) fn ingest_tests<'c>(&'c self, out: &mut Vec<(&'c ValuePath, bool)>) {
        match self {
            Cond::And(parts) | Cond::Or(parts) => parts.iter().for_each(|p| p.ingest_tests(out)),
            Cond::Not(inner) => inner.ingest_tests(out),
            Cond::Test(p, t) => push_ingest(out, p, t),
            Cond::SamePath(p, tests) => tests.iter().for_each(|t| push_ingest(out, p, t)),
            Cond::Const(_) | Cond::ArgNumber { .. } | Cond::Builtin(_) => {}
        }
    }

    /// True when the condition tests a host list. Such a rule is never memoised, so a denial
    /// always knows which URL ambiguity caused it.
    pub(crate) fn tests_hosts(&self) -> bool {
        match self {
            Cond::And(parts) | Cond::Or(parts) => parts.iter().any(Cond::tests_hosts),
            Cond::Not(inner) => inner.tests_hosts(),
            Cond::Test(_, t) => matches!(t, Test::InHosts(_)),
            Cond::SamePath(_, tests) => tests.iter().any(|t| matches!(t, Test::InHosts(_))),
            Cond::Const(_) | Cond::ArgNumber { .. } | Cond::Builtin(_) => false,
        }
    }

    /// Adds to `out` the top-level keys of custom facts this condition reads.
    pub(crate) fn collect_custom_facts(&self, out: &mut Vec<Box<str>>) {
        let mut note = |path: &ValuePath| {
            if let Root::Other(key) = &path.root {
                if !out.contains(key) {
                    out.push(key.clone());
                }
            }
        };
        let mut tests = |path: &ValuePath, tests: &[Test]| {
            note(path);
            for t in tests {
                if let Test::InFact(fact) = t {
                    note(fact);
                }
            }
        };
        match self {
            Cond::And(parts) | Cond::Or(parts) => {
                parts.iter().for_each(|p| p.collect_custom_facts(out))
            }
            Cond::Not(inner) => inner.collect_custom_facts(out),
            Cond::Test(path, test) => tests(path, std::slice::from_ref(test)),
            Cond::SamePath(path, ts) => tests(path, ts),
            Cond::Const(_) | Cond::ArgNumber { .. } | Cond::Builtin(_) => {}
        }
    }
}

fn push_ingest<'c>(out: &mut Vec<(&'c ValuePath, bool)>, path: &'c ValuePath, test: &Test) {
    match test {
        Test::From(Source::Ingest) => out.push((path, false)),
        Test::Mentions(Source::Ingest) => out.push((path, true)),
        _ => {}
    }
}

#[inline(always)]
pub(crate) fn lookup<'a>(path: &ValuePath, env: &Env<'a>) -> Lookup<'a> {
    let (start, fail) = match &path.root {
        Root::Args => (env.args, Lookup::Missing),
        Root::Stage => {
            return match env.facts.stage() {
                Some(s) if path.segs.is_empty() => Lookup::Found(Found::Str(s)),
                _ => Lookup::Absent,
            }
        }
        Root::StageTurns => {
            return match env.facts.stage_turns() {
                Some(n) if path.segs.is_empty() => Lookup::Found(Found::Num(n)),
                _ => Lookup::Absent,
            }
        }
        Root::Fields => match env.facts.fields() {
            None => return Lookup::Absent,
            Some(fields) => {
                let Some((first, rest)) = path.segs.split_first() else {
                    return Lookup::Absent;
                };
                let Seg::Key(k) = first else {
                    return Lookup::Absent;
                };
                match fields.get(&**k) {
                    None => return Lookup::Absent,
                    Some(v) => {
                        return walk(v, rest)
                            .map_or(Lookup::Absent, |v| Lookup::Found(Found::Json(v)))
                    }
                }
            }
        },
        Root::Principal => match env.facts.principal() {
            None => return Lookup::Absent,
            Some(v) => (v, Lookup::Absent),
        },
        Root::Other(key) => match env.facts.other(key) {
            None => return Lookup::Absent,
            Some(v) => (v, Lookup::Absent),
        },
    };
    match walk(start, &path.segs) {
        Some(v) => Lookup::Found(Found::Json(v)),
        None => fail,
    }
}

/// The value at an argument path (`path.root` is `Args`) of `args`.
pub(crate) fn arg_at<'a>(args: &'a Value, path: &ValuePath) -> Option<&'a Value> {
    debug_assert!(path.root == Root::Args);
    walk(args, &path.segs)
}

fn walk<'a>(mut v: &'a Value, segs: &[Seg]) -> Option<&'a Value> {
    for seg in segs {
        v = match (seg, v) {
            (Seg::Key(k), Value::Object(m)) => m.get(&**k)?,
            (Seg::Index(i), Value::Array(a)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(v)
}

/// Kleene `and` of lazily computed parts: false as soon as one part is false, else
/// unknown (with every reason seen) if any part is unknown.
#[inline]
fn all_of(parts: impl Iterator<Item = Truth>) -> Truth {
    let mut unknown = 0u8;
    for t in parts {
        match t {
            Truth::False => return Truth::False,
            Truth::Unknown(f) => unknown |= f,
            Truth::True => {}
        }
    }
    if unknown != 0 {
        Truth::Unknown(unknown)
    } else {
        Truth::True
    }
}

/// Kleene `or`, the dual of [`all_of`].
#[inline]
fn any_of(parts: impl Iterator<Item = Truth>) -> Truth {
    let mut unknown = 0u8;
    for t in parts {
        match t {
            Truth::True => return Truth::True,
            Truth::Unknown(f) => unknown |= f,
            Truth::False => {}
        }
    }
    if unknown != 0 {
        Truth::Unknown(unknown)
    } else {
        Truth::False
    }
}

pub(crate) fn eval_test(path: &ValuePath, test: &Test, env: &Env<'_>) -> Truth {
    apply(lookup(path, env), test, env)
}

/// `test` applied to what looking up its path gave.
#[inline(always)]
fn apply(found: Lookup<'_>, test: &Test, env: &Env<'_>) -> Truth {
    let found = match found {
        Lookup::Found(f) => f,
        Lookup::Absent => {
            return match test {
                Test::Exists | Test::Is(_) => Truth::False,
                _ => Truth::Unknown(ABSENT),
            }
        }
        // A missing argument came from nowhere.
        Lookup::Missing if matches!(test, Test::From(_) | Test::Mentions(_)) => {
            return Truth::False
        }
        Lookup::Missing => {
            return match test {
                Test::Exists | Test::Is(_) => Truth::False,
                _ => Truth::Unknown(INVALID),
            }
        }
    };
    match test {
        Test::Exists => Truth::True,
        Test::Is(t) => Truth::from_bool(is_type(found, *t)),
        Test::Cmp(op, lit) => compare(found, *op, lit),
        Test::InList(items) => match scalar(found) {
            Some(v) => Truth::from_bool(items.iter().any(|lit| equals(v, lit))),
            None => Truth::Unknown(INVALID),
        },
        Test::Matches(re) => match as_str(found) {
            Some(s) => Truth::from_bool(re.is_match(s)),
            None => Truth::Unknown(INVALID),
        },
        Test::InHosts(id) => match (as_str(found), env.hosts.get(id.index())) {
            (Some(s), Some(list)) => match list.check(s) {
                Ok(on_list) => Truth::from_bool(on_list),
                // Unknown, not false: `not args.url in hosts blocked` must not pass a URL
                // that some client reads as a blocked host.
                Err(why) => {
                    env.ambiguity.set(Some(why));
                    Truth::Unknown(INVALID | AMBIGUOUS)
                }
            },
            _ => Truth::Unknown(INVALID),
        },
        Test::InFact(fact) => in_fact(found, fact, env),
        Test::From(source) | Test::Mentions(source) => {
            // No index (no request judged): unknown, and never one `on_missing` lets through.
            let Some(index) = env.provenance else {
                return Truth::Unknown(INVALID);
            };
            let owned;
            let value = match found {
                Found::Json(v) => v,
                Found::Str(s) => {
                    owned = Value::from(s);
                    &owned
                }
                Found::Num(n) => {
                    owned = Value::from(n);
                    &owned
                }
            };
            let index = index.get();
            match (test, source) {
                (Test::From(_), Source::Ingest) => crate::provenance::from_ingest(value, index),
                (Test::From(_), Source::Prompt) => crate::provenance::from_prompt(value, index),
                (_, Source::Ingest) => crate::provenance::mentions_ingest(value, index),
                (_, Source::Prompt) => crate::provenance::mentions_prompt(value, index),
            }
        }
    }
}

/// `in facts.PATH`: the fact must be a list; a scalar value is in it when it equals one of
/// its elements (strings compared by their provenance key, so case and surrounding
/// punctuation do not matter), a list value when each of its elements is.
fn in_fact(found: Found<'_>, fact: &ValuePath, env: &Env<'_>) -> Truth {
    let list = match lookup(fact, env) {
        Lookup::Found(Found::Json(Value::Array(items))) => items,
        Lookup::Found(_) => return Truth::Unknown(INVALID),
        Lookup::Absent | Lookup::Missing => return Truth::Unknown(ABSENT),
    };
    let member = |v: Scalar<'_>| {
        list.iter().any(|item| match (v, item) {
            (Scalar::Str(a), Value::String(b)) => {
                a == b
                    || matches!((crate::provenance::key::loose(a), crate::provenance::key::loose(b)), (Some(x), Some(y)) if x == y)
            }
            (Scalar::Num(a), Value::Number(b)) => b.as_f64() == Some(a),
            (Scalar::Bool(a), Value::Bool(b)) => a == *b,
            (Scalar::Null, Value::Null) => true,
            _ => false,
        })
    };
    match found {
        Found::Json(Value::Array(items)) => {
            let mut all = true;
            for item in items {
                match scalar(Found::Json(item)) {
                    Some(v) => all &= member(v),
                    None => return Truth::Unknown(INVALID),
                }
            }
            Truth::from_bool(all)
        }
        f => match scalar(f) {
            Some(v) => Truth::from_bool(member(v)),
            None => Truth::Unknown(INVALID),
        },
    }
}

/// A scalar view of a found value.
#[derive(Clone, Copy)]
enum Scalar<'a> {
    Num(f64),
    Str(&'a str),
    Bool(bool),
    Null,
}

fn scalar(f: Found<'_>) -> Option<Scalar<'_>> {
    Some(match f {
        Found::Str(s) => Scalar::Str(s),
        Found::Num(n) => Scalar::Num(n as f64),
        Found::Json(Value::String(s)) => Scalar::Str(s),
        Found::Json(Value::Number(n)) => Scalar::Num(n.as_f64()?),
        Found::Json(Value::Bool(b)) => Scalar::Bool(*b),
        Found::Json(Value::Null) => Scalar::Null,
        Found::Json(_) => return None,
    })
}

fn as_str(f: Found<'_>) -> Option<&str> {
    match f {
        Found::Str(s) => Some(s),
        Found::Json(Value::String(s)) => Some(s),
        _ => None,
    }
}

fn equals(v: Scalar<'_>, lit: &Lit) -> bool {
    match (v, lit) {
        (Scalar::Num(a), Lit::Num(b)) => a == *b,
        (Scalar::Str(a), Lit::Str(b)) => a == &**b,
        (Scalar::Bool(a), Lit::Bool(b)) => a == *b,
        (Scalar::Null, Lit::Null) => true,
        _ => false,
    }
}

#[inline]
pub(crate) fn cmp_num(a: f64, op: CmpOp, b: f64) -> bool {
    match op {
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Ge => a >= b,
        CmpOp::Gt => a > b,
    }
}

fn compare(found: Found<'_>, op: CmpOp, lit: &Lit) -> Truth {
    // `== null` / `!= null` accept any type, objects and arrays included: that is their point.
    if let Lit::Null = lit {
        let is_null = matches!(found, Found::Json(Value::Null));
        return Truth::from_bool(if op == CmpOp::Ne { !is_null } else { is_null });
    }
    let Some(v) = scalar(found) else {
        return Truth::Unknown(INVALID);
    };
    match (v, lit) {
        (Scalar::Num(a), Lit::Num(b)) => Truth::from_bool(cmp_num(a, op, *b)),
        (Scalar::Str(_), Lit::Str(_)) | (Scalar::Bool(_), Lit::Bool(_)) => {
            let eq = equals(v, lit);
            Truth::from_bool(if op == CmpOp::Ne { !eq } else { eq })
        }
        _ => Truth::Unknown(INVALID),
    }
}

fn is_type(f: Found<'_>, t: TypeName) -> bool {
    match f {
        Found::Str(_) => t == TypeName::String,
        Found::Num(_) => matches!(t, TypeName::Number | TypeName::Integer),
        Found::Json(v) => match (t, v) {
            (TypeName::String, Value::String(_))
            | (TypeName::Number, Value::Number(_))
            | (TypeName::Bool, Value::Bool(_))
            | (TypeName::Array, Value::Array(_))
            | (TypeName::Object, Value::Object(_))
            | (TypeName::Null, Value::Null) => true,
            (TypeName::Integer, Value::Number(n)) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|x| x.fract() == 0.0)
            }
            _ => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truth_survives_its_byte_encoding() {
        for t in [
            Truth::True,
            Truth::False,
            Truth::Unknown(ABSENT),
            Truth::Unknown(INVALID),
            Truth::Unknown(ABSENT | INVALID),
        ] {
            assert_eq!(Truth::from_byte(t.to_byte()), t);
        }
    }
}
