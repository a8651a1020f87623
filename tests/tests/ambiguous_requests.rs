//! Ambiguous requests are malformed, never judged: a key given twice anywhere, two calls
//! with one id, a latch name the policy does not declare. An executor whose JSON library keeps
//! the other duplicate, or maps decisions back by id, would otherwise run a different call
//! from the one toolgate judged.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;
use toolgate_engine::{
    DenyKind, Facts, Latched, OfferRequest, Policy, Request, RequestError, ToolDef,
};
use toolgate_tests::{assert_allowed, assert_denied, compile, example_policy};

const SHOP: &str = r#"
module shop
write  refund, send_email
ingest web_fetch
read   lookup_order, verify
stage support { tools [refund, send_email, web_fetch, lookup_order, verify] }
latch untrusted { set_by ingest  blocks write }
latch manual_review { set_by [verify] blocks [send_email] }
rule small_refund for refund { require args.amount is number and args.amount <= 50 }
"#;

fn shop() -> Policy {
    compile(SHOP)
}

/// Asserts every reader of a decision request refuses `text` as a duplicate at `path`.
fn duplicate_at(text: &str, path: &str) {
    let err = Request::from_json(text).expect_err(&format!("accepted {text}"));
    match &err {
        RequestError::DuplicateKey {
            path: got, line, ..
        } => {
            assert_eq!(got, path, "wrong path for {text}");
            assert!(*line >= 1);
        }
        other => panic!("expected a duplicate-key error at `{path}` for {text}, got {other:?}"),
    }
    assert!(
        err.to_string().contains(path),
        "`{err}` does not name `{path}`"
    );
    // The one-pass reader refuses it with the same error.
    assert_eq!(
        shop().decide_json(text).unwrap_err(),
        err,
        "decide_json on {text}"
    );
    // serde's own entry point goes through the same reader.
    assert!(
        serde_json::from_str::<Request>(text).is_err(),
        "serde accepted {text}"
    );
}

#[test]
fn a_duplicate_tool_name_is_malformed() {
    // The attack: a first-key-wins executor runs `lookup_order`, a last-key-wins one `refund`.
    duplicate_at(
        r#"{"facts": {"stage": "support"}, "calls": [{"id": "1", "tool": "lookup_order", "tool": "refund"}]}"#,
        "calls[0].tool",
    );
    duplicate_at(
        r#"{"calls": [{"id": "1", "tool": "verify"}, {"id": "2", "tool": "refund", "tool": "lookup_order"}]}"#,
        "calls[1].tool",
    );
}

#[test]
fn duplicates_in_every_part_of_a_request() {
    let cases = [
        (r#"{"calls": [], "calls": []}"#, "calls"),
        (r#"{"facts": {}, "calls": [], "facts": {}}"#, "facts"),
        (
            r#"{"policy": "shop", "policy": "other", "calls": []}"#,
            "policy",
        ),
        (
            r#"{"session": "a", "turn": "1", "session": "b", "calls": []}"#,
            "session",
        ),
        (
            r#"{"session": "a", "turn": "1", "turn": "2", "calls": []}"#,
            "turn",
        ),
        (
            r#"{"facts": {"stage": "support", "stage": "admin"}, "calls": []}"#,
            "facts.stage",
        ),
        (
            r#"{"facts": {"stage_turns": 0, "stage_turns": 9}, "calls": []}"#,
            "facts.stage_turns",
        ),
        (
            r#"{"facts": {"latched": true, "latched": false}, "calls": []}"#,
            "facts.latched",
        ),
        (
            r#"{"facts": {"latched": {"untrusted": true, "untrusted": false}}, "calls": []}"#,
            "facts.latched.untrusted",
        ),
        (
            r#"{"facts": {"messages": [], "messages": []}, "calls": []}"#,
            "facts.messages",
        ),
        (
            r#"{"facts": {"messages": [{"from": "agent"}, {"from": "agent", "from": "client"}]}, "calls": []}"#,
            "facts.messages[1].from",
        ),
        (
            r#"{"facts": {"messages": [{"from": "client", "media": [], "media": ["image"]}]}, "calls": []}"#,
            "facts.messages[0].media",
        ),
        (
            r#"{"facts": {"messages": [{"from": "client", "text": "a", "text": "b"}]}, "calls": []}"#,
            "facts.messages[0].text",
        ),
        (
            r#"{"facts": {"fields": {"phone": "", "phone": "0123"}}, "calls": []}"#,
            "facts.fields.phone",
        ),
        (
            r#"{"facts": {"called": [{"tool": "verify", "ok": false, "ok": true}]}, "calls": []}"#,
            "facts.called[0].ok",
        ),
        (
            r#"{"facts": {"called": [{"tool": "x", "tool": "verify"}]}, "calls": []}"#,
            "facts.called[0].tool",
        ),
        (
            r#"{"facts": {"tier": "basic", "tier": "gold"}, "calls": []}"#,
            "facts.tier",
        ),
        (
            r#"{"facts": {"region": {"a": 1, "a": 2}}, "calls": []}"#,
            "facts.region.a",
        ),
        (
            r#"{"facts": {"unread": [{"x": 1}, {"y": 1, "y": 2}]}, "calls": []}"#,
            "facts.unread[1].y",
        ),
        (
            r#"{"calls": [{"id": "1", "id": "2", "tool": "refund"}]}"#,
            "calls[0].id",
        ),
        (
            r#"{"calls": [{"id": "1", "tool": "refund", "args": {}, "args": {"amount": 9000}}]}"#,
            "calls[0].args",
        ),
        (
            r#"{"calls": [{"id": "1", "tool": "refund", "args": {"amount": 10, "amount": 9000}}]}"#,
            "calls[0].args.amount",
        ),
        (
            r#"{"calls": [{"id": "1", "tool": "refund", "args": {"to": {"iban": "a", "iban": "b"}}}]}"#,
            "calls[0].args.to.iban",
        ),
        (
            r#"{"calls": [{"id": "1", "tool": "refund", "args": {"items": [{"q": 1}, {"q": 1, "q": 2}]}}]}"#,
            "calls[0].args.items[1].q",
        ),
        (
            r#"{"calls": [{"id": "1", "tool": "refund", "meta": 1, "meta": 2}]}"#,
            "calls[0].meta",
        ),
    ];
    for (text, path) in cases {
        duplicate_at(text, path);
    }
}

#[test]
fn keys_that_differ_only_in_escapes_are_the_same_key() {
    // `\u0074ool` is `tool`: a reader that compares raw bytes would miss it.
    duplicate_at(
        r#"{"calls": [{"id": "1", "tool": "lookup_order", "\u0074ool": "refund"}]}"#,
        "calls[0].tool",
    );
    duplicate_at(
        r#"{"calls": [{"id": "1", "tool": "refund", "args": {"amount": 1, "am\u006funt": 900}}]}"#,
        "calls[0].args.amount",
    );
    duplicate_at(
        r#"{"facts": {"st\u0061ge": "support", "stage": "admin"}, "calls": []}"#,
        "facts.stage",
    );
}

#[test]
fn unusual_keys_are_named_so_the_path_stays_readable() {
    duplicate_at(
        r#"{"calls": [{"id": "1", "tool": "refund", "args": {"a.b": 1, "a.b": 2}}]}"#,
        r#"calls[0].args["a.b"]"#,
    );
}

#[test]
fn the_same_key_in_different_objects_is_fine() {
    let text = r#"{"facts": {"stage": "support", "fields": {"stage": "x"}},
        "calls": [{"id": "1", "tool": "refund", "args": {"amount": 5, "x": {"amount": 6}}},
                  {"id": "2", "tool": "refund", "args": {"amount": 7}}]}"#;
    let request = Request::from_json(text).unwrap();
    let response = shop().decide_json(text).unwrap();
    assert_eq!(response, shop().decide(&request));
    assert_allowed(&response.decisions[0]);
}

#[test]
fn a_duplicate_is_found_however_large_the_object() {
    // Past any small inline buffer of keys in the fast reader.
    let mut keys: Vec<String> = (0..200).map(|i| format!("\"k{i}\": {i}")).collect();
    keys.push("\"k17\": 0".into());
    let text = format!(
        r#"{{"facts": {{"big": {{{}}}}}, "calls": [{{"id": "1", "tool": "refund", "args": {{{}}}}}]}}"#,
        keys.join(","),
        keys.join(",")
    );
    duplicate_at(&text, "facts.big.k17");
}

#[test]
fn offer_requests_and_tool_lists_refuse_duplicates() {
    let text = r#"{"facts": {"stage": "support", "stage": "x"}, "tools": []}"#;
    match OfferRequest::from_json(text).unwrap_err() {
        RequestError::DuplicateKey { path, .. } => assert_eq!(path, "facts.stage"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        shop().offer_json(text),
        Err(RequestError::DuplicateKey { .. })
    ));
    let tools = r#"[{"name": "lookup_order", "name": "refund"}]"#;
    match ToolDef::list_from_json(tools).unwrap_err() {
        RequestError::DuplicateKey { path, .. } => assert_eq!(path, "[0].name"),
        other => panic!("{other:?}"),
    }
}

/// Asserts every reader refuses `text` with a schema error at `path`, and returns its text.
fn schema_error(policy: &Policy, text: &str, path: &str) -> String {
    let err = policy.decide_json(text).expect_err(text);
    let RequestError::Schema { path: got, .. } = &err else {
        panic!("expected a schema error at `{path}` for {text}, got {err:?}");
    };
    assert_eq!(got, path, "{text}");
    let strict = Request::from_json(text).and_then(|r| policy.check_request(&r).map(|_| r));
    assert_eq!(strict.unwrap_err(), err, "strict reader on {text}");
    err.to_string()
}

#[test]
fn two_calls_with_one_id_are_malformed() {
    let p = shop();
    schema_error(
        &p,
        r#"{"calls": [{"id": "a", "tool": "lookup_order"}, {"id": "a", "tool": "refund"}]}"#,
        "calls[1].id",
    );
    let text = schema_error(
        &p,
        r#"{"calls": [{"id": "a", "tool": "verify"}, {"id": "b", "tool": "verify"}, {"id": "c", "tool": "verify"}, {"id": "b", "tool": "refund"}]}"#,
        "calls[3].id",
    );
    assert!(text.contains("calls[1]"), "{text}");
    // Escapes decode before comparing.
    schema_error(
        &p,
        r#"{"calls": [{"id": "ab", "tool": "verify"}, {"id": "a\u0062", "tool": "refund"}]}"#,
        "calls[1].id",
    );
    // Large batches too.
    let calls: Vec<String> = (0..100)
        .map(|i| format!(r#"{{"id": "c{}", "tool": "verify"}}"#, i % 99))
        .collect();
    schema_error(
        &p,
        &format!(r#"{{"calls": [{}]}}"#, calls.join(",")),
        "calls[99].id",
    );
}

#[test]
fn an_undeclared_latch_name_is_malformed_with_a_suggestion() {
    let p = shop();
    // A mis-cased name used to be ignored, silently clearing the latch.
    let text = schema_error(
        &p,
        r#"{"facts": {"stage": "support", "latched": {"Untrusted": true}}, "calls": [{"id": "1", "tool": "refund", "args": {"amount": 5}}]}"#,
        "facts.latched.Untrusted",
    );
    assert!(text.contains("did you mean `untrusted`"), "{text}");
    let text = schema_error(
        &p,
        r#"{"facts": {"latched": {"untrusted": true, "manual_reveiw": false}}, "calls": []}"#,
        "facts.latched.manual_reveiw",
    );
    assert!(text.contains("did you mean `manual_review`"), "{text}");
    let text = schema_error(
        &p,
        r#"{"facts": {"latched": {"zzz": false}}, "calls": []}"#,
        "facts.latched.zzz",
    );
    assert!(!text.contains("did you mean"), "{text}");
    assert!(
        text.contains("untrusted") && text.contains("manual_review"),
        "{text}"
    );
    // The declared names are fine, and so is the one-flag form.
    for ok in [
        r#"{"facts": {"latched": {"untrusted": true, "manual_review": false}}, "calls": []}"#,
        r#"{"facts": {"latched": true}, "calls": []}"#,
    ] {
        p.decide_json(ok).unwrap();
    }
    // An offer request is checked the same way.
    assert!(matches!(
        p.offer_json(r#"{"facts": {"latched": {"Untrusted": true}}, "tools": []}"#),
        Err(RequestError::Schema { .. })
    ));
}

#[test]
fn an_undeclared_set_latch_in_a_typed_request_sets_every_latch() {
    // Built in Rust, nothing rejected the name: unsure which latch it meant, the engine
    // takes every latch as set rather than none.
    let p = shop();
    let mut by_name = std::collections::BTreeMap::new();
    by_name.insert("Untrusted".into(), true);
    let mut facts = Facts::in_stage("support");
    facts.latched = Latched::ByName(by_name.clone());
    let request = Request::new(
        facts.clone(),
        vec![
            toolgate_engine::Call::new("1", "refund", json!({"amount": 5})),
            toolgate_engine::Call::new("2", "send_email", json!({})),
            toolgate_engine::Call::new("3", "lookup_order", json!({})),
        ],
    );
    let response = p.decide(&request);
    assert_denied(&response.decisions[0], DenyKind::Latch);
    assert_denied(&response.decisions[1], DenyKind::Latch);
    assert_allowed(&response.decisions[2]);
    assert!(p.check_request(&request).is_err());
    // An undeclared name set to false carries no state: nothing is latched.
    by_name.insert("Untrusted".into(), false);
    facts.latched = Latched::ByName(by_name);
    let response = p.decide(&Request::new(
        facts,
        vec![toolgate_engine::Call::new(
            "1",
            "refund",
            json!({"amount": 5}),
        )],
    ));
    assert_allowed(&response.decisions[0]);
}

#[test]
fn the_shipped_examples_refuse_duplicate_tools_too() {
    let p = example_policy("coach");
    let text = r#"{"facts": {"stage": "x"}, "calls": [{"id": "1", "tool": "a", "tool": "b"}]}"#;
    assert!(matches!(
        p.decide_json(text),
        Err(RequestError::DuplicateKey { .. })
    ));
}
