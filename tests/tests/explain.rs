//! `Policy::explain` narrates the decision `decide` makes, check by check, and never disagrees
//! with it.

#![allow(clippy::unwrap_used)]

use serde_json::json;
use toolgate_engine::{DenyKind, Request};
use toolgate_tests::{compile, example_policy, scenarios};

/// For every call: the explained decision is decide's, the steps stop at the first failure,
/// and a denial's last step names what denied it.
fn assert_consistent(policy: &toolgate_engine::Policy, request: &Request) {
    let response = policy.decide(request);
    let explained = policy.explain(request);
    assert_eq!(explained.len(), response.decisions.len());
    for (e, d) in explained.iter().zip(&response.decisions) {
        assert_eq!(&e.decision, d);
        assert!(!e.steps.is_empty(), "{d:?}");
        let failures = e.steps.iter().filter(|s| !s.passed).count();
        assert!(failures <= 1, "checks go on after a failure: {:?}", e.steps);
        let last = e.steps.last().unwrap();
        if d.allow {
            assert_eq!(failures, 0, "{:?}", e.steps);
        } else {
            assert!(
                !last.passed,
                "a denial ends on a failing check: {:?}",
                e.steps
            );
            let rule = d.rule.as_deref().unwrap();
            match d.kind.unwrap() {
                DenyKind::Unclassified => assert_eq!(last.check, "class"),
                DenyKind::Stage => assert!(last.check == "stage" || last.check == "max_turns"),
                DenyKind::Latch => assert_eq!(last.check, format!("latch {rule}")),
                _ => assert_eq!(last.check, format!("rule {rule}")),
            }
        }
    }
}

#[test]
fn explanations_agree_with_decide_on_every_scenario() {
    let all = scenarios();
    assert!(!all.is_empty());
    for s in all {
        let policy = example_policy(&s.policy);
        let request = Request::from_value(s.request()).unwrap();
        assert_consistent(&policy, &request);
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
