//! The proof on small policy pairs: what it proves, and what it leaves unproven.

use super::*;

fn policy(body: &str) -> Policy {
    let text = format!(
        "module m\nwrite t\nread verify_identity, lookup_lead, lookup\nstage s {{ tools [t] }}\n{body}\n"
    );
    Policy::compile("m.gate", &text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn proved(old: &str, new: &str) -> bool {
    matches!(entails(&policy(new), &policy(old), "t"), Entailment::Proved)
}

fn unproven(old: &str, new: &str) -> Unproven {
    match entails(&policy(new), &policy(old), "t") {
        Entailment::Unproven(u) => u,
        Entailment::Proved => panic!("proved:\nOLD {old}\nNEW {new}"),
    }
}

fn rule(requires: &str) -> String {
    format!("rule r for t {{\n{requires}\n}}")
}

#[test]
fn an_identical_rule_is_proved_whatever_its_layout_and_comments() {
    let old = "hosts docs { schemes [https] allow [\"a.com\"] }\nrule r for t {\n require args.url in hosts docs\n}";
    let new = "hosts docs {\n  schemes [https]\n  allow [\"a.com\"]\n}\nrule r for t { require args.url in hosts // note\n docs }";
    assert!(proved(old, new));
}

#[test]
fn numeric_bounds_are_ordered_by_the_numbers_they_admit() {
    let r = |b: &str| {
        rule(&format!(
            "require args.amount is number and args.amount {b}"
        ))
    };
    assert!(proved(&r("<= 500"), &r("<= 100")));
    assert!(proved(&r("<= 500"), &r("< 500")));
    assert!(proved(&r("< 500"), &r("<= 499.5")));
    assert!(!proved(&r("< 500"), &r("<= 500")));
    assert!(!proved(&r("<= 100"), &r("<= 500")));
    assert!(proved(&r("> 0"), &r("== 3")));
    assert!(!proved(&r("> 0"), &r("!= 3")));
    let u = unproven(&r("<= 100"), &r("<= 500"));
    assert_eq!(u.rule, "r");
    assert!(u.reason.contains("<= 500"), "{}", u.reason);
}

#[test]
fn a_requirement_edited_among_five_is_compared_with_its_counterpart() {
    let five = |last: &str| {
        rule(&format!(
            "require args.a is string\nrequire args.b is string\nrequire args.c is string\nrequire args.d is string\nrequire args.e {last}"
        ))
    };
    assert!(proved(&five("== \"x\""), &five("== \"x\"")));
    assert!(proved(&five("in [\"x\", \"y\"]"), &five("in [\"x\"]")));
    let u = unproven(&five("in [\"x\"]"), &five("in [\"x\", \"y\"]"));
    assert_eq!((u.requirement, u.requirements), (5, 5));
    // A requirement added is a narrowing; one dropped is not proved.
    assert!(proved(&rule("require args.a is string"), &five("== \"x\"")));
    assert!(!proved(
        &five("== \"x\""),
        &rule("require args.a is string")
    ));
}

#[test]
fn regexes_are_ordered_by_their_languages_and_a_wider_one_seeds_the_search() {
    let r = |re: &str| rule(&format!("require args.policy matches \"{re}\""));
    assert!(proved(&r("^POL-[0-9]+$"), &r("^POL-[0-9]{6}$")));
    let u = unproven(&r("^POL-[0-9]{6}$"), &r("(?m)^POL-[0-9]{6}$"));
    let seed = u.seeds.first().expect("a seed");
    let s = seed.value.as_str().unwrap();
    assert!(s.contains('\n') && s.contains("POL-"), "{s:?}");
    assert_eq!(seed.path, vec![SeedStep::Key("policy".into())]);
}

#[test]
fn host_lists_are_ordered_by_schemes_entries_and_options() {
    let h = |list: &str| {
        format!("hosts docs {{ {list} }}\nrule r for t {{ require args.url in hosts docs }}")
    };
    let base = "schemes [https] allow [\"a.com\", \".b.com\"]";
    assert!(proved(&h(base), &h("schemes [https] allow [\"a.com\"]")));
    assert!(proved(
        &h(base),
        &h("schemes [https] allow [\"x.b.com\", \".c.b.com\"]")
    ));
    assert!(!proved(
        &h(base),
        &h("schemes [https] allow [\"a.com\", \"c.com\"]")
    ));
    assert!(!proved(&h(base), &h("schemes [https] allow [\"b.com\"]")));
    let http = unproven(&h(base), &h("schemes [https, http] allow [\"a.com\"]"));
    assert!(http.reason.contains("scheme `http`"), "{}", http.reason);
    let idn = unproven(&h(base), &h(&format!("{base} idn allow")));
    assert!(idn.reason.contains("idn allow"), "{}", idn.reason);
    // Behind `not args.url exists or`, the list is still compared.
    let guarded = |list: &str| {
        format!("hosts docs {{ {list} }}\nrule r for t {{ require not args.url exists or args.url in hosts docs }}")
    };
    assert!(proved(
        &guarded(base),
        &guarded("schemes [https] allow [\"a.com\"]")
    ));
    assert!(!proved(
        &guarded(base),
        &guarded("schemes [https, http] allow [\"a.com\"]")
    ));
}

#[test]
fn a_negated_test_reverses_the_order() {
    let r = |list: &str| rule(&format!("require not args.to in [{list}]"));
    assert!(proved(&r("\"a\""), &r("\"a\", \"b\"")));
    assert!(!proved(&r("\"a\", \"b\""), &r("\"a\"")));
}

#[test]
fn built_in_parameters_are_ordered_under_on_missing_allow() {
    let r = |req: &str| rule(&format!("require {req}\non_missing allow"));
    let media = |within: u32, kinds: &str| {
        r(&format!(
            "client_sent_media(within: {within}, kinds: [{kinds}])"
        ))
    };
    assert!(proved(&media(10, "image, document"), &media(5, "image")));
    assert!(!proved(
        &media(10, "image, document"),
        &media(50, "image, document")
    ));
    assert!(!proved(&media(10, "image"), &media(10, "image, document")));
    assert!(proved(
        &r("min_client_messages(2)"),
        &r("min_client_messages(3)")
    ));
    assert!(!proved(
        &r("min_client_messages(2)"),
        &r("min_client_messages(1)")
    ));
    assert!(!proved(
        &r("called_before(verify_identity)"),
        &r("called_before(lookup_lead)")
    ));
    assert!(proved(
        &r("called_within(lookup, turns: 30)"),
        &r("called_within(lookup, turns: 2)")
    ));
    assert!(!proved(
        &r("called_within(lookup, turns: 2)"),
        &r("called_within(lookup, turns: 30)")
    ));
    assert!(proved(
        &r("called_before(lookup)"),
        &r("called_within(lookup, turns: 2)")
    ));
}

#[test]
fn on_missing_allow_added_is_unproven_and_removed_is_proved() {
    let strict = rule("require min_client_messages(2)\non_missing deny");
    let open = rule("require min_client_messages(2)\non_missing allow");
    assert!(proved(&open, &strict));
    assert!(!proved(&strict, &open));
    // On a rule that reads no facts the setting changes nothing.
    let args_only = |extra: &str| rule(&format!("require args.a is string\n{extra}"));
    assert!(proved(&args_only(""), &args_only("on_missing allow")));
}

#[test]
fn an_or_under_on_missing_allow_is_not_ordered_through() {
    // `x <= 5` is narrower than `x <= 10`, yet with `{"x": 7}` and no `flag` fact NEW's `and`
    // is false and its `or` absent-unknown (allowed), while OLD's `and` is invalid-unknown
    // (`y` is missing), which outweighs the absent fact (denied).
    let r = |x: &str| {
        rule(&format!(
            "require (args.x <= {x} and args.y > 0) or facts.flag == true\non_missing allow"
        ))
    };
    assert!(!proved(&r("10"), &r("5")));
    let (old, new) = (policy(&r("10")), policy(&r("5")));
    let request = crate::Request::from_json(
        r#"{"facts":{"stage":"s"},"calls":[{"id":"1","tool":"t","args":{"x":7}}]}"#,
    )
    .unwrap();
    assert!(new.decide(&request).decisions[0].allow);
    assert!(!old.decide(&request).decisions[0].allow);
    // Without `on_missing allow` the order carries through.
    let strict = |x: &str| {
        rule(&format!(
            "require (args.x <= {x} and args.y > 0) or facts.flag == true\non_missing deny"
        ))
    };
    assert!(proved(&strict("10"), &strict("5")));
}

#[test]
fn a_tool_without_rules_in_new_is_unproven_unless_old_had_none() {
    assert!(proved("", ""));
    assert!(proved("", &rule("require args.a is string")));
    let u = unproven(&rule("require args.a is string"), "");
    assert!(u.reason.contains("no rule"), "{}", u.reason);
}

#[test]
fn vault_paths_kinds_and_sanitising_are_compared() {
    let v = |d: &str| {
        let text = format!("module m\nwrite t\nstage s {{ tools [t] }}\n{d}\n");
        Policy::compile("m.gate", &text).unwrap()
    };
    let old = v("detokenise t { args [args.sort_code: SORT_CODE] }");
    let any = v("detokenise t { args [args.sort_code: any] }");
    let w = data_widenings(&any, &old, "t");
    assert_eq!(
        w,
        ["`t` may unwrap vault tokens of any kind at `args.sort_code`"]
    );
    assert!(data_widenings(&old, &any, "t").is_empty());
    let other = v("detokenise t { args [args.sort_code: SORT_CODE, args.nhs: NHS_NUMBER] }");
    assert_eq!(data_widenings(&other, &old, "t").len(), 1);
    let deep = v("detokenise t { args [args.bank.sort_code: SORT_CODE] }");
    let whole = v("detokenise t { args [args.bank: SORT_CODE] }");
    assert!(data_widenings(&deep, &whole, "t").is_empty());
    assert_eq!(data_widenings(&whole, &deep, "t").len(), 1);
}

#[test]
fn a_removed_re_sanitisation_is_a_widening() {
    let v = |d: &str| {
        let text = format!("module m\nread t\nstage s {{ tools [t] }}\n{d}\n");
        Policy::compile("m.gate", &text).unwrap()
    };
    let (with, without) = (v("sanitise_output [t]"), v(""));
    assert_eq!(
        data_widenings(&without, &with, "t"),
        ["`t`'s output is no longer re-sanitised"]
    );
    assert!(data_widenings(&with, &without, "t").is_empty());
}

#[test]
fn a_list_of_literals_is_within_any_test_each_literal_passes() {
    let r = |req: &str| rule(&format!("require {req}"));
    assert!(proved(
        &r("args.n is integer and args.n > 0"),
        &r("args.n in [1, 2, 3]")
    ));
    assert!(!proved(
        &r("args.n is integer and args.n > 0"),
        &r("args.n in [0, 1]")
    ));
    assert!(!proved(&r("args.n is integer"), &r("args.n in [1.5]")));
    assert!(proved(
        &r("args.to matches \"@ours[.]com$\""),
        &r("args.to == \"a@ours.com\"")
    ));
    assert!(!proved(
        &r("args.to matches \"@ours[.]com$\""),
        &r("args.to in [\"a@ours.com\", \"b@evil.io\"]")
    ));
    let hosts = "hosts docs { schemes [https] allow [\"docs.rs\"] }\n";
    assert!(proved(
        &format!("{hosts}{}", r("args.url in hosts docs")),
        &format!("{hosts}{}", r("args.url == \"https://docs.rs/x\""))
    ));
    assert!(!proved(
        &format!("{hosts}{}", r("args.url in hosts docs")),
        &format!("{hosts}{}", r("args.url == \"https://evil.io/\""))
    ));
}
