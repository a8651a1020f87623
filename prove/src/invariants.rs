//! Checking invariants: exhaustive enumeration of the finite part of the domain, then a
//! seeded, shrinking property search over arguments and facts where the finite part alone
//! cannot decide.
//!
//! The finite part is every stage the policy declares plus one it does not and a missing
//! stage; `stage_turns` at and past each `max_turns`; `latched` false and true; and every
//! batch of one or two calls over the classified tools plus one unclassified tool (so each
//! tool alone, with a companion of every tool and class, in both positions). For each call
//! of each such request, an invariant is *proved* at that point when the engine denies the
//! call before any rule runs (unclassified, stage or latch: those checks read no argument and
//! no other fact), or when the invariant's scope excludes the call whatever the arguments.
//! The remaining points reach the tool's rules; they are searched with generated arguments
//! and facts guided by the policy.

use crate::guide::{Guide, Seg};
use proptest::prelude::*;
use proptest::test_runner::{
    Config as RunnerConfig, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner,
};
use serde_json::{Map, Value};
use toolgate_engine::{
    Applies, Call, CalledTool, Decision, DenyKind, Facts, Invariants, Latched, Message, Policy,
    Request,
};

/// How much searching to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Generated cases per invariant that has points left open by enumeration.
    pub cases: u32,
    /// The seed of the search; the same seed gives the same cases.
    pub seed: u64,
}

/// The seed used when none is given.
pub const DEFAULT_SEED: u64 = 0x7001_6a7e;
/// The case count used when none is given: about a second per searched invariant of the
/// shipped examples in a release build (docs/testing.md has the measurement). Fixed rather
/// than timed, so a seed reproduces the same cases on any machine.
pub const DEFAULT_CASES: u32 = 100_000;

impl Default for Config {
    fn default() -> Self {
        Config {
            cases: DEFAULT_CASES,
            seed: DEFAULT_SEED,
        }
    }
}

/// The result of checking one invariant.
#[derive(Debug, Clone)]
pub struct InvariantResult {
    /// The invariant's name.
    pub name: String,
    /// Where it is declared (`file:line:col`).
    pub location: String,
    /// Requests in the enumerated domain.
    pub requests: usize,
    /// Call points (a call of an enumerated request) looked at.
    pub points: usize,
    /// Points proved for every argument and fact value.
    pub proved: usize,
    /// Points that depend on arguments or facts, left to the search.
    pub open: usize,
    /// Generated cases run before the search stopped (at the first violation, or at the
    /// budget); 0 when nothing was open or enumeration found a violation.
    pub cases: u32,
    /// The search seed.
    pub seed: u64,
    /// The violation found, if any.
    pub counterexample: Option<Counterexample>,
}

impl InvariantResult {
    /// True when no violation was found.
    pub fn passed(&self) -> bool {
        self.counterexample.is_none()
    }

    /// True when every point was proved (no search was needed).
    pub fn proved_everywhere(&self) -> bool {
        self.open == 0 && self.passed()
    }
}

/// A request that breaks an invariant, ready for `toolgate eval`.
#[derive(Debug, Clone)]
pub struct Counterexample {
    /// The request.
    pub request: Request,
    /// The index of the offending call.
    pub call: usize,
    /// The decision that allowed it.
    pub decision: Decision,
    /// True when found by the search (and shrunk), false when found by enumeration.
    pub searched: bool,
}

impl Counterexample {
    /// The request as indented JSON, in the shape `toolgate eval --input` reads.
    pub fn request_json(&self) -> String {
        serde_json::to_string_pretty(&self.request.to_value()).unwrap_or_default()
    }

    /// The decision as JSON.
    pub fn decision_json(&self) -> String {
        serde_json::to_string(&self.decision).unwrap_or_default()
    }
}

/// Checks every invariant of `invariants` against `policy`. `guide` is built from the
/// policy's and the invariants' syntax trees ([`Guide::new`]).
pub fn check(
    policy: &Policy,
    invariants: &Invariants,
    guide: &Guide,
    config: &Config,
) -> Vec<InvariantResult> {
    let domain = Domain::new(policy, guide);
    (0..invariants.len())
        .map(|i| check_one(policy, invariants, i, guide, &domain, config))
        .collect()
}

/// The enumerated requests (arguments `{}`, no facts beyond stage, turns and latch).
struct Domain {
    requests: Vec<Request>,
    decisions: Vec<Vec<Decision>>,
}

pub(crate) fn unique(base: &str, taken: &[String]) -> String {
    let mut name = base.to_string();
    while taken.contains(&name) {
        name.push('_');
    }
    name
}

impl Domain {
    fn new(policy: &Policy, guide: &Guide) -> Self {
        let mut tools: Vec<String> = policy.tools().map(|(t, _)| t.to_string()).collect();
        tools.push(unique("unclassified_tool", &tools));
        let declared: Vec<String> = policy.stages().map(str::to_string).collect();
        // (stage, stage_turns) points.
        let mut stages: Vec<(Option<String>, Option<u64>)> = Vec::new();
        for s in &declared {
            match guide.max_turns.get(s) {
                Some(m) => {
                    stages.push((Some(s.clone()), Some(*m)));
                    stages.push((Some(s.clone()), Some(m.saturating_add(1))));
                }
                None => stages.push((Some(s.clone()), None)),
            }
        }
        stages.push((Some(unique("undefined_stage", &declared)), None));
        stages.push((None, None));
        let mut batches: Vec<Vec<&str>> = tools.iter().map(|t| vec![t.as_str()]).collect();
        for a in &tools {
            for b in &tools {
                batches.push(vec![a.as_str(), b.as_str()]);
            }
        }
        let mut requests = Vec::new();
        for batch in &batches {
            for (stage, turns) in &stages {
                for latched in [false, true] {
                    let facts = Facts {
                        stage: stage.clone(),
                        stage_turns: *turns,
                        latched: Latched::Flag(latched),
                        ..Facts::default()
                    };
                    let calls = batch
                        .iter()
                        .enumerate()
                        .map(|(i, t)| {
                            Call::new(format!("c{}", i + 1), *t, Value::Object(Map::new()))
                        })
                        .collect();
                    requests.push(Request::new(facts, calls));
                }
            }
        }
        let decisions = requests
            .iter()
            .map(|r| policy.decide(r).decisions)
            .collect();
        Domain {
            requests,
            decisions,
        }
    }
}

/// Denials that happen before any rule, so no argument or other fact can change them: the
/// class, stage and latch checks, except a stage check that comes down to the stage's
/// `require` (which reads the principal and facts).
pub(crate) fn structural(policy: &Policy, request: &Request, call: usize, d: &Decision) -> bool {
    !d.allow
        && match d.kind {
            Some(DenyKind::Unclassified | DenyKind::Latch) => true,
            Some(DenyKind::Stage) => !request.calls.get(call).is_some_and(|c| {
                policy.stage_requirement_decides(
                    request.facts.stage.as_deref(),
                    &c.tool,
                    request.facts.stage_turns,
                )
            }),
            _ => false,
        }
}

fn violation_at(
    policy: &Policy,
    invariants: &Invariants,
    index: usize,
    request: &Request,
    call: usize,
) -> Option<Decision> {
    let name = invariants.names().nth(index)?;
    let response = policy.decide(request);
    invariants
        .violations(policy, request, &response)
        .into_iter()
        .find(|v| v.call == call && &*v.invariant == name)
        .map(|v| v.decision)
}

fn check_one(
    policy: &Policy,
    invariants: &Invariants,
    index: usize,
    guide: &Guide,
    domain: &Domain,
    config: &Config,
) -> InvariantResult {
    let mut result = InvariantResult {
        name: invariants
            .names()
            .nth(index)
            .unwrap_or_default()
            .to_string(),
        location: invariants.location(index),
        requests: domain.requests.len(),
        points: 0,
        proved: 0,
        open: 0,
        cases: 0,
        seed: config.seed,
        counterexample: None,
    };
    let mut open: Vec<(usize, usize)> = Vec::new();
    for (r, request) in domain.requests.iter().enumerate() {
        for c in 0..request.calls.len() {
            result.points += 1;
            if invariants.applies(index, policy, request, c) == Applies::No {
                result.proved += 1;
                continue;
            }
            match domain.decisions[r].get(c) {
                Some(d) if structural(policy, request, c, d) => {
                    result.proved += 1;
                    continue;
                }
                _ => {}
            }
            if result.counterexample.is_none() {
                if let Some(decision) = violation_at(policy, invariants, index, request, c) {
                    result.counterexample = Some(Counterexample {
                        request: request.clone(),
                        call: c,
                        decision,
                        searched: false,
                    });
                }
            }
            open.push((r, c));
        }
    }
    result.open = open.len();
    if result.counterexample.is_some() || open.is_empty() || config.cases == 0 {
        return result;
    }
    let (cases, counterexample) = search(policy, invariants, index, guide, domain, &open, config);
    result.cases = cases;
    result.counterexample = counterexample;
    result
}

/// One generated case: which open point, and the arguments and facts to fill in.
#[derive(Debug, Clone)]
struct Case {
    point: usize,
    args: Vec<Option<Value>>,
    /// Where each generated argument value (by [`Guide::args`] path) also appears, for a
    /// policy that reads provenance ([`Guide::provenance`]): [`NOWHERE`], [`UNTRUSTED`],
    /// [`PROMPT`] or [`BOTH`]. `None`: the request carries no `facts.outputs` (nor prompt).
    sources: Option<Vec<u8>>,
    messages: Option<Vec<Message>>,
    fields: Option<Vec<Option<Value>>>,
    called: Option<Vec<(String, bool, Option<u64>)>>,
    facts: Vec<Option<Value>>,
}

fn search(
    policy: &Policy,
    invariants: &Invariants,
    index: usize,
    guide: &Guide,
    domain: &Domain,
    open: &[(usize, usize)],
    config: &Config,
) -> (u32, Option<Counterexample>) {
    let points: Vec<(&Request, usize)> = open
        .iter()
        .map(|&(r, c)| (&domain.requests[r], c))
        .collect();
    let found = guided_search(guide, &points, config, |request, call| {
        violation_at(policy, invariants, index, request, call).is_some()
    });
    let counterexample = found.hit.and_then(|(request, call, _)| {
        let decision = violation_at(policy, invariants, index, &request, call)?;
        Some(Counterexample {
            request,
            call,
            decision,
            searched: true,
        })
    });
    (found.cases, counterexample)
}

/// What [`guided_search`] found.
pub(crate) struct Found {
    /// Cases generated before the first hit (or all of them), shrinking not counted.
    pub(crate) cases: u32,
    /// The shrunk request that `hit` accepted, its call index and the index of its point.
    pub(crate) hit: Option<(Request, usize, usize)>,
}

/// The seeded, shrinking search over arguments and facts: fills generated arguments and facts
/// into the given points (a request and the index of the call to vary) until `hit` accepts
/// one, then shrinks it. The one search behind invariants and `toolgate diff`.
pub(crate) fn guided_search(
    guide: &Guide,
    points: &[(&Request, usize)],
    config: &Config,
    hit: impl Fn(&Request, usize) -> bool,
) -> Found {
    if points.is_empty() || config.cases == 0 {
        return Found {
            cases: 0,
            hit: None,
        };
    }
    let strategy = case_strategy(guide, points.len());
    // XorShift, not ChaCha: the search needs reproducible cases, not cryptographic ones, and
    // ChaCha was most of the time per case in a debug build (the CI build).
    let mut seed = [0u8; 16];
    for (i, b) in seed.iter_mut().enumerate() {
        *b = (config.seed.rotate_left((i as u32 % 8) * 8) & 0xff) as u8 ^ (i as u8);
    }
    let runner_config = RunnerConfig {
        cases: config.cases,
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..RunnerConfig::default()
    };
    let mut runner = TestRunner::new_with_rng(
        runner_config,
        TestRng::from_seed(RngAlgorithm::XorShift, &seed),
    );
    let build = |case: &Case| -> (Request, usize, usize) {
        let point = case.point.min(points.len() - 1);
        let (request, call) = points[point];
        (fill(request, call, case, guide), call, point)
    };
    let ran = std::cell::Cell::new(0u32);
    let failed = std::cell::Cell::new(false);
    let outcome = runner.run(&strategy, |case| {
        if !failed.get() {
            ran.set(ran.get().saturating_add(1));
        }
        let (request, call, _) = build(&case);
        if hit(&request, call) {
            failed.set(true);
            Err(TestCaseError::fail("found"))
        } else {
            Ok(())
        }
    });
    let hit = match outcome {
        Err(TestError::Fail(_, case)) => Some(build(&case)),
        _ => None,
    };
    Found {
        cases: ran.get(),
        hit,
    }
}

/// An argument value planted nowhere: outputs are known, and it is in none.
const NOWHERE: u8 = 0;
/// Planted in an untrusted output (a tool the policy does not classify, so untrusted).
const UNTRUSTED: u8 = 1;
/// Planted in the prompt (trusted).
const PROMPT: u8 = 2;
/// Planted in both: a value the user typed that an untrusted output repeats.
const BOTH: u8 = 3;
/// The tool the planted untrusted output is recorded under; no policy classifies it.
const UNTRUSTED_SOURCE: &str = "toolgate_search_untrusted_source";

/// The request's `facts.outputs` and `facts.prompt` from the case's plan: each argument
/// value in an untrusted output, the prompt, both or neither.
fn plant_sources(request: &mut Request, guide: &Guide, case: &Case) {
    let Some(marks) = &case.sources else {
        return;
    };
    let mut untrusted = Vec::new();
    let mut prompt = Vec::new();
    for (value, mark) in case.args.iter().zip(marks) {
        let Some(v) = value else { continue };
        if matches!(*mark, UNTRUSTED | BOTH) {
            untrusted.push(v.clone());
        }
        if matches!(*mark, PROMPT | BOTH) {
            prompt_text(v, &mut prompt);
        }
    }
    debug_assert_eq!(marks.len(), guide.args.len());
    let outputs = if untrusted.is_empty() {
        Vec::new()
    } else {
        vec![
            serde_json::json!({"id": "search-output", "tool": UNTRUSTED_SOURCE, "output": untrusted}),
        ]
    };
    request.facts.outputs = Some(Value::Array(outputs));
    request.facts.prompt = (!prompt.is_empty()).then(|| prompt.join(" "));
}

/// The text of a value's leaves, as a user would type them.
fn prompt_text(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| prompt_text(i, out)),
        Value::Object(m) => m.values().for_each(|i| prompt_text(i, out)),
        Value::Null => {}
        other => out.push(other.to_string()),
    }
}

/// The enumerated request with the open call's arguments and the generated facts.
fn fill(base: &Request, call: usize, case: &Case, guide: &Guide) -> Request {
    let mut request = base.clone();
    let mut args = Value::Object(Map::new());
    for ((path, _), value) in guide.args.iter().zip(&case.args) {
        if let Some(v) = value {
            set_path(&mut args, path, v.clone());
        }
    }
    if let Some(c) = request.calls.get_mut(call) {
        c.args = args;
    }
    let facts = &mut request.facts;
    facts.messages.clone_from(&case.messages);
    facts.fields = case.fields.as_ref().map(|values| {
        guide
            .fields
            .iter()
            .zip(values)
            .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
            .collect()
    });
    facts.called = case.called.as_ref().map(|cs| {
        cs.iter()
            .map(|(tool, ok, turns_ago)| CalledTool {
                tool: tool.clone(),
                ok: *ok,
                turns_ago: *turns_ago,
            })
            .collect()
    });
    let mut other = Value::Object(Map::new());
    for ((path, _), value) in guide.facts.iter().zip(&case.facts) {
        if let Some(v) = value {
            set_path(&mut other, path, v.clone());
        }
    }
    if let Value::Object(mut m) = other {
        // A principal the search wrote is the standard fact, not a custom one.
        facts.principal = m.remove(toolgate_engine::schema::PRINCIPAL);
        facts.other = m;
    }
    plant_sources(&mut request, guide, case);
    request
}

/// Writes `v` at `path` inside `root`, creating objects and arrays on the way.
fn set_path(root: &mut Value, path: &[Seg], v: Value) {
    let Some((first, rest)) = path.split_first() else {
        *root = v;
        return;
    };
    match first {
        Seg::Key(k) => {
            if !root.is_object() {
                *root = Value::Object(Map::new());
            }
            if let Value::Object(m) = root {
                let slot = m.entry(k.clone()).or_insert(Value::Null);
                set_path(slot, rest, v);
            }
        }
        Seg::Index(i) => {
            if !root.is_array() {
                *root = Value::Array(Vec::new());
            }
            if let Value::Array(a) = root {
                if *i > 64 {
                    return;
                }
                while a.len() <= *i {
                    a.push(Value::Null);
                }
                set_path(&mut a[*i], rest, v);
            }
        }
    }
}

/// Strings that match each regex, and near misses.
fn regex_strategies(regexes: Option<&Vec<String>>) -> Vec<(u32, BoxedStrategy<Value>)> {
    let mut out = Vec::new();
    for re in regexes.into_iter().flatten() {
        let body = re.strip_prefix('^').unwrap_or(re);
        let body = body.strip_suffix('$').unwrap_or(body);
        if let Ok(s) = proptest::string::string_regex(body) {
            let s = s.boxed();
            out.push((4, s.clone().prop_map(Value::from).boxed()));
            out.push((
                2,
                (s, 0..4usize)
                    .prop_map(|(s, how)| {
                        Value::from(match how {
                            0 => format!("{s}0"),
                            1 => format!("x{s}"),
                            2 => s.chars().skip(1).collect(),
                            _ => s.to_lowercase(),
                        })
                    })
                    .boxed(),
            ));
        }
    }
    out
}

fn value_strategy(
    values: &[Value],
    regexes: Vec<(u32, BoxedStrategy<Value>)>,
) -> BoxedStrategy<Option<Value>> {
    let mut alts: Vec<(u32, BoxedStrategy<Option<Value>>)> = vec![(1, Just(None).boxed())];
    if !values.is_empty() {
        alts.push((
            6,
            prop::sample::select(values.to_vec()).prop_map(Some).boxed(),
        ));
    }
    for (weight, r) in regexes {
        alts.push((weight, r.prop_map(Some).boxed()));
    }
    prop::strategy::Union::new_weighted(alts).boxed()
}

fn message_strategy(kinds: Vec<String>) -> BoxedStrategy<Message> {
    (
        prop::sample::select(vec!["client", "assistant"]),
        prop::collection::vec(prop::sample::select(kinds), 0..=2),
    )
        .prop_map(|(from, media)| Message {
            from: from.to_string(),
            media,
        })
        .boxed()
}

/// Message lists with a media message exactly around each window's edge.
fn boundary_messages(windows: Vec<usize>, kinds: Vec<String>) -> BoxedStrategy<Vec<Message>> {
    (
        prop::sample::select(windows),
        -1i64..=1,
        prop::sample::select(kinds),
        prop::sample::select(vec!["client", "assistant"]),
        0usize..3,
    )
        .prop_map(|(w, offset, kind, from, noise)| {
            let mut ms = vec![Message {
                from: from.to_string(),
                media: vec![kind.clone()],
            }];
            let later = (w as i64 - 1 + offset).max(0) as usize;
            for i in 0..later {
                ms.push(Message::new("client", &[]));
                if i < noise {
                    ms.push(Message {
                        from: "assistant".into(),
                        media: vec![kind.clone()],
                    });
                }
            }
            ms
        })
        .boxed()
}

fn case_strategy(guide: &Guide, points: usize) -> BoxedStrategy<Case> {
    let args: Vec<BoxedStrategy<Option<Value>>> = guide
        .args
        .iter()
        .map(|(path, v)| value_strategy(v, regex_strategies(guide.arg_regexes.get(path))))
        .collect();
    let facts: Vec<BoxedStrategy<Option<Value>>> = guide
        .facts
        .iter()
        .map(|(path, v)| value_strategy(v, regex_strategies(guide.fact_regexes.get(path))))
        .collect();
    let mut kinds = guide.kinds.clone();
    kinds.extend(["image".to_string(), "video".to_string()]);
    kinds.sort();
    kinds.dedup();
    let max_window = guide.windows.iter().copied().max().unwrap_or(3);
    let windows = if guide.windows.is_empty() {
        vec![1, 3]
    } else {
        guide.windows.clone()
    };
    let messages = prop_oneof![
        2 => Just(None),
        1 => Just(Some(Vec::new())),
        3 => prop::collection::vec(message_strategy(kinds.clone()), 0..=max_window + 2).prop_map(Some),
        4 => boundary_messages(windows, kinds).prop_map(Some),
    ];
    // Every side of what `field_filled` counts as filled (docs/language.md).
    let field_values = vec![
        None,
        Some(Value::Null),
        Some(Value::from("")),
        Some(Value::from("  ")),
        Some(Value::from("\u{200B}\u{FEFF}")),
        Some(Value::from("\u{3164}\u{00A0}")),
        Some(Value::from("x")),
        Some(Value::from("\u{200B}x")),
        Some(Value::from(1)),
        Some(Value::from(0)),
        Some(Value::from(true)),
        Some(Value::from(false)),
        Some(Value::Array(Vec::new())),
        Some(Value::Object(serde_json::Map::new())),
    ];
    let n_fields = guide.fields.len();
    let fields = prop_oneof![
        1 => Just(None),
        3 => prop::collection::vec(prop::sample::select(field_values), n_fields..=n_fields).prop_map(Some),
    ];
    let mut called_tools = guide.called.clone();
    called_tools.push("some_other_tool".into());
    // Ages at, just inside and just outside each `called_within` bound, and undated.
    let mut ages: Vec<Option<u64>> = vec![None, Some(0)];
    for &t in &guide.turns {
        ages.extend([Some(t.saturating_sub(1)), Some(t), Some(t + 1)]);
    }
    let entry = (
        prop::sample::select(called_tools),
        any::<bool>(),
        prop::sample::select(ages),
    );
    let called = prop_oneof![
        1 => Just(None),
        3 => prop::collection::vec(entry, 0..=3).prop_map(Some),
    ];
    // Only for a policy that reads provenance: `Just` draws nothing, so every other
    // policy's search is the same case for case as before.
    let n_args = guide.args.len();
    let sources = if guide.provenance {
        prop_oneof![
            1 => Just(None),
            1 => Just(Some(vec![NOWHERE; n_args])),
            4 => prop::collection::vec(
                prop::sample::select(vec![NOWHERE, UNTRUSTED, UNTRUSTED, PROMPT, BOTH]),
                n_args..=n_args,
            )
            .prop_map(Some),
        ]
        .boxed()
    } else {
        Just(None).boxed()
    };
    (
        0..points.max(1),
        args,
        messages,
        fields,
        called,
        facts,
        sources,
    )
        .prop_map(
            |(point, args, messages, fields, called, facts, sources)| Case {
                point,
                args,
                sources,
                messages,
                fields,
                called,
                facts,
            },
        )
        .boxed()
}
