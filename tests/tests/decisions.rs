//! Decision kinds, the fixed check order, and the shape of the response.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use toolgate_engine::{Call, DenyKind, Facts, Latched, Message, Request};
use toolgate_tests::{
    assert_allowed, assert_denied, assert_denied_by, compile, decide, decide_one, example_policy,
};

const ORDER: &str = r#"
module order
write pay, note
ingest browse
read look
stage main { tools [pay, note, browse, look] }
stage short { tools [pay, look] max_turns 1 }
stage other { tools [look] }
latch untrusted { set_by ingest blocks write }
rule first for pay { require args.a == 1 }
rule second for pay { require args.b == 1 }
rule for_writes for write { require args.c == 1 }
"#;

#[test]
fn unclassified_is_checked_before_the_stage() {
    let p = compile(ORDER);
    // No stage at all, unknown stage, and a stage: an unknown tool is always `unclassified`.
    for facts in [
        json!({}),
        json!({"stage": "nowhere"}),
        json!({"stage": "other"}),
    ] {
        let d = decide_one(&p, facts, "mystery", json!({}));
        assert_denied(&d, DenyKind::Unclassified);
    }
}

#[test]
fn stage_is_checked_before_the_latch() {
    let p = compile(ORDER);
    let r = decide(
        &p,
        json!({"facts": {"stage": "other", "latched": true}, "calls": [
            {"id": "1", "tool": "pay", "args": {"a": 1, "b": 1, "c": 1}},
            {"id": "2", "tool": "browse"},
        ]}),
    );
    assert_denied_by(&r.decisions[0], DenyKind::Stage, "other");
    assert_denied_by(&r.decisions[1], DenyKind::Stage, "other");
}

#[test]
fn max_turns_is_checked_before_the_latch() {
    let p = compile(ORDER);
    let d = decide_one(
        &p,
        json!({"stage": "short", "stage_turns": 2, "latched": true}),
        "pay",
        json!({"a": 1, "b": 1, "c": 1}),
    );
    assert_denied_by(&d, DenyKind::Stage, "short");
}

#[test]
fn the_latch_is_checked_before_the_rules() {
    let p = compile(ORDER);
    // Every rule of `pay` fails too, but the latch decides.
    let d = decide_one(
        &p,
        json!({"stage": "main", "latched": true}),
        "pay",
        json!({}),
    );
    assert_denied_by(&d, DenyKind::Latch, "untrusted");
}

#[test]
fn rules_are_checked_in_source_order_and_the_first_failure_decides() {
    let p = compile(ORDER);
    let facts = json!({"stage": "main"});
    let d = decide_one(&p, facts.clone(), "pay", json!({}));
    assert_denied_by(&d, DenyKind::Args, "first");
    let d = decide_one(&p, facts.clone(), "pay", json!({"a": 1}));
    assert_denied_by(&d, DenyKind::Args, "second");
    let d = decide_one(&p, facts.clone(), "pay", json!({"a": 1, "b": 1}));
    assert_denied_by(&d, DenyKind::Args, "for_writes");
    let d = decide_one(&p, facts.clone(), "pay", json!({"a": 1, "b": 1, "c": 1}));
    assert_allowed(&d);
    // A rule for a class applies to every tool of the class.
    let d = decide_one(&p, facts.clone(), "note", json!({}));
    assert_denied_by(&d, DenyKind::Args, "for_writes");
    assert_allowed(&decide_one(&p, facts, "look", json!({})));
}

#[test]
fn swapping_rule_declarations_swaps_which_one_is_reported() {
    let swapped = compile(
        r#"
module order
write pay
stage main { tools [pay] }
rule second for pay { require args.b == 1 }
rule first for pay { require args.a == 1 }
"#,
    );
    let d = decide_one(&swapped, json!({"stage": "main"}), "pay", json!({}));
    assert_denied_by(&d, DenyKind::Args, "second");
}

#[test]
fn a_rule_can_target_several_tools() {
    let p = compile(
        r#"
module multi
write a, b, c
stage s { tools [a, b, c] }
rule small for [a, b] { require args.n < 3 }
"#,
    );
    let facts = json!({"stage": "s"});
    assert_denied_by(
        &decide_one(&p, facts.clone(), "a", json!({"n": 5})),
        DenyKind::Args,
        "small",
    );
    assert_denied_by(
        &decide_one(&p, facts.clone(), "b", json!({"n": 5})),
        DenyKind::Args,
        "small",
    );
    assert_allowed(&decide_one(&p, facts, "c", json!({"n": 5})));
}

#[test]
fn each_decision_kind_from_the_examples() {
    let motor = example_policy("motor_claims");
    let coach = example_policy("coach");
    let mp = example_policy("messenger_payments");

    let d = decide_one(&coach, json!({"stage": "coach"}), "rm_rf", json!({}));
    assert_denied(&d, DenyKind::Unclassified);

    let d = decide_one(
        &motor,
        json!({"stage": "intake_claim"}),
        "lookup_policy_faq",
        json!({}),
    );
    assert_denied_by(&d, DenyKind::Stage, "intake_claim");
    let d = decide_one(
        &motor,
        json!({"stage": "no_such_stage"}),
        "lookup_policy_faq",
        json!({}),
    );
    assert_denied(&d, DenyKind::Stage);
    let d = decide_one(&motor, json!({}), "lookup_policy_faq", json!({}));
    assert_denied(&d, DenyKind::Stage);
    let d = decide_one(
        &motor,
        json!({"stage": "ncd_policy_faq", "stage_turns": 3}),
        "query_policy_handbook_rag",
        json!({}),
    );
    assert_denied_by(&d, DenyKind::Stage, "ncd_policy_faq");
    let d = decide_one(
        &motor,
        json!({"stage": "ncd_policy_faq", "stage_turns": 2}),
        "query_policy_handbook_rag",
        json!({}),
    );
    assert_allowed(&d);

    let d = decide_one(
        &coach,
        json!({"stage": "coach", "latched": true}),
        "grade_attempt",
        json!({}),
    );
    assert_denied_by(&d, DenyKind::Latch, "documentation_read");

    let d = decide_one(
        &coach,
        json!({"stage": "coach"}),
        "fetch_vendor_doc",
        json!({"url": "https://evil.tld/"}),
    );
    assert_denied_by(&d, DenyKind::Host, "vendor_doc_host");

    let d = decide_one(
        &motor,
        json!({"stage": "tier_auto_payout"}),
        "authorise_bacs_payout",
        json!({"amount": 0, "policy": "POL-123456"}),
    );
    assert_denied_by(&d, DenyKind::Args, "payout_within_auto_tier");
    let d = decide_one(
        &motor,
        json!({"stage": "tier_auto_payout"}),
        "authorise_bacs_payout",
        json!({"amount": 10, "policy": "POL-12345"}),
    );
    assert_denied_by(&d, DenyKind::Args, "payout_policy_reference");
    let d = decide_one(
        &motor,
        json!({"stage": "tier_auto_payout"}),
        "authorise_bacs_payout",
        json!({"amount": "10", "policy": "POL-123456"}),
    );
    assert_denied_by(&d, DenyKind::Args, "payout_within_auto_tier");

    let d = decide_one(
        &mp,
        json!({"stage": "chat", "messages": []}),
        "confirm_payment",
        json!({}),
    );
    assert_denied_by(&d, DenyKind::Precondition, "receipt_received");

    let p = compile("module m\nwrite a\nstage s { tools [a] }\nrule vip for a { require facts.tier == \"vip\" }\n");
    let d = decide_one(&p, json!({"stage": "s", "tier": "basic"}), "a", json!({}));
    assert_denied_by(&d, DenyKind::Rule, "vip");
}

#[test]
fn the_motor_claims_payout_tool_exists_in_one_stage_only() {
    let motor = example_policy("motor_claims");
    for stage in ["intake_claim", "ncd_policy_faq", "tier_adjuster_review"] {
        let d = decide_one(
            &motor,
            json!({"stage": stage}),
            "authorise_bacs_payout",
            json!({"amount": 10, "policy": "POL-123456"}),
        );
        assert_denied_by(&d, DenyKind::Stage, stage);
    }
    let d = decide_one(
        &motor,
        json!({"stage": "tier_auto_payout"}),
        "authorise_bacs_payout",
        json!({"amount": 250, "policy": "POL-123456"}),
    );
    assert_allowed(&d);
}

#[test]
fn the_motor_claims_handbook_latch_blocks_claim_notes() {
    let motor = example_policy("motor_claims");
    let d = decide_one(
        &motor,
        json!({"stage": "tier_adjuster_review", "latched": true}),
        "update_claim_notes",
        json!({}),
    );
    assert_denied_by(&d, DenyKind::Latch, "untrusted_content");
    let d = decide_one(
        &motor,
        json!({"stage": "tier_adjuster_review"}),
        "update_claim_notes",
        json!({}),
    );
    assert_allowed(&d);
}

#[test]
fn the_messenger_notify_owner_has_no_precondition() {
    let mp = example_policy("messenger_payments");
    for facts in [
        json!({"stage": "chat"}),
        json!({"stage": "chat", "messages": [], "fields": {}, "called": []}),
    ] {
        let d = decide_one(&mp, facts, "notify_owner", json!({}));
        assert_allowed(&d);
        assert!(!d.fail_open, "{d:?}");
    }
}

// ---- response shape ----------------------------------------------------------------------

#[test]
fn one_decision_per_call_in_request_order_with_ids_and_tools_echoed() {
    let coach = example_policy("coach");
    let calls: Vec<Value> = [
        "lookup_lesson",
        "zzz",
        "grade_attempt",
        "lookup_lesson",
        "search_aws_docs",
    ]
    .iter()
    .enumerate()
    .map(|(i, t)| json!({"id": format!("id-{}", 9 - i), "tool": t, "args": {}}))
    .collect();
    let r = decide(&coach, json!({"facts": {"stage": "coach"}, "calls": calls}));
    assert_eq!(r.decisions.len(), calls.len());
    for (d, c) in r.decisions.iter().zip(&calls) {
        assert_eq!(d.id, c["id"].as_str().unwrap());
        assert_eq!(d.tool, c["tool"].as_str().unwrap());
    }
    assert_eq!(&*r.policy, "coach");
    assert_eq!(&*r.revision, coach.revision());
}

#[test]
fn duplicate_call_ids_are_refused_not_judged() {
    // Executors map decisions back by id: two calls with one id could swap an allow and a
    // denial, so such a batch is malformed (more cases in ambiguous_requests.rs).
    let coach = example_policy("coach");
    let request = json!({"facts": {"stage": "coach"}, "calls": [
        {"id": "same", "tool": "lookup_lesson"}, {"id": "same", "tool": "nope"}
    ]});
    let err = coach.decide_json(&request.to_string()).unwrap_err();
    assert!(err.to_string().contains("calls[1].id"), "{err}");
    // A request built in Rust is checked by `check_request`.
    let mut typed = Request::from_json(r#"{"calls": []}"#).unwrap();
    typed.calls = vec![
        Call::new("same", "lookup_lesson", json!({})),
        Call::new("same", "nope", json!({})),
    ];
    assert!(coach.check_request(&typed).is_err());
}

#[test]
fn empty_batch_gives_empty_decisions() {
    let coach = example_policy("coach");
    let r = decide(&coach, json!({"calls": []}));
    assert!(r.decisions.is_empty());
    assert!(!r.latched.any());
}

#[test]
fn response_json_has_the_specified_keys() {
    let mp = example_policy("messenger_payments");
    let r = decide(
        &mp,
        json!({"facts": {"stage": "chat", "fields": {}}, "calls": [
            {"id": "a", "tool": "notify_owner"},
            {"id": "b", "tool": "issue_invoice"},
            {"id": "c", "tool": "book_slot"},
        ]}),
    );
    let v = serde_json::to_value(&r).unwrap();
    let top: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    for key in ["policy", "revision", "latched", "decisions"] {
        assert!(top.contains(&key), "missing `{key}` in {v}");
    }
    assert_eq!(v["policy"], json!("messenger_payments"));
    assert!(v["revision"].as_str().is_some_and(|s| !s.is_empty()));
    // A policy without latches reports `latched: false`.
    assert_eq!(v["latched"], json!(false));

    let allowed = v["decisions"][0].as_object().unwrap();
    let mut keys: Vec<&str> = allowed.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["allow", "id", "tool"], "{v}");
    assert_eq!(allowed["allow"], json!(true));

    let denied = v["decisions"][1].as_object().unwrap();
    assert_eq!(denied["allow"], json!(false));
    assert_eq!(denied["kind"], json!("precondition"));
    assert_eq!(denied["rule"], json!("phone_on_file"));
    assert!(denied["reason"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(!denied.contains_key("fail_open"), "{v}");

    // No `messages` key at all: the precondition fails open, and says so.
    let open = v["decisions"][2].as_object().unwrap();
    assert_eq!(open["allow"], json!(true));
    assert_eq!(open["fail_open"], json!(true));
    assert!(
        !open.contains_key("kind") && !open.contains_key("rule") && !open.contains_key("reason")
    );
}

#[test]
fn every_kind_serialises_lowercase() {
    let kinds = [
        (DenyKind::Unclassified, "unclassified"),
        (DenyKind::Stage, "stage"),
        (DenyKind::Latch, "latch"),
        (DenyKind::Host, "host"),
        (DenyKind::Args, "args"),
        (DenyKind::Precondition, "precondition"),
        (DenyKind::Rule, "rule"),
    ];
    for (k, s) in kinds {
        assert_eq!(serde_json::to_value(k).unwrap(), json!(s));
        assert_eq!(k.as_str(), s);
    }
}

#[test]
fn typed_requests_built_in_rust_match_json_requests() {
    let mp = example_policy("messenger_payments");
    let facts = Facts {
        stage: Some("chat".into()),
        latched: Latched::Flag(false),
        messages: Some(vec![
            Message::new("client", &["image"]),
            Message::new("assistant", &[]),
        ]),
        ..Facts::default()
    };
    let typed = Request::new(
        facts,
        vec![
            Call::new("c1", "confirm_payment", json!({})),
            Call::new("c2", "book_slot", json!({})),
        ],
    );
    let from_json = Request::from_json(
        &json!({"facts": {"stage": "chat", "latched": false, "messages": [
            {"from": "client", "media": ["image"]}, {"from": "assistant", "media": []}
        ]}, "calls": [
            {"id": "c1", "tool": "confirm_payment", "args": {}},
            {"id": "c2", "tool": "book_slot", "args": {}}
        ]})
        .to_string(),
    )
    .unwrap();
    assert_eq!(typed, from_json);
    let a = mp.decide(&typed);
    let b = mp.decide(&from_json);
    assert_eq!(a, b);
    assert_allowed(&a.decisions[0]);
    assert_denied_by(&a.decisions[1], DenyKind::Precondition, "real_conversation");
    // And the typed request round-trips through its own JSON form.
    let again = Request::from_value(typed.to_value()).unwrap();
    assert_eq!(again, typed);
}

#[test]
fn deciding_is_deterministic() {
    let coach = example_policy("coach");
    let req = json!({"facts": {"stage": "coach"}, "calls": [
        {"id": "1", "tool": "grade_attempt"}, {"id": "2", "tool": "fetch_vendor_doc", "args": {"url": "https://aws.amazon.com/"}}
    ]});
    let a = decide(&coach, req.clone());
    let b = decide(&coach, req);
    assert_eq!(a, b);
}

#[test]
fn a_request_naming_another_policy_is_refused() {
    let coach = example_policy("coach");
    let err = coach
        .decide_json(r#"{"policy": "motor_claims", "facts": {}, "calls": []}"#)
        .unwrap_err();
    assert!(err.to_string().contains("motor_claims"), "{err}");
    let ok = coach
        .decide_json(r#"{"policy": "coach", "facts": {}, "calls": []}"#)
        .unwrap();
    assert!(ok.decisions.is_empty());
}

#[test]
fn the_policy_is_send_sync_and_shareable_behind_an_arc() {
    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    let p = std::sync::Arc::new(example_policy("coach"));
    assert_send_sync(&p);
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let p = p.clone();
            std::thread::spawn(move || {
                let d = decide_one(
                    &p,
                    json!({"stage": "coach"}),
                    "lookup_lesson",
                    json!({"i": i}),
                );
                d.allow
            })
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap());
    }
}

#[test]
fn the_whitelist_is_checked_before_max_turns() {
    let p = compile(ORDER);
    let reason = |tool: &str, turns: u64| {
        decide_one(
            &p,
            json!({"stage": "short", "stage_turns": turns}),
            tool,
            json!({}),
        )
        .reason
        .unwrap()
    };
    // `note` is not in `short`; `pay` is. With the turns used up, `note` still gets the
    // whitelist refusal, not the turns one.
    let whitelist = reason("note", 0);
    let turns = reason("pay", 2);
    assert_ne!(whitelist, turns);
    assert_eq!(reason("note", 2), whitelist);
}

/// Ids and tool names of every length are echoed exactly, by every decision path and in
/// the JSON response: short ones are stored inline, long ones on the heap (`CallLabel`), and
/// a batch longer than the 16 verdicts kept on the stack is judged whole.
#[test]
fn long_ids_and_names_and_long_batches_are_echoed_exactly() {
    let p = compile(ORDER);
    let long_id = format!("call-{}", "é9".repeat(60));
    let long_tool = "t".repeat(200);
    let mut calls = vec![
        json!({"id": long_id, "tool": "look", "args": {}}),
        json!({"id": "toolu_01A09q90qw90lq917835lq9a", "tool": long_tool, "args": {}}),
    ];
    for i in 0..20 {
        calls.push(json!({"id": format!("c{i}"), "tool": if i == 7 { "browse" } else { "note" }, "args": {"c": 1}}));
    }
    let request = json!({"facts": {"stage": "main"}, "calls": calls});
    let text = request.to_string();
    let strict = decide(&p, request.clone());
    let fast = p.decide_json(&text).unwrap();
    for response in [&strict, &fast] {
        assert_eq!(response.decisions.len(), 22);
        assert_eq!(response.decisions[0].id, long_id.as_str());
        assert!(response.decisions[0].allow);
        assert_eq!(response.decisions[1].tool, long_tool.as_str());
        assert_denied(&response.decisions[1], DenyKind::Unclassified);
        // The ingest call at index 9 latches the batch: every write in it is denied, before
        // and after it, including those past the sixteenth call.
        for (i, d) in response.decisions.iter().enumerate().skip(2) {
            assert_eq!(d.id, format!("c{}", i - 2));
            if i == 9 {
                assert!(d.allow, "{d:?}");
            } else {
                assert_denied(d, DenyKind::Latch);
            }
        }
    }
    assert_eq!(strict, fast);
    let json: Value = serde_json::to_value(&strict).unwrap();
    assert_eq!(json["decisions"][0]["id"], long_id);
    assert_eq!(json["decisions"][1]["tool"], long_tool);
    assert_eq!(json["decisions"][21]["id"], "c19");
}
