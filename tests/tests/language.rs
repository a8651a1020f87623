//! One test (or a few) per language construct: classes, stages, latches, argument
//! constraints, boolean logic, `facts.<path>` rules, `on_missing`, refusals, comments.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use toolgate_engine::{Decision, DenyKind, LatchState, ToolClass};
use toolgate_tests::{
    assert_allowed, assert_denied, assert_denied_by, compile, compile_err, decide, decide_one,
};

/// A one-tool policy whose only rule is `require EXPR`.
fn expr_policy(expr: &str) -> toolgate_engine::Policy {
    compile(&format!(
        "module t\nwrite act\nstage s {{ tools [act] }}\nrule r for act {{\n  require {expr}\n}}\n"
    ))
}

/// Judges `act(args)` under `require EXPR`, with facts `{stage: s}`.
fn judge(expr: &str, args: Value) -> Decision {
    decide_one(&expr_policy(expr), json!({"stage": "s"}), "act", args)
}

fn allows(expr: &str, args: Value) -> bool {
    let d = judge(expr, args.clone());
    if d.allow {
        assert_allowed(&d);
    } else {
        // A failing argument constraint is kind `args` and names the rule.
        assert_denied_by(&d, DenyKind::Args, "r");
    }
    d.allow
}

/// Asserts `require EXPR` allows each of `yes` and denies each of `no` (as `args` objects).
fn table(expr: &str, yes: &[Value], no: &[Value]) {
    for a in yes {
        assert!(allows(expr, a.clone()), "`{expr}` should allow {a}");
    }
    for a in no {
        assert!(!allows(expr, a.clone()), "`{expr}` should deny {a}");
    }
}

// ---- classes -----------------------------------------------------------------------------

#[test]
fn each_tool_gets_its_declared_class() {
    let p = compile(
        "module m\nwrite w1, w2\ningest i1\nread r1, \"quoted-tool\"\nstage s { tools [w1, w2, i1, r1, \"quoted-tool\"] }\n",
    );
    assert_eq!(p.class_of("w1"), Some(ToolClass::Write));
    assert_eq!(p.class_of("w2"), Some(ToolClass::Write));
    assert_eq!(p.class_of("i1"), Some(ToolClass::Ingest));
    assert_eq!(p.class_of("r1"), Some(ToolClass::Read));
    assert_eq!(p.class_of("quoted-tool"), Some(ToolClass::Read));
    assert_eq!(p.class_of("nope"), None);
    assert_eq!(p.tools().count(), 5);
    let d = decide_one(&p, json!({"stage": "s"}), "quoted-tool", json!({}));
    assert_allowed(&d);
}

#[test]
fn a_tool_classified_twice_is_a_compile_error() {
    let out = compile_err("module m\nwrite a\nread b, a\nstage s { tools [a, b] }\n");
    assert!(out.contains("error"), "{out}");
    assert!(out.contains("classified twice"), "{out}");
    assert!(out.contains("test.gate:3:9"), "{out}");
}

#[test]
fn a_tool_classified_twice_with_the_same_class_is_still_an_error() {
    let out = compile_err("module m\nwrite a\nwrite a\nstage s { tools [a] }\n");
    assert!(out.contains("classified twice"), "{out}");
}

#[test]
fn a_stage_listing_an_unclassified_tool_is_an_error_and_such_a_tool_is_denied() {
    // Listing a tool the policy never classifies used to warn and compile; it is an error
    // now (a misspelt name leaves the tool it meant outside its stage), see `unguarded.rs`.
    let out = compile_err("module m\nread a\nstage s { tools [a, ghost] }\n");
    assert!(
        out.contains(
            "test.gate:3:21: error: stage `s` names tool `ghost`, which is never classified"
        ),
        "{out}"
    );
    let p = compile("module m\nread a\nstage s { tools [a] }\n");
    let d = decide_one(&p, json!({"stage": "s"}), "ghost", json!({}));
    assert_denied(&d, DenyKind::Unclassified);
    let d = decide_one(&p, json!({"stage": "s"}), "a", json!({}));
    assert_allowed(&d);
}

#[test]
fn tool_names_are_case_sensitive() {
    let p = compile("module m\nread lookup\nstage s { tools [lookup] }\n");
    let d = decide_one(&p, json!({"stage": "s"}), "Lookup", json!({}));
    assert_denied(&d, DenyKind::Unclassified);
}

// ---- stages ------------------------------------------------------------------------------

const STAGES: &str = r#"
module stages
write pay
read faq, look
stage intake {}
stage digression {
  tools [faq]
  max_turns 2
}
stage zero { tools [faq] max_turns 0 }
stage main { tools [pay, faq] }
stage custom {
  tools [faq]
  max_turns 1
  refusal "Custom stage refusal. This did NOT happen."
}
"#;

#[test]
fn an_empty_stage_allows_no_tool() {
    let p = compile(STAGES);
    for tool in ["pay", "faq", "look"] {
        let d = decide_one(&p, json!({"stage": "intake"}), tool, json!({}));
        assert_denied_by(&d, DenyKind::Stage, "intake");
    }
}

#[test]
fn a_stage_whitelist_allows_only_its_tools() {
    let p = compile(STAGES);
    assert_allowed(&decide_one(&p, json!({"stage": "main"}), "pay", json!({})));
    assert_allowed(&decide_one(&p, json!({"stage": "main"}), "faq", json!({})));
    let d = decide_one(&p, json!({"stage": "main"}), "look", json!({}));
    assert_denied_by(&d, DenyKind::Stage, "main");
    assert!(p.stage_allows("main", "pay"));
    assert!(!p.stage_allows("digression", "pay"));
}

#[test]
fn max_turns_allows_up_to_n_and_denies_beyond() {
    let p = compile(STAGES);
    for turns in [0u64, 1, 2] {
        let d = decide_one(
            &p,
            json!({"stage": "digression", "stage_turns": turns}),
            "faq",
            json!({}),
        );
        assert_allowed(&d);
    }
    for turns in [3u64, 4, 1000] {
        let d = decide_one(
            &p,
            json!({"stage": "digression", "stage_turns": turns}),
            "faq",
            json!({}),
        );
        assert_denied_by(&d, DenyKind::Stage, "digression");
    }
}

#[test]
fn absent_stage_turns_counts_as_zero() {
    let p = compile(STAGES);
    // Even `max_turns 0` allows when `stage_turns` is absent (0 does not exceed 0).
    assert_allowed(&decide_one(&p, json!({"stage": "zero"}), "faq", json!({})));
    assert_allowed(&decide_one(
        &p,
        json!({"stage": "zero", "stage_turns": null}),
        "faq",
        json!({}),
    ));
    let d = decide_one(
        &p,
        json!({"stage": "zero", "stage_turns": 1}),
        "faq",
        json!({}),
    );
    assert_denied_by(&d, DenyKind::Stage, "zero");
}

#[test]
fn stage_turns_do_not_limit_a_stage_without_max_turns() {
    let p = compile(STAGES);
    let d = decide_one(
        &p,
        json!({"stage": "main", "stage_turns": 999}),
        "pay",
        json!({}),
    );
    assert_allowed(&d);
}

#[test]
fn exhausted_stage_denies_every_call_of_the_batch() {
    let p = compile(STAGES);
    let r = decide(
        &p,
        json!({"facts": {"stage": "digression", "stage_turns": 3}, "calls": [
            {"id": "a", "tool": "faq"}, {"id": "b", "tool": "faq", "args": {"q": 1}}
        ]}),
    );
    for d in &r.decisions {
        assert_denied_by(d, DenyKind::Stage, "digression");
    }
}

#[test]
fn stage_refusals_default_and_custom() {
    let p = compile(STAGES);
    let d = decide_one(&p, json!({"stage": "main"}), "look", json!({}));
    let reason = d.reason.unwrap();
    assert!(reason.contains("did NOT happen"), "{reason}");
    assert!(
        reason.contains("main"),
        "the refusal names the stage: {reason}"
    );

    let d = decide_one(
        &p,
        json!({"stage": "digression", "stage_turns": 3}),
        "faq",
        json!({}),
    );
    let reason = d.reason.unwrap();
    assert!(reason.contains("did NOT happen"), "{reason}");

    let d = decide_one(
        &p,
        json!({"stage": "custom", "stage_turns": 2}),
        "faq",
        json!({}),
    );
    assert_eq!(
        d.reason.as_deref(),
        Some("Custom stage refusal. This did NOT happen.")
    );
}

#[test]
fn undefined_and_missing_stage_deny_with_kind_stage() {
    let p = compile(STAGES);
    let d = decide_one(&p, json!({"stage": "nowhere"}), "faq", json!({}));
    assert_denied(&d, DenyKind::Stage);
    assert!(d.reason.as_deref().unwrap().contains("did NOT happen"));
    let d = decide_one(&p, json!({}), "faq", json!({}));
    assert_denied(&d, DenyKind::Stage);
    assert!(d.reason.as_deref().unwrap().contains("did NOT happen"));
    // Stage names are case-sensitive.
    let d = decide_one(&p, json!({"stage": "MAIN"}), "pay", json!({}));
    assert_denied(&d, DenyKind::Stage);
}

// ---- latches -----------------------------------------------------------------------------

const ONE_LATCH: &str = r#"
module one
write save_note, send_email
ingest browse
read lookup
stage s { tools [save_note, send_email, browse, lookup] }
stage narrow { tools [save_note] }
latch untrusted {
  set_by ingest
  blocks write
}
"#;

fn batch(
    policy: &toolgate_engine::Policy,
    facts: Value,
    tools: &[&str],
) -> toolgate_engine::Response {
    let calls: Vec<Value> = tools
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"id": format!("c{i}"), "tool": t, "args": {}}))
        .collect();
    decide(policy, json!({"facts": facts, "calls": calls}))
}

#[test]
fn latch_by_class_blocks_every_write_in_the_batch() {
    let p = compile(ONE_LATCH);
    let r = batch(
        &p,
        json!({"stage": "s"}),
        &["save_note", "browse", "send_email", "lookup"],
    );
    assert_denied_by(&r.decisions[0], DenyKind::Latch, "untrusted");
    assert_allowed(&r.decisions[1]);
    assert_denied_by(&r.decisions[2], DenyKind::Latch, "untrusted");
    assert_allowed(&r.decisions[3]);
    assert_eq!(r.latched, LatchState::Flag(true));
}

#[test]
fn latch_default_refusal_says_it_did_not_happen() {
    let p = compile(ONE_LATCH);
    let r = batch(&p, json!({"stage": "s"}), &["browse", "save_note"]);
    let reason = r.decisions[1].reason.as_deref().unwrap();
    assert!(reason.contains("did NOT happen"), "{reason}");
}

#[test]
fn no_setter_no_latch() {
    let p = compile(ONE_LATCH);
    let r = batch(
        &p,
        json!({"stage": "s"}),
        &["save_note", "lookup", "send_email"],
    );
    for d in &r.decisions {
        assert_allowed(d);
    }
    assert_eq!(r.latched, LatchState::Flag(false));
    assert_eq!(serde_json::to_value(&r).unwrap()["latched"], json!(false));
}

#[test]
fn a_setter_sets_the_latch_even_when_it_is_itself_denied() {
    let p = compile(ONE_LATCH);
    // `browse` does not exist in stage `narrow`, so it is denied, but it still latches.
    let r = batch(&p, json!({"stage": "narrow"}), &["save_note", "browse"]);
    assert_denied_by(&r.decisions[1], DenyKind::Stage, "narrow");
    assert_denied_by(&r.decisions[0], DenyKind::Latch, "untrusted");
    assert!(r.latched.any());
}

#[test]
fn latched_fact_blocks_writes_and_stays_set() {
    let p = compile(ONE_LATCH);
    let r = batch(
        &p,
        json!({"stage": "s", "latched": true}),
        &["save_note", "lookup"],
    );
    assert_denied_by(&r.decisions[0], DenyKind::Latch, "untrusted");
    assert_allowed(&r.decisions[1]);
    assert_eq!(r.latched, LatchState::Flag(true));
    // Nothing in the batch can clear it: an empty batch still reports it set.
    let r = batch(&p, json!({"stage": "s", "latched": true}), &[]);
    assert!(r.decisions.is_empty());
    assert_eq!(r.latched, LatchState::Flag(true));
}

#[test]
fn single_latch_accepts_the_map_form_of_latched() {
    let p = compile(ONE_LATCH);
    let r = batch(
        &p,
        json!({"stage": "s", "latched": {"untrusted": true}}),
        &["save_note"],
    );
    assert_denied_by(&r.decisions[0], DenyKind::Latch, "untrusted");
    assert!(r.latched.any());
    let r = batch(
        &p,
        json!({"stage": "s", "latched": {"untrusted": false}}),
        &["save_note"],
    );
    assert_allowed(&r.decisions[0]);
    assert!(!r.latched.any());
}

#[test]
fn unclassified_calls_do_not_set_a_latch() {
    let p = compile(ONE_LATCH);
    let r = batch(&p, json!({"stage": "s"}), &["mystery_ingest", "save_note"]);
    assert_denied(&r.decisions[0], DenyKind::Unclassified);
    assert_allowed(&r.decisions[1]);
    assert!(!r.latched.any());
}

const LATCH_BY_NAME: &str = r#"
module by_name
write save_note, send_email
ingest browse, read_inbox
read lookup
stage s { tools [save_note, send_email, browse, read_inbox, lookup] }
latch l {
  set_by read_inbox
  blocks [send_email]
  refusal "Mail was read this turn; sending is off. This did NOT happen."
}
"#;

#[test]
fn latch_by_tool_name_sets_and_blocks_only_the_named_tools() {
    let p = compile(LATCH_BY_NAME);
    // `browse` is ingest but not a setter of this latch.
    let r = batch(
        &p,
        json!({"stage": "s"}),
        &["send_email", "browse", "save_note"],
    );
    for d in &r.decisions {
        assert_allowed(d);
    }
    assert!(!r.latched.any());
    // `read_inbox` sets it; it blocks `send_email` but not the other write.
    let r = batch(
        &p,
        json!({"stage": "s"}),
        &["send_email", "save_note", "read_inbox"],
    );
    assert_denied_by(&r.decisions[0], DenyKind::Latch, "l");
    assert_eq!(
        r.decisions[0].reason.as_deref(),
        Some("Mail was read this turn; sending is off. This did NOT happen.")
    );
    assert_allowed(&r.decisions[1]);
    assert_allowed(&r.decisions[2]);
    assert!(r.latched.any());
}

const TWO_LATCHES: &str = r#"
module two
write save_note, send_email, post
ingest browse, read_inbox
read lookup
stage s { tools [save_note, send_email, post, browse, read_inbox, lookup] }
latch web {
  set_by browse
  blocks [post, send_email]
}
latch mail {
  set_by [read_inbox]
  blocks send_email
}
"#;

fn latched_map(r: &toolgate_engine::Response) -> Value {
    serde_json::to_value(r).unwrap()["latched"].clone()
}

#[test]
fn several_named_latches_are_independent() {
    let p = compile(TWO_LATCHES);
    assert_eq!(p.latches().collect::<Vec<_>>(), vec!["web", "mail"]);

    let r = batch(&p, json!({"stage": "s"}), &["post", "browse", "save_note"]);
    assert_denied_by(&r.decisions[0], DenyKind::Latch, "web");
    assert_allowed(&r.decisions[1]);
    assert_allowed(&r.decisions[2]);
    assert_eq!(latched_map(&r), json!({"web": true, "mail": false}));

    let r = batch(
        &p,
        json!({"stage": "s"}),
        &["read_inbox", "post", "send_email"],
    );
    assert_allowed(&r.decisions[0]);
    assert_allowed(&r.decisions[1]);
    assert_denied_by(&r.decisions[2], DenyKind::Latch, "mail");
    assert_eq!(latched_map(&r), json!({"web": false, "mail": true}));

    let r = batch(&p, json!({"stage": "s"}), &["lookup"]);
    assert_eq!(latched_map(&r), json!({"web": false, "mail": false}));
}

#[test]
fn a_tool_blocked_by_two_set_latches_is_denied_naming_one_of_them() {
    let p = compile(TWO_LATCHES);
    let r = batch(
        &p,
        json!({"stage": "s"}),
        &["send_email", "browse", "read_inbox"],
    );
    assert_denied(&r.decisions[0], DenyKind::Latch);
    let rule = r.decisions[0].rule.as_deref().unwrap();
    assert!(rule == "web" || rule == "mail", "{rule}");
    assert_eq!(latched_map(&r), json!({"web": true, "mail": true}));
}

#[test]
fn latched_map_in_facts_carries_each_latch() {
    let p = compile(TWO_LATCHES);
    let r = batch(
        &p,
        json!({"stage": "s", "latched": {"web": true, "mail": false}}),
        &["post", "send_email", "save_note"],
    );
    assert_denied_by(&r.decisions[0], DenyKind::Latch, "web");
    assert_denied_by(&r.decisions[1], DenyKind::Latch, "web");
    assert_allowed(&r.decisions[2]);
    assert_eq!(latched_map(&r), json!({"web": true, "mail": false}));

    let r = batch(
        &p,
        json!({"stage": "s", "latched": {"mail": true}}),
        &["post", "send_email"],
    );
    assert_allowed(&r.decisions[0]);
    assert_denied_by(&r.decisions[1], DenyKind::Latch, "mail");
    // Write-once-true per latch; a latch the facts leave out starts clear.
    assert_eq!(latched_map(&r), json!({"web": false, "mail": true}));
}

#[test]
fn latched_true_flag_sets_every_latch_of_a_multi_latch_policy() {
    let p = compile(TWO_LATCHES);
    let r = batch(
        &p,
        json!({"stage": "s", "latched": true}),
        &["post", "send_email"],
    );
    assert_denied_by(&r.decisions[0], DenyKind::Latch, "web");
    assert_denied(&r.decisions[1], DenyKind::Latch);
    assert_eq!(latched_map(&r), json!({"web": true, "mail": true}));
}

// ---- argument constraints ----------------------------------------------------------------

#[test]
fn less_than() {
    table(
        "args.n < 10",
        &[json!({"n": 9}), json!({"n": 9.99}), json!({"n": -100})],
        &[
            json!({"n": 10}),
            json!({"n": 11}),
            json!({"n": "9"}),
            json!({"n": null}),
            json!({"n": true}),
            json!({"n": [1]}),
            json!({}),
        ],
    );
}

#[test]
fn less_or_equal() {
    table(
        "args.n <= 250",
        &[json!({"n": 250}), json!({"n": 250.0}), json!({"n": 0})],
        &[json!({"n": 250.01}), json!({"n": "250"}), json!({})],
    );
}

#[test]
fn numeric_equal_and_not_equal() {
    table(
        "args.n == 3",
        &[json!({"n": 3}), json!({"n": 3.0})],
        &[json!({"n": 4}), json!({"n": "3"}), json!({})],
    );
    table(
        "args.n != 3",
        &[json!({"n": 4}), json!({"n": -3})],
        // A missing or wrongly typed argument fails even `!=`.
        &[json!({"n": 3}), json!({}), json!({"n": "4"})],
    );
}

#[test]
fn greater_or_equal_and_greater() {
    table(
        "args.n >= 1.5",
        &[json!({"n": 1.5}), json!({"n": 2})],
        &[json!({"n": 1.49}), json!({}), json!({"n": {}})],
    );
    table(
        "args.n > -5",
        &[json!({"n": -4}), json!({"n": 0})],
        &[json!({"n": -5}), json!({"n": -6}), json!({"n": false})],
    );
}

#[test]
fn string_equality() {
    table(
        r#"args.s == "gbp""#,
        &[json!({"s": "gbp"})],
        &[
            json!({"s": "GBP"}),
            json!({"s": "gbp "}),
            json!({"s": 1}),
            json!({"s": null}),
            json!({}),
        ],
    );
    table(
        r#"args.s != "gbp""#,
        &[json!({"s": "eur"}), json!({"s": "GBP"})],
        &[json!({"s": "gbp"}), json!({}), json!({"s": 5})],
    );
}

#[test]
fn bool_and_null_equality() {
    table(
        "args.b == true",
        &[json!({"b": true})],
        &[
            json!({"b": false}),
            json!({"b": "true"}),
            json!({"b": 1}),
            json!({}),
        ],
    );
    table(
        "args.x == null",
        &[json!({"x": null})],
        &[json!({"x": 0}), json!({"x": ""}), json!({})],
    );
}

#[test]
fn in_list() {
    table(
        r#"args.c in ["gbp", "eur"]"#,
        &[json!({"c": "gbp"}), json!({"c": "eur"})],
        &[
            json!({"c": "usd"}),
            json!({"c": "GBP"}),
            json!({"c": ["gbp"]}),
            json!({"c": 1}),
            json!({}),
        ],
    );
    table(
        "args.n in [1, 2, 3]",
        &[json!({"n": 2}), json!({"n": 3.0})],
        &[json!({"n": 4}), json!({"n": "2"}), json!({})],
    );
}

#[test]
fn matches_regex() {
    table(
        r#"args.p matches "^POL-[0-9]{6}$""#,
        &[json!({"p": "POL-884120"})],
        &[
            json!({"p": "POL-88412"}),
            json!({"p": "xPOL-884120"}),
            json!({"p": "POL-884120\n"}),
            json!({"p": 884120}),
            json!({"p": null}),
            json!({}),
        ],
    );
    // Unanchored patterns match anywhere.
    table(
        r#"args.p matches "abc""#,
        &[json!({"p": "xxabcxx"})],
        &[json!({"p": "ab c"})],
    );
}

#[test]
fn is_type_for_each_type() {
    let values = [
        ("string", json!("s")),
        ("number", json!(1.5)),
        ("bool", json!(true)),
        ("array", json!([1])),
        ("object", json!({"k": 1})),
        ("null", json!(null)),
    ];
    for (ty, _) in &values {
        for (other, v) in &values {
            let want = ty == other;
            assert_eq!(
                allows(&format!("args.v is {ty}"), json!({ "v": v })),
                want,
                "`args.v is {ty}` on {v}"
            );
        }
        // A missing argument is of no type.
        assert!(
            !allows(&format!("args.v is {ty}"), json!({})),
            "missing is not {ty}"
        );
    }
    // Integers are numbers; integer requires a whole number.
    table(
        "args.v is number",
        &[json!({"v": 7}), json!({"v": -7})],
        &[],
    );
    table(
        "args.v is integer",
        &[json!({"v": 7}), json!({"v": -7}), json!({"v": 0})],
        &[json!({"v": 7.5}), json!({"v": "7"}), json!({})],
    );
}

#[test]
fn exists() {
    table(
        "args.v exists",
        &[json!({"v": 0}), json!({"v": ""}), json!({"v": {}})],
        &[json!({}), json!({"w": 1})],
    );
    table(
        "args.a.b exists",
        &[json!({"a": {"b": 1}})],
        &[json!({"a": {}}), json!({"a": 1}), json!({})],
    );
}

#[test]
fn nested_paths_and_indices() {
    table(
        "args.order.lines[1].qty <= 5",
        &[json!({"order": {"lines": [{"qty": 99}, {"qty": 5}]}})],
        &[
            json!({"order": {"lines": [{"qty": 1}, {"qty": 6}]}}),
            json!({"order": {"lines": [{"qty": 1}]}}),
            json!({"order": {"lines": {"1": {"qty": 1}}}}),
            json!({"order": []}),
        ],
    );
}

#[test]
fn several_require_lines_must_all_hold() {
    let p = compile(
        "module t\nwrite act\nstage s { tools [act] }\nrule r for act {\n  require args.a == 1\n  require args.b == 2\n}\n",
    );
    let facts = json!({"stage": "s"});
    assert_allowed(&decide_one(
        &p,
        facts.clone(),
        "act",
        json!({"a": 1, "b": 2}),
    ));
    assert_denied_by(
        &decide_one(&p, facts.clone(), "act", json!({"a": 1, "b": 3})),
        DenyKind::Args,
        "r",
    );
    assert_denied_by(
        &decide_one(&p, facts, "act", json!({"a": 0, "b": 2})),
        DenyKind::Args,
        "r",
    );
}

// ---- and / or / not (Kleene) -------------------------------------------------------------

#[test]
fn and_requires_both() {
    table(
        "args.a == 1 and args.b == 2",
        &[json!({"a": 1, "b": 2})],
        &[
            json!({"a": 1, "b": 3}),
            json!({"a": 0, "b": 2}),
            json!({"a": 1}),
        ],
    );
}

#[test]
fn or_passes_with_one_true_branch_even_if_the_other_is_missing() {
    table(
        "args.a == 1 or args.b == 2",
        &[
            json!({"a": 1, "b": 0}),
            json!({"a": 0, "b": 2}),
            json!({"b": 2}),
            json!({"a": 1}),
            json!({"a": "x", "b": 2}),
        ],
        &[json!({"a": 0, "b": 0}), json!({"b": 3}), json!({})],
    );
}

#[test]
fn not_never_turns_a_missing_argument_into_a_pass() {
    table(
        "not args.a == 1",
        &[json!({"a": 2})],
        &[json!({"a": 1}), json!({}), json!({"a": "1"})],
    );
    table(
        "not (args.a > 5)",
        &[json!({"a": 5})],
        &[json!({"a": 6}), json!({"a": "x"}), json!({})],
    );
    table(
        "not not args.a == 1",
        &[json!({"a": 1})],
        &[json!({"a": 2}), json!({})],
    );
    table(
        r#"not args.s matches "^evil""#,
        &[json!({"s": "good"})],
        &[json!({"s": "evil.tld"}), json!({}), json!({"s": 3})],
    );
    table(
        "not (args.a == 1 or args.b == 1)",
        &[json!({"a": 0, "b": 0})],
        &[json!({"a": 0}), json!({"a": 1}), json!({})],
    );
}

#[test]
fn and_binds_tighter_than_or_and_parentheses_regroup() {
    // a or (b and c)
    table(
        "args.a == 1 or args.b == 1 and args.c == 1",
        &[
            json!({"a": 1, "b": 0, "c": 0}),
            json!({"a": 0, "b": 1, "c": 1}),
        ],
        &[json!({"a": 0, "b": 1, "c": 0})],
    );
    // (a or b) and c
    table(
        "(args.a == 1 or args.b == 1) and args.c == 1",
        &[json!({"a": 1, "b": 0, "c": 1})],
        &[json!({"a": 1, "b": 0, "c": 0})],
    );
}

#[test]
fn true_and_false_constants() {
    assert!(allows("true", json!({})));
    assert!(!allows("false", json!({})));
    assert!(allows("false or args.a == 1", json!({"a": 1})));
}

// ---- facts.<path> rules and on_missing ---------------------------------------------------

const FACTS_RULES: &str = r#"
module facts_rules
write t_tier, t_nested, t_country, t_country_open, t_stage, t_turns, t_mixed, t_open_args
stage s { tools [t_tier, t_nested, t_country, t_country_open, t_stage, t_turns, t_mixed, t_open_args] }
rule gold_only for t_tier { require facts.tier == "gold" }
rule nested for t_nested { require facts.account.limits[0] > 5 }
rule gb_only for t_country { require facts.fields.country == "GB" }
rule gb_open for t_country_open {
  require facts.fields.country == "GB"
  on_missing allow
}
rule in_s for t_stage { require facts.stage == "s" }
rule few_turns for t_turns { require facts.stage_turns < 3 }
rule open_args for t_open_args {
  require args.x == 1 and facts.t == 1
  on_missing allow
}
"#;

#[test]
fn custom_facts_rules_read_any_json() {
    let p = compile(FACTS_RULES);
    let d = decide_one(
        &p,
        json!({"stage": "s", "tier": "gold"}),
        "t_tier",
        json!({}),
    );
    assert_allowed(&d);
    let d = decide_one(
        &p,
        json!({"stage": "s", "tier": "silver"}),
        "t_tier",
        json!({}),
    );
    assert_denied_by(&d, DenyKind::Rule, "gold_only");
    let d = decide_one(
        &p,
        json!({"stage": "s", "account": {"limits": [6, 1]}}),
        "t_nested",
        json!({}),
    );
    assert_allowed(&d);
    let d = decide_one(
        &p,
        json!({"stage": "s", "account": {"limits": [5, 100]}}),
        "t_nested",
        json!({}),
    );
    assert_denied_by(&d, DenyKind::Rule, "nested");
}

#[test]
fn facts_rules_fail_closed_when_the_fact_is_absent() {
    let p = compile(FACTS_RULES);
    let d = decide_one(&p, json!({"stage": "s"}), "t_tier", json!({}));
    assert_denied_by(&d, DenyKind::Rule, "gold_only");
    let d = decide_one(
        &p,
        json!({"stage": "s", "account": {}}),
        "t_nested",
        json!({}),
    );
    assert_denied_by(&d, DenyKind::Rule, "nested");
    let d = decide_one(&p, json!({"stage": "s"}), "t_country", json!({}));
    assert_denied_by(&d, DenyKind::Rule, "gb_only");
    let d = decide_one(&p, json!({"stage": "s"}), "t_turns", json!({}));
    assert!(
        !d.allow,
        "absent stage_turns does not satisfy a facts rule by default"
    );
}

#[test]
fn facts_fields_path() {
    let p = compile(FACTS_RULES);
    let d = decide_one(
        &p,
        json!({"stage": "s", "fields": {"country": "GB"}}),
        "t_country",
        json!({}),
    );
    assert_allowed(&d);
    let d = decide_one(
        &p,
        json!({"stage": "s", "fields": {"country": "FR"}}),
        "t_country",
        json!({}),
    );
    assert_denied_by(&d, DenyKind::Rule, "gb_only");
}

#[test]
fn facts_stage_and_stage_turns_paths() {
    let p = compile(FACTS_RULES);
    assert_allowed(&decide_one(&p, json!({"stage": "s"}), "t_stage", json!({})));
    let d = decide_one(
        &p,
        json!({"stage": "s", "stage_turns": 2}),
        "t_turns",
        json!({}),
    );
    assert_allowed(&d);
    let d = decide_one(
        &p,
        json!({"stage": "s", "stage_turns": 3}),
        "t_turns",
        json!({}),
    );
    assert_denied_by(&d, DenyKind::Rule, "few_turns");
}

#[test]
fn on_missing_allow_lets_absent_facts_through_with_fail_open() {
    let p = compile(FACTS_RULES);
    let d = decide_one(&p, json!({"stage": "s"}), "t_country_open", json!({}));
    assert_allowed(&d);
    assert!(d.fail_open, "{d:?}");
    // Present but wrong still denies, and a present, right value is not fail_open.
    let d = decide_one(
        &p,
        json!({"stage": "s", "fields": {"country": "FR"}}),
        "t_country_open",
        json!({}),
    );
    assert_denied_by(&d, DenyKind::Rule, "gb_open");
    let d = decide_one(
        &p,
        json!({"stage": "s", "fields": {"country": "GB"}}),
        "t_country_open",
        json!({}),
    );
    assert_allowed(&d);
    assert!(!d.fail_open);
}

#[test]
fn on_missing_allow_never_lets_a_missing_argument_through() {
    let p = compile(FACTS_RULES);
    // Fact absent, argument right: allowed, failing open.
    let d = decide_one(&p, json!({"stage": "s"}), "t_open_args", json!({"x": 1}));
    assert_allowed(&d);
    assert!(d.fail_open);
    // Fact absent, argument missing: denied.
    let d = decide_one(&p, json!({"stage": "s"}), "t_open_args", json!({}));
    assert!(!d.allow, "{d:?}");
    // Fact absent, argument wrong: denied.
    let d = decide_one(&p, json!({"stage": "s"}), "t_open_args", json!({"x": 2}));
    assert!(!d.allow, "{d:?}");
}

#[test]
fn messages_called_and_latched_cannot_be_read_by_path() {
    for path in ["facts.messages", "facts.called[0].ok", "facts.latched"] {
        let out = compile_err(&format!(
            "module m\nwrite a\nstage s {{ tools [a] }}\nrule r for a {{ require {path} exists }}\n"
        ));
        assert!(out.contains("cannot be read by path"), "{path}: {out}");
    }
}

// ---- refusals ----------------------------------------------------------------------------

#[test]
fn custom_refusal_is_reported_verbatim() {
    let p = compile(
        "module m\nwrite a\nstage s { tools [a] }\nrule r for a {\n  require args.n < 5\n  refusal \"Too many. This did NOT happen. Ask for fewer.\"\n}\n",
    );
    let d = decide_one(&p, json!({"stage": "s"}), "a", json!({"n": 9}));
    assert_denied_by(&d, DenyKind::Args, "r");
    assert_eq!(
        d.reason.as_deref(),
        Some("Too many. This did NOT happen. Ask for fewer.")
    );
}

#[test]
fn default_refusal_is_generated_and_says_it_did_not_happen() {
    let p = compile(
        "module m\nwrite a\nstage s { tools [a] }\nrule amount_cap for a { require args.amount <= 250 }\n",
    );
    let d = decide_one(&p, json!({"stage": "s"}), "a", json!({"amount": 300}));
    let reason = d.reason.as_deref().unwrap();
    assert!(reason.contains("did NOT happen"), "{reason}");
    assert!(
        reason.contains("amount"),
        "the refusal says what was wrong: {reason}"
    );
    assert!(reason.contains("250"), "{reason}");
}

#[test]
fn default_precondition_refusal_matches_the_spec_example() {
    let p = compile(
        "module m\nwrite pay\nstage s { tools [pay] }\nrule receipt for pay { require client_sent_media(within: 10, kinds: [image, document]) }\n",
    );
    let d = decide_one(&p, json!({"stage": "s", "messages": []}), "pay", json!({}));
    assert_denied_by(&d, DenyKind::Precondition, "receipt");
    assert_eq!(
        d.reason.as_deref(),
        Some("Blocked: the customer must have sent an image/document attachment in their last 10 messages. This did NOT happen. Do not tell the user it did. Ask the user for it, then call this function again.")
    );
}

#[test]
fn every_generated_refusal_of_the_examples_says_it_did_not_happen() {
    // Unclassified, stage, latch, host, args, precondition: all defaults.
    let coach = toolgate_tests::example_policy("coach");
    let r = decide(
        &coach,
        json!({"facts": {"stage": "coach"}, "calls": [
            {"id": "a", "tool": "nope"},
            {"id": "b", "tool": "fetch_vendor_doc", "args": {"url": "https://evil.tld/"}},
        ]}),
    );
    for d in &r.decisions {
        assert!(!d.allow);
        assert!(
            d.reason.as_deref().unwrap().contains("did NOT happen"),
            "{d:?}"
        );
    }
    let mp = toolgate_tests::example_policy("messenger_payments");
    let r = decide(
        &mp,
        json!({"facts": {"stage": "chat", "messages": [], "fields": {}, "called": []}, "calls": [
            {"id": "a", "tool": "confirm_payment"},
            {"id": "b", "tool": "issue_invoice"},
            {"id": "c", "tool": "modify_booking"},
            {"id": "d", "tool": "book_slot"},
        ]}),
    );
    for d in &r.decisions {
        assert_denied(d, DenyKind::Precondition);
        assert!(
            d.reason.as_deref().unwrap().contains("did NOT happen"),
            "{d:?}"
        );
    }
}

// ---- comments and module -----------------------------------------------------------------

#[test]
fn comments_and_module_name() {
    let p = compile(
        "// leading comment\n# hash comment\nmodule my_policy // trailing\nread a # trailing too\n// between\nstage s {\n  // inside a block\n  tools [a] # after\n}\n",
    );
    assert_eq!(p.module(), "my_policy");
    let r = decide(
        &p,
        json!({"facts": {"stage": "s"}, "calls": [{"id": "x", "tool": "a"}]}),
    );
    assert_eq!(&*r.policy, "my_policy");
    assert_allowed(&r.decisions[0]);
}

#[test]
fn revision_is_a_content_hash() {
    let a = compile("module m\nread a\nstage s { tools [a] }\n");
    let b = compile("module m\nread a\nstage s { tools [a] }\n");
    let c = compile("module m\nread a\nstage s { tools [a] } // changed\n");
    assert!(!a.revision().is_empty());
    assert_eq!(a.revision(), b.revision());
    assert_ne!(a.revision(), c.revision());
    let r = decide(&a, json!({"facts": {}, "calls": []}));
    assert_eq!(&*r.revision, a.revision());
}
