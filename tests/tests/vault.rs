//! Vault tokens: which argument paths an allowed call may unwrap, which stay opaque, and which
//! tools' outputs must be re-sanitised.

#![allow(clippy::unwrap_used)]

use serde_json::json;
use toolgate_tests::{compile, compile_err, decide};

const POLICY: &str = r#"
module clinic
write  send_referral, update_notes
ingest fetch_guidance
read   lookup_patient, list_slots
stage care { tools [send_referral, update_notes, fetch_guidance, lookup_patient, list_slots] }
rule small for update_notes { require args.text is string }
detokenise send_referral { args [args.nhs_number, args.patient] }
sanitise_output [lookup_patient]
"#;

#[test]
fn allowed_calls_split_token_paths_into_unwrap_and_opaque() {
    let p = compile(POLICY);
    let r = decide(
        &p,
        json!({"facts": {"stage": "care"}, "calls": [
            {"id": "1", "tool": "send_referral", "args": {
                "nhs_number": "<VAULT:NHS_NUMBER_01>",
                "patient": {"email": "<VAULT:EMAIL_1>", "phones": ["<VAULT:PHONE_1>"]},
                "to": ["<VAULT:EMAIL_2>", "gp@example.org"],
                "note": "plain text"}},
            {"id": "2", "tool": "update_notes", "args": {"text": "<VAULT:NHS_NUMBER_01>"}}
        ]}),
    );
    let d = &r.decisions[0];
    assert!(d.allow);
    assert_eq!(
        d.detokenise,
        [
            "args.nhs_number",
            "args.patient.email",
            "args.patient.phones[0]"
        ]
    );
    assert_eq!(d.opaque_tokens, ["args.to[0]"]);
    // A tool without permissions: the token is still allowed through, wrapped.
    let d = &r.decisions[1];
    assert!(d.allow);
    assert!(d.detokenise.is_empty());
    assert_eq!(d.opaque_tokens, ["args.text"]);
}

#[test]
fn denied_calls_list_no_tokens_and_json_shows_the_fields() {
    let p = compile(POLICY);
    let r = decide(
        &p,
        json!({"facts": {"stage": "care"}, "calls": [
            {"id": "1", "tool": "update_notes", "args": {"text": 3, "x": "<VAULT:A>"}},
            {"id": "2", "tool": "send_referral", "args": {"nhs_number": "<VAULT:NHS_1>"}}
        ]}),
    );
    assert!(!r.decisions[0].allow);
    assert!(r.decisions[0].opaque_tokens.is_empty());
    let out = serde_json::to_value(&r).unwrap();
    assert_eq!(
        out["decisions"][1]["detokenise"],
        json!(["args.nhs_number"])
    );
    assert!(out["decisions"][1].get("opaque_tokens").is_none());
    assert!(out["decisions"][0].get("detokenise").is_none());
}

#[test]
fn the_json_fast_path_reports_the_same_paths() {
    let p = compile(POLICY);
    let text = r#"{"facts": {"stage": "care"}, "calls": [{"id": "1", "tool": "send_referral",
        "args": {"nhs_number": "<VAULT:NHS_1>", "cc": "\u003cVAULT:EMAIL_9>"}}]}"#;
    let fast = p.decide_json(text).unwrap();
    let strict = p.decide(&toolgate_engine::Request::from_json(text).unwrap());
    assert_eq!(fast, strict);
    assert_eq!(fast.decisions[0].opaque_tokens, ["args.cc"]);
}

#[test]
fn ingest_and_named_tools_must_have_their_output_sanitised() {
    let p = compile(POLICY);
    let r = decide(
        &p,
        json!({"facts": {"stage": "care"}, "calls": [
            {"id": "1", "tool": "fetch_guidance", "args": {}},
            {"id": "2", "tool": "lookup_patient", "args": {}},
            {"id": "3", "tool": "list_slots", "args": {}}
        ]}),
    );
    let flags: Vec<bool> = r.decisions.iter().map(|d| d.sanitise_output).collect();
    assert_eq!(flags, [true, true, false]);
}

#[test]
fn policies_without_detokenise_do_not_scan_arguments() {
    let p = compile("module m\nread a\nstage s { tools [a] }\n");
    let r = decide(
        &p,
        json!({"facts": {"stage": "s"}, "calls": [{"id": "1", "tool": "a", "args": {"x": "<VAULT:A>"}}]}),
    );
    assert!(r.decisions[0].allow);
    assert!(r.decisions[0].opaque_tokens.is_empty() && r.decisions[0].detokenise.is_empty());
}

#[test]
fn bad_declarations_are_located_errors() {
    let e = compile_err(
        "module m\nread a\nstage s { tools [a] }\ndetokenise ghost { args [args.x] }\n",
    );
    assert!(
        e.contains("4:12") && e.contains("`detokenise` names tool `ghost`"),
        "{e}"
    );
    let e =
        compile_err("module m\nread a\nstage s { tools [a] }\ndetokenise a { args [facts.x] }\n");
    assert!(
        e.contains("4:22") && e.contains("must name an argument"),
        "{e}"
    );
    let e = compile_err(
        "module m\nread a\nstage s { tools [a] }\ndetokenise a { args [args.x] }\ndetokenise a { args [args.y] }\n",
    );
    assert!(e.contains("5:12") && e.contains("declared twice"), "{e}");
    let e = compile_err("module m\nread a\ndetokenise a { args args.x }\n");
    assert!(e.contains("3:21") && e.contains("expected"), "{e}");
}
