//! Vault tokens: which argument paths an allowed call may unwrap (only tokens of the kinds
//! the path declares), which stay opaque, and which tools' outputs must be re-sanitised.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use toolgate_engine::Policy;
use toolgate_tests::{compile, compile_err, decide, example_policy};

const POLICY: &str = r#"
module clinic
write  send_referral, update_notes
ingest fetch_guidance
read   lookup_patient, list_slots
stage care { tools [send_referral, update_notes, fetch_guidance, lookup_patient, list_slots] }
rule small for update_notes { require args.text is string }
detokenise send_referral { args [args.nhs_number: NHS_NUMBER, args.patient: [EMAIL, PHONE]] }
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
            {"id": "2", "tool": "send_referral", "args": {"nhs_number": "<VAULT:NHS_NUMBER_1>"}}
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
        "args": {"nhs_number": "<VAULT:NHS_NUMBER_1>", "cc": "\u003cVAULT:EMAIL_9>"}}]}"#;
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
        "module m\nread a\nstage s { tools [a] }\ndetokenise ghost { args [args.x: X] }\n",
    );
    assert!(
        e.contains("4:12") && e.contains("`detokenise` names tool `ghost`"),
        "{e}"
    );
    let e = compile_err(
        "module m\nread a\nstage s { tools [a] }\ndetokenise a { args [facts.x: X] }\n",
    );
    assert!(
        e.contains("4:22") && e.contains("must name an argument"),
        "{e}"
    );
    let e = compile_err(
        "module m\nread a\nstage s { tools [a] }\ndetokenise a { args [args.x: X] }\ndetokenise a { args [args.y: Y] }\n",
    );
    assert!(e.contains("5:12") && e.contains("declared twice"), "{e}");
    let e = compile_err("module m\nread a\ndetokenise a { args args.x }\n");
    assert!(e.contains("3:21") && e.contains("expected"), "{e}");
}

// ---- token kinds (issue 11, section 4) ---------------------------------------------------

/// The sorted token paths of one allowed call, through both readers (which must agree).
fn sorted(p: &Policy, tool: &str, args: Value) -> (Vec<String>, Vec<String>) {
    let request =
        json!({"facts": {"stage": "s"}, "calls": [{"id": "1", "tool": tool, "args": args}]});
    let strict = decide(p, request.clone());
    let fast = p.decide_json(&request.to_string()).unwrap();
    assert_eq!(strict, fast, "the two readers disagree on {request}");
    let d = &strict.decisions[0];
    assert!(d.allow, "{d:?}");
    (d.detokenise.clone(), d.opaque_tokens.clone())
}

#[test]
fn the_issue_attack_an_nhs_number_token_in_sort_code_stays_opaque() {
    let p = example_policy("motor_claims");
    let args = json!({
        "amount": 100, "policy": "POL-123456",
        "sort_code": "<VAULT:NHS_NUMBER_01>",
        "account_number": "<VAULT:ACCOUNT_NUMBER_01>",
    });
    let r = decide(
        &p,
        json!({"facts": {"stage": "tier_auto_payout"},
               "calls": [{"id": "1", "tool": "authorise_bacs_payout", "args": args}]}),
    );
    let d = &r.decisions[0];
    assert!(d.allow, "a misplaced token never denies: {d:?}");
    assert_eq!(d.detokenise, ["args.account_number"]);
    assert_eq!(d.opaque_tokens, ["args.sort_code"]);
    // The right kind at the right path is unwrapped.
    let r = decide(
        &p,
        json!({"facts": {"stage": "tier_auto_payout"},
               "calls": [{"id": "1", "tool": "authorise_bacs_payout", "args": {
                   "amount": 100, "policy": "POL-123456",
                   "sort_code": "<VAULT:SORT_CODE_01>", "account_number": "<VAULT:ACCOUNT_NUMBER_01>"}}]}),
    );
    assert_eq!(
        r.decisions[0].detokenise,
        ["args.account_number", "args.sort_code"]
    );
    assert!(r.decisions[0].opaque_tokens.is_empty());
}

const KINDS: &str = r#"
module kinds
write pay, refer, letter, quoted
stage s { tools [pay, refer, letter, quoted] }
detokenise pay { args [args.sort_code: SORT_CODE, args.account.number: ACCOUNT_NUMBER] }
detokenise refer {
  args [
    args.patient: [NAME, EMAIL],
    args.patient.ids: NHS_NUMBER,
    args.to[0]: EMAIL,
  ]
}
detokenise letter { args [args.body: any] }
detokenise quoted { args [args.x: ["nhs:number", sort_code, "A-B"]] }
"#;

#[test]
fn each_path_unwraps_only_its_kinds_across_the_attack_class() {
    let p = compile(KINDS);
    // (tool, args, unwrapped paths, opaque paths)
    let cases: Vec<(&str, Value, &[&str], &[&str])> = vec![
        // The issue's attack and its variants at a top-level path.
        (
            "pay",
            json!({"sort_code": "<VAULT:SORT_CODE_01>"}),
            &["args.sort_code"],
            &[],
        ),
        (
            "pay",
            json!({"sort_code": "<VAULT:NHS_NUMBER_01>"}),
            &[],
            &["args.sort_code"],
        ),
        (
            "pay",
            json!({"sort_code": "<VAULT:ACCOUNT_NUMBER_01>"}),
            &[],
            &["args.sort_code"],
        ),
        (
            "pay",
            json!({"sort_code": "<VAULT:SORT_CODE>"}),
            &["args.sort_code"],
            &[],
        ),
        (
            "pay",
            json!({"sort_code": "<VAULT:SORT_CODE_12345>"}),
            &["args.sort_code"],
            &[],
        ),
        // Kinds are exact: case, extra index, prefix/suffix and look-alikes stay opaque.
        (
            "pay",
            json!({"sort_code": "<VAULT:sort_code_01>"}),
            &[],
            &["args.sort_code"],
        ),
        (
            "pay",
            json!({"sort_code": "<VAULT:Sort_Code_01>"}),
            &[],
            &["args.sort_code"],
        ),
        (
            "pay",
            json!({"sort_code": "<VAULT:SORT_CODE_01_02>"}),
            &[],
            &["args.sort_code"],
        ),
        (
            "pay",
            json!({"sort_code": "<VAULT:SORT_CODES_01>"}),
            &[],
            &["args.sort_code"],
        ),
        (
            "pay",
            json!({"sort_code": "<VAULT:X_SORT_CODE_01>"}),
            &[],
            &["args.sort_code"],
        ),
        (
            "pay",
            json!({"sort_code": "<VAULT:SORT-CODE_01>"}),
            &[],
            &["args.sort_code"],
        ),
        (
            "pay",
            json!({"sort_code": "<VAULT:SORT_CODE01>"}),
            &[],
            &["args.sort_code"],
        ),
        // Several tokens in one string: every one must be of an accepted kind.
        (
            "pay",
            json!({"sort_code": "<VAULT:SORT_CODE_01><VAULT:SORT_CODE_02>"}),
            &["args.sort_code"],
            &[],
        ),
        (
            "pay",
            json!({"sort_code": "<VAULT:SORT_CODE_01> <VAULT:NHS_NUMBER_01>"}),
            &[],
            &["args.sort_code"],
        ),
        (
            "pay",
            json!({"sort_code": "<VAULT:NHS_NUMBER_01> then <VAULT:SORT_CODE_01>"}),
            &[],
            &["args.sort_code"],
        ),
        // Something a lenient executor might read as a token keeps the string wrapped.
        (
            "pay",
            json!({"sort_code": "<VAULT:SORT_CODE_01> <vault:NHS_NUMBER_01>"}),
            &[],
            &["args.sort_code"],
        ),
        (
            "pay",
            json!({"sort_code": "<VAULT:SORT_CODE_01> <VAULT:NHS NUMBER_01>"}),
            &[],
            &["args.sort_code"],
        ),
        (
            "pay",
            json!({"sort_code": "<VAULT:<VAULT:SORT_CODE_01>"}),
            &[],
            &["args.sort_code"],
        ),
        // A string with no well-formed token is not a token path at all.
        (
            "pay",
            json!({"sort_code": "<vault:NHS_NUMBER_01>"}),
            &[],
            &[],
        ),
        // Nested declared path.
        (
            "pay",
            json!({"account": {"number": "<VAULT:ACCOUNT_NUMBER_3>"}}),
            &["args.account.number"],
            &[],
        ),
        (
            "pay",
            json!({"account": {"number": "<VAULT:SORT_CODE_3>"}}),
            &[],
            &["args.account.number"],
        ),
        (
            "pay",
            json!({"account": {"number": ["<VAULT:ACCOUNT_NUMBER_3>", "<VAULT:NAME_1>"]}}),
            &["args.account.number[0]"],
            &["args.account.number[1]"],
        ),
        // A parent's kinds cover its subtree; a deeper path adds its own kinds below it.
        (
            "refer",
            json!({"patient": {"name": "<VAULT:NAME_1>", "email": "<VAULT:EMAIL_1>"}}),
            &["args.patient.email", "args.patient.name"],
            &[],
        ),
        (
            "refer",
            json!({"patient": {"name": "<VAULT:NHS_NUMBER_1>"}}),
            &[],
            &["args.patient.name"],
        ),
        (
            "refer",
            json!({"patient": {"ids": ["<VAULT:NHS_NUMBER_1>", "<VAULT:NAME_2>", "<VAULT:SORT_CODE_1>"]}}),
            &["args.patient.ids[0]", "args.patient.ids[1]"],
            &["args.patient.ids[2]"],
        ),
        (
            "refer",
            json!({"patient": {"ids": "<VAULT:NAME_1> <VAULT:NHS_NUMBER_1>"}}),
            &["args.patient.ids"],
            &[],
        ),
        // Array index paths: only that element.
        (
            "refer",
            json!({"to": ["<VAULT:EMAIL_1>", "<VAULT:EMAIL_2>"]}),
            &["args.to[0]"],
            &["args.to[1]"],
        ),
        (
            "refer",
            json!({"to": ["<VAULT:NAME_1>"]}),
            &[],
            &["args.to[0]"],
        ),
        // `any` unwraps every well-formed kind, but not a malformed look-alike.
        (
            "letter",
            json!({"body": "Dear <VAULT:NAME_1>, NHS <VAULT:NHS_NUMBER_1>, <VAULT:odd-name:x_9>"}),
            &["args.body"],
            &[],
        ),
        (
            "letter",
            json!({"body": "Dear <VAULT:NAME_1> <VAULT:bad name>"}),
            &[],
            &["args.body"],
        ),
        // Odd kinds written as strings.
        (
            "quoted",
            json!({"x": "<VAULT:nhs:number_01>"}),
            &["args.x"],
            &[],
        ),
        (
            "quoted",
            json!({"x": "<VAULT:NHS:NUMBER_01>"}),
            &[],
            &["args.x"],
        ),
        (
            "quoted",
            json!({"x": "<VAULT:sort_code_2>"}),
            &["args.x"],
            &[],
        ),
        (
            "quoted",
            json!({"x": "<VAULT:A-B_2> <VAULT:A-B>"}),
            &["args.x"],
            &[],
        ),
        ("quoted", json!({"x": "<VAULT:A_B_2>"}), &[], &["args.x"]),
        // Undeclared paths stay opaque whatever the kind.
        (
            "pay",
            json!({"memo": "<VAULT:SORT_CODE_01>"}),
            &[],
            &["args.memo"],
        ),
        (
            "refer",
            json!({"cc": ["<VAULT:EMAIL_1>"]}),
            &[],
            &["args.cc[0]"],
        ),
    ];
    for (tool, args, unwrap, opaque) in cases {
        let (got_unwrap, got_opaque) = sorted(&p, tool, args.clone());
        assert_eq!(got_unwrap, unwrap, "unwrapped paths of {tool} {args}");
        assert_eq!(got_opaque, opaque, "opaque paths of {tool} {args}");
    }
}

#[test]
fn a_path_must_name_the_kinds_it_unwraps() {
    let base = "module m\nwrite a\nstage s { tools [a] }\n";
    let e = compile_err(&format!("{base}detokenise a {{ args [args.sort_code] }}\n"));
    assert!(
        e.contains(
            "test.gate:4:22: error: `args.sort_code` does not say which token kinds it unwraps"
        ),
        "{e}"
    );
    assert!(
        e.contains("args.sort_code: KIND") && e.contains("`args.sort_code: any`"),
        "{e}"
    );
    let e = compile_err(&format!("{base}detokenise a {{ args [args.x: []] }}\n"));
    assert!(
        e.contains("4:30: error: `args.x` accepts no token kind"),
        "{e}"
    );
    let e = compile_err(&format!(
        "{base}detokenise a {{ args [args.x: \"NHS NUMBER\"] }}\n"
    ));
    assert!(
        e.contains("4:30: error: `NHS NUMBER` can never be a token kind"),
        "{e}"
    );
    let e = compile_err(&format!("{base}detokenise a {{ args [args.x: \"\"] }}\n"));
    assert!(e.contains("can never be a token kind"), "{e}");
    let e = compile_err(&format!(
        "{base}detokenise a {{ args [args.x: X, args.y] }}\n"
    ));
    assert!(e.contains("`args.y` does not say which token kinds"), "{e}");
}

#[test]
fn suspicious_kinds_are_warnings() {
    let base = "module m\nwrite a\nstage s { tools [a] }\n";
    let p = compile(&format!(
        "{base}detokenise a {{ args [args.x: SORT_CODE_01] }}\n"
    ));
    let w: Vec<String> = p.warnings().iter().map(|w| w.message.clone()).collect();
    assert_eq!(
        w,
        ["token kind `SORT_CODE_01` ends in an index, so it matches only tokens such as `<VAULT:SORT_CODE_01_01>`"]
    );
    assert_eq!(
        p.warnings()[0]
            .help
            .as_deref()
            .map(|h| h.contains("write `SORT_CODE`")),
        Some(true)
    );
    let p = compile(&format!(
        "{base}detokenise a {{ args [args.x: [any, NAME]] }}\n"
    ));
    assert!(
        p.warnings()[0].message.contains("lists kinds and `any`"),
        "{:?}",
        p.warnings()
    );
    let p = compile(&format!(
        "{base}detokenise a {{ args [args.x: [NAME, EMAIL], args.y: any] }}\n"
    ));
    assert!(p.warnings().is_empty(), "{:?}", p.warnings());
}

#[test]
fn the_formatter_lays_out_detokenise_like_other_blocks() {
    let src = "module m\nwrite a, b, c\n\ndetokenise a   {args[args.x:X,args.y :[ A ,\"b:c\" ,],args.z: any ,]}\n\ndetokenise b { args [args.sort_code: SORT_CODE, args.account_number: ACCOUNT_NUMBER, args.p: [NAME, EMAIL]] }\n\ndetokenise c { args [args.patient.nhs_number: NHS_NUMBER, args.patient.email_address: EMAIL, args.patient.postal_address: [ADDRESS, POSTCODE]] }\n\ndetokenise d {\n  args [\n    args.a: A, // kept\n  ]\n}\n";
    let want = "module m\n\nwrite a, b, c\n\ndetokenise a { args [args.x: X, args.y: [A, \"b:c\"], args.z: any] }\n\ndetokenise b {\n  args [args.sort_code: SORT_CODE, args.account_number: ACCOUNT_NUMBER, args.p: [NAME, EMAIL]]\n}\n\ndetokenise c {\n  args [\n    args.patient.nhs_number: NHS_NUMBER,\n    args.patient.email_address: EMAIL,\n    args.patient.postal_address: [ADDRESS, POSTCODE],\n  ]\n}\n\ndetokenise d {\n  args [\n    args.a: A, // kept\n  ]\n}\n";
    let got = toolgate_lang::format_source("k.gate", src).unwrap();
    assert_eq!(got, want);
    assert_eq!(toolgate_lang::format_source("k.gate", &got).unwrap(), got);
}

#[test]
fn the_kinds_syntax_formats_and_round_trips() {
    for src in [
        KINDS,
        "module m\nwrite a\n\ndetokenise a { args [args.x: X, args.y: [A, \"b:c\"], args.z: any] }\n",
    ] {
        let once = toolgate_lang::format_source("k.gate", src).unwrap();
        let twice = toolgate_lang::format_source("k.gate", &once).unwrap();
        assert_eq!(once, twice, "formatting is idempotent");
        let a = toolgate_lang::parse(src).unwrap().without_spans();
        let b = toolgate_lang::parse(&once).unwrap().without_spans();
        assert_eq!(a, b, "formatting keeps the meaning");
    }
}

#[test]
fn a_kind_named_any_is_written_as_a_string_and_means_only_itself() {
    let p = compile(
        "module m\nwrite pay\nstage s { tools [pay] }\ndetokenise pay { args [args.x: \"any\"] }\n",
    );
    let (unwrap, opaque) = sorted(&p, "pay", json!({"x": "<VAULT:any_1>", "y": 1}));
    assert_eq!((unwrap, opaque), (vec!["args.x".to_string()], vec![]));
    let (unwrap, opaque) = sorted(&p, "pay", json!({"x": "<VAULT:NAME_1>"}));
    assert_eq!((unwrap, opaque), (vec![], vec!["args.x".to_string()]));
}
