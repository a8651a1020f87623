//! Invariants: the language construct, the checker's proofs and searches, and that a
//! deliberately broken copy of each example policy is caught with a replayable counterexample.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use toolgate_engine::{Invariants, Policy};
use toolgate_prove::{check_policy, Config, InvariantResult};
use toolgate_tests::{compile, compile_err, compile_named, example_path, EXAMPLES};

/// Small enough to keep debug-mode runs quick; the CLI default is larger.
const CONFIG: Config = Config {
    cases: 400,
    seed: 42,
};

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn invariants_text(name: &str) -> String {
    read(&example_path(name).with_file_name(format!("{name}.invariants.gate")))
}

fn example_text(name: &str) -> String {
    read(&example_path(name))
}

/// Checks `policy_text` against the example's invariants file.
fn check_against(name: &str, policy_text: &str) -> Vec<InvariantResult> {
    let policy = compile_named(&format!("{name}.gate"), policy_text);
    let inv = invariants_text(name);
    check_policy(&policy, Some(("inv.gate", &inv)), &CONFIG)
        .unwrap_or_else(|e| panic!("invariants do not compile:\n{}", e.render()))
}

fn result<'a>(results: &'a [InvariantResult], name: &str) -> &'a InvariantResult {
    results
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no invariant `{name}` in results"))
}

/// Asserts `name` is violated and that its counterexample, judged again from its JSON by the
/// broken policy, really allows the offending call, while the original policy denies it.
fn assert_caught(example: &str, broken: &str, name: &str) {
    let results = check_against(example, broken);
    let r = result(&results, name);
    let cx = r
        .counterexample
        .as_ref()
        .unwrap_or_else(|| panic!("`{name}` not caught in the broken {example}: {r:?}"));
    let json = cx.request_json();
    let broken_policy = compile(broken);
    let replay = broken_policy
        .decide_json(&json)
        .expect("the counterexample is a valid request");
    assert!(replay.decisions[cx.call].allow, "replayed: {replay:?}");
    let original = compile(&example_text(example));
    let invariants = Invariants::compile(&original, "i", &invariants_text(example)).unwrap();
    let request = toolgate_engine::Request::from_json(&json).unwrap();
    let (_, violations) = invariants.check(&original, &request);
    assert!(
        violations.is_empty(),
        "the original {example} keeps `{name}` on the counterexample:\n{json}\n{violations:?}"
    );
    // Every other invariant's result is still computed.
    assert_eq!(
        results.len(),
        Invariants::compile(&broken_policy, "i", &invariants_text(example))
            .unwrap()
            .len()
    );
}

fn replace_once(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "`{from}` not in the example");
    text.replacen(from, to, 1)
}

#[test]
fn every_example_keeps_its_invariants() {
    for name in EXAMPLES {
        let results = check_against(name, &example_text(name));
        assert!(results.len() >= 3, "{name}: {} invariants", results.len());
        for r in &results {
            assert!(
                r.passed(),
                "{name}: {} violated: {:?}",
                r.name,
                r.counterexample
            );
            assert!(r.requests > 100 && r.points >= r.requests, "{name}: {r:?}");
            assert_eq!(r.proved + r.open, r.points);
        }
    }
}

#[test]
fn structural_invariants_are_proved_without_search() {
    let results = check_against("motor_claims", &example_text("motor_claims"));
    for name in [
        "payout_only_in_its_stage",
        "no_write_after_ingest",
        "unclassified_never_runs",
    ] {
        let r = result(&results, name);
        assert!(r.proved_everywhere(), "{name}: {r:?}");
        assert_eq!(r.cases, 0, "nothing was left to search");
    }
    // This one reads arguments, so part of it is searched.
    let r = result(&results, "payout_within_auto_tier");
    assert!(r.open > 0 && r.cases == CONFIG.cases, "{r:?}");
}

#[test]
fn broken_motor_claims_payout_in_another_stage_is_caught() {
    let broken = replace_once(
        &example_text("motor_claims"),
        "tools [update_claim_notes, lookup_policy_faq]",
        "tools [update_claim_notes, lookup_policy_faq, authorise_bacs_payout]",
    );
    assert_caught("motor_claims", &broken, "payout_only_in_its_stage");
}

#[test]
fn broken_motor_claims_limit_raised_is_caught() {
    let broken = replace_once(
        &example_text("motor_claims"),
        "args.amount <= 250",
        "args.amount <= 2500",
    );
    assert_caught("motor_claims", &broken, "payout_within_auto_tier");
}

#[test]
fn broken_coach_latch_removed_is_caught() {
    let broken = replace_once(&example_text("coach"), "  blocks write\n", "");
    let policy = compile(&broken);
    assert_eq!(
        policy.latches().count(),
        1,
        "the latch is still declared, it blocks nothing"
    );
    assert_caught("coach", &broken, "no_write_after_ingest");
}

#[test]
fn broken_coach_host_list_widened_is_caught() {
    let broken = replace_once(
        &example_text("coach"),
        "\"developers.cloudflare.com\"]",
        "\"developers.cloudflare.com\", \".amazon.com\"]",
    );
    assert_caught("coach", &broken, "vendor_hosts_only");
}

#[test]
fn broken_messenger_payments_precondition_removed_is_caught() {
    let broken = replace_once(
        &example_text("messenger_payments"),
        "require client_sent_media(within: 10, kinds: [image, document])",
        "require true",
    );
    assert_caught("messenger_payments", &broken, "receipt_before_confirm");
}

#[test]
fn broken_messenger_payments_window_widened_is_caught_by_the_search() {
    // The window is only wrong past 10 messages: enumeration cannot see it, the search must.
    let broken = replace_once(
        &example_text("messenger_payments"),
        "within: 10, kinds",
        "within: 11, kinds",
    );
    let results = check_against("messenger_payments", &broken);
    let cx = result(&results, "receipt_before_confirm")
        .counterexample
        .as_ref()
        .expect("caught");
    assert!(cx.searched, "found by the search");
    let messages = cx
        .request
        .facts
        .messages
        .as_ref()
        .expect("messages present");
    let clients = messages.iter().filter(|m| m.from == "client").count();
    assert!(
        clients >= 11,
        "the receipt sits just outside the window: {messages:?}"
    );
}

#[test]
fn the_same_seed_gives_the_same_counterexample() {
    let broken = replace_once(
        &example_text("coach"),
        "\"developers.cloudflare.com\"]",
        "\"developers.cloudflare.com\", \".amazon.com\"]",
    );
    let a = check_against("coach", &broken);
    let b = check_against("coach", &broken);
    let json = |r: &[InvariantResult]| {
        result(r, "vendor_hosts_only")
            .counterexample
            .as_ref()
            .map(|c| c.request_json())
    };
    assert!(json(&a).is_some());
    assert_eq!(json(&a), json(&b));
}

const INLINE: &str = r#"
module shop
write refund
ingest web_fetch
read lookup
stage support { tools [refund, web_fetch, lookup] }
stage closed {}
latch untrusted { set_by ingest blocks write }
hosts docs { allow ["example.com"] }
rule docs_only for web_fetch { require args.url in hosts docs }
rule receipt for refund { require client_sent_media(within: 2, kinds: [image]) }

invariant no_refund_when_closed { never allow refund when stage == closed }
invariant refund_needs_receipt { never allow refund unless client_sent_media(within: 2, kinds: [image]) or fail_open }
invariant no_write_with_fetch { never allow write when batch has web_fetch }
invariant fetch_docs_only { never allow web_fetch unless args.url in hosts docs }
"#;

#[test]
fn inline_invariants_compile_and_hold() {
    let policy = compile(INLINE);
    assert_eq!(
        policy.invariants().names().collect::<Vec<_>>(),
        [
            "no_refund_when_closed",
            "refund_needs_receipt",
            "no_write_with_fetch",
            "fetch_docs_only"
        ]
    );
    let results = check_policy(&policy, None, &CONFIG).unwrap();
    assert_eq!(results.len(), 4);
    assert!(results.iter().all(InvariantResult::passed), "{results:?}");
}

#[test]
fn fail_open_is_named_by_the_invariant() {
    // Without `or fail_open`, the documented fail-open case is a violation.
    let strict = INLINE.replace(" or fail_open }", " }");
    let policy = compile(&strict);
    let results = check_policy(&policy, None, &CONFIG).unwrap();
    let cx = result(&results, "refund_needs_receipt")
        .counterexample
        .as_ref()
        .expect("the fail-open case breaks the strict invariant");
    assert!(cx.decision.fail_open, "{:?}", cx.decision);
    assert!(cx.request.facts.messages.is_none());
}

#[test]
fn invariants_never_change_decisions() {
    let without: String = INLINE
        .lines()
        .filter(|l| !l.starts_with("invariant"))
        .collect::<Vec<_>>()
        .join("\n");
    let with = compile(INLINE);
    let plain = compile(&without);
    assert!(plain.invariants().is_empty());
    let request = r#"{"facts": {"stage": "support", "messages": [{"from": "client", "media": ["image"]}]},
        "calls": [{"id": "1", "tool": "refund", "args": {}}, {"id": "2", "tool": "web_fetch", "args": {"url": "https://example.com/"}},
                  {"id": "3", "tool": "lookup", "args": {}}, {"id": "4", "tool": "nope", "args": {}}]}"#;
    let a = with.decide_json(request).unwrap();
    let b = plain.decide_json(request).unwrap();
    assert_eq!(a.decisions, b.decisions);
    assert_eq!(a.latched, b.latched);
}

#[test]
fn bad_references_are_located_errors_with_hints() {
    let base = "module m\nwrite pay\nstage a { tools [pay] }\n";
    let e = compile_err(&format!(
        "{base}invariant i {{ never allow pay unless stage == b }}\n"
    ));
    assert!(
        e.contains("test.gate:4:47: error: the policy declares no stage `b`"),
        "{e}"
    );
    assert!(e.contains("help: declared stages: a"), "{e}");
    let e = compile_err(&format!("{base}invariant i {{ never allow payy }}\n"));
    assert!(
        e.contains("4:27: error: an invariant names tool `payy`, which is never classified"),
        "{e}"
    );
    assert!(e.contains("unclassified"), "{e}");
    let e = compile_err(&format!(
        "{base}invariant i {{ never allow pay unless args.u in hosts h }}\n"
    ));
    assert!(e.contains("no host list named `h`"), "{e}");
    let e = compile_err(&format!(
        "{base}invariant i {{ never allow pay when stage = a }}\n"
    ));
    assert!(
        e.contains("4:42: error: expected `in`, `==`, `!=` or `(`, found `=`"),
        "{e}"
    );
    assert!(e.contains("help: compare with `==`"), "{e}");
    let e = compile_err(&format!("{base}invariant i {{ never pay }}\n"));
    assert!(e.contains("never allow TOOLS"), "{e}");
    let e = compile_err(&format!(
        "{base}invariant i {{ never allow pay }}\ninvariant i {{ never allow any }}\n"
    ));
    assert!(e.contains("invariant `i` is declared twice"), "{e}");
}

#[test]
fn an_invariants_file_must_name_its_policy() {
    let policy = compile("module m\nwrite pay\nstage a { tools [pay] }\n");
    let err = Invariants::compile(&policy, "x.invariants.gate", "invariants for other\n")
        .expect_err("wrong module");
    let text = err.render();
    assert!(
        text.contains("x.invariants.gate:1:16: error: these invariants are for policy `other`"),
        "{text}"
    );
    assert!(text.contains("invariants for m"), "{text}");
    // Host lists of the file may not shadow the policy's.
    let policy = compile("module m\nread f\nstage a { tools [f] }\nhosts h { allow [\"a.com\"] }\nrule r for f { require args.u in hosts h }\n");
    let err = Invariants::compile(
        &policy,
        "x",
        "invariants for m\nhosts h { allow [\"b.com\"] }\n",
    )
    .expect_err("duplicate list");
    assert!(
        err.render().contains("host list `h` is declared twice"),
        "{}",
        err.render()
    );
}

#[test]
fn an_invariant_with_batch_has_and_latched_is_exact() {
    let policy = compile(
        "module m\nwrite w\ningest i\nread r\nstage s { tools [w, i, r] }\n\
         invariant w_alone { never allow w when batch has read }\n\
         invariant w_unlatched { never allow w when latched }\n",
    );
    let results = check_policy(&policy, None, &CONFIG).unwrap();
    // No latch is declared, so both are broken and found by enumeration alone.
    for r in &results {
        let cx = r.counterexample.as_ref().unwrap_or_else(|| panic!("{r:?}"));
        assert!(!cx.searched);
        assert_eq!(cx.request.calls[cx.call].tool, "w");
    }
    let json = results[0].counterexample.as_ref().unwrap().request_json();
    assert!(
        json.contains("\"r\""),
        "the batch holds a read companion: {json}"
    );
}

#[test]
fn example_tests_pass_and_report_readable_diffs() {
    for name in EXAMPLES {
        let policy = compile_named(&format!("{name}.gate"), &example_text(name));
        let text = read(&example_path(name).with_file_name(format!("{name}.tests.json")));
        let file = toolgate_prove::TestFile::parse(&text).unwrap();
        assert!(file.cases.len() >= 5, "{name}");
        for r in file.run(&policy) {
            assert!(r.passed(), "{name}: {}: {:?}", r.name, r.failures);
        }
    }
    let policy: Policy = compile("module m\nwrite w\nstage s { tools [w] }\n");
    let file = toolgate_prove::TestFile::parse(
        r#"{"cases": [{"name": "wrong", "request": {"facts": {"stage": "s"}, "calls": [{"id": "a", "tool": "x"}]},
            "expect": [{"allow": true}]}]}"#,
    )
    .unwrap();
    let r = &file.run(&policy)[0];
    assert_eq!(r.failures.len(), 1);
    assert!(
        r.failures[0].contains("expected: allow"),
        "{}",
        r.failures[0]
    );
    assert!(
        r.failures[0].contains("actual:   deny kind=unclassified rule=unclassified"),
        "{}",
        r.failures[0]
    );
    let e = toolgate_prove::TestFile::parse(r#"{"cases": [{"name": "n", "request": {}, "expect": [{"allow": false, "kind": "nope"}]}]}"#)
        .unwrap_err();
    assert_eq!(e.errors[0].path, "cases[0].expect[0].kind");
}

/// The search is guided by `called_within`'s bound: a policy that accepts a call three turns
/// old, against an invariant that wants two, is caught with a replayable counterexample whose
/// `turns_ago` sits between the two.
#[test]
fn a_called_within_bound_looser_than_the_invariant_is_caught() {
    let policy = compile(
        "module fresh\nwrite payout\nread verify_identity\nstage pay { tools [payout, verify_identity] }\n\
         rule fresh_identity for payout { require called_within(verify_identity, turns: 3) }\n",
    );
    let inv = "invariants for fresh\ninvariant recent_check {\n  never allow payout unless called_within(verify_identity, turns: 2) or fail_open\n}\n";
    let results = check_policy(&policy, Some(("inv.gate", inv)), &CONFIG).unwrap();
    let cx = result(&results, "recent_check")
        .counterexample
        .as_ref()
        .unwrap_or_else(|| panic!("not caught: {results:?}"));
    let json = cx.request_json();
    assert!(
        policy.decide_json(&json).unwrap().decisions[cx.call].allow,
        "{json}"
    );
    let request: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(request["facts"]["called"][0]["turns_ago"], 2, "{json}");
    // With the bound the invariant asks for, nothing is found.
    let fixed = compile(
        "module fresh\nwrite payout\nread verify_identity\nstage pay { tools [payout, verify_identity] }\n\
         rule fresh_identity for payout { require called_within(verify_identity, turns: 2) }\n",
    );
    let results = check_policy(&fixed, Some(("inv.gate", inv)), &CONFIG).unwrap();
    assert!(result(&results, "recent_check").passed(), "{results:?}");
}

/// The two mistakes issue 15 reports the search found only at 512 and 20,000 cases (an
/// unanchored domain check, and a case-insensitive one against a case-sensitive invariant)
/// are caught within a budget of 24. A regression guard for the search's regex guidance: with
/// the literal seeds switched off it still passes (the patterns' own generated strings find
/// both), so this does not isolate the seeds; `diff.rs` tests the seeds themselves.
#[test]
fn loose_patterns_are_caught_within_a_small_budget() {
    let tiny = Config { cases: 24, seed: 7 };
    let inv = "invariants for mail\ninvariant internal_only {\n  never allow send_email unless args.to matches \"@ourcompany\\\\.com$\"\n}\n";
    for (loose, why) in [
        ("\"@ourcompany\"", "unanchored"),
        ("\"(?i)@ourcompany\\\\.com$\"", "case-insensitive"),
    ] {
        let policy = compile(&format!(
            "module mail\nwrite send_email\nstage main {{ tools [send_email] }}\n\
             rule internal for send_email {{ require args.to matches {loose} }}\n"
        ));
        let results = check_policy(&policy, Some(("inv.gate", inv)), &tiny).unwrap();
        let r = result(&results, "internal_only");
        let cx = r
            .counterexample
            .as_ref()
            .unwrap_or_else(|| panic!("{why} pattern not caught in {} cases: {r:?}", r.cases));
        let json = cx.request_json();
        assert!(
            policy.decide_json(&json).unwrap().decisions[cx.call].allow,
            "{json}"
        );
    }
}

/// An invariant about provenance breaks with a request whose outputs show the value as
/// untrusted: the search plants argument values in generated `facts.outputs` for a policy
/// that reads provenance, so the counterexample is the attack itself (before, it was a
/// request with no outputs at all, broken only because an unknown `when` counts).
#[test]
fn a_provenance_invariant_breaks_with_the_value_in_an_untrusted_output() {
    let policy = compile(
        "module m\nwrite send\ningest fetch\nstage main { tools [send, fetch] }\n\
         rule to_only for send { require args.to not from ingest }\n\
         invariant no_injected_cc { never allow send when args.cc from ingest }\n",
    );
    let results = check_policy(&policy, None, &CONFIG).unwrap();
    let cx = result(&results, "no_injected_cc")
        .counterexample
        .as_ref()
        .expect("cc is never checked");
    let cc = cx.request.calls[cx.call].args["cc"].to_string();
    let outputs = cx.request.facts.outputs.as_ref().expect("outputs planted");
    assert!(outputs.to_string().contains(&cc), "{outputs}");

    // With the rule for cc as well, the invariant holds over the generated outputs.
    let fixed = compile(
        "module m\nwrite send\ningest fetch\nstage main { tools [send, fetch] }\n\
         rule to_only for send { require args.to not from ingest  require args.cc not from ingest }\n\
         invariant no_injected_cc { never allow send when args.cc from ingest }\n",
    );
    let results = check_policy(&fixed, None, &CONFIG).unwrap();
    assert!(results.iter().all(InvariantResult::passed), "{results:?}");
}
