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
//! `fail_open` are compared when given. `latched` (the response's latch state, any latch set)
//! is compared when given.

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

impl TestFile {
    /// Reads a test file's JSON text.
    pub fn parse(text: &str) -> Result<Self, TestFileError> {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            err(
                format!("line {} column {}", e.line(), e.column()),
                format!("not valid JSON: {e}"),
            )
        })?;
        let cases = value
            .get("cases")
            .and_then(Value::as_array)
            .ok_or_else(|| err("cases", "expected an array of cases: {\"cases\": [..]}"))?;
        let mut out = Vec::new();
        for (i, c) in cases.iter().enumerate() {
            let at = |field: &str| format!("cases[{i}].{field}");
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| err(at("name"), "expected a string"))?
                .to_string();
            let request = c
                .get("request")
                .cloned()
                .ok_or_else(|| err(at("request"), "missing field"))?;
            let latched = match c.get("latched") {
                None => None,
                Some(Value::Bool(b)) => Some(*b),
                Some(_) => return Err(err(at("latched"), "expected true or false")),
            };
            let expect = c
                .get("expect")
                .and_then(Value::as_array)
                .ok_or_else(|| err(at("expect"), "expected an array, one entry per call"))?
                .iter()
                .enumerate()
                .map(|(j, e)| expectation(e, &format!("cases[{i}].expect[{j}]")))
                .collect::<Result<Vec<_>, _>>()?;
            out.push(Case {
                name,
                request,
                expect,
                latched,
            });
        }
        Ok(TestFile { cases: out })
    }

    /// Runs every case against `policy`.
    pub fn run(&self, policy: &Policy) -> Vec<CaseResult> {
        self.cases.iter().map(|c| run_case(policy, c)).collect()
    }
}

fn expectation(e: &Value, at: &str) -> Result<Expect, TestFileError> {
    let allow = e
        .get("allow")
        .and_then(Value::as_bool)
        .ok_or_else(|| err(format!("{at}.allow"), "expected true or false"))?;
    let kind = match e.get("kind") {
        None => None,
        Some(k) => Some(serde_json::from_value::<DenyKind>(k.clone()).map_err(|_| {
            err(
                format!("{at}.kind"),
                "expected one of unclassified, stage, latch, host, args, precondition, rule",
            )
        })?),
    };
    let rule = match e.get("rule") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(err(format!("{at}.rule"), "expected a string")),
    };
    let fail_open = match e.get("fail_open") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => return Err(err(format!("{at}.fail_open"), "expected true or false")),
    };
    if allow && (kind.is_some() || rule.is_some()) {
        return Err(err(
            at.to_string(),
            "an allowed call has no `kind` or `rule`; expect `\"allow\": false` or drop them",
        ));
    }
    Ok(Expect {
        allow,
        kind,
        rule,
        fail_open,
    })
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
                    cov.tools_hit.insert(d.tool.clone());
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
                        if tools.contains(&d.tool) {
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
