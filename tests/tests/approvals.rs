//! Asking a person (issue 24): `ask when`, a latch's `asks`, the `ask` kind with its approval
//! digest, and `facts.approvals` letting exactly the approved call through.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use toolgate_engine::{Decision, DenyKind, Policy, Request};
use toolgate_tests::compile;

const REFUNDS: &str = r#"
module refunds
write refund, refund_gift, send
ingest fetch
read look
stage main { tools [refund, refund_gift, send, fetch, look] }
latch tainted { set_by [fetch] blocks [send] asks [look] }
rule refunds for [refund, refund_gift] {
  require args.amount is number and args.amount <= 500
  ask when args.amount > 50
}
rule flagged for send { ask when args.flagged == true }
"#;

/// The decisions for `calls` (each `(tool, args)`), in session `s1` turn `t1`, with `facts`.
fn judge(p: &Policy, facts: Value, calls: &[(&str, Value)]) -> Vec<Decision> {
    judge_in(p, ("s1", "t1"), facts, calls)
}

fn judge_in(
    p: &Policy,
    (session, turn): (&str, &str),
    mut facts: Value,
    calls: &[(&str, Value)],
) -> Vec<Decision> {
    facts["stage"] = json!("main");
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (tool, args))| json!({"id": format!("c{i}"), "tool": tool, "args": args}))
        .collect();
    let body = json!({"session": session, "turn": turn, "facts": facts, "calls": calls});
    let text = body.to_string();
    let strict = p.decide(&Request::from_json(&text).unwrap());
    // The one-pass reader judges the same request the same way.
    let fast = p.decide_json(&text).unwrap();
    assert_eq!(strict, fast, "{text}");
    strict.decisions
}

fn one(p: &Policy, facts: Value, tool: &str, args: Value) -> Decision {
    judge(p, facts, &[(tool, args)]).remove(0)
}

fn asks(d: &Decision, by: &str) -> String {
    assert!(!d.allow, "{d:?}");
    assert_eq!(d.kind, Some(DenyKind::Ask), "{d:?}");
    assert_eq!(d.rule.as_deref(), Some(by), "{d:?}");
    assert!(
        d.reason.as_deref().unwrap().starts_with("Approval needed"),
        "{d:?}"
    );
    let digest = d
        .approval
        .clone()
        .expect("an ask carries its approval digest");
    assert!(toolgate_engine::is_approval_digest(&digest), "{digest}");
    digest
}

#[test]
fn a_failed_require_denies_and_a_passing_one_whose_ask_holds_asks() {
    let p = compile(REFUNDS);
    let small = one(&p, json!({}), "refund", json!({"amount": 20}));
    assert!(small.allow && small.approval.is_none(), "{small:?}");
    asks(
        &one(&p, json!({}), "refund", json!({"amount": 100})),
        "refunds",
    );
    let big = one(&p, json!({}), "refund", json!({"amount": 600}));
    assert_eq!(big.kind, Some(DenyKind::Args), "{big:?}");
    assert!(big.approval.is_none());
    // The ask is a denial to an executor that does not know asks: `allow` is false.
    let v = serde_json::to_value(one(&p, json!({}), "refund", json!({"amount": 100}))).unwrap();
    assert_eq!(
        (v["allow"].clone(), v["kind"].clone()),
        (json!(false), json!("ask"))
    );
}

#[test]
fn an_ask_when_that_cannot_be_told_asks() {
    let p = compile(REFUNDS);
    // `args.flagged` absent: unknown, so a person sees the call.
    asks(&one(&p, json!({}), "send", json!({})), "flagged");
    asks(
        &one(&p, json!({}), "send", json!({"flagged": "yes"})),
        "flagged",
    );
    assert!(one(&p, json!({}), "send", json!({"flagged": false})).allow);
}

#[test]
fn a_latch_asks_for_the_tools_it_names_and_still_blocks_the_others() {
    let p = compile(REFUNDS);
    let d = judge(
        &p,
        json!({}),
        &[
            ("fetch", json!({})),
            ("look", json!({})),
            ("send", json!({"flagged": false})),
        ],
    );
    assert!(d[0].allow);
    asks(&d[1], "tainted");
    assert_eq!(d[2].kind, Some(DenyKind::Latch), "{:?}", d[2]);
    // Unlatched, the tool runs without asking.
    assert!(one(&p, json!({}), "look", json!({})).allow);
}

#[test]
fn an_approval_allows_exactly_the_call_it_was_asked_for() {
    let p = compile(REFUNDS);
    let digest = asks(
        &one(&p, json!({}), "refund", json!({"amount": 100, "to": "ann"})),
        "refunds",
    );
    let approved = json!({"approvals": [digest]});
    let d = one(
        &p,
        approved.clone(),
        "refund",
        json!({"amount": 100, "to": "ann"}),
    );
    assert!(d.allow, "{d:?}");
    assert_eq!(
        d.approval.as_deref(),
        Some(digest.as_str()),
        "the allow names the approval it used"
    );
    // Key order and number spelling do not make another call.
    for same in [
        r#"{"to": "ann", "amount": 100}"#,
        r#"{"amount": 100.0, "to": "ann"}"#,
        r#"{"amount": 1e2, "to": "ann"}"#,
        r#"{"to":"ann","amount":1.00e2}"#,
    ] {
        let args: Value = serde_json::from_str(same).unwrap();
        assert!(one(&p, approved.clone(), "refund", args).allow, "{same}");
    }
    // Anything else is another call, and asks again.
    for other in [
        json!({"amount": 101, "to": "ann"}),
        json!({"amount": 100, "to": "bob"}),
        json!({"amount": 100, "to": "ann", "memo": "x"}),
        json!({"amount": 100}),
        json!({"amount": 100, "to": "Ann"}),
    ] {
        asks(&one(&p, approved.clone(), "refund", other), "refunds");
    }
    // Another tool under the same rule.
    asks(
        &one(
            &p,
            approved.clone(),
            "refund_gift",
            json!({"amount": 100, "to": "ann"}),
        ),
        "refunds",
    );
    // Another turn, another session.
    for ids in [("s1", "t2"), ("s2", "t1")] {
        let d = judge_in(
            &p,
            ids,
            approved.clone(),
            &[("refund", json!({"amount": 100, "to": "ann"}))],
        );
        asks(&d[0], "refunds");
    }
    // Another revision of the policy.
    let revised = compile(&REFUNDS.replace("<= 500", "<= 400"));
    asks(
        &one(
            &revised,
            approved.clone(),
            "refund",
            json!({"amount": 100, "to": "ann"}),
        ),
        "refunds",
    );
    // A failed `require` is not overridden by an approval of another call that passed it.
    let d = one(&p, approved, "refund", json!({"amount": 600, "to": "ann"}));
    assert_eq!(d.kind, Some(DenyKind::Args));
}

#[test]
fn an_approval_never_carries_over_to_another_unicode_spelling() {
    let p = compile(REFUNDS);
    let nfc = json!({"amount": 100, "to": "Zo\u{e9}"});
    let nfd = json!({"amount": 100, "to": "Zoe\u{301}"});
    let digest = asks(&one(&p, json!({}), "refund", nfc.clone()), "refunds");
    let approved = json!({"approvals": [digest]});
    assert!(one(&p, approved.clone(), "refund", nfc).allow);
    asks(&one(&p, approved, "refund", nfd), "refunds");
}

#[test]
fn in_a_batch_each_call_needs_its_own_approval() {
    let p = compile(REFUNDS);
    let calls = [
        ("refund", json!({"amount": 99})),
        ("refund", json!({"amount": 98})),
    ];
    let first = judge(&p, json!({}), &calls);
    let d0 = asks(&first[0], "refunds");
    let d1 = asks(&first[1], "refunds");
    assert_ne!(d0, d1);
    let again = judge(&p, json!({"approvals": [d0]}), &calls);
    assert!(again[0].allow);
    asks(&again[1], "refunds");
}

#[test]
fn one_approval_lets_one_call_of_a_batch_run_even_when_two_are_identical() {
    let p = compile(REFUNDS);
    let calls = [
        ("refund", json!({"amount": 99})),
        ("refund", json!({"amount": 99})),
    ];
    let first = judge(&p, json!({}), &calls);
    let digest = asks(&first[0], "refunds");
    assert_eq!(asks(&first[1], "refunds"), digest);
    let again = judge(&p, json!({"approvals": [digest.clone()]}), &calls);
    assert!(again[0].allow, "{:?}", again[0]);
    assert_eq!(again[0].approval.as_deref(), Some(digest.as_str()));
    assert_eq!(asks(&again[1], "refunds"), digest);
    // Giving the same approval twice is still one approval.
    let twice = judge(&p, json!({"approvals": [digest.clone(), digest]}), &calls);
    assert!(twice[0].allow);
    asks(&twice[1], "refunds");
}

#[test]
fn an_approval_window_is_ten_minutes_unless_the_policy_sets_one() {
    assert_eq!(
        compile(REFUNDS).approval_window(),
        std::time::Duration::from_secs(600)
    );
    for (written, secs) in [("30s", 30), ("5m", 300), ("2h", 7200), ("24h", 86_400)] {
        let p = compile(&format!("{REFUNDS}approvals {{ valid_for {written} }}\n"));
        assert_eq!(p.approval_window().as_secs(), secs, "{written}");
    }
    // A block without `valid_for` keeps the default.
    let p = compile(&format!("{REFUNDS}approvals {{}}\n"));
    assert_eq!(p.approval_window().as_secs(), 600);
}

#[test]
fn an_approval_window_outside_a_second_to_a_day_or_given_twice_is_refused() {
    for (bad, says) in [
        ("approvals { valid_for 0s }", "cannot stay valid for 0s"),
        ("approvals { valid_for 25h }", "cannot stay valid for 25h"),
        (
            "approvals { valid_for 99999999999999999999s }",
            "this duration is too long",
        ),
        (
            "approvals { valid_for 5m valid_for 6m }",
            "`valid_for` is given twice",
        ),
        (
            "approvals { valid_for 5m }\napprovals { valid_for 6m }",
            "`approvals` is declared twice",
        ),
        ("approvals { valid_for 10 }", "duration"),
    ] {
        let e = toolgate_tests::compile_err(&format!("{REFUNDS}{bad}\n"));
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn fmt_lays_out_an_approvals_block() {
    let messy = format!("{REFUNDS}approvals {{   valid_for   5m }}\n");
    let out = toolgate_lang::format_source("m.gate", &messy).unwrap();
    assert!(out.contains("approvals {\n  valid_for 5m\n}\n"), "{out}");
    assert_eq!(toolgate_lang::format_source("m.gate", &out).unwrap(), out);
    assert_eq!(compile(&out).approval_window().as_secs(), 300);
}

#[test]
fn the_change_gate_counts_a_longer_approval_window_as_a_widening() {
    let longer = format!("{REFUNDS}approvals {{ valid_for 1h }}\n");
    let d = gate(REFUNDS, &longer);
    assert_eq!(d.data_widenings.len(), 1, "{d:?}");
    assert!(d.data_widenings[0].contains("3600s (was 600s)"), "{d:?}");
    // Shorter narrows nothing the gate holds.
    assert!(gate(&longer, REFUNDS).data_widenings.is_empty());
}

#[test]
fn a_malformed_approval_is_a_request_error_with_its_path() {
    for bad in [
        json!(["yes"]),
        json!([1]),
        json!("ap1:00"),
        json!([format!("ap1:{}", "A".repeat(64))]),
    ] {
        let text = json!({"facts": {"stage": "main", "approvals": bad}, "calls": []}).to_string();
        let e = Request::from_json(&text).unwrap_err().to_string();
        assert!(e.contains("facts.approvals"), "{e}");
        let p = compile(REFUNDS);
        let fast = p.decide_json(&text).unwrap_err().to_string();
        assert_eq!(fast, e);
    }
}

#[test]
fn asks_compile_and_a_latch_cannot_both_block_and_ask_for_a_tool() {
    let only_ask =
        "module m\nwrite pay\nstage s { tools [pay] }\nrule big for pay { ask when args.n > 1 }\n";
    assert!(Policy::compile("m.gate", only_ask).is_ok());
    let both = "module m\nwrite pay\ningest get\nstage s { tools [pay, get] }\nlatch l { set_by [get] blocks [pay] asks [pay] }\n";
    let e = Policy::compile("m.gate", both).unwrap_err().to_string();
    assert!(e.contains("both blocks and asks for `pay`"), "{e}");
    let empty = "module m\nwrite pay\nstage s { tools [pay] }\nrule r for pay { refusal \"no\" }\n";
    assert!(Policy::compile("m.gate", empty).is_err());
}

#[test]
fn explain_names_the_ask_and_whether_it_was_approved() {
    let p = compile(REFUNDS);
    let req = |facts: Value| {
        let mut facts = facts;
        facts["stage"] = json!("main");
        Request::from_value(json!({"session": "s1", "turn": "t1", "facts": facts,
            "calls": [{"id": "c", "tool": "refund", "args": {"amount": 100}}]}))
        .unwrap()
    };
    let asked = p.explain(&req(json!({})));
    let last = asked[0].steps.last().unwrap();
    assert_eq!(
        (last.check.as_str(), last.passed),
        ("ask rule refunds", false),
        "{last:?}"
    );
    let digest = asked[0].decision.approval.clone().unwrap();
    let approved = p.explain(&req(json!({"approvals": [digest]})));
    let last = approved[0].steps.last().unwrap();
    assert_eq!(
        (last.check.as_str(), last.passed),
        ("ask rule refunds", true),
        "{last:?}"
    );
    assert!(approved[0].decision.allow);
}

#[test]
fn fmt_lays_out_asks_and_keeps_their_meaning() {
    let messy = "module m\nwrite pay\ningest get\nstage main { tools [pay, get] }\nlatch l { set_by get   asks [ pay ] }\nrule big for pay { require args.n is number  ask   when args.n > 1 or args.urgent == true # why\n}\n";
    let out = toolgate_lang::format_source("m.gate", messy).unwrap();
    assert!(
        out.contains("  asks pay\n") || out.contains("  asks [pay]\n"),
        "{out}"
    );
    assert!(
        out.contains("  ask when args.n > 1 or args.urgent == true  # why\n"),
        "{out}"
    );
    assert_eq!(toolgate_lang::format_source("m.gate", &out).unwrap(), out);
    let a = compile(messy);
    let b = compile(&out);
    let d = |p: &Policy| one(p, json!({}), "pay", json!({"n": 2})).kind;
    assert_eq!(d(&a), Some(DenyKind::Ask));
    assert_eq!(d(&a), d(&b));
}

/// 0 denied, 1 asks, 2 allowed: the order the change gate widens in.
fn rank(p: &Policy, change: &toolgate_prove::Change) -> u8 {
    if p.check_request(&change.request).is_err() {
        return 0;
    }
    let d = &p.decide(&change.request).decisions[change.call];
    match (d.allow, d.kind) {
        (true, _) => 2,
        (false, Some(DenyKind::Ask)) => 1,
        _ => 0,
    }
}

/// The diff of OLD → NEW, every reported change replayed through both policies.
fn gate(old: &str, new: &str) -> toolgate_prove::PolicyDiff {
    let (old, new) = (compile(old), compile(new));
    let config = toolgate_prove::Config {
        cases: 512,
        seed: 7,
    };
    let d = toolgate_prove::diff(&old, &new, &config);
    for w in &d.widenings {
        assert!(rank(&new, w) > rank(&old, w), "not a widening: {w:?}");
    }
    for n in &d.narrowings {
        assert!(rank(&old, n) > rank(&new, n), "not a narrowing: {n:?}");
    }
    d
}

#[test]
fn the_change_gate_counts_deny_to_ask_and_ask_to_allow_as_widenings() {
    // An `ask when` dropped: the call that asked now runs (found by the search).
    let dropped = REFUNDS.replace("  ask when args.amount > 50\n", "");
    let d = gate(REFUNDS, &dropped);
    assert!(
        d.widenings
            .iter()
            .any(|w| w.tool == "refund" && w.new == "allowed"),
        "{:?} {:?}",
        d.widenings,
        d.undecided
    );
    // A higher threshold asks less often: a widening too.
    let d = gate(REFUNDS, &REFUNDS.replace("> 50", "> 80"));
    assert!(!d.widenings.is_empty() || !d.undecided.is_empty(), "{d:?}");
    // A latch that blocked now asks: deny -> ask.
    let asks_instead = REFUNDS.replace("blocks [send] asks [look]", "asks [send, look]");
    let d = gate(REFUNDS, &asks_instead);
    assert!(
        d.widenings
            .iter()
            .any(|w| w.tool == "send" && w.new.starts_with("asks")),
        "{:?}",
        d.widenings
    );
    // A latch that asked no longer does: ask -> allow.
    let d = gate(REFUNDS, &REFUNDS.replace(" asks [look]", ""));
    assert!(
        d.widenings
            .iter()
            .any(|w| w.tool == "look" && w.new == "allowed"),
        "{:?}",
        d.widenings
    );
}

#[test]
fn the_change_gate_holds_a_latch_ask_dropped_behind_rules() {
    // `refund` has rules that deny every call without arguments, so the enumeration alone
    // cannot see the latch's ask go.
    let asking = REFUNDS.replace("asks [look]", "asks [look, refund]");
    let d = gate(&asking, REFUNDS);
    assert!(
        d.widenings.iter().any(|w| w.tool == "refund")
            || d.undecided.iter().any(|u| u.tool == "refund"),
        "{d:?}"
    );
}

#[test]
fn the_change_gate_counts_a_new_ask_as_a_narrowing_only() {
    let more = REFUNDS.replace(
        "  ask when args.amount > 50\n",
        "  ask when args.amount > 50\n  ask when args.amount > 5\n",
    );
    let d = gate(REFUNDS, &more);
    assert!(d.widenings.is_empty() && d.undecided.is_empty(), "{d:?}");
    let d = gate(
        REFUNDS,
        &REFUNDS.replace("blocks [send] asks [look]", "blocks [send, look]"),
    );
    assert!(d.widenings.is_empty() && d.undecided.is_empty(), "{d:?}");
    assert!(
        d.narrowings.iter().any(|n| n.tool == "look"),
        "{:?}",
        d.narrowings
    );
}
