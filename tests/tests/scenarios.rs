//! The shared scenario cases, judged by the example policies through the engine API.
//!
//! Every `tests/fixtures/scenarios/*.json` file is picked up; the same files are fed to the
//! real binary in `cli/tests/cli.rs`.

use std::collections::HashMap;
use toolgate_engine::Policy;
use toolgate_tests::{example_policy, scenarios, EXAMPLES, MIN_SCENARIOS};

#[test]
fn all_scenarios_are_found() {
    let all = scenarios();
    assert!(
        all.len() >= MIN_SCENARIOS,
        "expected at least {MIN_SCENARIOS} scenario fixtures, found {}",
        all.len()
    );
    for s in &all {
        assert!(
            EXAMPLES.contains(&s.policy.as_str()),
            "{}: unknown policy `{}`",
            s.path.display(),
            s.policy
        );
        // Every call has an expectation, and every expectation is for a call.
        let ids: Vec<&str> = s
            .calls
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), s.decisions.len(), "{}", s.path.display());
        for id in s.decisions.keys() {
            assert!(ids.contains(&id.as_str()), "{}: {id}", s.path.display());
        }
    }
}

#[test]
fn every_scenario_is_decided_as_expected_through_the_engine() {
    let policies: HashMap<&str, Policy> = EXAMPLES
        .iter()
        .map(|name| (*name, example_policy(name)))
        .collect();
    let mut failures = Vec::new();
    let all = scenarios();
    for s in &all {
        let policy = &policies[s.policy.as_str()];
        let response = policy
            .decide_json(&s.request().to_string())
            .unwrap_or_else(|e| panic!("{}: request rejected: {e}", s.path.display()));
        assert_eq!(response.policy.as_ref(), s.policy.as_str());
        let json = serde_json::to_value(&response).unwrap();
        if let Err(e) = s.check(&json) {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scenarios failed:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n\n")
    );
}

#[test]
fn the_checker_notices_a_wrong_decision() {
    // Guard against a checker that accepts anything.
    let s = scenarios().into_iter().next().unwrap();
    let bogus = serde_json::json!({"latched": "nonsense", "decisions": []});
    assert!(s.check(&bogus).is_err());
}

#[test]
fn the_sample_requests_next_to_the_examples_are_accepted() {
    for name in EXAMPLES {
        let path = toolgate_tests::repo_root()
            .join("stdlib-rules/examples")
            .join(format!("{name}.request.json"));
        let text = std::fs::read_to_string(&path).unwrap();
        let policy = example_policy(name);
        let response = policy.decide_json(&text).unwrap();
        assert!(!response.decisions.is_empty(), "{name}");
    }
}
