//! `toolgate diff`: what a new policy allows that the old one denied. Every widening's request
//! is replayed through both policies, so a reported change is a real one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use toolgate_engine::{Policy, PolicySet};
use toolgate_prove::guide::regex_seeds;
use toolgate_prove::{diff, diff_sets, Change, Config, PolicyDiff};
use toolgate_tests::{compile, example_path};

const CONFIG: Config = Config {
    cases: 512,
    seed: 42,
};

fn coach() -> String {
    std::fs::read_to_string(example_path("coach")).unwrap()
}

/// Whether `policy` allows the changed call of `change`'s request (a refused request counts
/// as denied, as it does for a client).
fn allows(policy: &Policy, change: &Change) -> bool {
    policy.check_request(&change.request).is_ok()
        && policy.decide(&change.request).decisions[change.call].allow
}

/// Diffs and checks every reported change by replaying its request.
fn checked_diff(old: &Policy, new: &Policy) -> PolicyDiff {
    let d = diff(old, new, &CONFIG);
    for w in &d.widenings {
        assert!(allows(new, w) && !allows(old, w), "not a widening: {w:?}");
    }
    for n in &d.narrowings {
        assert!(allows(old, n) && !allows(new, n), "not a narrowing: {n:?}");
    }
    d
}

fn summaries(changes: &[Change]) -> Vec<String> {
    changes.iter().map(Change::summary).collect()
}

#[test]
fn every_example_against_itself_has_no_change_and_searches_nothing() {
    for name in [
        "coach",
        "coding_agent",
        "messenger_payments",
        "motor_claims",
        "support_desk",
    ] {
        let text = std::fs::read_to_string(example_path(name)).unwrap();
        let (a, b) = (compile(&text), compile(&text));
        let d = checked_diff(&a, &b);
        assert!(d.widenings.is_empty() && d.narrowings.is_empty(), "{name}");
        assert!(d.requests > 0);
        assert_eq!(d.searched, 0, "{name}: identical rules need no search");
    }
}

#[test]
fn a_truncated_coach_loses_the_latch_and_the_host_allowlist() {
    let full = coach();
    let prefix = &full[..full.find("latch documentation_read").unwrap()];
    let d = checked_diff(&compile(&full), &compile(prefix));
    let s = summaries(&d.widenings);
    assert!(
        s.iter()
            .any(|l| l.starts_with("`grade_attempt` in stage `coach`")
                && l.contains("(ingest) in the same batch")
                && l.ends_with("OLD latch `documentation_read`, NEW allowed")),
        "{s:#?}"
    );
    assert!(
        s.iter()
            .any(|l| l.contains("`fetch_vendor_doc`") && l.contains("OLD rule `vendor_doc_host`")),
        "{s:#?}"
    );
    assert!(d.narrowings.is_empty());
    // The other way round it is all narrowing.
    let back = checked_diff(&compile(prefix), &compile(&full));
    assert!(back.widenings.is_empty());
    assert!(!back.narrowings.is_empty());
}

#[test]
fn a_host_added_to_an_allowlist_is_found_by_the_search() {
    let full = coach();
    let wider = full.replace(
        "\"developers.cloudflare.com\"]",
        "\"developers.cloudflare.com\", \"pastebin.com\"]",
    );
    let d = checked_diff(&compile(&full), &compile(&wider));
    assert_eq!(d.widenings.len(), 1, "{:#?}", summaries(&d.widenings));
    let w = &d.widenings[0];
    assert!(w.searched);
    assert_eq!(w.tool, "fetch_vendor_doc");
    let url = w.request.calls[0].args["url"]
        .as_str()
        .unwrap()
        .to_lowercase();
    assert!(url.contains("pastebin.com"), "{url}");
    let back = checked_diff(&compile(&wider), &compile(&full));
    assert!(back.widenings.is_empty());
    assert_eq!(back.narrowings.len(), 1);
}

#[test]
fn a_tool_added_to_a_stage_or_newly_classified_widens_exactly() {
    let old = "module m\nwrite pay\nread look\nstage a { tools [look] }\n";
    let added = "module m\nwrite pay\nread look\nstage a { tools [look, pay] }\n";
    let d = checked_diff(&compile(old), &compile(added));
    let s = summaries(&d.widenings);
    assert!(
        s.contains(&"`pay` in stage `a`: OLD stage `a`, NEW allowed".to_string()),
        "{s:#?}"
    );
    assert!(d.widenings.iter().all(|w| !w.searched));

    let classified = "module m\nwrite pay, wire\nread look\nstage a { tools [look, wire] }\n";
    let d = checked_diff(&compile(old), &compile(classified));
    let s = summaries(&d.widenings);
    assert!(
        s.contains(&"`wire` in stage `a`: OLD unclassified, NEW allowed".to_string()),
        "{s:#?}"
    );
}

#[test]
fn a_raised_turn_limit_widens_at_the_turns_between() {
    let old = "module m\nread look\nstage a { tools [look] max_turns 3 }\n";
    let new = "module m\nread look\nstage a { tools [look] max_turns 5 }\n";
    let d = checked_diff(&compile(old), &compile(new));
    let s = summaries(&d.widenings);
    assert!(
        s.iter()
            .any(|l| l.contains("at turn 4") && l.ends_with("NEW allowed")),
        "{s:#?}"
    );
}

#[test]
fn a_latch_renamed_is_no_change_unless_it_stops_blocking() {
    let full = coach();
    let renamed = full.replace("documentation_read", "docs_read");
    let d = checked_diff(&compile(&full), &compile(&renamed));
    assert!(d.widenings.is_empty() && d.narrowings.is_empty());
    let weakened = renamed.replace("blocks write", "blocks read");
    let d = checked_diff(&compile(&full), &compile(&weakened));
    let s = summaries(&d.widenings);
    assert!(
        s.iter()
            .any(|l| l.contains("`update_memory`") && l.ends_with("NEW allowed")),
        "{s:#?}"
    );
}

#[test]
fn a_latch_moved_between_two_latches_widens_under_the_one_set() {
    // OLD: `pay` is blocked by `a`; NEW: by `b`. With only `a` set, NEW allows what OLD denied;
    // with every latch set both deny, so the single-latch states are needed to see it.
    let head =
        "module m\nwrite pay\ningest fetch\nread look\nstage s { tools [pay, fetch, look] }\n";
    let old = format!(
        "{head}latch a {{ set_by fetch blocks pay }}\nlatch b {{ set_by look blocks fetch }}\n"
    );
    let new = format!(
        "{head}latch a {{ set_by fetch blocks fetch }}\nlatch b {{ set_by look blocks pay }}\n"
    );
    let d = checked_diff(&compile(&old), &compile(&new));
    let s = summaries(&d.widenings);
    assert!(
        s.iter().any(|l| l.starts_with("`pay`")
            && l.contains("OLD latch `a`")
            && l.ends_with("NEW allowed")),
        "{s:#?}"
    );
}

#[test]
fn an_added_module_widens_a_set_and_a_removed_one_narrows_it() {
    let a = compile("module a\nread look\nstage s { tools [look] }\n");
    let b = compile("module b\nread look\nstage s { tools [look] }\n");
    let a2 = compile("module a\nread look\nstage s { tools [look] }\n");
    let old = PolicySet::new(vec![a], 0).unwrap();
    let new = PolicySet::new(vec![a2, b], 1).unwrap();
    let d = diff_sets(&old, &new, &CONFIG);
    assert!(d.widens());
    assert_eq!(d.added, vec!["b".to_string()]);
    let back = diff_sets(&new, &old, &CONFIG);
    assert!(!back.widens());
    assert_eq!(back.removed, vec!["b".to_string()]);
    let json = back.to_json();
    assert_eq!(json["widens"], false);
}

#[test]
fn regex_seeds_are_the_literals_in_every_case() {
    let seeds = regex_seeds("^[a-z]+@ourcompany\\.com$");
    for want in [
        "@ourcompany.com",
        "@OURCOMPANY.COM",
        "@Ourcompany.com",
        "a@ourcompany.com",
    ] {
        assert!(seeds.iter().any(|s| s == want), "{want} not in {seeds:?}");
    }
    assert!(regex_seeds("(unclosed").is_empty());
}

fn example(name: &str) -> String {
    std::fs::read_to_string(example_path(name)).unwrap()
}

/// Replaces `from` (which must occur) in `text`.
fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "{from}");
    text.replacen(from, to, 1)
}

#[test]
fn a_weakened_built_in_precondition_is_a_widening_found_by_driving_the_facts() {
    // Each of these rules allows the empty call on both sides (built-ins fail open), which
    // the old search never started from.
    let base = example("messenger_payments");
    for (from, to, tool) in [
        ("within: 10, kinds", "within: 50, kinds", "confirm_payment"),
        (
            "min_client_messages(2)",
            "min_client_messages(1)",
            "book_slot",
        ),
        (
            "called_before(verify_identity)",
            "called_before(lookup_lead)",
            "modify_booking",
        ),
    ] {
        let d = checked_diff(&compile(&base), &compile(&edit(&base, from, to)));
        assert!(
            d.widenings.iter().any(|w| w.tool == tool && w.searched),
            "{from} -> {to}: {:#?} {:#?}",
            summaries(&d.widenings),
            d.undecided
        );
        // The other way round a window or count is proved; a tool swapped widens both ways.
        let back = checked_diff(&compile(&edit(&base, from, to)), &compile(&base));
        let swapped = from.starts_with("called_before");
        assert_eq!(
            back.widenings.is_empty() && back.undecided.is_empty(),
            !swapped,
            "{from}"
        );
    }
}

#[test]
fn a_comment_inside_in_hosts_cannot_detach_the_list_from_the_rule() {
    let full = coach();
    let commented = edit(
        &full,
        "require args.url in hosts vendor_docs",
        "require args.url in hosts // the vendors we trust\n    vendor_docs",
    );
    let same = checked_diff(&compile(&full), &compile(&commented));
    assert!(same.widenings.is_empty() && same.undecided.is_empty());
    assert_eq!(same.searched, 0, "the compiled rules are the same");
    let wider = edit(
        &commented,
        "\"developers.cloudflare.com\"]",
        "\"developers.cloudflare.com\", \"pastebin.com\"]",
    );
    let d = checked_diff(&compile(&commented), &compile(&wider));
    assert_eq!(d.widenings.len(), 1, "{:#?}", summaries(&d.widenings));
}

#[test]
fn a_multiline_flag_on_a_regex_is_found_from_the_proofs_own_string() {
    let base = example("motor_claims");
    let wider = edit(&base, "\"^POL-[0-9]{6}$\"", "\"(?m)^POL-[0-9]{6}$\"");
    let d = checked_diff(&compile(&base), &compile(&wider));
    let w = d
        .widenings
        .iter()
        .find(|w| w.tool == "authorise_bacs_payout")
        .unwrap_or_else(|| panic!("{:#?} {:#?}", summaries(&d.widenings), d.undecided));
    let policy = w.request.calls[w.call].args["policy"].as_str().unwrap();
    assert!(policy.contains('\n'), "{policy:?}");
}

#[test]
fn a_vault_kind_widened_or_re_sanitising_dropped_is_a_data_widening() {
    let base = example("motor_claims");
    let any = edit(&base, "args.sort_code: SORT_CODE", "args.sort_code: any");
    let d = diff(&compile(&base), &compile(&any), &CONFIG);
    assert_eq!(
        d.data_widenings,
        ["`authorise_bacs_payout` may unwrap vault tokens of any kind at `args.sort_code`"]
    );
    let set = |p: Policy| PolicySet::new(vec![p], 0).unwrap();
    let sets = diff_sets(&set(compile(&base)), &set(compile(&any)), &CONFIG);
    assert!(sets.widens() && sets.found_widening());
    assert!(sets.widening_lines().iter().any(|l| l.contains("any kind")));
    assert!(diff(&compile(&any), &compile(&base), &CONFIG)
        .data_widenings
        .is_empty());
}

#[test]
fn a_change_neither_proved_nor_shown_is_undecided_and_held() {
    let policy = |req: &str| {
        compile(&format!(
            "module m\nwrite pay\nstage s {{ tools [pay] }}\nrule policy_code for pay {{\n  require {req}\n}}\n"
        ))
    };
    // The anchored pattern admits only what the old one does, but a Unicode `\b` cannot be
    // decided on a DFA, and no call shows a change: undecided.
    let old = policy("args.code matches \"\\\\bPOL\\\\b\"");
    let new = policy("args.code matches \"^\\\\bPOL\\\\b$\"");
    let d = checked_diff(&old, &new);
    assert!(d.widenings.is_empty());
    assert_eq!(d.undecided.len(), 1, "{:#?}", d.undecided);
    let u = &d.undecided[0];
    assert_eq!(u.tool, "pay");
    assert_eq!(u.rule.as_deref(), Some("`policy_code`"));
    let set = |p: Policy| PolicySet::new(vec![p], 0).unwrap();
    let sets = diff_sets(&set(old), &set(new), &CONFIG);
    assert!(sets.widens());
    let lines = sets.widening_lines();
    assert!(
        lines[0].starts_with("m: undecided: `pay` in stage `s`"),
        "{lines:?}"
    );
    assert!(sets.render().contains("undecided: `pay`"));
}

/// A requirement on where a value came from, dropped while another provenance test stays:
/// without `facts.outputs` both policies deny (unknown), with outputs that hold nothing both
/// allow, so only outputs that hold the dropped argument's value show the widening. The
/// search plants argument values in generated outputs and the prompt for a policy that reads
/// provenance; before, it generated none and the change was only "undecided" (held, with no
/// request to show).
#[test]
fn a_dropped_provenance_requirement_is_found_with_outputs_that_show_it() {
    let old = "module m\nwrite send\ningest fetch\nstage main { tools [send, fetch] }\nrule safe_send for send {\n  require args.to == \"boss@corp.example\"\n  require args.to not from ingest\n  require args.cc not from ingest\n}\n";
    let new = old.replace("  require args.cc not from ingest\n", "");
    let d = checked_diff(&compile(old), &compile(&new));
    assert!(d.undecided.is_empty(), "{:?}", d.undecided);
    let [w] = d.widenings.as_slice() else {
        panic!("one widening expected: {:?}", summaries(&d.widenings));
    };
    assert!(w.searched);
    let cc = w.request.calls[w.call].args["cc"].clone();
    let outputs = w
        .request
        .facts
        .outputs
        .as_ref()
        .expect("the witness carries outputs");
    assert!(
        outputs.to_string().contains(&cc.to_string()),
        "the dropped argument's value is in an untrusted output: {outputs}"
    );
    let denied = compile(old).decide(&w.request).decisions[w.call].clone();
    assert_eq!(
        denied.kind,
        Some(toolgate_engine::DenyKind::Provenance),
        "{denied:?}"
    );

    // The other way, the requirement added back is a narrowing with such outputs too.
    let back = checked_diff(&compile(&new), &compile(old));
    assert!(
        back.widenings.is_empty() && back.undecided.is_empty(),
        "{back:?}"
    );
    assert_eq!(
        back.narrowings.len(),
        1,
        "{:?}",
        summaries(&back.narrowings)
    );

    // A value the user typed as well is vouched for: the prompt is planted too, and a
    // policy that accepts `from prompt` is told apart from one that does not.
    let strict = "module m\nwrite send\ningest fetch\nstage main { tools [send, fetch] }\nrule r for send {\n  require args.to not from ingest\n}\n";
    let lenient = strict.replace(
        "args.to not from ingest",
        "args.to not from ingest or args.to from prompt",
    );
    let d = checked_diff(&compile(strict), &compile(&lenient));
    assert!(d.widenings.is_empty(), "{:?}", summaries(&d.widenings));
    let d = checked_diff(&compile(&lenient), &compile(strict));
    assert!(d.widenings.is_empty() && d.undecided.is_empty(), "{d:?}");
}
