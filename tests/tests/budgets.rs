//! `budget NAME for TOOLS { count|sum args.PATH <= N per batch }` (issue 26): allowed calls
//! of a batch consume in request order, a denied or asking call consumes nothing, a
//! non-number or negative amount is denied, the denial says what is left, and the change
//! gate holds a raised or dropped budget.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use toolgate_engine::{DenyKind, Policy, Request, Verdict};

const REFUNDS: &str = r#"module refunds
write refund, send
read look
stage main { tools [refund, send, look] }
rule small for refund { require args.amount <= 99 }
rule flagged for refund { ask when args.flagged exists }
budget batch_refunds for refund {
  sum args.amount <= 100 per batch
}
budget sends for [send] {
  count <= 2 per batch
  refusal "two messages a batch at most"
}
"#;

fn policy(text: &str) -> Policy {
    Policy::compile("refunds.gate", text).unwrap_or_else(|e| panic!("{e}"))
}

fn batch(calls: &[(&str, Value)]) -> String {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (tool, args))| json!({"id": format!("c{i}"), "tool": tool, "args": args}))
        .collect();
    json!({"facts": {"stage": "main"}, "calls": calls}).to_string()
}

/// The decisions by both readers (which must agree) and `decide_into`'s verdicts.
fn judge(p: &Policy, text: &str) -> Vec<toolgate_engine::Decision> {
    let fast = p.decide_json(text).unwrap();
    let req = Request::from_json(text).unwrap();
    let strict = p.decide(&req);
    assert_eq!(fast, strict);
    let mut verdicts: Vec<Verdict> = Vec::new();
    p.decide_into(&req, &mut verdicts);
    let allowed: Vec<bool> = verdicts.iter().map(|v| v.allowed()).collect();
    assert_eq!(
        allowed,
        fast.decisions.iter().map(|d| d.allow).collect::<Vec<_>>()
    );
    fast.decisions
}

#[test]
fn three_refunds_of_99_in_one_batch_are_not_three_allows() {
    let p = policy(REFUNDS);
    let d = judge(
        &p,
        &batch(&[
            ("refund", json!({"amount": 99})),
            ("refund", json!({"amount": 99})),
            ("refund", json!({"amount": 1})),
            ("refund", json!({"amount": 1})),
        ]),
    );
    assert!(d[0].allow);
    assert!(!d[1].allow);
    assert_eq!(d[1].kind, Some(DenyKind::Budget));
    assert_eq!(d[1].rule.as_deref(), Some("batch_refunds"));
    let reason = d[1].reason.as_deref().unwrap();
    assert!(reason.contains("1 of 100 left"), "{reason}");
    assert!(reason.contains("needs 99"), "{reason}");
    // The denied call consumed nothing: the third fits exactly, the fourth does not.
    assert!(d[2].allow);
    assert!(!d[3].allow);
    assert!(d[3].reason.as_deref().unwrap().contains("0 of 100 left"));
}

#[test]
fn a_call_denied_by_a_rule_or_asking_consumes_nothing() {
    let p = policy(REFUNDS);
    let d = judge(
        &p,
        &batch(&[
            ("refund", json!({"amount": 150})),
            ("refund", json!({"amount": 60, "flagged": true})),
            ("refund", json!({"amount": 90})),
        ]),
    );
    assert_eq!(d[0].kind, Some(DenyKind::Args));
    assert_eq!(d[1].kind, Some(DenyKind::Ask));
    assert!(d[2].allow, "{:?}", d[2]);
}

#[test]
fn an_amount_that_is_not_a_number_of_at_least_zero_is_denied() {
    let p = policy(REFUNDS);
    for bad in [json!(-50), json!("50"), json!(null), json!([50])] {
        let d = judge(
            &p,
            &batch(&[
                ("refund", json!({"amount": bad})),
                ("refund", json!({"amount": 99})),
            ]),
        );
        // A negative amount must not give budget back (nor pass the rule's `<= 99`).
        assert!(!d[0].allow, "{bad}");
        assert!(d[1].allow, "{bad}: {:?}", d[1]);
    }
    let d = judge(&p, &batch(&[("refund", json!({}))]));
    assert!(!d[0].allow);
    // The rule `small` reads the same argument; a rule of its own passes a negative one.
    let p = policy(&REFUNDS.replace("require args.amount <= 99", "require true"));
    let d = judge(
        &p,
        &batch(&[
            ("refund", json!({"amount": -500})),
            ("refund", json!({"amount": 100})),
        ]),
    );
    assert_eq!(d[0].kind, Some(DenyKind::Budget));
    assert!(d[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("must be a number of at least 0"));
    assert!(d[1].allow);
}

#[test]
fn count_budgets_count_calls_and_keep_the_authors_refusal() {
    let p = policy(REFUNDS);
    let d = judge(
        &p,
        &batch(&[
            ("send", json!({})),
            ("look", json!({})),
            ("send", json!({})),
            ("send", json!({})),
        ]),
    );
    assert!(d[0].allow && d[1].allow && d[2].allow);
    assert_eq!(d[3].kind, Some(DenyKind::Budget));
    let reason = d[3].reason.as_deref().unwrap();
    assert!(
        reason.starts_with("two messages a batch at most"),
        "{reason}"
    );
    assert!(reason.contains("0 of 2 left"), "{reason}");
    // Each batch starts afresh.
    assert!(judge(&p, &batch(&[("send", json!({}))]))[0].allow);
}

#[test]
fn an_approved_ask_consumes_its_amount() {
    let p = policy(REFUNDS);
    let asked = judge(
        &p,
        &batch(&[("refund", json!({"amount": 60, "flagged": true}))]),
    );
    let digest = asked[0].approval.clone().unwrap();
    let text = json!({
        "facts": {"stage": "main", "approvals": [digest]},
        "calls": [
            {"id": "c0", "tool": "refund", "args": {"amount": 60, "flagged": true}},
            {"id": "c1", "tool": "refund", "args": {"amount": 60}},
        ]
    })
    .to_string();
    let d = judge(&p, &text);
    assert!(d[0].allow);
    assert_eq!(d[1].kind, Some(DenyKind::Budget));
}

#[test]
fn explain_names_the_budget_check() {
    let p = policy(REFUNDS);
    let req = Request::from_json(&batch(&[
        ("refund", json!({"amount": 99})),
        ("refund", json!({"amount": 2})),
    ]))
    .unwrap();
    let text = serde_json::to_string(&p.explain(&req)).unwrap();
    assert!(text.contains("budget batch_refunds"), "{text}");
    assert!(text.contains("1 of 100 left"), "{text}");
}

#[test]
fn budget_declarations_are_checked() {
    for (body, says) in [
        (
            "count <= 5 per session",
            "`per session` budgets are not supported yet",
        ),
        (
            "sum args.amount <= 500 within 24h per principal",
            "not supported yet",
        ),
        ("count <= 5 within 1h per batch", "has no window"),
        (
            "sum facts.total <= 5 per batch",
            "a budget sums an argument",
        ),
        ("count <= -1 per batch", "at least 0"),
    ] {
        let text =
            format!("module m\nwrite w\nstage main {{ tools [w] }}\nbudget b for w {{ {body} }}\n");
        let err = Policy::compile("m.gate", &text)
            .expect_err(body)
            .to_string();
        assert!(err.contains(says), "`{body}`: {err}");
    }
    let twice = "module m\nwrite w\nstage main { tools [w] }\nbudget b for w { count <= 1 per batch }\nbudget b for w { count <= 2 per batch }\n";
    assert!(Policy::compile("m.gate", twice)
        .unwrap_err()
        .to_string()
        .contains("declared twice"));
    let unknown =
        "module m\nwrite w\nstage main { tools [w] }\nbudget b for wx { count <= 1 per batch }\n";
    assert!(Policy::compile("m.gate", unknown).is_err());
    let none = "module m\nwrite w\nstage main { tools [w] }\nbudget b for w { refusal \"no\" }\n";
    assert!(Policy::compile("m.gate", none)
        .unwrap_err()
        .to_string()
        .contains("has no limit"));
}

#[test]
fn fmt_keeps_a_budget_and_lays_it_out() {
    let messy = "module m\nwrite w\nstage main { tools [w] }\nbudget b for w {   sum   args.amount<=100    per batch\n refusal \"no\" }\n";
    let out = toolgate_lang::format_source("m.gate", messy).unwrap();
    assert!(
        out.contains("budget b for w {\n  sum args.amount <= 100 per batch\n  refusal \"no\"\n}"),
        "{out}"
    );
    assert_eq!(toolgate_lang::format_source("m.gate", &out).unwrap(), out);
    policy(&out);
}

#[test]
fn the_change_gate_holds_a_raised_or_dropped_budget_and_not_a_lowered_one() {
    use toolgate_engine::unstable::entail::data_widenings;
    let old = policy(REFUNDS);
    let raised = policy(&REFUNDS.replace("<= 100 per batch", "<= 200 per batch"));
    let w = data_widenings(&raised, &old, "refund");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("rises from 100 to 200"), "{w:?}");
    let dropped = policy(&REFUNDS.replace(
        "budget batch_refunds for refund",
        "budget batch_refunds for send",
    ));
    let w = data_widenings(&dropped, &old, "refund");
    assert!(
        w.iter()
            .any(|s| s.contains("no longer held to budget `batch_refunds`")),
        "{w:?}"
    );
    let lowered = policy(&REFUNDS.replace("<= 100 per batch", "<= 50 per batch"));
    assert!(data_widenings(&lowered, &old, "refund").is_empty());
    assert!(data_widenings(&old, &old, "send").is_empty());
}
