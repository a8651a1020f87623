//! Shared helpers for the toolgate integration tests.
//!
//! The helpers panic on anything unexpected (a fixture that does not parse, an example policy
//! that does not compile): they only ever run inside tests, where a panic is a test failure
//! with a clear message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod gen;
pub mod reference;
pub mod wire_gen;

use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use toolgate_engine::{Decision, DenyKind, Policy, Request, Response};

/// The workspace root (the directory holding the top-level `Cargo.toml`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The path of an example policy, `stdlib-rules/examples/NAME.gate`.
pub fn example_path(name: &str) -> PathBuf {
    repo_root()
        .join("stdlib-rules")
        .join("examples")
        .join(format!("{name}.gate"))
}

/// How many cases a property test runs: `TOOLGATE_PROPTEST_CASES` when set (to run longer),
/// else `default`, sized so that the suite stays quick in a debug build.
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("TOOLGATE_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// The proptest settings every suite uses: [`proptest_cases`] cases, and no regression files
/// written into the source tree.
pub fn proptest_config(default: u32) -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases: proptest_cases(default),
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}

/// The names of the three example policies.
pub const EXAMPLES: [&str; 3] = ["motor_claims", "coach", "messenger_payments"];

/// Compiles an example policy by name, panicking with the rendered diagnostics if it fails.
pub fn example_policy(name: &str) -> Policy {
    let path = example_path(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    compile_named(&format!("{name}.gate"), &text)
}

/// Compiles policy source, panicking with the rendered diagnostics if it fails.
pub fn compile(text: &str) -> Policy {
    compile_named("test.gate", text)
}

/// Compiles policy source under a file name, panicking with the rendered diagnostics.
pub fn compile_named(file: &str, text: &str) -> Policy {
    match Policy::compile(file, text) {
        Ok(p) => p,
        Err(e) => panic!("policy does not compile:\n{}", e.render()),
    }
}

/// Compiles policy source that must fail, returning the rendered diagnostics.
pub fn compile_err(text: &str) -> String {
    match Policy::compile("test.gate", text) {
        Ok(_) => panic!("policy compiled, but an error was expected:\n{text}"),
        Err(e) => e.render(),
    }
}

/// Parses a JSON request (panicking if malformed) and judges it.
pub fn decide(policy: &Policy, request: Value) -> Response {
    let text = request.to_string();
    let req =
        Request::from_json(&text).unwrap_or_else(|e| panic!("request is malformed: {e}\n{text}"));
    policy.decide(&req)
}

/// Judges a single call of `tool` with `args` under `facts`, returning its decision.
pub fn decide_one(policy: &Policy, facts: Value, tool: &str, args: Value) -> Decision {
    let resp = decide(
        policy,
        json!({"facts": facts, "calls": [{"id": "c1", "tool": tool, "args": args}]}),
    );
    assert_eq!(resp.decisions.len(), 1, "one decision per call");
    resp.decisions.into_iter().next().expect("one decision")
}

/// Asserts a decision allows its call (and is well formed: no kind, rule or reason).
pub fn assert_allowed(d: &Decision) {
    assert!(d.allow, "expected `{}` to be allowed, got {d:?}", d.tool);
    assert!(
        d.kind.is_none() && d.rule.is_none() && d.reason.is_none(),
        "an allowed decision carries no kind/rule/reason: {d:?}"
    );
}

/// Asserts a decision denies its call with `kind`, and carries a rule name and a reason.
pub fn assert_denied(d: &Decision, kind: DenyKind) {
    assert!(
        !d.allow,
        "expected `{}` to be denied ({kind:?}), got {d:?}",
        d.tool
    );
    assert_eq!(d.kind, Some(kind), "wrong kind for {d:?}");
    assert!(d.rule.is_some(), "a denial names its rule: {d:?}");
    assert!(
        d.reason.as_deref().is_some_and(|r| !r.trim().is_empty()),
        "a denial carries a refusal: {d:?}"
    );
    assert!(!d.fail_open, "a denial is never fail_open: {d:?}");
}

/// Asserts a decision denies its call with `kind`, naming `rule`.
pub fn assert_denied_by(d: &Decision, kind: DenyKind, rule: &str) {
    assert_denied(d, kind);
    assert_eq!(d.rule.as_deref(), Some(rule), "wrong rule for {d:?}");
}

/// One shared scenario case (`tests/fixtures/scenarios/*.json`).
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file it was read from.
    pub path: PathBuf,
    /// A one-line description.
    pub name: String,
    /// The example policy that judges it (`stdlib-rules/examples/<policy>.gate`).
    pub policy: String,
    /// The request's facts.
    pub facts: Value,
    /// The request's calls.
    pub calls: Value,
    /// Expected decisions by call id: `{"allow": bool, "kind"?: str}`.
    pub decisions: Map<String, Value>,
    /// The expected `latched` of the response, when the case states it.
    pub latched: Option<Value>,
}

impl Scenario {
    /// The request the case describes: `{facts, calls}` only.
    pub fn request(&self) -> Value {
        json!({"facts": self.facts, "calls": self.calls})
    }

    /// Checks a response (as JSON) against the expectations; returns what differs.
    pub fn check(&self, response: &Value) -> Result<(), String> {
        let mut problems = Vec::new();
        let decisions = response["decisions"]
            .as_array()
            .ok_or_else(|| format!("response has no `decisions` array: {response}"))?;
        let calls = self.calls.as_array().map_or(0, Vec::len);
        if decisions.len() != calls {
            problems.push(format!("{} decisions for {calls} calls", decisions.len()));
        }
        // Decisions come back in request order.
        for (i, call) in self.calls.as_array().into_iter().flatten().enumerate() {
            if decisions.get(i).map(|d| &d["id"]) != Some(&call["id"]) {
                problems.push(format!("decision {i} is not for call {}", call["id"]));
            }
        }
        for (id, want) in &self.decisions {
            let Some(got) = decisions.iter().find(|d| d["id"] == json!(id)) else {
                problems.push(format!("no decision for call `{id}`"));
                continue;
            };
            if got["allow"] != want["allow"] {
                problems.push(format!(
                    "call `{id}`: allow is {}, expected {}",
                    got["allow"], want["allow"]
                ));
            }
            let want_kind = want.get("kind").cloned().unwrap_or(Value::Null);
            let got_kind = got.get("kind").cloned().unwrap_or(Value::Null);
            if want_kind != got_kind {
                problems.push(format!(
                    "call `{id}`: kind is {got_kind}, expected {want_kind}"
                ));
            }
        }
        if let Some(latched) = &self.latched {
            if &response["latched"] != latched {
                problems.push(format!(
                    "latched is {}, expected {latched}",
                    response["latched"]
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "scenario {} ({}):\n  {}\nresponse: {response}",
                self.path.display(),
                self.name,
                problems.join("\n  ")
            ))
        }
    }
}

/// The directory of the scenario fixtures.
pub fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join("scenarios")
}

/// Every scenario fixture, sorted by file name.
pub fn scenarios() -> Vec<Scenario> {
    let dir = scenarios_dir();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths.into_iter().map(|p| load_scenario(&p)).collect()
}

/// Reads one scenario file.
pub fn load_scenario(path: &Path) -> Scenario {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    let field = |k: &str| -> Value {
        v.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("{} has no `{k}`", path.display()))
    };
    let expect = field("expect");
    Scenario {
        path: path.to_path_buf(),
        name: field("name").as_str().unwrap_or_default().to_string(),
        policy: field("policy")
            .as_str()
            .unwrap_or_else(|| panic!("{}: `policy` is not a string", path.display()))
            .to_string(),
        facts: v.get("facts").cloned().unwrap_or_else(|| json!({})),
        calls: field("calls"),
        decisions: expect
            .get("decisions")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_else(|| panic!("{}: `expect.decisions` is not an object", path.display())),
        latched: expect.get("latched").cloned(),
    }
}

/// The least number of scenario fixtures the suite must find.
pub const MIN_SCENARIOS: usize = 15;
