//! Malformed requests: standard facts of the wrong type are errors naming the field.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use toolgate_engine::{Latched, Request, RequestError};
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
