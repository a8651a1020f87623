//! The server's one-pass entry (`Policy::read_json`, `ReadRequest::carry`,
//! `Policy::decide_read`) against the strict path it replaces (`Request::from_json`,
//! `check_request`, `Latched::or`, `decide`): the same response for every valid request and
//! every carried latch state, the same ids read, and no request the strict path refuses
//! accepted.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use toolgate_engine::{Latched, Policy, Request};
use toolgate_tests::compile;

const POLICY: &str = r#"
module fast
write  pay, note
ingest fetch
read   lookup, verify
stage main { tools [pay, note, fetch, lookup, verify] max_turns 3 }
latch untrusted { set_by ingest blocks write }
latch manual { set_by [verify] blocks [note] }
rule pay_amount for pay { require args.amount is number and args.amount <= 250 }
rule pay_region for pay { require facts.region in ["uk", "ie"] on_missing allow }
"#;

/// Latch states a session may carry in.
fn carried_states() -> Vec<Option<Latched>> {
    let by_name = |pairs: &[(&str, bool)]| {
        Some(Latched::ByName(
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), *v))
                .collect::<BTreeMap<_, _>>(),
        ))
    };
    vec![
        None,
        Some(Latched::Flag(false)),
        Some(Latched::Flag(true)),
        by_name(&[("untrusted", true)]),
        by_name(&[("manual", true), ("untrusted", false)]),
        by_name(&[]),
    ]
}

/// Valid requests: every `latched` form, escapes, ids, the policy field after the facts.
fn valid_requests() -> Vec<Value> {
    let calls = json!([
        {"id": "a", "tool": "pay", "args": {"amount": 10}},
        {"id": "b\u{e9}\"", "tool": "note", "args": {}},
        {"id": "c", "tool": "lookup"},
    ]);
    let mut out = Vec::new();
    for latched in [
        Value::Null,
        json!(false),
        json!(true),
        json!({"untrusted": true}),
        json!({"manual": true, "untrusted": false}),
        json!({}),
    ] {
        out.push(json!({"facts": {"stage": "main", "latched": latched}, "calls": calls}));
        out.push(
            json!({"session": "s\n1", "turn": "t", "facts": {"stage": "main",
            "latched": latched, "region": "fr"}, "calls": calls, "policy": "fast"}),
        );
    }
    out.push(json!({"calls": [{"id": "x", "tool": "fetch"}, {"id": "y", "tool": "pay"}]}));
    out.push(
        json!({"facts": {"stage": "main", "messages": [{"from": "client", "text": "hi"},
        {"from": "agent"}]}, "calls": []}),
    );
    out
}

#[test]
fn read_json_judges_like_the_strict_path_under_every_carried_state() {
    let policy = compile(POLICY);
    let mut compared = 0;
    for doc in valid_requests() {
        let text = doc.to_string();
        let strict = Request::from_json(&text).unwrap();
        policy.check_request(&strict).unwrap();
        let read = policy
            .read_json(&text)
            .unwrap_or_else(|| panic!("one-pass reader refused {text}"));
        assert_eq!(read.policy(), strict.policy.as_deref(), "{text}");
        assert_eq!(read.session(), strict.session.as_deref(), "{text}");
        assert_eq!(read.turn(), strict.turn.as_deref(), "{text}");
        assert_eq!(read.calls(), strict.calls.len(), "{text}");
        assert_eq!(
            read.messages(),
            strict.facts.messages.as_ref().map(Vec::len),
            "{text}"
        );
        for carried in carried_states() {
            let mut owned = strict.clone();
            let mut one_pass = policy.read_json(&text).unwrap();
            if let Some(c) = &carried {
                owned.facts.latched = owned.facts.latched.or(c);
                one_pass.carry(c);
            }
            let want = serde_json::to_value(policy.decide(&owned)).unwrap();
            let got = serde_json::to_value(policy.decide_read(&one_pass)).unwrap();
            assert_eq!(got, want, "{text} carrying {carried:?}");
            compared += 1;
        }
    }
    assert_eq!(compared, 14 * carried_states().len());
}

#[test]
fn carried_state_changes_the_verdict() {
    // The comparison above would pass if `carry` did nothing and decide ignored it; this
    // pins that a carried latch blocks a write the request alone allows.
    let policy = compile(POLICY);
    let text =
        json!({"facts": {"stage": "main"}, "calls": [{"id": "a", "tool": "note"}]}).to_string();
    let alone = policy.decide_read(&policy.read_json(&text).unwrap());
    assert!(alone.decisions[0].allow);
    let mut read = policy.read_json(&text).unwrap();
    read.carry(&Latched::ByName(BTreeMap::from([("manual".into(), true)])));
    let carried = policy.decide_read(&read);
    assert!(!carried.decisions[0].allow);
}

#[test]
fn read_json_refuses_what_the_strict_path_refuses() {
    let policy = compile(POLICY);
    let other = compile("module other\nread lookup\nstage main { tools [lookup] }\n");
    let refused: &[&str] = &[
        r#"{"calls": [{"id": "a", "tool": "pay", "tool": "note"}]}"#,
        r#"{"calls": [], "calls": []}"#,
        r#"{"session": "a", "session": "b", "calls": []}"#,
        r#"{"turn": 3, "calls": []}"#,
        r#"{"facts": {"stage": "main", "latched": {"Untrusted": true}}, "calls": []}"#,
        r#"{"facts": {"latched": {"untrusted": true, "untrusted": false}}, "calls": []}"#,
        r#"{"policy": "other", "calls": []}"#,
        r#"{"calls": [{"id": "a", "tool": "pay"}, {"id": "a", "tool": "note"}]}"#,
        r#"{"calls": [{"id": "a", "tool": "pay", "args": {"x": 1, "x": 2}}]}"#,
        r#"{"calls": []"#,
        r#"{"facts": {"stage": "main"}}"#,
        r#"{"calls": [], "extra": 1}"#,
        // Every object is closed: an unknown key in a call, a message or a `called` entry.
        r#"{"facts": {"stage": "main"}, "calls": [{"id": "a", "tool": "pay", "arguments": {"amount": 9000}}]}"#,
        r#"{"calls": [{"id": "a", "name": "pay"}]}"#,
        r#"{"facts": {"messages": [{"from": "client", "role": "user"}]}, "calls": []}"#,
        r#"{"facts": {"called": [{"tool": "verify", "ok": true, "name": "verify"}]}, "calls": []}"#,
    ];
    for text in refused {
        assert!(policy.read_json(text).is_none(), "accepted {text}");
        let strict = Request::from_json(text).and_then(|r| policy.check_request(&r));
        assert!(strict.is_err(), "the strict path accepts {text}");
    }
    // The module check is the policy's own: `other` accepts what `fast` refuses.
    assert!(other
        .read_json(r#"{"policy": "other", "calls": []}"#)
        .is_some());
    assert!(Policy::read_json(&other, r#"{"policy": "fast", "calls": []}"#).is_none());
}
