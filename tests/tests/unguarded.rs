//! The compiler refuses what would silently unguard a tool (issue 11, section 5): a tool name
//! that is never classified is an error wherever it is used, with a did-you-mean, and the
//! warnings for guards that look like guards but never deny.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use toolgate_engine::Policy;
use toolgate_tests::compile_err;

/// Two classified tools, both staged, so a misspelling of either is one edit away.
const BASE: &str = "module m\nwrite send_email\nread lookup\ningest fetch_page\nstage s { tools [send_email, lookup, fetch_page] }\n";

/// Every place a tool name may be written, each with `send_emails` (one edit from
/// `send_email`), and what the error says uses it.
const MISSPELT: [(&str, &str); 12] = [
    ("stage t { tools [lookup, send_emails] }", "stage `t`"),
    ("rule r for send_emails { require args.x == 1 }", "rule `r`"),
    (
        "rule r for [lookup, send_emails] { require args.x == 1 }",
        "rule `r`",
    ),
    (
        "latch l {\n  set_by send_emails\n  blocks write\n}",
        "latch `l`",
    ),
    (
        "latch l {\n  set_by ingest\n  blocks [lookup, send_emails]\n}",
        "latch `l`",
    ),
    (
        "detokenise send_emails { args [args.x: X] }",
        "`detokenise`",
    ),
    ("sanitise_output send_emails", "`sanitise_output`"),
    ("sanitise_output [lookup, send_emails]", "`sanitise_output`"),
    (
        "rule r for lookup { require called_before(send_emails) }",
        "`called_before`",
    ),
    (
        "rule r for lookup { require called_before(\"send_emails\") }",
        "`called_before`",
    ),
    ("invariant i { never allow send_emails }", "an invariant"),
    (
        "invariant i { never allow lookup when batch has send_emails }",
        "an invariant",
    ),
];

#[test]
fn a_misspelt_tool_name_is_an_error_with_a_did_you_mean_everywhere() {
    for (item, what) in MISSPELT {
        let src = format!("{BASE}{item}\n");
        let out = compile_err(&src);
        let line = BASE.lines().count()
            + 1
            + item
                .lines()
                .take_while(|l| !l.contains("send_emails"))
                .count();
        // The span starts at the name's token, the opening quote for a quoted name.
        let text = src.lines().nth(line - 1).unwrap();
        let col = text
            .find("\"send_emails")
            .or_else(|| text.find("send_emails"))
            .unwrap()
            + 1;
        let want = format!(
            "test.gate:{line}:{col}: error: {what} names tool `send_emails`, which is never classified"
        );
        assert!(
            out.contains(&want),
            "for `{item}` expected `{want}` in:\n{out}"
        );
        assert!(out.contains("did you mean `send_email`?"), "{item}:\n{out}");
        assert!(
            !out.contains("warning: "),
            "{item}: an error, not a warning:\n{out}"
        );
    }
}

#[test]
fn a_name_close_to_nothing_gets_the_classify_hint_instead() {
    for (item, _) in MISSPELT {
        let item = item.replace("send_emails", "wire_money_abroad");
        let out = compile_err(&format!("{BASE}{item}\n"));
        assert!(
            out.contains("`wire_money_abroad`, which is never classified"),
            "{item}:\n{out}"
        );
        assert!(!out.contains("did you mean"), "{item}:\n{out}");
        assert!(
            out.contains("classify it (`write wire_money_abroad`, `egress wire_money_abroad`"),
            "{item}:\n{out}"
        );
    }
}

#[test]
fn case_and_transposition_mistakes_are_suggested() {
    for (wrong, right) in [
        ("Send_Email", "send_email"),
        ("send_emial", "send_email"),
        ("lokup", "lookup"),
        ("fetch-page", "fetch_page"),
    ] {
        let out = compile_err(&format!(
            "{BASE}rule r for {wrong} {{ require args.x == 1 }}\n"
        ));
        assert!(
            out.contains(&format!("did you mean `{right}`?")),
            "{wrong}:\n{out}"
        );
    }
}

#[test]
fn an_imported_rule_retargeted_at_a_misspelt_tool_is_an_error() {
    let out = compile_err(&format!(
        "{BASE}use stdlib::money_preconditions::phone_on_file for send_emails\n"
    ));
    assert!(
        out.contains("names tool `send_emails`, which is never classified"),
        "{out}"
    );
    assert!(out.contains("did you mean `send_email`?"), "{out}");
}

#[test]
fn the_issue_example_no_longer_compiles() {
    // `rule r for send_emails` used to warn, exit 0 and leave `send_email` unguarded.
    let src = "module m\negress send_email\nstage s { tools [send_email] }\nrule r for send_emails {\n  require args.to matches \"^[a-z]+@example\\\\.com$\"\n}\n";
    let Err(err) = Policy::compile("m.gate", src) else {
        panic!("must not compile");
    };
    assert!(err
        .diagnostics
        .iter()
        .any(|d| d.is_error() && d.message.contains("send_emails")));
}

#[test]
fn called_before_in_an_imported_rule_is_checked_where_it_applies() {
    // The library module itself names `verify_identity` in a rule for no tool: it compiles.
    let lib = "module m\nwrite modify_booking\nstage s { tools [modify_booking] }\nuse stdlib::money_preconditions\n";
    assert!(Policy::compile("m.gate", lib).is_ok());
    // Imported for a tool, the rule applies, so the name must be classified.
    let out = compile_err(
        "module m\nwrite modify_booking\nstage s { tools [modify_booking] }\nuse stdlib::money_preconditions::identity_verified for modify_booking\n",
    );
    assert!(
        out.contains("`called_before` names tool `verify_identity`, which is never classified"),
        "{out}"
    );
    let ok = "module m\nwrite modify_booking\nread verify_identity\nstage s { tools [modify_booking, verify_identity] }\nuse stdlib::money_preconditions::identity_verified for modify_booking\n";
    assert!(Policy::compile("m.gate", ok).is_ok());
}
