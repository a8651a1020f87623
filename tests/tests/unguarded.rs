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

// ---- warnings for guards that never deny -------------------------------------------------

/// The warnings of a policy that must compile, as `line:col: message` strings.
fn warnings(src: &str) -> Vec<String> {
    let p = toolgate_tests::compile(src);
    p.warnings()
        .iter()
        .map(|w| {
            let at = p.source().location(w.span.start);
            let at = at.strip_prefix("test.gate:").unwrap_or(&at);
            format!("{at}: {}", w.message)
        })
        .collect()
}

/// A one-tool policy whose rule is `require EXPR` (plus `extra` lines in the rule).
fn rule_policy(expr: &str, extra: &str) -> String {
    format!(
        "module m\nwrite act\nread verify\nstage s {{ tools [act, verify] }}\nrule r for act {{\n  require {expr}\n{extra}}}\n"
    )
}

#[test]
fn a_require_that_is_always_true_warns() {
    for (expr, whole) in [
        ("args.x == 1 or true", true),
        ("true", true),
        ("not false", true),
        ("true or field_filled(phone)", true),
        ("(args.a > 1 or true) and true", true),
        ("args.x == 1 or not args.x == 1", false),
        ("not args.x == 1 or args.x == 1", false),
        ("field_filled(phone) or not field_filled(phone)", false),
        (
            "args.s matches \"^a$\" or args.t == 2 or not args.s matches \"^a$\"",
            false,
        ),
        (
            "not (facts.tier == \"a\" and not facts.tier == \"a\")",
            false,
        ),
        ("(args.x == 1 or not args.x == 1) and true", false),
    ] {
        let w = warnings(&rule_policy(expr, ""));
        let want = if whole {
            "6:11: this `require` is always true, so it never denies a call of rule `r`"
        } else {
            "6:11: this `require` is true whenever the values it reads are present and of the type it tests (a condition or its own negation), so rule `r` denies only calls that lack them"
        };
        let w: Vec<&String> = w.iter().filter(|w| w.contains("this `require`")).collect();
        assert_eq!(w, [want], "{expr}");
    }
    for expr in [
        "args.x == 1",
        "args.x == 1 or args.x == 2",
        "args.x == 1 or not args.x == 2",
        "args.x == 1 and true",
        "not args.x == 1",
        "false or args.x == 1",
    ] {
        assert_eq!(
            warnings(&rule_policy(expr, "")),
            Vec::<String>::new(),
            "{expr}"
        );
    }
}

#[test]
fn the_always_true_warnings_tell_the_truth() {
    use serde_json::json;
    let facts = json!({"stage": "s"});
    // `or true`: every call passes, whatever its arguments.
    let p = toolgate_tests::compile(&rule_policy("args.x == 1 or true", ""));
    for args in [json!({}), json!({"x": 2}), json!({"x": "evil"})] {
        assert!(toolgate_tests::decide_one(&p, facts.clone(), "act", args).allow);
    }
    // `x or not x`: every call with a number `x` passes; only one without it (or with
    // another type, which a comparison with a number cannot read) is denied.
    let p = toolgate_tests::compile(&rule_policy("args.x == 1 or not args.x == 1", ""));
    for args in [
        json!({"x": 1}),
        json!({"x": 2}),
        json!({"x": -7.5}),
        json!({"x": 1e300}),
    ] {
        assert!(toolgate_tests::decide_one(&p, facts.clone(), "act", args).allow);
    }
    for args in [json!({}), json!({"x": "evil"}), json!({"x": null})] {
        assert!(!toolgate_tests::decide_one(&p, facts.clone(), "act", args).allow);
    }
}

#[test]
fn a_write_tool_guarded_only_by_rules_that_fail_open_warns() {
    let warn = |class: &str, tool: &str, rules: &str| {
        format!("2:{}: `{class}` tool `{tool}` is guarded only by rules that fail open ({rules}): a request without the facts they read lets every call through", class.len() + 2)
    };
    let policy = |class: &str, rules: &str| {
        format!("module m\n{class} pay\nread verify\nstage s {{ tools [pay, verify] }}\n{rules}")
    };
    let open = "rule phone for pay { require field_filled(phone) }\n";
    let open2 = "rule media for pay { require client_sent_media(within: 5) }\n";
    let explicit = "rule phone for pay {\n  require field_filled(phone)\n  on_missing allow\n}\n";
    let explicit2 =
        "rule media for pay {\n  require client_sent_media(within: 5)\n  on_missing allow\n}\n";
    let closed = "rule limit for pay { require args.amount <= 10 }\n";
    let denied = "rule phone for pay {\n  require field_filled(phone)\n  on_missing deny\n}\n";
    let cases: Vec<(String, Vec<String>)> = vec![
        (policy("write", open), vec![warn("write", "pay", "`phone`")]),
        (
            policy("egress", open),
            vec![warn("egress", "pay", "`phone`")],
        ),
        (
            policy("write", &format!("{open}{open2}")),
            vec![warn("write", "pay", "`phone`, `media`")],
        ),
        (
            policy("write", &format!("{explicit}{open2}")),
            vec![warn("write", "pay", "`phone`, `media`")],
        ),
        (
            policy(
                "write",
                "use stdlib::money_preconditions::phone_on_file for pay\n",
            ),
            vec![warn("write", "pay", "`phone_on_file`")],
        ),
        (policy("write", &format!("{explicit}{explicit2}")), vec![]),
        (policy("write", &format!("{open}{closed}")), vec![]),
        (policy("write", denied), vec![]),
        (
            policy(
                "write",
                "rule r for pay { require field_filled(phone) and args.x == 1 }\n",
            ),
            vec![],
        ),
        (policy("read", open), vec![]),
        (policy("ingest", open), vec![]),
        (policy("write", ""), vec![]),
    ];
    for (src, want) in cases {
        let got: Vec<String> = warnings(&src)
            .into_iter()
            .filter(|w| !w.contains("classified but allowed in no stage"))
            .collect();
        assert_eq!(got, want, "{src}");
    }
    // The warning is true: without the facts, the call runs.
    let p = toolgate_tests::compile(&policy("write", open));
    let d = toolgate_tests::decide_one(
        &p,
        serde_json::json!({"stage": "s"}),
        "pay",
        serde_json::json!({}),
    );
    assert!(d.allow && d.fail_open, "{d:?}");
}

#[test]
fn on_missing_allow_on_a_rule_reading_custom_facts_warns() {
    let allow = "  on_missing allow\n";
    for (expr, fact) in [
        ("facts.tier == \"gold\"", "tier"),
        ("facts.account.plan == \"x\" or args.y == 1", "account"),
        ("args.y == 1 and facts.kyc == true", "kyc"),
        ("not facts.blocked == true", "blocked"),
    ] {
        let w = warnings(&rule_policy(expr, allow));
        assert!(
            w.contains(&format!("7:14: rule `r` reads custom facts (`facts.{fact}`) and fails open: a request that leaves them out is allowed")),
            "{expr}: {w:?}"
        );
    }
    for (expr, extra) in [
        ("facts.tier == \"gold\"", ""),
        ("facts.tier == \"gold\"", "  on_missing deny\n"),
        ("field_filled(phone)", allow),
        ("facts.fields.phone exists", allow),
        ("facts.stage == \"s\" and called_before(verify)", allow),
    ] {
        let w = warnings(&rule_policy(expr, extra));
        assert!(
            !w.iter().any(|w| w.contains("custom facts")),
            "{expr}: {w:?}"
        );
    }
}

#[test]
fn unicode_perl_classes_in_a_regex_warn_and_are_truly_unicode() {
    for (re, classes) in [
        (r#""^\\d{6}$""#, vec!["\\d"]),
        (r#"r"^\d+$""#, vec!["\\d"]),
        (r#"r"^\w+@example\.com$""#, vec!["\\w"]),
        (r#"r"^\s*[0-9]+\s*$""#, vec!["\\s"]),
        (r#"r"^[\d\s]+$""#, vec!["\\d", "\\s"]),
        (r#"r"^(?i)[a-z]+\d$""#, vec!["\\d"]),
        (r#"r"^(?-u:\d)+$""#, vec![]),
        (r#"r"^[0-9]+$""#, vec![]),
        (r#"r"^\\d$""#, vec![]),
        (r#"r"^\D+$""#, vec![]),
        (r#"r"^\p{Nd}+$""#, vec![]),
        (r#"r"^[^\s<>]+$""#, vec![]),
        (r#"r"^[^\D]+$""#, vec!["\\D"]),
    ] {
        let w = warnings(&rule_policy(&format!("args.x matches {re}"), ""));
        let got: Vec<&String> = w
            .iter()
            .filter(|w| w.contains("in a regex is a Unicode class"))
            .collect();
        assert_eq!(got.len(), classes.len(), "{re}: {w:?}");
        for c in classes {
            assert!(
                got.iter()
                    .any(|w| w.contains(&format!("`{c}` in a regex is a Unicode class"))),
                "{re}: {w:?}"
            );
        }
    }
    // Under `not`, a Unicode class only makes the rule stricter: no warning.
    for expr in [
        r#"not args.x matches r"\d""#,
        r#"not (args.x matches r"^\w+$" or args.y == 1)"#,
    ] {
        let w = warnings(&rule_policy(expr, ""));
        assert!(
            !w.iter().any(|w| w.contains("Unicode class")),
            "{expr}: {w:?}"
        );
    }
    let w = warnings(&rule_policy(r#"not not args.x matches r"^\d+$""#, ""));
    assert!(w.iter().any(|w| w.contains("`\\d` in a regex")), "{w:?}");
    let p = toolgate_tests::compile(&rule_policy(r#"args.x matches r"^\d+$""#, ""));
    assert!(p.warnings()[0]
        .help
        .as_deref()
        .unwrap_or("")
        .contains("write `[0-9]`"));
    // The claim is true: Arabic-Indic and full-width digits pass `\d`.
    for x in ["٣٣", "５"] {
        let d = toolgate_tests::decide_one(
            &p,
            serde_json::json!({"stage": "s"}),
            "act",
            serde_json::json!({"x": x}),
        );
        assert!(d.allow, "{x}");
    }
    let p = toolgate_tests::compile(&rule_policy(r#"args.x matches "^[0-9]+$""#, ""));
    let d = toolgate_tests::decide_one(
        &p,
        serde_json::json!({"stage": "s"}),
        "act",
        serde_json::json!({"x": "٣"}),
    );
    assert!(!d.allow);
}

#[test]
fn an_unanchored_identifier_pattern_warns_with_an_anchored_suggestion() {
    const MSG: &str = "this pattern checks the shape of a value but is not anchored";
    for (re, suggestion) in [
        ("POL-[0-9]{6}", "^(?:POL-[0-9]{6})$"),
        ("^POL-[0-9]{6}", "^(?:POL-[0-9]{6})$"),
        ("POL-[0-9]{6}$", "^(?:POL-[0-9]{6})$"),
        ("^POL-[0-9]+|ADM-[0-9]+$", "^(?:POL-[0-9]+|ADM-[0-9]+)$"),
        ("(?m)^[0-9]+$", "^(?:(?m)^[0-9]+)$"),
        (
            "[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}",
            "^(?:[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30})$",
        ),
        ("[a-z]+@example[.]com", "^(?:[a-z]+@example[.]com)$"),
    ] {
        let p = toolgate_tests::compile(&rule_policy(&format!("args.id matches \"{re}\""), ""));
        let w: Vec<_> = p
            .warnings()
            .iter()
            .filter(|w| w.message.starts_with(MSG))
            .collect();
        assert_eq!(w.len(), 1, "{re}: {:?}", p.warnings());
        let help = w[0].help.clone().unwrap_or_default();
        assert!(help.contains(&format!("`{suggestion}`")), "{re}: {help}");
        // The suggestion, taken, compiles without the warning.
        if !re.starts_with("(?m)") {
            let fixed = toolgate_tests::compile(&rule_policy(
                &format!("args.id matches \"{suggestion}\""),
                "",
            ));
            assert!(
                !fixed.warnings().iter().any(|w| w.message.starts_with(MSG)),
                "{suggestion}"
            );
        }
    }
    for re in [
        "^POL-[0-9]{6}$",
        "^(?:POL|ADM)-[0-9]+$",
        "urgent",
        "\\\\A[0-9]+\\\\z",
        "^https://",
        "[.]pdf$",
        "a+b",
    ] {
        let w = warnings(&rule_policy(&format!("args.id matches \"{re}\""), ""));
        assert!(!w.iter().any(|w| w.contains(MSG)), "{re}: {w:?}");
    }
    // Under `not` an unanchored pattern is what the author wants (a deny-list): no warning.
    for expr in [
        "not args.id matches \"[<>]+\"",
        "args.n > 1 and not (args.id matches \"[0-9]{3}\")",
    ] {
        let w = warnings(&rule_policy(expr, ""));
        assert!(!w.iter().any(|w| w.contains(MSG)), "{expr}: {w:?}");
    }
    // The claim is true: an unanchored pattern passes a value that only contains a match.
    let p = toolgate_tests::compile(&rule_policy("args.id matches \"POL-[0-9]{6}\"", ""));
    let d = toolgate_tests::decide_one(
        &p,
        serde_json::json!({"stage": "s"}),
        "act",
        serde_json::json!({"id": "x; DROP POL-123456 y"}),
    );
    assert!(d.allow);
}

#[test]
fn a_long_or_is_checked_for_complements_in_linear_time() {
    // 20 000 parts, half of them negations: comparing every pair (as a first version did)
    // took minutes in a debug build; hashing the parts takes well under a second.
    let parts: Vec<String> = (0..10_000)
        .map(|i| format!("args.x == {i} or not args.y == {i}"))
        .collect();
    let src = rule_policy(&parts.join(" or "), "");
    let start = std::time::Instant::now();
    assert_eq!(warnings(&src), Vec::<String>::new());
    let with_complement = rule_policy(&format!("{} or not args.x == 9999", parts.join(" or ")), "");
    assert_eq!(warnings(&with_complement).len(), 1);
    assert!(
        start.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn thousands_of_unknown_names_fail_quickly_with_a_few_suggestions() {
    // Each did-you-mean scans every classified name; a hostile policy with thousands of
    // unknown names must not turn that into a quadratic search.
    let n = 5_000;
    let tools: Vec<String> = (0..n).map(|i| format!("tool_{i:05}")).collect();
    let refs: Vec<String> = (0..n).map(|i| format!("tool_{i:05}x")).collect();
    let src = format!(
        "module m\nwrite {}\nstage s {{ tools [\n{}\n] }}\n",
        tools.join(", "),
        refs.join(",\n")
    );
    let start = std::time::Instant::now();
    let Err(err) = Policy::compile("m.gate", &src) else {
        panic!("must not compile");
    };
    assert!(
        start.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(err.errors().count(), n);
    let suggested = err
        .errors()
        .filter(|d| {
            d.help
                .as_deref()
                .is_some_and(|h| h.starts_with("did you mean"))
        })
        .count();
    assert_eq!(suggested, 8, "the first few unknown names get a suggestion");
}
