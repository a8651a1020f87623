//! Generated refusal texts: a denial names the one requirement that failed, as a sentence,
//! with no raw regex and no double negative.
#![allow(clippy::unwrap_used, clippy::panic)]

use serde_json::json;
use toolgate_engine::{Policy, Request};
use toolgate_tests::compile;

const POLICY: &str = r#"module pay
write payout, send
stage main { tools [payout, send] }
rule payout_limits for payout {
  require args.amount is number and args.amount > 0 and args.amount <= 250
  require args.policy matches "^POL-[0-9]{6}$"
}
rule no_cc for send {
  require not args.cc exists
}
rule quiet for send {
  require not (args.priority == "high" or args.loud == true)
}
"#;

/// The refusal for one call of `tool` with `args`, from `decide` and from `decide_json`
/// (the one-pass reader), which must agree.
fn refusal(policy: &Policy, tool: &str, args: serde_json::Value) -> String {
    let request =
        json!({"facts": {"stage": "main"}, "calls": [{"id": "c", "tool": tool, "args": args}]});
    let strict = policy.decide(&Request::from_value(request.clone()).unwrap());
    let fast = policy.decide_json(&request.to_string()).unwrap();
    assert_eq!(strict, fast);
    let d = &strict.decisions[0];
    assert!(!d.allow, "{d:?}");
    d.reason.as_deref().unwrap().to_string()
}

#[test]
fn a_denial_names_the_requirement_that_failed_not_every_one() {
    let p = compile(POLICY);
    let too_much = refusal(&p, "payout", json!({"amount": 300, "policy": "POL-123456"}));
    assert!(
        too_much.contains("`args.amount` must be at most 250"),
        "{too_much}"
    );
    for other in ["more than 0", "must be a number", "POL-"] {
        assert!(!too_much.contains(other), "names `{other}` too: {too_much}");
    }
    let not_a_number = refusal(&p, "payout", json!({"amount": "x", "policy": "POL-123456"}));
    assert!(
        not_a_number.contains("`args.amount` must be a number"),
        "{not_a_number}"
    );
    assert!(!not_a_number.contains("250"), "{not_a_number}");
    // The second `require` line.
    let bad_policy = refusal(&p, "payout", json!({"amount": 10, "policy": "pol-1"}));
    assert!(bad_policy.contains("`args.policy`"), "{bad_policy}");
    assert!(!bad_policy.contains("args.amount"), "{bad_policy}");
    // A missing argument fails its own requirement.
    let missing = refusal(&p, "payout", json!({"amount": 10}));
    assert!(
        missing.contains("`args.policy`") && !missing.contains("args.amount"),
        "{missing}"
    );
}

#[test]
fn refusals_read_as_sentences_without_regex_or_double_negatives() {
    let p = compile(POLICY);
    let bad_policy = refusal(&p, "payout", json!({"amount": 10, "policy": "pol-1"}));
    assert!(
        bad_policy.contains(r#"`args.policy` must be "POL-" followed by 6 digits"#),
        "{bad_policy}"
    );
    for raw in ["[0-9]", "{6}", "^", "$", "matches", "match `"] {
        assert!(!bad_policy.contains(raw), "raw regex `{raw}`: {bad_policy}");
    }
    let cc = refusal(&p, "send", json!({"cc": "x@example.com"}));
    assert!(cc.contains("`args.cc` must be absent"), "{cc}");
    for double in ["must not hold", "must be present", "not (", "this must not"] {
        assert!(!cc.contains(double), "`{double}`: {cc}");
    }
    let loud = refusal(&p, "send", json!({"priority": "high"}));
    assert!(
        loud.contains(r#"`args.priority` must not be "high" and `args.loud` must not be true"#),
        "{loud}"
    );
}

#[test]
fn a_negated_built_in_reads_as_its_opposite() {
    let p = compile(
        "module m\nwrite w\nstage s { tools [w] }\nrule r for w { require not field_filled(phone) }\n",
    );
    let request = json!({"facts": {"stage": "s", "fields": {"phone": "0123"}}, "calls": [{"id": "c", "tool": "w", "args": {}}]});
    let d = &p.decide(&Request::from_value(request).unwrap()).decisions[0];
    let reason = d.reason.as_deref().unwrap();
    assert!(
        reason.contains("the `phone` field must not be filled in"),
        "{reason}"
    );
}

#[test]
fn an_authors_refusal_is_kept_whole() {
    let p = compile(
        "module m\nwrite w\nstage s { tools [w] }\nrule r for w {\n  require args.a exists\n  require args.b exists\n  refusal \"Send both a and b.\"\n}\n",
    );
    let request =
        json!({"facts": {"stage": "s"}, "calls": [{"id": "c", "tool": "w", "args": {"a": 1}}]});
    let d = &p.decide(&Request::from_value(request).unwrap()).decisions[0];
    assert_eq!(d.reason.as_deref(), Some("Send both a and b."));
}

#[test]
fn the_offered_requirement_still_lists_every_requirement() {
    let p = compile(POLICY);
    let offer = p.offer(
        &toolgate_engine::Facts::from_value(json!({"stage": "main"})).unwrap(),
        &[toolgate_engine::ToolDef::new(
            "payout",
            "Pays.",
            json!({"type": "object"}),
        )],
    );
    let text = offer.tools[0].description.as_deref().unwrap();
    assert!(
        text.contains("at most 250") && text.contains("\"POL-\" followed by 6 digits"),
        "{text}"
    );
}

/// A precondition's refusal tells the model what *it* can do: call the tool first for
/// `called_before`/`called_within` (a customer cannot run a tool), ask the user for the rest
/// (issue 22, item 12).
#[test]
fn a_precondition_refusal_names_what_the_model_can_do() {
    let p = compile(
        "module m\nwrite pay\nread verify\nstage main { tools [pay, verify] }\nrule v for pay { require called_before(verify) }\n",
    );
    let request = json!({"facts": {"stage": "main", "called": []},
                         "calls": [{"id": "c", "tool": "pay", "args": {}}]});
    let r = p.decide(&Request::from_value(request).unwrap());
    let reason = r.decisions[0].reason.as_deref().unwrap();
    assert!(reason.contains("Call the tool it names first"), "{reason}");
    assert!(!reason.contains("Ask the user"), "{reason}");
    let p = compile(
        "module m\nwrite pay\nstage main { tools [pay] }\nrule v for pay { require min_client_messages(2) }\n",
    );
    let request = json!({"facts": {"stage": "main", "messages": []},
                         "calls": [{"id": "c", "tool": "pay", "args": {}}]});
    let r = p.decide(&Request::from_value(request).unwrap());
    let reason = r.decisions[0].reason.as_deref().unwrap();
    assert!(reason.contains("Ask the user for it"), "{reason}");
}
