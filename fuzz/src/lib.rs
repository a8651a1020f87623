//! Shared pieces of the toolgate fuzz targets: the example policies, compiled once, and the
//! checks every response must pass. A failed check panics, which libFuzzer reports as a crash
//! and saves under `artifacts/TARGET/`.

use std::sync::OnceLock;
use toolgate_engine::{DenyKind, Policy, Request, RequestError, Response};

/// The three example policies, as `(file name, source)`.
pub const EXAMPLES: [(&str, &str); 3] = [
    (
        "motor_claims.gate",
        include_str!("../../stdlib-rules/examples/motor_claims.gate"),
    ),
    (
        "coach.gate",
        include_str!("../../stdlib-rules/examples/coach.gate"),
    ),
    (
        "messenger_payments.gate",
        include_str!("../../stdlib-rules/examples/messenger_payments.gate"),
    ),
];

/// The example policies, compiled on first use.
pub fn example_policies() -> &'static [Policy] {
    static POLICIES: OnceLock<Vec<Policy>> = OnceLock::new();
    POLICIES.get_or_init(|| {
        EXAMPLES
            .iter()
            .map(|(name, text)| match Policy::compile(name, text) {
                Ok(p) => p,
                Err(e) => panic!("example {name} does not compile:\n{}", e.render()),
            })
            .collect()
    })
}

/// Checks the outcome of `decide_json`: a well-formed response, or an error that says
/// something.
pub fn check_outcome(policy: &Policy, outcome: &Result<Response, RequestError>) {
    match outcome {
        Ok(r) => {
            assert_eq!(&*r.policy, policy.module());
            // The response always serialises back to JSON.
            assert!(serde_json::to_string(r).is_ok());
        }
        Err(e) => assert!(!e.to_string().trim().is_empty(), "an empty error: {e:?}"),
    }
}

/// Checks a response against the request it answers: one decision per call, in order, ids and
/// tools echoed, kind/rule/reason present exactly on denials, fail_open only on allows, and
/// default deny for unclassified tools and missing or undefined stages.
pub fn check_response(policy: &Policy, request: &Request, r: &Response) {
    assert_eq!(r.decisions.len(), request.calls.len());
    let stage_known = request
        .facts
        .stage
        .as_deref()
        .is_some_and(|s| policy.stages().any(|p| p == s));
    for (d, c) in r.decisions.iter().zip(&request.calls) {
        assert_eq!(d.id, c.id);
        assert_eq!(d.tool, c.tool);
        let denied = !d.allow;
        assert_eq!(d.kind.is_some(), denied, "{d:?}");
        assert_eq!(d.rule.is_some(), denied, "{d:?}");
        assert_eq!(d.reason.is_some(), denied, "{d:?}");
        assert!(!(d.fail_open && denied), "fail_open on a denial: {d:?}");
        if let Some(reason) = &d.reason {
            assert!(!reason.trim().is_empty(), "an empty refusal: {d:?}");
        }
        if policy.class_of(&c.tool).is_none() {
            assert_eq!(d.kind, Some(DenyKind::Unclassified), "{d:?}");
        } else if !stage_known {
            assert_eq!(d.kind, Some(DenyKind::Stage), "{d:?}");
        } else if d.allow {
            let stage = request.facts.stage.as_deref().unwrap_or_default();
            assert!(policy.stage_allows(stage, &c.tool), "{d:?}");
        }
    }
}

/// Judges `request` with its calls reversed and checks that the decisions come back reversed
/// and nothing else changes (the latch is decided by the whole batch, not its order).
pub fn check_order_independent(policy: &Policy, request: &Request, r: &Response) {
    let mut reversed = request.clone();
    reversed.calls.reverse();
    let back = policy.decide(&reversed);
    assert_eq!(back.latched, r.latched);
    assert_eq!(back.policy, r.policy);
    assert_eq!(back.revision, r.revision);
    let mut decisions = back.decisions;
    decisions.reverse();
    assert_eq!(decisions, r.decisions);
}
