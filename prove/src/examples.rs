//! Example tests: requests with the decisions they must get.
//!
//! A test file (`NAME.tests.json` beside `NAME.gate`) is a JSON object:
//!
//! ```json
//! {"cases": [
//!   {"name": "a write after a doc search is refused",
//!    "request": {"facts": {"stage": "coach"},
//!                "calls": [{"id": "c1", "tool": "grade_attempt", "args": {}},
//!                          {"id": "c2", "tool": "search_aws_docs", "args": {}}]},
//!    "latched": true,
//!    "expect": [{"allow": false, "kind": "latch", "rule": "documentation_read"},
//!               {"allow": true}]}
//! ]}
//! ```
//!
//! `expect` has one entry per call, in order: `allow` is required; `kind`, `rule` and
//! `fail_open` are compared when given, and `reason` is text the refusal must contain.
//! `latched` (the response's latch state, any latch set) is compared when given. Any other
//! key is an error with a did-you-mean, and every error of a file is reported at once.

use serde_json::Value;
use std::collections::BTreeSet;
use toolgate_engine::{DenyKind, Policy, Request, Response};
use toolgate_lang::ast::{Item, Selector};

/// A test file that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct TestFileError {
    /// Where in the file, e.g. `cases[2].expect[0].kind`.
    pub path: String,
    /// What is wrong there.
    pub message: String,
}

/// The expected decision for one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Expect {
    /// Must the call be allowed?
    pub allow: bool,
    /// The denial kind, when checked.
    pub kind: Option<DenyKind>,
    /// The denying rule, stage or latch name, when checked.
    pub rule: Option<String>,
    /// Text the refusal must contain, when checked (a substring, so a test survives a
    /// rewording of the rest).
    pub reason: Option<String>,
    /// Whether the call failed open, when checked.
    pub fail_open: Option<bool>,
}

/// One example test.
#[derive(Debug, Clone)]
pub struct Case {
    /// The case's name.
    pub name: String,
    /// The request as written (read only when the case runs, so a malformed one fails it).
    pub request: Value,
    /// One expectation per call.
    pub expect: Vec<Expect>,
    /// The response's latch state, when checked.
    pub latched: Option<bool>,
}

/// A parsed test file.
#[derive(Debug, Clone)]
pub struct TestFile {
    /// The cases, in file order.
    pub cases: Vec<Case>,
}

/// The outcome of one case.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// The case's name.
    pub name: String,
    /// Each difference between expected and actual, readable; empty when the case passed.
    pub failures: Vec<String>,
    /// The request, when it could be read.
    pub request: Option<Request>,
    /// The response, when the request could be judged.
    pub response: Option<Response>,
}

impl CaseResult {
    /// True when the case passed.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

fn err(path: impl Into<String>, message: impl Into<String>) -> TestFileError {
    TestFileError {
        path: path.into(),
        message: message.into(),
    }
}

/// Every mistake found in a test file, in file order: a file is read to the end, so one run
/// shows them all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct TestFileErrors {
    /// At least one.
    pub errors: Vec<TestFileError>,
}

/// The keys of a test file, a case and an expectation: anything else is a mistake (most
/// often a misspelling, which would otherwise silently check nothing).
const FILE_KEYS: [&str; 1] = ["cases"];
const CASE_KEYS: [&str; 4] = ["name", "request", "expect", "latched"];
const EXPECT_KEYS: [&str; 5] = ["allow", "kind", "rule", "reason", "fail_open"];

/// An error per key of `object` not in `known`, with a did-you-mean.
fn unknown_keys(
    object: &Value,
    known: &[&str],
    what: &str,
    at: &str,
    errors: &mut Vec<TestFileError>,
) {
    let Value::Object(map) = object else {
        return;
    };
    for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
        let hint = match toolgate_lang::did_you_mean(key, known.iter().copied()) {
            Some(near) => format!("did you mean `{near}`? "),
            None => String::new(),
        };
        errors.push(err(
            join(at, key),
            format!("unknown key `{key}`; {hint}{what} has {}", list(known)),
        ));
    }
}

fn join(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_string()
    } else {
        format!("{at}.{key}")
    }
}

fn list(keys: &[&str]) -> String {
    keys.iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl TestFile {
    /// Reads a test file's JSON text; every mistake is reported, not only the first.
    pub fn parse(text: &str) -> Result<Self, TestFileErrors> {
        let value: Value = serde_json::from_str(text).map_err(|e| TestFileErrors {
            errors: vec![err(
                format!("line {} column {}", e.line(), e.column()),
                format!("not valid JSON: {e}"),
            )],
        })?;
        let mut errors = Vec::new();
        unknown_keys(&value, &FILE_KEYS, "a test file", "", &mut errors);
        let Some(cases) = value.get("cases").and_then(Value::as_array) else {
            errors.push(err(
                "cases",
                "expected an array of cases: {\"cases\": [..]}",
            ));
            return Err(TestFileErrors { errors });
        };
        let mut out = Vec::new();
        for (i, c) in cases.iter().enumerate() {
            if let Some(case) = case(c, i, &mut errors) {
                out.push(case);
            }
        }
        if errors.is_empty() {
            Ok(TestFile { cases: out })
        } else {
            Err(TestFileErrors { errors })
        }
    }

    /// Runs every case against `policy`.
    pub fn run(&self, policy: &Policy) -> Vec<CaseResult> {
        self.cases.iter().map(|c| run_case(policy, c)).collect()
    }
}

/// One case, or `None` with its mistakes added to `errors`.
fn case(c: &Value, i: usize, errors: &mut Vec<TestFileError>) -> Option<Case> {
    let before = errors.len();
    let at = |field: &str| format!("cases[{i}].{field}");
    if !c.is_object() {
        errors.push(err(format!("cases[{i}]"), "expected an object"));
        return None;
    }
    unknown_keys(c, &CASE_KEYS, "a case", &format!("cases[{i}]"), errors);
    let name = c.get("name").and_then(Value::as_str);
    if name.is_none() {
        errors.push(err(at("name"), "expected a string"));
    }
    let request = c.get("request").cloned();
    if request.is_none() {
        errors.push(err(at("request"), "missing field"));
    }
    let latched = match c.get("latched") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => {
            errors.push(err(at("latched"), "expected true or false"));
            None
        }
    };
    let expect: Vec<Expect> = match c.get("expect").and_then(Value::as_array) {
        Some(list) => list
            .iter()
            .enumerate()
            .filter_map(|(j, e)| {
                expectation(e, &format!("cases[{i}].expect[{j}]"))
                    .map_err(|e| errors.extend(e))
                    .ok()
            })
            .collect(),
        None => {
            errors.push(err(at("expect"), "expected an array, one entry per call"));
            Vec::new()
        }
    };
    if errors.len() > before {
        return None;
    }
    Some(Case {
        name: name?.to_string(),
        request: request?,
        expect,
        latched,
    })
}

fn expectation(e: &Value, at: &str) -> Result<Expect, Vec<TestFileError>> {
    let mut errors = Vec::new();
    if !e.is_object() {
        return Err(vec![err(
            at,
            "expected an object such as {\"allow\": true}",
        )]);
    }
    unknown_keys(e, &EXPECT_KEYS, "an expectation", at, &mut errors);
    let allow = e.get("allow").and_then(Value::as_bool);
    if allow.is_none() {
        errors.push(err(format!("{at}.allow"), "expected true or false"));
    }
    let kind = match e.get("kind") {
        None => None,
        Some(k) => serde_json::from_value::<DenyKind>(k.clone())
            .map_err(|_| {
                errors.push(err(
                    format!("{at}.kind"),
                    "expected one of unclassified, stage, latch, host, args, precondition, rule, state, ask",
                ))
            })
            .ok(),
    };
    let mut text = |key: &str| match e.get(key) {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            errors.push(err(format!("{at}.{key}"), "expected a string"));
            None
        }
    };
    let rule = text("rule");
    let reason = text("reason");
    let fail_open = match e.get("fail_open") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => {
            errors.push(err(format!("{at}.fail_open"), "expected true or false"));
            None
        }
    };
    if allow == Some(true)
        && (e.get("kind").is_some() || e.get("rule").is_some() || e.get("reason").is_some())
    {
        errors.push(err(
            at.to_string(),
            "an allowed call has no `kind`, `rule` or `reason`; expect `\"allow\": false` or drop them",
        ));
    }
    match allow {
        Some(allow) if errors.is_empty() => Ok(Expect {
            allow,
            kind,
            rule,
            reason,
            fail_open,
        }),
        _ => Err(errors),
    }
}

fn describe(allow: bool, kind: Option<DenyKind>, rule: Option<&str>, fail_open: bool) -> String {
    if allow {
        return if fail_open {
            "allow (fail_open)".into()
        } else {
            "allow".into()
        };
    }
    let mut s = String::from("deny");
    if let Some(k) = kind {
        s.push_str(&format!(" kind={}", k.as_str()));
    }
    if let Some(r) = rule {
        s.push_str(&format!(" rule={r}"));
    }
    s
}

fn run_case(policy: &Policy, case: &Case) -> CaseResult {
    let mut failures = Vec::new();
    let request = match Request::from_value(case.request.clone()) {
        Ok(r) => r,
        Err(e) => {
            return CaseResult {
                name: case.name.clone(),
                failures: vec![format!("malformed request: {e}")],
                request: None,
                response: None,
            }
        }
    };
    if let Err(e) = policy.check_request(&request) {
        failures.push(e.to_string());
    }
    let response = policy.decide(&request);
    if response.decisions.len() != case.expect.len() {
        failures.push(format!(
            "expected {} decisions, the request has {} calls",
            case.expect.len(),
            response.decisions.len()
        ));
    }
    for (e, d) in case.expect.iter().zip(&response.decisions) {
        let ok = e.allow == d.allow
            && (e.kind.is_none() || e.kind == d.kind)
            && (e.rule.is_none() || e.rule.as_deref() == d.rule.as_deref())
            && (e.fail_open.is_none() || e.fail_open == Some(d.fail_open));
        if let (true, Some(want)) = (ok, &e.reason) {
            let got = d.reason.as_deref().unwrap_or("");
            if !got.contains(want.as_str()) {
                failures.push(format!(
                    "call `{}` ({}): the refusal does not contain the expected text\n      expected to contain: {want:?}\n      refusal:             {got:?}",
                    d.id, d.tool
                ));
            }
        }
        if !ok {
            failures.push(format!(
                "call `{}` ({}):\n      expected: {}\n      actual:   {}",
                d.id,
                d.tool,
                describe(
                    e.allow,
                    e.kind,
                    e.rule.as_deref(),
                    e.fail_open.unwrap_or(false)
                ),
                describe(d.allow, d.kind, d.rule.as_deref(), d.fail_open),
            ));
        }
    }
    if let Some(l) = case.latched {
        if response.latched.any() != l {
            failures.push(format!(
                "latched:\n      expected: {l}\n      actual:   {}",
                response.latched.any()
            ));
        }
    }
    CaseResult {
        name: case.name.clone(),
        failures,
        request: Some(request),
        response: Some(response),
    }
}

/// What a set of example tests exercised.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Rules evaluated by some call (it denied one, or a call of its tool was allowed).
    pub rules_hit: BTreeSet<String>,
    /// Declared rules never evaluated.
    pub rules_missed: BTreeSet<String>,
    /// Declared stages some request was in.
    pub stages_hit: BTreeSet<String>,
    /// Declared stages no request was in.
    pub stages_missed: BTreeSet<String>,
    /// Classified tools some request called.
    pub tools_hit: BTreeSet<String>,
    /// Classified tools no request called.
    pub tools_missed: BTreeSet<String>,
}

impl Coverage {
    /// Coverage of `results` (the run of some test file) over `policy`.
    pub fn of(policy: &Policy, results: &[CaseResult]) -> Coverage {
        let ast = Some(policy.syntax());
        // Each rule's tools, resolved the way the compiler does.
        let mut rule_tools: Vec<(String, BTreeSet<String>)> = Vec::new();
        for item in ast.iter().flat_map(|a| a.items.iter()) {
            if let Item::Rule(r) = item {
                let mut tools = BTreeSet::new();
                for t in &r.targets {
                    match t {
                        Selector::Class(c) => tools.extend(
                            policy
                                .tools()
                                .filter(|(_, k)| k.selected_by(c.node))
                                .map(|(n, _)| n.to_string()),
                        ),
                        Selector::Tool(t) => {
                            tools.insert(t.name.clone());
                        }
                    }
                }
                rule_tools.push((r.name.name.clone(), tools));
            }
        }
        let mut cov = Coverage::default();
        for r in results {
            let (Some(req), Some(resp)) = (&r.request, &r.response) else {
                continue;
            };
            if let Some(stage) = &req.facts.stage {
                if policy.stages().any(|s| s == stage) {
                    cov.stages_hit.insert(stage.clone());
                }
            }
            for d in &resp.decisions {
                if policy.class_of(&d.tool).is_some() {
                    cov.tools_hit.insert(d.tool.to_string());
                }
                let rule_denied = !d.allow
                    && !matches!(
                        d.kind,
                        Some(DenyKind::Unclassified | DenyKind::Stage | DenyKind::Latch)
                    );
                if rule_denied {
                    if let Some(rule) = &d.rule {
                        cov.rules_hit.insert(rule.to_string());
                    }
                }
                if d.allow {
                    for (name, tools) in &rule_tools {
                        if tools.contains(d.tool.as_str()) {
                            cov.rules_hit.insert(name.clone());
                        }
                    }
                }
            }
        }
        cov.rules_missed = policy
            .rules()
            .filter(|r| !cov.rules_hit.contains(*r))
            .map(str::to_string)
            .collect();
        cov.stages_missed = policy
            .stages()
            .filter(|s| !cov.stages_hit.contains(*s))
            .map(str::to_string)
            .collect();
        cov.tools_missed = policy
            .tools()
            .filter(|(t, _)| !cov.tools_hit.contains(*t))
            .map(|(t, _)| t.to_string())
            .collect();
        cov
    }
}
