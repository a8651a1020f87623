//! The built-in fact preconditions, their fail-open behaviour, and the window clamp.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use toolgate_engine::{DenyKind, Policy, Severity};
use toolgate_tests::{
    assert_allowed, assert_denied_by, compile, decide, decide_one, example_policy,
};

fn messenger() -> Policy {
    example_policy("messenger_payments")
}

fn msg(from: &str, media: &[&str]) -> Value {
    json!({"from": from, "media": media})
}

fn chat(extra: Value) -> Value {
    let mut facts = json!({"stage": "chat"});
    for (k, v) in extra.as_object().unwrap() {
        facts[k] = v.clone();
    }
    facts
}

/// Judges `tool` in the messenger policy; asserts the precondition decides as `allow`.
fn messenger_allows(tool: &str, facts: Value) -> bool {
    let d = decide_one(&messenger(), chat(facts), tool, json!({}));
    if d.allow {
        assert_allowed(&d);
    } else {
        assert_eq!(d.kind, Some(DenyKind::Precondition), "{d:?}");
    }
    d.allow
}

// ---- client_sent_media -------------------------------------------------------------------

#[test]
fn media_in_the_last_n_client_messages_passes() {
    let mut ms = vec![msg("client", &["image"])];
    ms.extend((0..9).map(|_| msg("client", &[])));
    // The image is the 10th most recent client message: inside a window of 10.
    assert!(messenger_allows("confirm_payment", json!({"messages": ms})));
    ms.push(msg("client", &[]));
    // Now it is the 11th: outside.
    assert!(!messenger_allows(
        "confirm_payment",
        json!({"messages": ms})
    ));
}

#[test]
fn rows_by_others_do_not_count_toward_the_window() {
    let mut ms = vec![msg("client", &["document"])];
    ms.extend((0..30).map(|_| msg("assistant", &[])));
    ms.extend((0..9).map(|_| msg("client", &[])));
    ms.extend((0..30).map(|_| msg("system", &[])));
    assert!(messenger_allows("confirm_payment", json!({"messages": ms})));
}

#[test]
fn media_sent_by_others_does_not_count() {
    let ms = vec![
        msg("assistant", &["image"]),
        msg("owner", &["document"]),
        msg("Client", &["image"]),
        msg("client", &[]),
    ];
    assert!(!messenger_allows(
        "confirm_payment",
        json!({"messages": ms})
    ));
}

#[test]
fn media_kinds_are_case_sensitive_and_filtered() {
    for (kinds, want) in [
        (vec!["image"], true),
        (vec!["document"], true),
        (vec!["video", "document"], true),
        (vec!["Image"], false),
        (vec!["IMAGE", "Document"], false),
        (vec!["video"], false),
        (vec!["audio", "sticker"], false),
    ] {
        let ms = vec![msg("client", &kinds), msg("assistant", &[])];
        assert_eq!(
            messenger_allows("confirm_payment", json!({"messages": ms})),
            want,
            "{kinds:?}"
        );
    }
}

#[test]
fn an_empty_conversation_is_present_and_fails() {
    let d = decide_one(
        &messenger(),
        chat(json!({"messages": []})),
        "confirm_payment",
        json!({}),
    );
    assert_denied_by(&d, DenyKind::Precondition, "receipt_received");
}

#[test]
fn absent_messages_fail_open() {
    for facts in [json!({}), json!({"messages": null})] {
        let d = decide_one(&messenger(), chat(facts), "confirm_payment", json!({}));
        assert_allowed(&d);
        assert!(d.fail_open, "{d:?}");
    }
}

// ---- field_filled ------------------------------------------------------------------------

#[test]
fn field_filled_needs_a_visible_string_a_number_or_true() {
    for (phone, want) in [
        (json!("+44 7700 900123"), true),
        (json!("0"), true),
        (json!(" x "), true),
        (json!("\u{200B}7"), true),
        (json!("\u{FEFF}+44\u{2060}"), true),
        (json!("٣"), true),
        (json!(7700900123u64), true),
        (json!(0), true),
        (json!(-0.5), true),
        (json!(true), true),
        // Not filled: false, null, arrays and objects (empty or not).
        (json!(false), false),
        (json!(null), false),
        (json!([]), false),
        (json!({}), false),
        (json!(["+44"]), false),
        (json!({"cc": "44"}), false),
        // Not filled: strings of only whitespace or invisible characters.
        (json!(""), false),
        (json!(" "), false),
        (json!("\t\n  "), false),
        (json!("\u{00A0}"), false),
        (json!("\u{2003}\u{3000}\u{205F}\u{1680}"), false),
        (json!("\u{200B}"), false),
        (json!("\u{200C}\u{200D}"), false),
        (json!("\u{2060}"), false),
        (json!("\u{FEFF}"), false),
        (json!("\u{200B} \u{FEFF}\u{2060}\u{200D}"), false),
        (json!("\u{00AD}"), false),
        (json!("\u{034F}\u{061C}\u{180E}"), false),
        (
            json!("\u{200E}\u{200F}\u{202A}\u{202E}\u{2066}\u{2069}"),
            false,
        ),
        (json!("\u{2061}\u{2064}"), false),
        (json!("\u{3164}"), false),
        (json!("\u{FFA0}\u{115F}\u{1160}"), false),
        (json!("\u{2800}"), false),
        (json!("\u{FE0F}\u{E0020}\u{E007F}"), false),
        (json!("\u{0000}\u{0007}\u{007F}\u{0085}"), false),
    ] {
        assert_eq!(
            messenger_allows("issue_invoice", json!({"fields": {"phone": phone}})),
            want,
            "phone = {phone}"
        );
    }
}

#[test]
fn field_filled_with_the_field_missing_fails() {
    assert!(!messenger_allows("issue_invoice", json!({"fields": {}})));
    assert!(!messenger_allows(
        "issue_invoice",
        json!({"fields": {"Phone": "123", "email": "a@b.c"}})
    ));
}

#[test]
fn field_filled_fails_open_without_fields() {
    let d = decide_one(
        &messenger(),
        chat(json!({"messages": []})),
        "issue_invoice",
        json!({}),
    );
    assert_allowed(&d);
    assert!(d.fail_open);
}

// ---- called_before -----------------------------------------------------------------------

#[test]
fn called_before_needs_an_ok_call_of_that_tool() {
    for (called, want) in [
        (json!([{"tool": "verify_identity", "ok": true}]), true),
        (
            json!([{"tool": "verify_identity", "ok": false}, {"tool": "verify_identity", "ok": true}]),
            true,
        ),
        (json!([{"tool": "verify_identity", "ok": false}]), false),
        (json!([{"tool": "verify_identity"}]), false),
        (json!([{"tool": "lookup_lead", "ok": true}]), false),
        (json!([{"tool": "Verify_Identity", "ok": true}]), false),
        (json!([]), false),
    ] {
        assert_eq!(
            messenger_allows("modify_booking", json!({"called": called})),
            want,
            "called = {called}"
        );
    }
}

#[test]
fn a_call_earlier_in_the_same_batch_does_not_count() {
    let r = decide(
        &messenger(),
        json!({"facts": {"stage": "chat", "called": []}, "calls": [
            {"id": "v", "tool": "verify_identity", "args": {}},
            {"id": "m", "tool": "modify_booking", "args": {}},
        ]}),
    );
    assert_allowed(&r.decisions[0]);
    assert_denied_by(&r.decisions[1], DenyKind::Precondition, "identity_verified");
}

#[test]
fn called_before_fails_open_without_called() {
    let d = decide_one(
        &messenger(),
        chat(json!({"fields": {}})),
        "modify_booking",
        json!({}),
    );
    assert_allowed(&d);
    assert!(d.fail_open);
}

// ---- min_client_messages -----------------------------------------------------------------

#[test]
fn min_client_messages_counts_client_rows_only() {
    assert!(messenger_allows(
        "book_slot",
        json!({"messages": [msg("client", &[]), msg("client", &[])]})
    ));
    assert!(messenger_allows(
        "book_slot",
        json!({"messages": [msg("client", &[]), msg("assistant", &[]), msg("client", &[])]})
    ));
    assert!(!messenger_allows(
        "book_slot",
        json!({"messages": [msg("client", &[]), msg("assistant", &[]), msg("assistant", &[])]})
    ));
    assert!(!messenger_allows("book_slot", json!({"messages": []})));
}

#[test]
fn min_client_messages_fails_open_without_messages() {
    let d = decide_one(&messenger(), chat(json!({})), "book_slot", json!({}));
    assert_allowed(&d);
    assert!(d.fail_open);
}

// ---- fail-open bookkeeping and on_missing ------------------------------------------------

#[test]
fn fail_open_is_reported_only_on_the_decisions_it_applied_to() {
    let r = decide(
        &messenger(),
        json!({"facts": {"stage": "chat", "fields": {"phone": "1"}}, "calls": [
            {"id": "a", "tool": "issue_invoice"},
            {"id": "b", "tool": "confirm_payment"},
            {"id": "c", "tool": "notify_owner"},
        ]}),
    );
    assert!(r.decisions.iter().all(|d| d.allow));
    assert!(!r.decisions[0].fail_open, "fields present and filled");
    assert!(r.decisions[1].fail_open, "messages absent");
    assert!(!r.decisions[2].fail_open, "no rule at all");
}

const OVERRIDES: &str = r#"
module overrides
write strict_pay, strict_invoice, strict_modify, strict_book, open_pay
read verify
stage s { tools [strict_pay, strict_invoice, strict_modify, strict_book, open_pay, verify] }
rule media_strict for strict_pay {
  require client_sent_media(within: 5, kinds: [image])
  on_missing deny
}
rule phone_strict for strict_invoice {
  require field_filled(phone)
  on_missing deny
}
rule verified_strict for strict_modify {
  require called_before(verify)
  on_missing deny
}
rule chatty_strict for strict_book {
  require min_client_messages(1)
  on_missing deny
}
rule media_open for open_pay {
  require client_sent_media(within: 5, kinds: [image])
  on_missing allow
}
"#;

#[test]
fn on_missing_deny_overrides_fail_open() {
    let p = compile(OVERRIDES);
    for (tool, rule) in [
        ("strict_pay", "media_strict"),
        ("strict_invoice", "phone_strict"),
        ("strict_modify", "verified_strict"),
        ("strict_book", "chatty_strict"),
    ] {
        let d = decide_one(&p, json!({"stage": "s"}), tool, json!({}));
        assert_denied_by(&d, DenyKind::Precondition, rule);
    }
    // With the facts present and satisfied they pass.
    let facts = json!({"stage": "s", "messages": [msg("client", &["image"])],
        "fields": {"phone": "1"}, "called": [{"tool": "verify", "ok": true}]});
    for tool in [
        "strict_pay",
        "strict_invoice",
        "strict_modify",
        "strict_book",
    ] {
        let d = decide_one(&p, facts.clone(), tool, json!({}));
        assert_allowed(&d);
        assert!(!d.fail_open);
    }
}

#[test]
fn explicit_on_missing_allow_fails_open_and_still_denies_when_present() {
    let p = compile(OVERRIDES);
    let d = decide_one(&p, json!({"stage": "s"}), "open_pay", json!({}));
    assert_allowed(&d);
    assert!(d.fail_open);
    let d = decide_one(
        &p,
        json!({"stage": "s", "messages": []}),
        "open_pay",
        json!({}),
    );
    assert_denied_by(&d, DenyKind::Precondition, "media_open");
}

#[test]
fn a_negated_precondition_still_fails_open_only_on_absent_facts() {
    let p = compile(
        "module m\nwrite a\nstage s { tools [a] }\nrule no_phone for a { require not field_filled(phone) }\n",
    );
    let d = decide_one(
        &p,
        json!({"stage": "s", "fields": {"phone": "1"}}),
        "a",
        json!({}),
    );
    assert_denied_by(&d, DenyKind::Precondition, "no_phone");
    let d = decide_one(&p, json!({"stage": "s", "fields": {}}), "a", json!({}));
    assert_allowed(&d);
    assert!(!d.fail_open);
}

// ---- window clamp ------------------------------------------------------------------------

const WIDE: &str = "module wide\nwrite pay\nstage s { tools [pay] }\nrule receipt for pay {\n  require client_sent_media(within: 80, kinds: [image])\n}\n";

#[test]
fn a_window_over_50_compiles_with_a_warning() {
    let p = compile(WIDE);
    let w: Vec<_> = p
        .warnings()
        .iter()
        .filter(|w| w.severity == Severity::Warning && w.message.contains("50"))
        .collect();
    assert_eq!(w.len(), 1, "{:?}", p.warnings());
    assert!(w[0].message.contains("80"), "{}", w[0].message);
    // The warning points at the window.
    let at = w[0].span.start;
    assert_eq!(&WIDE[at..at + 2], "80");
}

#[test]
fn a_window_over_50_is_clamped_to_50() {
    let p = compile(WIDE);
    let with_image_at = |depth: usize| {
        // `depth` client messages after the image one: it is the (depth+1)-th newest.
        let mut ms = vec![msg("client", &["image"])];
        ms.extend((0..depth).map(|_| msg("client", &[])));
        decide_one(&p, json!({"stage": "s", "messages": ms}), "pay", json!({}))
    };
    assert_allowed(&with_image_at(49));
    assert_denied_by(&with_image_at(50), DenyKind::Precondition, "receipt");
    assert_denied_by(&with_image_at(70), DenyKind::Precondition, "receipt");
}

/// The refusal text names the window the engine scans, for windows on both sides of the
/// cap: the denial of an image one message outside the window says that window.
#[test]
fn the_refusal_names_the_window_the_engine_scans() {
    for written in [1u64, 2, 10, 49, 50, 51, 80, 999] {
        let src = format!(
            "module w\nwrite pay\nstage s {{ tools [pay] }}\nrule r for pay {{ require client_sent_media(within: {written}, kinds: [image]) }}\n"
        );
        let p = compile(&src);
        let scanned = toolgate_engine::clamp_window(written);
        assert_eq!(scanned as u64, written.clamp(1, 50), "window {written}");
        let with_image_at = |depth: usize| {
            let mut ms = vec![msg("client", &["image"])];
            ms.extend((0..depth).map(|_| msg("client", &[])));
            decide_one(&p, json!({"stage": "s", "messages": ms}), "pay", json!({}))
        };
        assert_allowed(&with_image_at(scanned - 1));
        let d = with_image_at(scanned);
        assert_denied_by(&d, DenyKind::Precondition, "r");
        let text = d.reason.as_deref().unwrap_or_default();
        assert!(
            text.contains(&format!("last {scanned} messages")),
            "window {written}: `{text}`"
        );
    }
}

#[test]
fn a_window_of_exactly_50_is_not_warned_about() {
    let p = compile(
        "module w\nwrite pay\nstage s { tools [pay] }\nrule r for pay { require client_sent_media(within: 50, kinds: [image]) }\n",
    );
    assert!(
        !p.warnings().iter().any(|w| w.message.contains("clamp")),
        "{:?}",
        p.warnings()
    );
}

#[test]
fn a_later_failing_precondition_wins_over_an_earlier_fail_open() {
    let p = compile(
        "module m\nwrite a\nstage s { tools [a] }\nrule phone for a { require field_filled(phone) }\nrule chatty for a { require min_client_messages(2) }\n",
    );
    let d = decide_one(&p, json!({"stage": "s", "messages": []}), "a", json!({}));
    assert_denied_by(&d, DenyKind::Precondition, "chatty");
    let d = decide_one(
        &p,
        json!({"stage": "s", "messages": [msg("client", &[]), msg("client", &[])]}),
        "a",
        json!({}),
    );
    assert_allowed(&d);
    assert!(d.fail_open, "the phone rule failed open: {d:?}");
}

// ---- called_within -----------------------------------------------------------------------

/// A payout that needs an identity check in this turn or the one before.
fn fresh_check() -> Policy {
    compile(
        "module fresh\nwrite payout\nread verify_identity\nstage pay { tools [payout, verify_identity] }\n\
         rule fresh_identity for payout { require called_within(verify_identity, turns: 2) }\n",
    )
}

fn payout_with(called: Value) -> toolgate_engine::Decision {
    decide_one(
        &fresh_check(),
        json!({"stage": "pay", "called": called}),
        "payout",
        json!({}),
    )
}

#[test]
fn called_within_counts_only_ok_calls_younger_than_the_bound() {
    for (called, want) in [
        (
            json!([{"tool": "verify_identity", "ok": true, "turns_ago": 0}]),
            true,
        ),
        (
            json!([{"tool": "verify_identity", "ok": true, "turns_ago": 1}]),
            true,
        ),
        (
            json!([{"tool": "verify_identity", "ok": true, "turns_ago": 2}]),
            false,
        ),
        (
            json!([{"tool": "verify_identity", "ok": false, "turns_ago": 0}]),
            false,
        ),
        (json!([{"tool": "verify_identity", "turns_ago": 0}]), false),
        (
            json!([{"tool": "lookup", "ok": true, "turns_ago": 0}]),
            false,
        ),
        (
            json!([{"tool": "verify_identity", "ok": true, "turns_ago": 7},
                   {"tool": "verify_identity", "ok": true, "turns_ago": 1}]),
            true,
        ),
        (json!([]), false),
    ] {
        let d = payout_with(called.clone());
        assert_eq!(d.allow, want, "called = {called}: {d:?}");
        if !want {
            assert_denied_by(&d, DenyKind::Precondition, "fresh_identity");
            assert!(
                d.reason
                    .as_deref()
                    .unwrap_or("")
                    .contains("within the last 2 turns"),
                "{d:?}"
            );
        }
    }
}

/// An ok call with no `turns_ago` cannot show its age: it denies even where absent facts
/// would fail open, and under `not`.
#[test]
fn an_undated_call_never_counts_as_recent_even_failing_open_or_negated() {
    let open = compile(
        "module fresh\nwrite payout\nread verify_identity\nstage pay { tools [payout, verify_identity] }\n\
         rule fresh_identity for payout {\n  require called_within(verify_identity, turns: 2)\n  on_missing allow\n}\n",
    );
    let undated = json!([{"tool": "verify_identity", "ok": true}]);
    let d = decide_one(
        &open,
        json!({"stage": "pay", "called": undated}),
        "payout",
        json!({}),
    );
    assert!(!d.allow, "{d:?}");
    assert!(!d.fail_open);
    let negated = compile(
        "module fresh\nwrite payout\nread verify_identity\nstage pay { tools [payout, verify_identity] }\n\
         rule not_twice for payout { require not called_within(payout, 1) }\n",
    );
    let undated = json!([{"tool": "payout", "ok": true}]);
    let d = decide_one(
        &negated,
        json!({"stage": "pay", "called": undated}),
        "payout",
        json!({}),
    );
    assert!(
        !d.allow,
        "an undated earlier payout let a `not called_within` through: {d:?}"
    );
    let dated = json!([{"tool": "payout", "ok": true, "turns_ago": 1}]);
    let d = decide_one(
        &negated,
        json!({"stage": "pay", "called": dated}),
        "payout",
        json!({}),
    );
    assert_allowed(&d);
}

#[test]
fn called_within_fails_open_only_without_called() {
    let d = decide_one(&fresh_check(), json!({"stage": "pay"}), "payout", json!({}));
    assert_allowed(&d);
    assert!(d.fail_open);
}

#[test]
fn called_within_refuses_zero_turns_and_an_unclassified_tool() {
    let errors = |src: &str| match Policy::compile("t.gate", src) {
        Ok(_) => Vec::new(),
        Err(e) => e
            .diagnostics
            .iter()
            .map(|d| d.message.clone())
            .collect::<Vec<_>>(),
    };
    let base = "module m\nwrite payout\nstage s { tools [payout] }\n";
    assert_eq!(
        errors(&format!(
            "{base}rule r for payout {{ require called_within(payout, turns: 0) }}\n"
        )),
        ["`turns: 0` never holds"]
    );
    let unknown = errors(&format!(
        "{base}rule r for payout {{ require called_within(verify, 2) }}\n"
    ));
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert!(unknown[0].contains("verify"), "{unknown:?}");
}

#[test]
fn a_bad_turns_ago_is_a_request_error_naming_the_entry() {
    for bad in [json!(-1), json!(1.5), json!("0"), json!(true)] {
        let text = json!({"facts": {"stage": "pay", "called": [{"tool": "verify_identity", "ok": true, "turns_ago": bad}]},
                          "calls": [{"id": "c", "tool": "payout", "args": {}}]})
        .to_string();
        let err = fresh_check().decide_json(&text).unwrap_err().to_string();
        assert!(err.contains("facts.called[0].turns_ago"), "{bad}: {err}");
    }
}
