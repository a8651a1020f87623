//! The zero-copy JSON path (`Policy::decide_json`) against the strict path
//! (`Request::from_json` + `Policy::decide`): same response for every valid request, same
//! error for every invalid one, on generated documents that mix well-formed facts with every
//! kind of wrong type, unknown key, escape and duplicate.

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use toolgate_engine::{Policy, Request, RequestError, Response};
use toolgate_tests::compile;

const POLICY: &str = r#"
module fast
write  pay, note
ingest fetch
read   lookup, verify
stage main { tools [pay, note, fetch, lookup, verify] max_turns 3 }
stage quiet { tools [lookup] }
latch untrusted { set_by ingest blocks write }
latch manual { set_by [verify] blocks [note] }
hosts docs { allow ["docs.example.com", ".example.org"] }
rule fetch_host for fetch { require args.url in hosts docs }
rule pay_media for pay { require client_sent_media(within: 3, kinds: [image, document]) }
rule pay_phone for pay { require field_filled("phone") on_missing deny }
rule pay_verified for pay { require called_before(verify) }
rule pay_amount for pay { require args.amount is number and args.amount <= 250 }
rule pay_region for pay { require facts.region in ["uk", "ie"] or facts.tier == "gold" on_missing allow }
"#;

fn strict(policy: &Policy, text: &str) -> Result<Response, RequestError> {
    let request = Request::from_json(text)?;
    policy.check_request(&request)?;
    Ok(policy.decide(&request))
}

/// A value that is sometimes the right type for a standard fact and often not.
fn wild() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-5i64..300).prop_map(Value::from),
        Just(json!(2.5)),
        Just(json!(1e300)),
        "[a-z\\\\\"é]{0,6}".prop_map(Value::from),
        Just(json!([])),
        Just(json!(["image", 3])),
        Just(json!({})),
        Just(json!({"untrusted": true, "manual": false})),
        Just(json!({"untrusted": "yes"})),
    ]
}

fn message() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["client", "bot", "Client", "cl\\u0069ent"]),
        prop::collection::vec(
            prop::sample::select(vec!["image", "document", "Image", "audio"]),
            0..3,
        ),
        prop::option::of(wild()),
        any::<bool>(),
        0u8..16,
    )
        .prop_map(|(from, media, extra, drop_from, unknown)| {
            let mut m = Map::new();
            if !drop_from {
                m.insert("from".into(), Value::from(from.replace("\\u0069", "i")));
            }
            m.insert("media".into(), json!(media));
            m.insert(
                "text".into(),
                json!("some \"quoted\" text \\ with escapes \u{1F600}"),
            );
            if let Some(extra) = extra {
                m.insert("media".into(), extra);
            }
            // Now and then a key a message does not have (`role`, an escaped `from`-alike).
            match unknown {
                0 => {
                    m.insert("role".into(), json!("user"));
                }
                1 => {
                    m.insert("fr\u{f6}m".into(), json!("client"));
                }
                _ => {}
            }
            Value::Object(m)
        })
}

fn call() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec![
            "pay", "note", "fetch", "lookup", "verify", "ghost", "p\u{e9}y",
        ]),
        prop::sample::select(vec![
            json!({}),
            json!({"amount": 100}),
            json!({"amount": 250.5}),
            json!({"amount": "100"}),
            json!({"url": "https://docs.example.com/a"}),
            json!({"url": "https://a.example.org.evil.tld/"}),
            json!({"url": "HTTPS://B.Example.ORG:443/x"}),
            Value::Null,
            json!("{\"amount\": 1}"),
            json!([1]),
        ]),
        any::<bool>(),
        0u8..4,
        0u8..16,
    )
        .prop_map(|(tool, args, with_id, extra, unknown)| {
            let mut c = Map::new();
            if with_id || extra == 0 {
                c.insert("id".into(), json!(format!("c{extra}")));
            }
            c.insert("tool".into(), json!(tool));
            c.insert("args".into(), args);
            // Now and then a key a call does not have: an arbitrary one, or OpenAI's
            // `arguments`, which used to be ignored (the call judged with no arguments).
            match unknown {
                0 => {
                    c.insert("note".into(), json!({"ignored": [1, 2, 3]}));
                }
                1 => {
                    c.insert("arguments".into(), json!({"amount": 9000}));
                }
                _ => {}
            }
            Value::Object(c)
        })
}

fn facts() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec![
            json!("main"),
            json!("quiet"),
            json!("nowhere"),
            Value::Null,
            json!(7),
        ]),
        prop::option::of(wild()),
        prop::option::of(wild()),
        prop::option::of(prop::collection::vec(message(), 0..6)),
        prop::option::of(prop_oneof![
            Just(json!({"phone": "+44 7700 900123"})),
            Just(json!({"phone": "  "})),
            Just(json!({})),
            wild(),
        ]),
        prop::option::of(prop_oneof![
            Just(json!([{"tool": "verify", "ok": true}])),
            Just(json!([{"tool": "verify", "ok": false}, {"tool": "lookup"}])),
            Just(json!([{"ok": true}])),
            Just(json!([{"tool": "verify", "ok": true, "name": "verify"}])),
            Just(json!([{"tool": "verify", "ok": true, "turns_ago": 0}])),
            wild(),
        ]),
        prop::option::of(wild()),
        prop::option::of(wild()),
    )
        .prop_map(
            |(stage, turns, latched, messages, fields, called, region, other)| {
                let mut f = Map::new();
                f.insert("stage".into(), stage);
                let optional = [
                    ("stage_turns", turns),
                    ("latched", latched),
                    ("messages", messages.map(Value::from)),
                    ("fields", fields),
                    ("called", called),
                    ("region", region),
                    ("unread_fact", other),
                ];
                for (k, v) in optional {
                    if let Some(v) = v {
                        f.insert(k.into(), v);
                    }
                }
                Value::Object(f)
            },
        )
}

fn request() -> impl Strategy<Value = Value> {
    (
        prop::option::of(prop_oneof![facts(), wild()]),
        prop::option::of(prop_oneof![
            prop::collection::vec(call(), 0..6).prop_map(Value::from),
            wild()
        ]),
        prop::option::of(prop::sample::select(vec![
            json!("fast"),
            json!("other"),
            Value::Null,
            json!(1),
        ])),
        prop::option::of(prop::sample::select(vec![json!("s1"), json!(2)])),
        any::<bool>(),
    )
        .prop_map(|(facts, calls, policy, session, unknown)| {
            let mut r = Map::new();
            for (k, v) in [
                ("facts", facts),
                ("calls", calls),
                ("policy", policy),
                ("session", session),
            ] {
                if let Some(v) = v {
                    r.insert(k.into(), v);
                }
            }
            if unknown {
                r.insert("extra".into(), json!(true));
            }
            Value::Object(r)
        })
}

proptest! {
    #![proptest_config(toolgate_tests::proptest_config(1024))]

    #[test]
    fn fast_and_strict_paths_agree(doc in request()) {
        let policy = compile(POLICY);
        let text = doc.to_string();
        prop_assert_eq!(policy.decide_json(&text), strict(&policy, &text), "request {}", text);
    }
}

#[test]
fn agree_on_hand_written_edge_cases() {
    let policy = compile(POLICY);
    let cases = [
        r#"{"calls": []}"#,
        r#"{"calls": [], "facts": null}"#,
        r#"{"calls": [], "calls": [{"id": "a", "tool": "lookup"}], "facts": {"stage": "quiet"}}"#,
        r#"{"facts": {"stage": "main", "stage": "quiet"}, "calls": [{"id": "a", "tool": "lookup"}]}"#,
        r#"{"facts": {"stage": "m\u0061in"}, "calls": [{"id": "\u0061", "tool": "l\u006fokup"}]}"#,
        r#"{"facts": {"latched": {"untrusted": true, "untrusted": false}, "stage": "main"}, "calls": [{"id": "a", "tool": "pay"}]}"#,
        r#"{"facts": {"messages": [{"from": "client", "media": ["image"], "media": []}]}, "calls": []}"#,
        r#"{"facts": {"stage_turns": 4.0}, "calls": []}"#,
        r#"{"facts": {"stage_turns": -1}, "calls": []}"#,
        r#"{"facts": {"stage_turns": 18446744073709551616}, "calls": []}"#,
        r#"{"facts": {"unread_fact": [[[[[[[[1]]]]]]]]}, "calls": []}"#,
        r#"{"calls": [{"id": "a", "tool": "pay", "args": null}]} "#,
        r#"{"calls": [{"id": "a", "tool": "pay"}]} x"#,
        r#"{"calls": [{"id": "a", "tool": "pay",}]}"#,
        r#"{"calls": [{"id": "a", "tool": "pay"}], "policy": "other"}"#,
        r#"[]"#,
        r#""#,
        r#"{"calls": [{"id": "a", "tool": "fetch", "args": {"url": "https://docs.example.com/\ud83d\ude00"}}], "facts": {"stage": "main"}}"#,
        r#"{"calls": [{"id": "a", "tool": "fetch", "args": {"url": "https://docs.example.com/\ud83d"}}], "facts": {"stage": "main"}}"#,
        // Closed objects: an unknown key anywhere but in `facts`, `args` and `fields`.
        r#"{"facts": {"stage": "main"}, "calls": [{"id": "a", "tool": "pay", "arguments": {"amount": 9000}}]}"#,
        r#"{"facts": {"stage": "main"}, "calls": [{"id": "a", "tool": "pay", "input": {}}]}"#,
        r#"{"facts": {"stage": "main"}, "calls": [{"id": "a", "name": "pay"}]}"#,
        r#"{"facts": {"stage": "main"}, "calls": [{"id": "a", "tool": "pay", "\u0061rgs": {}, "argz": 1}]}"#,
        r#"{"facts": {"messages": [{"from": "client", "role": "user"}]}, "calls": []}"#,
        r#"{"facts": {"messages": [{"from": "client", "text": {"any": ["json"]}}]}, "calls": []}"#,
        r#"{"facts": {"called": [{"tool": "verify", "ok": true, "succeeded": true}]}, "calls": []}"#,
        r#"{"facts": {"arguments": {"amount": 9000}, "stage": "main"}, "calls": [{"id": "a", "tool": "lookup"}]}"#,
        r#"{"facts": {"fields": {"role": 1}}, "calls": [{"id": "a", "tool": "lookup", "args": {"input": 1}}]}"#,
    ];
    for text in cases {
        assert_eq!(
            policy.decide_json(text),
            strict(&policy, text),
            "request {text}"
        );
    }
}

/// Regression, found by the `decide_structured` fuzz target: a custom fact nested 535 deep,
/// which no rule reads, was skipped by the fast reader (serde's `IgnoredAny` does not count
/// nesting) but refused by the strict one ("recursion limit exceeded").
#[test]
fn a_deeply_nested_unread_fact_is_refused_on_both_paths() {
    let text = include_str!("../fixtures/fast_json/deep_unread_fact.json");
    let policy = toolgate_tests::example_policy("coach");
    let fast = policy.decide_json(text);
    assert!(fast.is_err(), "{fast:?}");
    assert_eq!(fast, strict(&policy, text));
}
