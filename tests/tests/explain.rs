//! The trace of the judge. `Policy::explain` runs `decide`'s own judge with a recording trace
//! sink, so these tests hold the trace itself: its steps follow the one check order, stop at
//! the check that decided, name what denied, and carry the decision the judge made (the same
//! decision `decide` and `decide_json` return).

#![allow(clippy::unwrap_used, clippy::panic)]

use proptest::prelude::*;
use serde_json::{json, Value};
use toolgate_engine::{DenyKind, Policy, Request};
use toolgate_tests::{compile, example_policy, gen, proptest_config, scenarios};

/// Where a step's check sits in the judge's order: class, stage, max_turns, the stage's
/// `require`, latches, rules.
fn rank(check: &str) -> u8 {
    match check {
        "class" => 0,
        "stage" => 1,
        "max_turns" => 2,
        "stage require" => 3,
        c if c.starts_with("latch ") => 4,
        c if c.starts_with("rule ") => 5,
        other => panic!("unknown check {other:?}"),
    }
}

/// For every call: the traced decision is decide's, the steps follow the check order and
/// stop at the first failure, and a denial's last step names what denied it.
fn assert_consistent(policy: &Policy, request: &Request) {
    let response = policy.decide(request);
    let explained = policy.explain(request);
    assert_eq!(explained.len(), response.decisions.len());
    for (e, d) in explained.iter().zip(&response.decisions) {
        assert_eq!(&e.decision, d);
        assert!(!e.steps.is_empty(), "{d:?}");
        assert_eq!(e.steps[0].check, "class", "{:?}", e.steps);
        for pair in e.steps.windows(2) {
            let (a, b) = (rank(&pair[0].check), rank(&pair[1].check));
            assert!(
                a < b || (a == b && a >= 4 && pair[0].check != pair[1].check),
                "steps out of the check order: {:?}",
                e.steps
            );
        }
        let failures = e.steps.iter().filter(|s| !s.passed).count();
        assert!(failures <= 1, "checks go on after a failure: {:?}", e.steps);
        let last = e.steps.last().unwrap();
        let opened = e
            .steps
            .iter()
            .any(|s| s.passed && s.detail.contains("fails open"));
        // Only an allowed call is reported as allowed through a fail-open rule.
        assert_eq!(opened && d.allow, d.fail_open, "{:?}", e.steps);
        if d.allow {
            assert_eq!(failures, 0, "{:?}", e.steps);
            assert!(e.steps.iter().any(|s| s.check == "stage"), "{:?}", e.steps);
        } else {
            assert!(
                !last.passed,
                "a denial ends on a failing check: {:?}",
                e.steps
            );
            let rule = d.rule.as_deref().unwrap();
            match d.kind.unwrap() {
                DenyKind::Unclassified => assert_eq!(last.check, "class"),
                DenyKind::Stage => assert!(
                    ["stage", "max_turns", "stage require"].contains(&last.check.as_str()),
                    "{:?}",
                    e.steps
                ),
                DenyKind::Latch => assert_eq!(last.check, format!("latch {rule}")),
                _ => assert_eq!(last.check, format!("rule {rule}")),
            }
        }
    }
}

/// [`assert_consistent`], and the traced decisions are the ones the one-pass JSON reader's
/// path gives for the same request text.
fn assert_consistent_json(policy: &Policy, request: &Value) {
    let parsed = Request::from_value(request.clone()).unwrap();
    assert_consistent(policy, &parsed);
    if let Ok(response) = policy.decide_json(&request.to_string()) {
        let traced: Vec<_> = policy
            .explain(&parsed)
            .into_iter()
            .map(|e| e.decision)
            .collect();
        assert_eq!(traced, response.decisions, "{request}");
    }
}

#[test]
fn the_trace_of_every_scenario_is_well_formed() {
    let all = scenarios();
    assert!(!all.is_empty());
    for s in all {
        let policy = example_policy(&s.policy);
        assert_consistent_json(&policy, &s.request());
    }
}

#[test]
fn the_trace_walks_stage_turns_and_latches_in_order() {
    let policy = compile(
        r#"
        module m
        ingest look
        write pay, wipe
        stage s { tools [look, pay] max_turns 2 }
        latch first {
          set_by ingest
          blocks write
        }
        latch second {
          set_by ingest
          blocks write
        }
        "#,
    );
    let cases = [
        json!({"facts": {"stage": "s"}, "calls": [{"id": "1", "tool": "pay", "args": {}}]}),
        json!({"facts": {"stage": "s"}, "calls": [{"id": "1", "tool": "pay", "args": {}},
                                                 {"id": "2", "tool": "look", "args": {}}]}),
        json!({"facts": {"stage": "s", "latched": {"second": true}},
               "calls": [{"id": "1", "tool": "pay", "args": {}}]}),
        json!({"facts": {"stage": "s", "stage_turns": 3},
               "calls": [{"id": "1", "tool": "pay", "args": {}}]}),
        json!({"facts": {"stage": "s"}, "calls": [{"id": "1", "tool": "wipe", "args": {}}]}),
        json!({"facts": {"stage": "t"}, "calls": [{"id": "1", "tool": "pay", "args": {}}]}),
        json!({"facts": {}, "calls": [{"id": "1", "tool": "pay", "args": {}},
                                      {"id": "2", "tool": "nope", "args": {}}]}),
    ];
    for case in &cases {
        assert_consistent_json(&policy, case);
    }
    let checks = |case: &Value| -> Vec<(String, bool)> {
        let request = Request::from_value(case.clone()).unwrap();
        policy.explain(&request)[0]
            .steps
            .iter()
            .map(|s| (s.check.clone(), s.passed))
            .collect()
    };
    let walk = |steps: &[(&str, bool)]| -> Vec<(String, bool)> {
        steps.iter().map(|(c, p)| (c.to_string(), *p)).collect()
    };
    let open = [("class", true), ("stage", true), ("max_turns", true)];
    let mut passed = open.to_vec();
    passed.extend([("latch first", true), ("latch second", true)]);
    assert_eq!(checks(&cases[0]), walk(&passed));
    let mut first = open.to_vec();
    first.push(("latch first", false));
    assert_eq!(checks(&cases[1]), walk(&first));
    let mut second = open.to_vec();
    second.extend([("latch first", true), ("latch second", false)]);
    assert_eq!(checks(&cases[2]), walk(&second));
    assert_eq!(
        checks(&cases[3]),
        walk(&[("class", true), ("stage", true), ("max_turns", false)])
    );
    assert_eq!(
        checks(&cases[4]),
        walk(&[("class", true), ("stage", false)])
    );
    assert_eq!(
        checks(&cases[5]),
        walk(&[("class", true), ("stage", false)])
    );
    assert_eq!(
        checks(&cases[6]),
        walk(&[("class", true), ("stage", false)])
    );
}

proptest! {
    #![proptest_config(proptest_config(128))]

    /// On generated policies and requests, the trace is well formed and carries the
    /// decisions both readers' paths make.
    #[test]
    fn the_trace_is_well_formed_on_generated_policies(
        (spec, requests) in gen::spec().prop_flat_map(|s| {
            let r = prop::collection::vec(gen::request_for(&s), 1..4);
            (Just(s), r)
        }),
    ) {
        let Ok(policy) = Policy::compile("gen.gate", &spec.render()) else {
            return Ok(());
        };
        for request in &requests {
            assert_consistent_json(&policy, request);
        }
    }
}

#[test]
fn a_host_denial_names_the_host_it_read() {
    let policy = example_policy("coach");
    let request = Request::from_value(json!({
        "facts": {"stage": "coach"},
        "calls": [{"id": "1", "tool": "fetch_vendor_doc",
                   "args": {"url": "https://docs.aws.amazon.com.evil.tld/x"}}]
    }))
    .unwrap();
    let e = &policy.explain(&request)[0];
    let last = e.steps.last().unwrap();
    assert!(!last.passed);
    assert!(
        last.detail
            .contains("host \"docs.aws.amazon.com.evil.tld\" not in vendor_docs"),
        "{}",
        last.detail
    );
}

#[test]
fn latch_steps_say_which_call_set_the_latch() {
    let policy = example_policy("coach");
    let request = Request::from_value(json!({
        "facts": {"stage": "coach"},
        "calls": [{"id": "g", "tool": "grade_attempt", "args": {}},
                  {"id": "s", "tool": "search_aws_docs", "args": {}}]
    }))
    .unwrap();
    assert_consistent(&policy, &request);
    let e = &policy.explain(&request)[0];
    let last = e.steps.last().unwrap();
    assert_eq!(
        last.detail,
        "set by `search_aws_docs` (call s) in this batch"
    );
}

#[test]
fn rules_show_values_and_fail_open() {
    let policy = compile(
        r#"
        module m
        write pay
        stage s { tools [pay] max_turns 2 }
        rule limit for pay { require args.amount is number and args.amount <= 250 }
        rule media for pay { require client_sent_media(within: 3, kinds: [image]) }
        "#,
    );
    let request = Request::from_value(json!({
        "facts": {"stage": "s", "stage_turns": 1},
        "calls": [{"id": "a", "tool": "pay", "args": {"amount": 400}},
                  {"id": "b", "tool": "pay", "args": {"amount": 100}}]
    }))
    .unwrap();
    assert_consistent(&policy, &request);
    let explained = policy.explain(&request);
    let denied = explained[0].steps.last().unwrap();
    assert_eq!(denied.check, "rule limit");
    assert!(
        denied
            .detail
            .contains("args.amount = 400: `<= 250` is not true"),
        "{}",
        denied.detail
    );
    let allowed = &explained[1];
    assert!(allowed.decision.fail_open);
    let media = allowed.steps.last().unwrap();
    assert!(
        media.passed && media.detail.contains("fails open"),
        "{}",
        media.detail
    );
    assert!(allowed
        .steps
        .iter()
        .any(|s| s.check == "max_turns" && s.detail == "stage_turns 1 <= max_turns 2"));
}
