//! Every object of a request is closed: a key the schema does not name, in a call, a message
//! or a `called` entry, makes the request malformed, with its path and a did-you-mean. It used
//! to be ignored, so a call copied with OpenAI's `arguments` (or Anthropic's `input`) was
//! judged with no arguments at all, and `require not args.bcc exists` allowed a blind copy to
//! a stranger. Custom facts, and the contents of `args` and `fields`, stay open.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use toolgate_engine::{schema, Facts, OfferRequest, Policy, Request, RequestError};
use toolgate_tests::compile;

const MAIL: &str = r#"
module mail
write send_email
read  verify
stage main { tools [send_email, verify] }
rule no_bcc for send_email { require not args.bcc exists }
"#;

/// The strict path: read, check against the policy, judge.
fn strict(policy: &Policy, text: &str) -> Result<toolgate_engine::Response, RequestError> {
    let request = Request::from_json(text)?;
    policy.check_request(&request)?;
    Ok(policy.decide(&request))
}

/// Asserts `doc` is refused by every reader with a schema error at `path` whose message
/// says `did you mean `{hint}`?` (or no did-you-mean at all for `None`), and returns the
/// message.
fn refused_at(policy: &Policy, doc: &Value, path: &str, hint: Option<&str>) -> String {
    let text = doc.to_string();
    let err = Request::from_json(&text).expect_err(&format!("{text} must be refused"));
    let RequestError::Schema {
        path: ref got,
        ref message,
    } = err
    else {
        panic!("expected a schema error at `{path}` for {text}, got {err:?}");
    };
    assert_eq!(got, path, "{text}: {err}");
    match hint {
        Some(h) => assert!(
            message.contains(&format!("did you mean `{h}`?")),
            "{text}: `{message}` does not suggest `{h}`"
        ),
        None => assert!(!message.contains("did you mean"), "{text}: {message}"),
    }
    assert!(message.starts_with("unknown field"), "{message}");
    // The one-pass reader refuses it too, and the strict reader's re-read explains it, so
    // the error is the same on every entry point.
    assert_eq!(policy.decide_json(&text).unwrap_err(), err, "{text}");
    assert!(
        policy.read_json(&text).is_none(),
        "read_json accepted {text}"
    );
    assert_eq!(strict(policy, &text).unwrap_err(), err, "{text}");
    err.to_string()
}

fn mail_call(call: Value) -> Value {
    json!({"facts": {"stage": "main"}, "calls": [call]})
}

#[test]
fn a_call_with_openai_arguments_is_malformed_not_judged_without_arguments() {
    let policy = compile(MAIL);
    // With `args`, the rule sees the bcc and denies.
    let sent = mail_call(json!({"id": "1", "tool": "send_email", "args": {"bcc": "spy@evil.io"}}));
    let r = policy.decide_json(&sent.to_string()).unwrap();
    assert!(!r.decisions[0].allow, "{:?}", r.decisions[0]);
    // With `arguments`, the call used to be judged with no arguments, and allowed.
    let copied =
        mail_call(json!({"id": "1", "tool": "send_email", "arguments": {"bcc": "spy@evil.io"}}));
    let shown = refused_at(&policy, &copied, "calls[0].arguments", Some("args"));
    assert!(
        shown.contains("request field `calls[0].arguments`"),
        "{shown}"
    );
    assert!(
        shown.contains("a call has `id`, `tool` and optionally `args`"),
        "{shown}"
    );
}

#[test]
fn the_names_model_apis_give_a_calls_parts_suggest_the_toolgate_key() {
    let policy = compile(MAIL);
    for (key, hint) in [
        ("arguments", "args"),
        ("input", "args"),
        ("parameters", "args"),
        ("params", "args"),
        ("tool_input", "args"),
        ("Arguments", "args"),
        ("arg", "args"),
        ("argz", "args"),
        ("tools", "tool"),
        ("Tool", "tool"),
        ("function", "tool"),
        ("tool_name", "tool"),
        ("call_id", "id"),
        ("tool_use_id", "id"),
        ("toolCallId", "id"),
        ("ID", "id"),
    ] {
        let mut call = json!({"id": "1", "tool": "send_email", "args": {}});
        call[key] = json!({"bcc": "spy@evil.io"});
        refused_at(
            &policy,
            &mail_call(call),
            &format!("calls[0].{key}"),
            Some(hint),
        );
    }
    // No key is near `weight`: no did-you-mean, only what a call holds.
    let call = json!({"id": "1", "tool": "send_email", "weight": 3});
    let shown = refused_at(&policy, &mail_call(call), "calls[0].weight", None);
    assert!(shown.contains("optionally `args`"), "{shown}");
}

#[test]
fn a_call_copied_as_the_model_wrote_it_is_told_its_keys_not_that_tool_is_missing() {
    let policy = compile(MAIL);
    // Anthropic's `tool_use` block: `name` and `input` (and `type`), no `tool`.
    let anthropic = json!({"id": "toolu_1", "type": "tool_use", "name": "send_email",
                           "input": {"bcc": "spy@evil.io"}});
    refused_at(
        &policy,
        &mail_call(anthropic),
        "calls[0].input",
        Some("args"),
    );
    // OpenAI Responses' `function_call` item, `arguments` decoded.
    let openai = json!({"id": "fc_1", "name": "send_email", "arguments": {"bcc": "x"}});
    refused_at(
        &policy,
        &mail_call(openai),
        "calls[0].arguments",
        Some("args"),
    );
    // `name` alone, in place of `tool`.
    let named = json!({"id": "1", "name": "send_email", "args": {}});
    refused_at(&policy, &mail_call(named), "calls[0].name", Some("tool"));
    // The error comes before the type checks of the call's own keys, and a later call is
    // named by its index.
    let second = json!({"facts": {"stage": "main"}, "calls": [
        {"id": "1", "tool": "verify"},
        {"id": 2, "tool": "send_email", "arguments": {}},
    ]});
    refused_at(&policy, &second, "calls[1].arguments", Some("args"));
}

#[test]
fn unknown_keys_in_messages_and_called_entries_are_malformed() {
    let policy = compile(MAIL);
    let with_facts = |facts: Value| json!({"facts": facts, "calls": []});
    for (facts, path, hint) in [
        (
            json!({"messages": [{"from": "client", "role": "user"}]}),
            "facts.messages[0].role",
            Some("from"),
        ),
        (
            json!({"messages": [{"from": "client"}, {"from": "client", "content": "hi"}]}),
            "facts.messages[1].content",
            Some("text"),
        ),
        (
            json!({"messages": [{"from": "client", "medias": ["image"]}]}),
            "facts.messages[0].medias",
            Some("media"),
        ),
        (
            json!({"messages": [{"from": "client", "attachments": ["image"]}]}),
            "facts.messages[0].attachments",
            Some("media"),
        ),
        (
            json!({"messages": [{"from": "client", "sent_at": 17}]}),
            "facts.messages[0].sent_at",
            None,
        ),
        (
            json!({"called": [{"tool": "verify", "ok": true, "name": "verify"}]}),
            "facts.called[0].name",
            Some("tool"),
        ),
        (
            json!({"called": [{"tool": "verify", "success": true}]}),
            "facts.called[0].success",
            Some("ok"),
        ),
        (
            json!({"called": [{"tool": "verify", "ok": true}, {"tool": "verify", "turn_ago": 0}]}),
            "facts.called[1].turn_ago",
            Some("turns_ago"),
        ),
        (
            json!({"called": [{"tool": "verify", "ok": true, "at": "2024-01-01"}]}),
            "facts.called[0].at",
            None,
        ),
    ] {
        refused_at(&policy, &with_facts(facts), path, hint);
    }
    // A message's `text` is part of its schema: accepted, never read.
    let text = with_facts(json!({"messages": [{"from": "client", "text": "hi", "media": []}]}));
    assert!(Request::from_json(&text.to_string()).is_ok());
    assert!(policy.decide_json(&text.to_string()).is_ok());
}

#[test]
fn a_standard_fact_at_the_top_level_is_pointed_into_facts() {
    let policy = compile(MAIL);
    let doc = json!({"stage": "main", "calls": []});
    refused_at(&policy, &doc, "stage", Some("facts.stage"));
    let doc = json!({"facts": {}, "latched": true, "calls": []});
    refused_at(&policy, &doc, "latched", Some("facts.latched"));
    refused_at(&policy, &json!({"call": []}), "call", Some("calls"));
    refused_at(
        &policy,
        &json!({"tool_calls": [], "calls": []}),
        "tool_calls",
        Some("calls"),
    );
}

#[test]
fn facts_stay_open_for_custom_facts_and_args_and_fields_for_the_executors_data() {
    let policy = compile(MAIL);
    let doc = json!({
        "facts": {
            "stage": "main",
            "tier": "gold",
            "x_stage": 1,
            "arguments": {"bcc": "kept as a custom fact"},
            "fields": {"anything": {"nested": [1]}},
        },
        "calls": [{"id": "1", "tool": "verify", "args": {"arguments": 1, "input": {"name": 2}}}]
    });
    let text = doc.to_string();
    let r = Request::from_json(&text).unwrap();
    assert_eq!(r.facts.other.len(), 3, "{:?}", r.facts.other);
    assert_eq!(
        r.facts.other["arguments"],
        json!({"bcc": "kept as a custom fact"})
    );
    assert_eq!(r.calls[0].args["input"], json!({"name": 2}));
    assert_eq!(
        policy.decide_json(&text).unwrap(),
        strict(&policy, &text).unwrap()
    );
    assert!(policy.read_json(&text).is_some());
}

#[test]
fn facts_read_alone_and_offer_requests_are_closed_the_same_way() {
    let err = Facts::from_json(r#"{"messages": [{"role": "user", "from": "client"}]}"#)
        .expect_err("a facts file is closed like a request's facts");
    assert!(
        matches!(&err, RequestError::Schema { path, message }
            if path == "facts.messages[0].role" && message.contains("did you mean `from`?")),
        "{err:?}"
    );
    let offer = r#"{"facts": {"stage": "main", "called": [{"name": "verify", "ok": true}]},
                    "tools": [{"name": "verify", "description": "d", "cache_control": {}}]}"#;
    let err = OfferRequest::from_json(offer).expect_err("an offer's facts are closed");
    assert!(
        matches!(&err, RequestError::Schema { path, .. } if path == "facts.called[0].name"),
        "{err:?}"
    );
    assert_eq!(compile(MAIL).offer_json(offer).unwrap_err(), err);
    // Tool definitions keep the executor's shape: an unknown key passes through.
    let ok = OfferRequest::from_json(
        r#"{"tools": [{"name": "verify", "description": "d", "cache_control": {}}]}"#,
    )
    .expect("a tool definition is the executor's own");
    assert!(ok.tools[0].extra.contains_key("cache_control"));
}

/// An object of the schema: its key list, a valid instance, how a request holds it, its path.
type ObjectUnderTest = (
    &'static [&'static str],
    Value,
    fn(Value) -> Value,
    &'static str,
);

/// The key lists of `schema` are the whole truth, on both readers: each listed key is
/// accepted in its object, and the same key with one letter more is refused there, with the
/// listed key as its did-you-mean.
#[test]
fn every_object_accepts_exactly_its_schema_keys_on_both_readers() {
    let policy = compile(MAIL);
    let value_for = |key: &str| match key {
        schema::ID | schema::TOOL | schema::FROM => json!("verify"),
        schema::ARGS => json!({}),
        schema::MEDIA => json!(["image"]),
        schema::TEXT => json!("hello"),
        schema::OK => json!(true),
        schema::TURNS_AGO => json!(0),
        other => panic!("no sample value for `{other}`"),
    };
    let base_call = json!({"id": "c", "tool": "verify"});
    let base_message = json!({"from": "client"});
    let base_called = json!({"tool": "verify"});
    let objects: [ObjectUnderTest; 3] = [
        (
            &schema::CALL_KEYS,
            base_call,
            |c| json!({"calls": [c]}),
            "calls[0]",
        ),
        (
            &schema::MESSAGE_KEYS,
            base_message,
            |m| json!({"facts": {"messages": [m]}, "calls": []}),
            "facts.messages[0]",
        ),
        (
            &schema::CALLED_KEYS,
            base_called,
            |c| json!({"facts": {"called": [c]}, "calls": []}),
            "facts.called[0]",
        ),
    ];
    for (keys, base, wrap, at) in objects {
        for key in keys {
            let mut object = base.clone();
            object[*key] = value_for(key);
            let text = wrap(object.clone()).to_string();
            assert!(Request::from_json(&text).is_ok(), "`{key}` refused: {text}");
            assert!(
                policy.decide_json(&text).is_ok(),
                "`{key}` refused (fast): {text}"
            );
            let mut misspelt = base.clone();
            misspelt[format!("{key}s")] = value_for(key);
            refused_at(&policy, &wrap(misspelt), &format!("{at}.{key}s"), Some(key));
        }
    }
}

#[test]
fn an_unknown_key_given_twice_is_reported_as_the_duplicate_it_is() {
    // The strict reader refuses a repeated key while parsing, before the schema: both
    // readers agree on that too.
    let policy = compile(MAIL);
    let text = r#"{"calls": [{"id": "1", "tool": "verify", "input": {}, "input": {}}]}"#;
    let err = Request::from_json(text).unwrap_err();
    assert!(
        matches!(&err, RequestError::DuplicateKey { path, .. } if path == "calls[0].input"),
        "{err:?}"
    );
    assert_eq!(policy.decide_json(text).unwrap_err(), err);
}

/// A custom fact named like a standard one is a misspelling: sent as `facts.latch`, the
/// executor's latch state would be read as absent and the write after an ingest allowed.
#[test]
fn a_misspelt_standard_fact_is_refused_by_both_readers_unless_a_rule_reads_it() {
    let policy = toolgate_tests::compile(
        "module m\nwrite send\ningest fetch\nstage s { tools [send, fetch] }\nlatch untrusted { set_by ingest  blocks write }\n",
    );
    for (key, meant) in [
        ("latch", "latched"),
        ("Latched", "latched"),
        ("mesages", "messages"),
        ("caled", "called"),
    ] {
        let text = format!(
            r#"{{"facts": {{"stage": "s", "{key}": true}}, "calls": [{{"id": "1", "tool": "send", "args": {{}}}}]}}"#
        );
        let fast = policy.decide_json(&text).unwrap_err().to_string();
        let strict = policy
            .check_request(&toolgate_engine::Request::from_json(&text).unwrap())
            .unwrap_err()
            .to_string();
        assert_eq!(fast, strict, "{key}");
        assert!(fast.contains(&format!("facts.{key}")), "{fast}");
        assert!(fast.contains(&format!("did you mean `{meant}`")), "{fast}");
    }
    // A policy that reads the fact under that name takes it as its own.
    let reads = toolgate_tests::compile(
        "module m\nwrite send\nstage s { tools [send] }\nrule r for send { require facts.latch == true }\n",
    );
    let text = r#"{"facts": {"stage": "s", "latch": true}, "calls": [{"id": "1", "tool": "send", "args": {}}]}"#;
    assert!(reads.decide_json(text).unwrap().decisions[0].allow);
    // Names far from every standard fact stay custom facts, read or not.
    let text = r#"{"facts": {"stage": "s", "tier": "gold", "callers": 2}, "calls": [{"id": "1", "tool": "send", "args": {}}]}"#;
    assert!(policy.decide_json(text).unwrap().decisions[0].allow);
}
