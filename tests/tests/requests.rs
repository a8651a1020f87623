//! Malformed requests: standard facts of the wrong type are errors naming the field.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use toolgate_engine::{Facts, Latched, Request, RequestError};
use toolgate_tests::example_policy;

/// Asserts `request` is rejected with a schema error at `path`, and returns the message.
fn schema_error_at(request: Value, path: &str) -> String {
    let err = Request::from_json(&request.to_string())
        .expect_err(&format!("expected {request} to be rejected"));
    match &err {
        RequestError::Schema { path: got, .. } => {
            assert_eq!(got, path, "wrong path for {request}: {err}");
        }
        other => panic!("expected a schema error at `{path}`, got {other:?}"),
    }
    // The display names the path too, for the CLI's one-paragraph message.
    let text = err.to_string();
    assert!(text.contains(path), "`{text}` does not name `{path}`");
    // And the engine's JSON entry point refuses it the same way.
    let policy = example_policy("coach");
    assert_eq!(policy.decide_json(&request.to_string()).unwrap_err(), err);
    text
}

#[test]
fn messages_not_an_array() {
    schema_error_at(
        json!({"facts": {"messages": 5}, "calls": []}),
        "facts.messages",
    );
    schema_error_at(
        json!({"facts": {"messages": "hi"}, "calls": []}),
        "facts.messages",
    );
    schema_error_at(
        json!({"facts": {"messages": {}}, "calls": []}),
        "facts.messages",
    );
}

#[test]
fn message_entries_of_the_wrong_shape() {
    schema_error_at(
        json!({"facts": {"messages": [{"from": "client"}, {"from": 3}]}, "calls": []}),
        "facts.messages[1].from",
    );
    schema_error_at(
        json!({"facts": {"messages": [{"from": "client"}, {"media": []}]}, "calls": []}),
        "facts.messages[1].from",
    );
    schema_error_at(
        json!({"facts": {"messages": ["client"]}, "calls": []}),
        "facts.messages[0]",
    );
    schema_error_at(
        json!({"facts": {"messages": [{"from": "client", "media": "image"}]}, "calls": []}),
        "facts.messages[0].media",
    );
    schema_error_at(
        json!({"facts": {"messages": [{"from": "client", "media": ["image", 7]}]}, "calls": []}),
        "facts.messages[0].media[1]",
    );
}

#[test]
fn called_entries_of_the_wrong_shape() {
    schema_error_at(
        json!({"facts": {"called": [{"tool": "a", "ok": "yes"}]}, "calls": []}),
        "facts.called[0].ok",
    );
    schema_error_at(
        json!({"facts": {"called": [{"tool": "a", "ok": true}, {"tool": "b", "ok": 1}]}, "calls": []}),
        "facts.called[1].ok",
    );
    schema_error_at(
        json!({"facts": {"called": [{"tool": 1, "ok": true}]}, "calls": []}),
        "facts.called[0].tool",
    );
    schema_error_at(
        json!({"facts": {"called": {"tool": "a"}}, "calls": []}),
        "facts.called",
    );
}

#[test]
fn latched_of_the_wrong_type() {
    schema_error_at(
        json!({"facts": {"latched": "yes"}, "calls": []}),
        "facts.latched",
    );
    schema_error_at(
        json!({"facts": {"latched": 1}, "calls": []}),
        "facts.latched",
    );
    schema_error_at(
        json!({"facts": {"latched": [true]}, "calls": []}),
        "facts.latched",
    );
    schema_error_at(
        json!({"facts": {"latched": {"web": "yes"}}, "calls": []}),
        "facts.latched.web",
    );
}

#[test]
fn stage_turns_must_be_a_non_negative_integer() {
    schema_error_at(
        json!({"facts": {"stage_turns": -1}, "calls": []}),
        "facts.stage_turns",
    );
    schema_error_at(
        json!({"facts": {"stage_turns": 1.5}, "calls": []}),
        "facts.stage_turns",
    );
    schema_error_at(
        json!({"facts": {"stage_turns": "2"}, "calls": []}),
        "facts.stage_turns",
    );
    schema_error_at(
        json!({"facts": {"stage_turns": true}, "calls": []}),
        "facts.stage_turns",
    );
}

#[test]
fn stage_and_fields_of_the_wrong_type() {
    schema_error_at(json!({"facts": {"stage": 5}, "calls": []}), "facts.stage");
    schema_error_at(
        json!({"facts": {"stage": ["chat"]}, "calls": []}),
        "facts.stage",
    );
    schema_error_at(
        json!({"facts": {"fields": []}, "calls": []}),
        "facts.fields",
    );
    schema_error_at(
        json!({"facts": {"fields": "phone"}, "calls": []}),
        "facts.fields",
    );
    schema_error_at(json!({"facts": [], "calls": []}), "facts");
}

#[test]
fn calls_of_the_wrong_shape() {
    let msg = schema_error_at(
        json!({"facts": {}, "calls": [{"id": "c1", "tool": "t", "args": "{\"url\": \"x\"}"}]}),
        "calls[0].args",
    );
    assert!(msg.contains("string"), "{msg}");
    schema_error_at(
        json!({"calls": [{"id": "c1", "tool": "t"}, {"id": "c2", "tool": "t", "args": [1]}]}),
        "calls[1].args",
    );
    schema_error_at(
        json!({"calls": [{"id": "c1", "tool": "t", "args": 3}]}),
        "calls[0].args",
    );
    schema_error_at(json!({"calls": [{"tool": "t"}]}), "calls[0].id");
    schema_error_at(json!({"calls": [{"id": 1, "tool": "t"}]}), "calls[0].id");
    schema_error_at(json!({"calls": [{"id": "c1"}]}), "calls[0].tool");
    schema_error_at(
        json!({"calls": [{"id": "c1", "tool": null}]}),
        "calls[0].tool",
    );
    schema_error_at(json!({"calls": ["t"]}), "calls[0]");
    schema_error_at(json!({"calls": {"id": "c1"}}), "calls");
    schema_error_at(json!({"calls": null}), "calls");
}

#[test]
fn missing_calls() {
    let msg = schema_error_at(json!({"facts": {"stage": "s"}}), "calls");
    assert!(msg.contains("calls"), "{msg}");
    schema_error_at(json!({}), "calls");
}

#[test]
fn unknown_top_level_keys() {
    schema_error_at(json!({"facts": {}, "calls": [], "expect": {}}), "expect");
    schema_error_at(json!({"facts": {}, "calls": [], "Facts": {}}), "Facts");
}

#[test]
fn optional_top_level_strings_are_typed() {
    schema_error_at(json!({"calls": [], "policy": 1}), "policy");
}

#[test]
fn not_json_at_all() {
    for text in [
        "",
        "{",
        "{\"facts\": {}, \"calls\": [}",
        "calls: []",
        "{\"calls\": []} x",
    ] {
        let err = Request::from_json(text).expect_err(text);
        assert!(
            matches!(err, RequestError::Json { .. }),
            "{text:?}: {err:?}"
        );
        assert!(err.to_string().contains("line"), "{err}");
    }
    let err = Request::from_json("{\n  \"calls\": [\n    oops\n  ]\n}").unwrap_err();
    match err {
        RequestError::Json { line, .. } => assert_eq!(line, 3),
        other => panic!("{other:?}"),
    }
}

#[test]
fn non_object_requests() {
    for v in [json!([]), json!(1), json!("x"), json!(null)] {
        let err = Request::from_json(&v.to_string()).expect_err(&v.to_string());
        assert!(matches!(err, RequestError::Schema { .. }), "{v}: {err:?}");
    }
}

#[test]
fn well_formed_requests_with_every_optional_part_are_accepted() {
    let r = Request::from_json(
        &json!({
            "policy": "coach",
            "session": "s-1",
            "turn": "t-9",
            "facts": {
                "stage": "coach",
                "stage_turns": 0,
                "latched": {"documentation_read": false},
                "messages": [{"from": "client", "media": ["image"]}, {"from": "assistant"}],
                "fields": {"phone": null, "nested": {"a": [1, 2]}},
                "called": [{"tool": "x", "ok": true}, {"tool": "y"}],
                "custom": [1, {"deep": null}],
                "another": "value"
            },
            "calls": [{"id": "c1", "tool": "t"}, {"id": "c2", "tool": "t", "args": null}]
        })
        .to_string(),
    )
    .unwrap();
    assert_eq!(r.policy.as_deref(), Some("coach"));
    assert_eq!(r.facts.stage.as_deref(), Some("coach"));
    assert_eq!(r.facts.stage_turns, Some(0));
    assert!(matches!(r.facts.latched, Latched::ByName(_)));
    assert_eq!(r.facts.messages.as_ref().unwrap().len(), 2);
    assert!(r.facts.messages.as_ref().unwrap()[1].media.is_empty());
    assert_eq!(r.facts.called.as_ref().unwrap().len(), 2);
    assert!(!r.facts.called.as_ref().unwrap()[1].ok);
    assert_eq!(r.facts.other.len(), 2);
    assert_eq!(r.calls.len(), 2);
    assert_eq!(r.calls[0].args, json!({}));
    assert_eq!(r.calls[1].args, json!({}));
}

#[test]
fn absent_facts_are_all_defaults() {
    let r = Request::from_json(r#"{"calls": []}"#).unwrap();
    assert_eq!(r.facts.stage, None);
    assert_eq!(r.facts.stage_turns, None);
    assert_eq!(r.facts.latched, Latched::Flag(false));
    assert!(r.facts.messages.is_none() && r.facts.fields.is_none() && r.facts.called.is_none());
}

// ---- facts read on their own -------------------------------------------------------------

/// Facts documents, valid and not, covering every standard fact, custom facts and the
/// non-object shapes.
fn facts_documents() -> Vec<Value> {
    vec![
        Value::Null,
        json!({}),
        json!(true),
        json!(5),
        json!("coach"),
        json!([]),
        json!({"stage": "coach", "stage_turns": 3, "latched": true}),
        json!({"stage": 1}),
        json!({"stage": null, "stage_turns": null, "latched": null, "messages": null, "fields": null, "called": null}),
        json!({"stage_turns": -1}),
        json!({"stage_turns": 1.5}),
        json!({"stage_turns": "3"}),
        json!({"latched": {"l1": true, "l2": false}}),
        json!({"latched": {"l1": "yes"}}),
        json!({"latched": [true]}),
        json!({"messages": [{"from": "client", "media": ["image"]}, {"from": "agent"}]}),
        json!({"messages": [{}]}),
        json!({"messages": [{"from": 1}]}),
        json!({"messages": [{"from": "client", "media": "image"}]}),
        json!({"messages": [{"from": "client", "media": [1]}]}),
        json!({"messages": "hi"}),
        json!({"fields": {"email": "a@b.c"}}),
        json!({"fields": []}),
        json!({"called": [{"tool": "t", "ok": true}, {"tool": "u"}]}),
        json!({"called": [{"ok": true}]}),
        json!({"called": [{"tool": "t", "ok": "yes"}]}),
        json!({"called": {}}),
        json!({"tier": "gold", "nested": {"a": [1, 2]}}),
    ]
}

#[test]
fn facts_read_alone_match_facts_read_in_a_request() {
    for facts in facts_documents() {
        let alone = Facts::from_value(facts.clone());
        let in_request = Request::from_value(json!({"facts": facts, "calls": []})).map(|r| r.facts);
        assert_eq!(alone, in_request, "facts {facts}");
        let from_text = Facts::from_json(&facts.to_string());
        assert_eq!(from_text, alone, "facts {facts} read from text");
    }
}

#[test]
fn facts_read_alone_name_the_field_as_a_request_does() {
    let at = |facts: Value| match Facts::from_value(facts.clone()) {
        Err(RequestError::Schema { path, .. }) => path,
        other => panic!("expected a schema error for {facts}, got {other:?}"),
    };
    assert_eq!(at(json!(5)), "facts");
    assert_eq!(at(json!({"stage": 1})), "facts.stage");
    assert_eq!(at(json!({"stage_turns": -1})), "facts.stage_turns");
    assert_eq!(at(json!({"latched": {"l1": 1}})), "facts.latched.l1");
    assert_eq!(at(json!({"messages": [{}, {}]})), "facts.messages[0].from");
    assert_eq!(
        at(json!({"called": [{"tool": "t"}, {"ok": true}]})),
        "facts.called[1].tool"
    );
}

#[test]
fn facts_from_json_keeps_the_strict_readers_refusals() {
    match Facts::from_json("{\n  \"stage\": \"a\",\n  \"stage\": \"b\"\n}") {
        Err(RequestError::DuplicateKey { path, line, .. }) => {
            assert_eq!((path.as_str(), line), ("stage", 3))
        }
        other => panic!("a repeated key must be refused with its line, got {other:?}"),
    }
    match Facts::from_json("{\"stage\": ") {
        Err(RequestError::Json { line, column, .. }) => assert_eq!((line, column), (1, 10)),
        other => panic!("truncated JSON must be refused with its place, got {other:?}"),
    }
    let facts = Facts::from_json(r#"{"stage": "coach", "tier": "gold"}"#).unwrap();
    assert_eq!(facts.stage.as_deref(), Some("coach"));
    assert_eq!(facts.other.get("tier"), Some(&json!("gold")));
}

// ---- the wire schema is one list -----------------------------------------------------------

/// Every key the schema names as a standard fact is read as one by both readers: a value of
/// a shape no standard fact takes (`[[1]]`) is refused at that fact's path, strict and fast
/// alike, while the same value under a custom name is an ordinary custom fact.
#[test]
fn every_standard_fact_key_is_checked_by_both_readers() {
    let policy = example_policy("coach");
    for key in toolgate_engine::schema::STANDARD_FACTS {
        let doc = json!({"facts": {key: [[1]]}, "calls": []});
        let err = Request::from_json(&doc.to_string())
            .expect_err(&format!("`{key}: [[1]]` must be refused"));
        let RequestError::Schema { path, .. } = &err else {
            panic!("expected a schema error for `{key}`, got {err:?}");
        };
        assert!(
            path.starts_with(&format!("facts.{key}")),
            "`{key}` refused at `{path}`"
        );
        assert_eq!(policy.decide_json(&doc.to_string()).unwrap_err(), err);
        let custom = format!("x_{key}");
        let ok = Request::from_json(&json!({"facts": {&custom: [[1]]}, "calls": []}).to_string())
            .expect("a custom fact may hold anything");
        assert_eq!(ok.facts.other.get(&custom), Some(&json!([[1]])));
        assert!(ok.facts.other.get(key).is_none());
    }
    // Every request key the schema names is accepted (null for the optional ones, on both
    // paths), and a key it does not name is refused.
    for key in toolgate_engine::schema::REQUEST_KEYS {
        let mut body = json!({"calls": []});
        body[key] = Value::Null;
        let text = body.to_string();
        if key == toolgate_engine::schema::CALLS {
            assert!(
                Request::from_json(&text).is_err(),
                "`calls: null` is not a batch"
            );
        } else {
            assert!(
                Request::from_json(&text).is_ok(),
                "`{key}: null` is allowed"
            );
            assert!(
                policy.decide_json(&text).is_ok(),
                "`{key}: null` is allowed (fast)"
            );
        }
    }
    let err = Request::from_json(r#"{"calls": [], "facts_": {}}"#).unwrap_err();
    assert!(matches!(err, RequestError::Schema { ref path, .. } if path == "facts_"));
}

/// The compiler reserves every standard fact the schema names: `facts.KEY.sub` either reads
/// the standard fact (`fields`) or is refused, never read as a custom fact of that name,
/// while the same path under a custom name reads the custom fact.
#[test]
fn the_compiler_reserves_every_standard_fact_key() {
    use toolgate_engine::{schema, Policy};
    let src = |name: &str| {
        format!(
            "module m\nwrite t\nstage s {{ tools [t] }}\nrule r for t {{ require facts.{name}.sub == 1 }}\n"
        )
    };
    let allowed = |p: &Policy, facts: Value| {
        let mut facts = facts;
        facts["stage"] = json!("s");
        let body = json!({"facts": facts, "calls": [{"id": "c", "tool": "t"}]});
        p.decide_json(&body.to_string()).unwrap().decisions[0].allow
    };
    for key in schema::STANDARD_FACTS {
        let compiled = Policy::compile("m.gate", &src(key));
        if key == schema::FIELDS {
            let p = compiled.expect("`facts.fields.NAME` reads a field");
            assert!(allowed(&p, json!({"fields": {"sub": 1}})));
            assert!(!allowed(&p, json!({"fields": {"sub": 2}})));
        } else {
            assert!(
                compiled.is_err(),
                "`facts.{key}.sub` must not compile as a custom fact"
            );
        }
        let custom = format!("x_{key}");
        let p = Policy::compile("m.gate", &src(&custom)).expect("a custom fact path compiles");
        assert!(allowed(&p, json!({&custom: {"sub": 1}})), "{custom}");
        assert!(!allowed(&p, json!({&custom: {"sub": 2}})), "{custom}");
    }
}
