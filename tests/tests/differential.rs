//! Differential tests: the compiled engine (`Policy::compile` + `decide`) against the reference
//! evaluator over the syntax tree (`toolgate_tests::reference`), on generated policies and
//! generated requests. They must agree, for every call, on `allow`, `kind`, `rule` and
//! `fail_open`, and on the response's `latched`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use serde_json::Value;
use toolgate_engine::{Policy, Request};
use toolgate_tests::gen;
use toolgate_tests::proptest_config;
use toolgate_tests::reference::{self, RefDecision, RefResponse};

/// The engine's answer in the reference's terms.
fn engine(policy: &Policy, request: &Value) -> RefResponse {
    let req = Request::from_json(&request.to_string())
        .unwrap_or_else(|e| panic!("generated request is malformed: {e}\n{request}"));
    let resp = policy.decide(&req);
    RefResponse {
        latched: serde_json::to_value(&resp.latched).unwrap(),
        decisions: resp
            .decisions
            .into_iter()
            .map(|d| RefDecision {
                id: d.id.into(),
                allow: d.allow,
                kind: d.kind.map(|k| k.as_str().to_string()),
                rule: d.rule.map(|r| r.to_string()),
                fail_open: d.fail_open,
            })
            .collect(),
    }
}

/// Compares both sides on one policy source and request; `Err` describes the first
/// disagreement.
fn compare(src: &str, request: &Value) -> Result<(), String> {
    let Ok(policy) = Policy::compile("gen.gate", src) else {
        return Ok(());
    };
    let ast = toolgate_lang::parse(src).map_err(|d| format!("{d:?}"))?;
    let want = reference::decide(&ast, request);
    let got = engine(&policy, request);
    if want == got {
        return Ok(());
    }
    Err(format!(
        "engine and reference disagree\n--- policy:\n{src}\n--- request:\n{request}\n--- reference:\n{want:#?}\n--- engine:\n{got:#?}"
    ))
}

proptest! {
    #![proptest_config(proptest_config(192))]

    #[test]
    fn engine_agrees_with_reference(
        (spec, requests) in gen::spec().prop_flat_map(|s| {
            let r = prop::collection::vec(gen::request_for(&s), 1..6);
            (Just(s), r)
        }),
    ) {
        let src = spec.render();
        for request in &requests {
            if let Err(e) = compare(&src, request) {
                return Err(TestCaseError::fail(e));
            }
        }
    }
}

/// Most generated policies must compile, or the differential test compares little.
#[test]
fn generated_policies_mostly_compile() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = gen::spec();
    let total = 200;
    let mut ok = 0;
    let mut errors = std::collections::BTreeMap::<String, usize>::new();
    for _ in 0..total {
        let src = strategy.new_tree(&mut runner).unwrap().current().render();
        match Policy::compile("gen.gate", &src) {
            Ok(_) => ok += 1,
            Err(e) => {
                for d in e.errors() {
                    *errors.entry(d.message.clone()).or_default() += 1;
                }
            }
        }
    }
    assert!(
        ok * 10 >= total * 7,
        "only {ok} of {total} generated policies compile: {errors:#?}"
    );
}

/// The generators reach every outcome: each denial kind, allowed calls, fail-open calls and
/// set latches all occur, so agreement above is not agreement on trivial cases.
#[test]
fn generated_cases_reach_every_outcome() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = gen::spec().prop_flat_map(|s| {
        let r = prop::collection::vec(gen::request_for(&s), 4);
        (Just(s), r)
    });
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for _ in 0..300 {
        let (spec, requests) = strategy.new_tree(&mut runner).unwrap().current();
        let src = spec.render();
        let Ok(policy) = Policy::compile("gen.gate", &src) else {
            continue;
        };
        for request in &requests {
            let resp = engine(&policy, request);
            if resp.latched.as_bool() == Some(true)
                || resp
                    .latched
                    .as_object()
                    .is_some_and(|m| m.values().any(|v| v == &Value::Bool(true)))
            {
                *seen.entry("latched".into()).or_default() += 1;
            }
            for d in resp.decisions {
                let key = match (&d.kind, d.fail_open) {
                    (Some(k), _) => k.clone(),
                    (None, true) => "allowed, fail_open".into(),
                    (None, false) => "allowed".into(),
                };
                *seen.entry(key).or_default() += 1;
            }
        }
    }
    println!("{seen:#?}");
    for want in [
        "allowed",
        "allowed, fail_open",
        "latched",
        "unclassified",
        "stage",
        "latch",
        "host",
        "args",
        "precondition",
        "rule",
    ] {
        assert!(
            seen.get(want).copied().unwrap_or(0) >= 3,
            "{want} is rare or missing: {seen:#?}"
        );
    }
}

/// Regression: found by the differential property. A `true`/`false` literal counts with the
/// argument tests (docs/language.md, "Denial kinds"), so `require not false` beside a built-in
/// precondition makes a mixed rule: kind `rule`, failing closed when `called` is absent. The
/// engine used to ignore the literal and let the call through with `fail_open: true`.
#[test]
fn docs_and_engine_disagree_on_literals_in_a_precondition_rule() {
    let src = "module m\ningest t2\nstage s0 { tools [t2] }\n\
               rule r1 for ingest {\n  require not false\n  require called_before(t2)\n}\n";
    let request = serde_json::json!({"facts": {"stage": "s0"}, "calls": [{"id": "c0", "tool": "t2", "args": {}}]});
    let policy = Policy::compile("m.gate", src).unwrap();
    let got = engine(&policy, &request);
    let want = reference::decide(&toolgate_lang::parse(src).unwrap(), &request);
    assert_eq!(
        want.decisions[0].kind.as_deref(),
        Some("rule"),
        "the docs' reading"
    );
    assert_eq!(
        got, want,
        "a literal beside a built-in makes a mixed rule that fails closed"
    );
}
