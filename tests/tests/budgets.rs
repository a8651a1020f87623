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
    assert!(reason.contains("1 of 100 left in one batch"), "{reason}");
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
    assert!(text.contains("1 of 100 is left"), "{text}");
}

#[test]
fn budget_declarations_are_checked() {
    for (body, says) in [
        (
            "count <= 5 within 1h per batch",
            "a `per batch` budget has no window",
        ),
        (
            "count <= 5 within 1h per turn",
            "a `per turn` budget has no window",
        ),
        (
            "count <= 5 per principal",
            "a `per principal` budget needs a window",
        ),
        ("count <= 5 per tenant", "needs a window"),
        (
            "count <= 5 within 745h per session",
            "outside 1s to 31 days",
        ),
        ("count <= 5 within 0s per session", "outside 1s to 31 days"),
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

const DAILY: &str = r#"module refunds
write refund
stage main { tools [refund] }
budget daily for refund { sum args.amount <= 500 within 24h per principal }
budget per_turn for refund { count <= 3 per turn }
"#;

fn with_spent(spent: Value, amounts: &[f64]) -> String {
    let calls: Vec<Value> = amounts
        .iter()
        .enumerate()
        .map(|(i, a)| json!({"id": format!("c{i}"), "tool": "refund", "args": {"amount": a}}))
        .collect();
    let mut facts = json!({"stage": "main"});
    if !spent.is_null() {
        facts["spent"] = spent;
    }
    json!({"facts": facts, "calls": calls}).to_string()
}

#[test]
fn a_budget_over_batches_starts_from_the_keepers_count_and_reports_what_it_took() {
    let p = policy(DAILY);
    assert!(p.keeps_counts());
    let kept: Vec<_> = p.budgets().map(|b| (b.name, b.scope, b.window)).collect();
    assert_eq!(
        kept,
        vec![
            (
                "daily",
                toolgate_engine::BudgetScope::Principal,
                Some(std::time::Duration::from_secs(86_400))
            ),
            ("per_turn", toolgate_engine::BudgetScope::Turn, None),
        ]
    );
    let text = with_spent(
        json!({"daily": 430, "per_turn": 0}),
        &[60, 60].map(f64::from),
    );
    let d = judge(&p, &text);
    assert!(d[0].allow);
    assert_eq!(d[1].kind, Some(DenyKind::Budget));
    let reason = d[1].reason.as_deref().unwrap();
    assert!(reason.contains("10 of 500 left per principal"), "{reason}");
    let r = p.decide_json(&text).unwrap();
    assert_eq!(r.spent.get("daily").copied(), Some(60.0));
    assert_eq!(r.spent.get("per_turn").copied(), Some(1.0));
    let shown = serde_json::to_value(&r).unwrap();
    assert_eq!(shown["spent"], json!({"daily": 60.0, "per_turn": 1.0}));
    // The turn's count: two used already, so one more call fits and the next does not.
    let d = judge(
        &p,
        &with_spent(json!({"daily": 0, "per_turn": 2}), &[1.0, 1.0]),
    );
    assert!(d[0].allow);
    assert_eq!(d[1].rule.as_deref(), Some("per_turn"));
}

#[test]
fn a_budget_whose_count_is_not_given_denies() {
    let p = policy(DAILY);
    for spent in [Value::Null, json!({"per_turn": 0})] {
        let d = judge(&p, &with_spent(spent.clone(), &[1.0]));
        assert_eq!(d[0].kind, Some(DenyKind::Budget), "{spent}");
        assert_eq!(d[0].rule.as_deref(), Some("daily"));
        assert!(d[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("`facts.spent.daily` is missing"));
    }
    // A response that denied everything consumed nothing.
    assert!(p
        .decide_json(&with_spent(Value::Null, &[1.0]))
        .unwrap()
        .spent
        .is_empty());
}

#[test]
fn facts_spent_is_checked_by_both_readers() {
    let p = policy(DAILY);
    for (spent, at, says) in [
        (
            json!({"dialy": 1}),
            "facts.spent.dialy",
            "did you mean `daily`?",
        ),
        (json!({"daily": -1}), "facts.spent.daily", "at least 0"),
        (json!({"daily": "1"}), "facts.spent.daily", "at least 0"),
        (json!([1]), "facts.spent", "expected an object"),
    ] {
        let text = with_spent(spent.clone(), &[1.0]);
        let strict = Request::from_json(&text).and_then(|r| p.check_request(&r).map(|_| r));
        let err = strict.expect_err(&format!("{spent} must be refused"));
        let shown = err.to_string();
        assert!(
            shown.contains(at) && shown.contains(says),
            "{spent}: {shown}"
        );
        let fast = p
            .decide_json(&text)
            .expect_err("the one-pass reader refuses it too");
        assert_eq!(fast.to_string(), shown);
    }
    // A per-batch budget has no count to give.
    let p = policy(REFUNDS);
    let text =
        json!({"facts": {"stage": "main", "spent": {"batch_refunds": 1}}, "calls": []}).to_string();
    assert!(p
        .decide_json(&text)
        .unwrap_err()
        .to_string()
        .contains("leave `spent` out"));
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
    let daily = policy(DAILY);
    let shorter = policy(&DAILY.replace("within 24h", "within 1h"));
    let w = data_widenings(&shorter, &daily, "refund");
    assert!(
        w.iter()
            .any(|s| s.contains("no longer held to budget `daily`")),
        "{w:?}"
    );
    let per_session = policy(&DAILY.replace("per principal", "per session"));
    assert!(!data_widenings(&per_session, &daily, "refund").is_empty());
    let lowered = policy(&REFUNDS.replace("<= 100 per batch", "<= 50 per batch"));
    assert!(data_widenings(&lowered, &old, "refund").is_empty());
    assert!(data_widenings(&old, &old, "send").is_empty());
}
