//! `use` imports and the standard library of rule modules (`stdlib-rules/lib/`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;
use toolgate_engine::{
    Call, DenyKind, Facts, ImportTarget, ModuleText, Policy, Request, Severity, STDLIB,
};
use toolgate_tests::{compile, repo_root};

fn deny_of(policy: &Policy, request: &Request, i: usize) -> (DenyKind, String, String) {
    let d = &policy.decide(request).decisions[i];
    assert!(!d.allow, "call {i} should be denied: {d:?}");
    (
        d.kind.expect("a denial has a kind"),
        d.rule.as_deref().unwrap_or_default().to_string(),
        d.reason.as_deref().unwrap_or_default().to_string(),
    )
}

fn call(id: &str, tool: &str) -> Call {
    Call::new(id, tool, json!({}))
}

/// A resolver over an in-memory map of files, for file imports without I/O.
fn files(
    map: &'static [(&'static str, &'static str)],
) -> impl Fn(&ImportTarget<'_>) -> Result<ModuleText, toolgate_engine::ImportError> {
    move |t| match t {
        ImportTarget::File { path, .. } => map
            .iter()
            .find(|(p, _)| p == path)
            .map(|(p, text)| ModuleText {
                name: (*p).to_string(),
                text: (*text).to_string(),
            })
            .ok_or_else(|| toolgate_engine::ImportError::Other(format!("no file `{path}`"))),
        ImportTarget::Stdlib(_) => toolgate_engine::resolve_stdlib(t),
    }
}

#[test]
fn the_embedded_stdlib_is_the_copy_on_disk_and_every_module_compiles() {
    let dir = repo_root().join("stdlib-rules/lib");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .expect("stdlib-rules/lib exists")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".gate") && !n.ends_with(".invariants.gate"))
        .collect();
    on_disk.sort();
    let mut embedded: Vec<String> = STDLIB.iter().map(|(n, _)| format!("{n}.gate")).collect();
    embedded.sort();
    assert_eq!(
        on_disk, embedded,
        "every module on disk is embedded, and only those"
    );
    for (name, text) in STDLIB {
        let disk = std::fs::read_to_string(dir.join(format!("{name}.gate"))).expect("readable");
        assert_eq!(&disk, text, "embedded `{name}` differs from the file");
        let policy = Policy::compile(&format!("{name}.gate"), text)
            .unwrap_or_else(|e| panic!("`{name}` does not compile:\n{}", e.render()));
        assert_eq!(
            policy.module(),
            *name,
            "a module's `module` line is its stdlib name"
        );
        assert!(
            text.starts_with("// stdlib::"),
            "`{name}` starts with its header comment"
        );
        assert_eq!(policy.stages().count(), 0);
        assert_eq!(policy.tools().count(), 0);
    }
}

const LATCH_APP: &str = "module app
use stdlib::untrusted_content_latch
write  grade
ingest search
read   lookup
stage main { tools [grade, search, lookup] }
";

#[test]
fn the_untrusted_content_latch_blocks_writes_whatever_the_order() {
    let p = compile(LATCH_APP);
    let req = Request::new(
        Facts::in_stage("main"),
        vec![call("1", "grade"), call("2", "search"), call("3", "lookup")],
    );
    let (kind, rule, reason) = deny_of(&p, &req, 0);
    assert_eq!(kind, DenyKind::Latch);
    assert_eq!(rule, "untrusted_content");
    assert!(
        reason.starts_with("Blocked by design: this turn has read untrusted third-party content")
    );
    assert!(reason.contains("This did NOT happen."));
    let r = p.decide(&req);
    assert!(r.decisions[1].allow && r.decisions[2].allow);
    // Without the ingest the write runs.
    let clean = Request::new(Facts::in_stage("main"), vec![call("1", "grade")]);
    assert!(p.decide(&clean).decisions[0].allow);
    // The module's invariant travels with it.
    assert!(p
        .invariants()
        .names()
        .any(|n| n == "no_write_after_untrusted_content"));
}

const EGRESS_APP: &str = "module app
use stdlib::exfiltration_guard
egress send_email
write  update_notes
ingest fetch_page
stage main { tools [send_email, update_notes, fetch_page] }
";

#[test]
fn the_exfiltration_guard_blocks_egress_only_once_untrusted_content_is_in_the_turn() {
    let p = compile(EGRESS_APP);
    let req = Request::new(
        Facts::in_stage("main"),
        vec![
            call("1", "send_email"),
            call("2", "update_notes"),
            call("3", "fetch_page"),
        ],
    );
    let (kind, rule, reason) = deny_of(&p, &req, 0);
    assert_eq!((kind, rule.as_str()), (DenyKind::Latch, "untrusted_egress"));
    assert!(reason.contains("send data outside"));
    let r = p.decide(&req);
    assert!(r.decisions[1].allow, "a plain write is not outward");
    let clean = Request::new(Facts::in_stage("main"), vec![call("1", "send_email")]);
    assert!(p.decide(&clean).decisions[0].allow);
    assert_eq!(
        p.class_of("send_email"),
        Some(toolgate_engine::ToolClass::Egress)
    );
}

#[test]
fn egress_is_a_kind_of_write_for_latches_rules_and_invariants() {
    let p = compile(&format!(
        "{LATCH_APP}egress post\nstage out {{ tools [post, search] }}\n"
    ));
    let req = Request::new(
        Facts::in_stage("out"),
        vec![call("1", "post"), call("2", "search")],
    );
    let (kind, rule, _) = deny_of(&p, &req, 0);
    assert_eq!(
        (kind, rule.as_str()),
        (DenyKind::Latch, "untrusted_content")
    );
}

#[test]
fn a_guard_over_a_class_the_policy_never_uses_warns_on_the_use_line() {
    let p = compile(
        "module app\nuse stdlib::exfiltration_guard\nwrite w\ningest i\nstage s { tools [w, i] }\n",
    );
    let w: Vec<_> = p
        .warnings()
        .iter()
        .filter(|d| d.message.contains("egress"))
        .collect();
    assert_eq!(w.len(), 1, "{:?}", p.warnings());
    assert_eq!(w[0].severity, Severity::Warning);
    assert_eq!(p.source().location(w[0].span.start), "test.gate:2:1");
    assert!(w[0]
        .message
        .contains("`stdlib::exfiltration_guard` applies to `egress` tools"));
}

#[test]
fn a_name_clash_is_an_error_with_both_locations() {
    let src = "module app\nuse stdlib::untrusted_content_latch\nwrite w\ningest i\nstage s { tools [w, i] }\nlatch untrusted_content { set_by i blocks w }\n";
    let err = Policy::compile("app.gate", src).expect_err("a clash does not compile");
    let out = err.render();
    assert!(
        out.contains("app.gate:6:7: error: latch `untrusted_content` is declared twice"),
        "{out}"
    );
    let module = toolgate_engine::stdlib_module("untrusted_content_latch").unwrap_or_default();
    let line = module
        .lines()
        .position(|l| l.starts_with("latch untrusted_content"))
        .expect("the module declares the latch")
        + 1;
    assert!(
        out.contains(&format!(
            "stdlib::untrusted_content_latch:{line}:7: note: first declared here"
        )),
        "{out}"
    );
    assert!(
        out.contains("^^^^^^^^^^^^^^^^^ declared again here"),
        "{out}"
    );
}

#[test]
fn two_modules_declaring_the_same_host_list_clash_too() {
    let resolve = files(&[(
        "mine.gate",
        "module mine\nhosts aws_docs { allow [\"example.com\"] }\n",
    )]);
    let src = "module app\nuse stdlib::vendor_docs\nuse \"mine.gate\"\n";
    let err = Policy::compile_with("app.gate", src, &resolve).expect_err("clash");
    let out = err.render();
    assert!(
        out.contains("mine.gate:2:7: error: host list `aws_docs` is declared twice"),
        "{out}"
    );
    assert!(out.contains("stdlib::vendor_docs:"), "{out}");
}

#[test]
fn unknown_modules_and_items_are_located_errors() {
    let err = Policy::compile("a.gate", "module a\nuse stdlib::nope\n").expect_err("unknown");
    let out = err.render();
    assert!(
        out.contains("a.gate:2:1: error: cannot import `stdlib::nope`"),
        "{out}"
    );
    assert!(
        out.contains("`untrusted_content_latch`"),
        "the hint lists the modules: {out}"
    );
    let err = Policy::compile("a.gate", "module a\nuse stdlib::vendor_docs::gitlab_docs\n")
        .expect_err("unknown item");
    assert!(err.render().contains("a.gate:2:26: error: module `stdlib::vendor_docs` declares no latch, host list, rule or invariant `gitlab_docs`"), "{}", err.render());
    let err =
        Policy::compile("a.gate", "module a\nuse \"x.gate\"\n").expect_err("no file resolver");
    assert!(
        err.render().contains("Policy::compile_with"),
        "{}",
        err.render()
    );
}

#[test]
fn a_module_may_not_classify_tools_or_declare_stages() {
    let resolve = files(&[("bad.gate", "module bad\nwrite payout\nstage s {}\n")]);
    let err = Policy::compile_with("app.gate", "module app\nuse \"bad.gate\"\n", &resolve)
        .expect_err("refused");
    let out = err.render();
    assert!(
        out.contains("app.gate:2:1: error: module `bad.gate` classifies tools"),
        "{out}"
    );
    assert!(out.contains("bad.gate:2:1: note: here"), "{out}");
    assert!(out.contains("module `bad.gate` declares a stage"), "{out}");
}

#[test]
fn errors_inside_a_module_point_into_the_module() {
    let resolve = files(&[(
        "m.gate",
        "module m\nrule r for write {\n  require args.x = 1\n}\n",
    )]);
    let err = Policy::compile_with("app.gate", "module app\nuse \"m.gate\"\n", &resolve)
        .expect_err("syntax error");
    let out = err.render();
    assert!(out.contains("m.gate:3:18: error: expected"), "{out}");
    assert!(
        out.contains("app.gate:2:1: error: module `m.gate` does not parse"),
        "{out}"
    );
}

#[test]
fn modules_importing_each_other_are_brought_in_once() {
    let resolve = files(&[
        (
            "a.gate",
            "module a\nuse \"b.gate\"\nlatch la { set_by ingest blocks write }\n",
        ),
        (
            "b.gate",
            "module b\nuse \"a.gate\"\nlatch lb { set_by ingest blocks write }\n",
        ),
    ]);
    let src =
        "module app\nuse \"a.gate\"\nuse \"b.gate\"\nwrite w\ningest i\nstage s { tools [w, i] }\n";
    let p = Policy::compile_with("app.gate", src, &resolve)
        .unwrap_or_else(|e| panic!("{}", e.render()));
    assert_eq!(p.latches().collect::<Vec<_>>(), ["lb", "la"]);
}

#[test]
fn money_preconditions_apply_to_the_tools_named_in_the_import() {
    let p = compile(
        "module shop
use stdlib::money_preconditions::receipt_received for [confirm_payment, refund]
write confirm_payment, refund, book
stage chat { tools [confirm_payment, refund, book] }
",
    );
    assert_eq!(p.rules().collect::<Vec<_>>(), ["receipt_received"]);
    let req = Request::from_json(
        &json!({
            "facts": {"stage": "chat",
                      "messages": [{"from": "client"}, {"from": "assistant", "media": ["image"]}]},
            "calls": [{"id": "1", "tool": "confirm_payment"}, {"id": "2", "tool": "refund"},
                      {"id": "3", "tool": "book"}]
        })
        .to_string(),
    )
    .expect("a valid request");
    let (kind, rule, reason) = deny_of(&p, &req, 0);
    assert_eq!(
        (kind, rule.as_str()),
        (DenyKind::Precondition, "receipt_received")
    );
    assert!(reason.contains(
        "in their last 10 messages. This did NOT happen. Do not tell the customer it did."
    ));
    assert!(!p.decide(&req).decisions[1].allow);
    assert!(
        p.decide(&req).decisions[2].allow,
        "book was not named in the import"
    );
    // Facts that cannot be read: the precondition fails open, and says so.
    let open = Request::new(Facts::in_stage("chat"), vec![call("1", "confirm_payment")]);
    let d = &p.decide(&open).decisions[0];
    assert!(d.allow && d.fail_open);
}

#[test]
fn the_revision_covers_the_imported_modules() {
    let a = files(&[(
        "m.gate",
        "module m\nlatch l { set_by ingest blocks write }\n",
    )]);
    let b = files(&[(
        "m.gate",
        "module m\nlatch l { set_by ingest blocks [write, read] }\n",
    )]);
    let src =
        "module app\nuse \"m.gate\"\nwrite w\nread r\ningest i\nstage s { tools [w, r, i] }\n";
    let pa = Policy::compile_with("app.gate", src, &a).expect("compiles");
    let pb = Policy::compile_with("app.gate", src, &b).expect("compiles");
    assert_ne!(pa.revision(), pb.revision());
    assert_eq!(pa.source().own_text(), src);
}

#[test]
fn every_vendor_docs_entry_matches_its_host_and_nothing_that_imitates_it() {
    let module = toolgate_engine::stdlib_module("vendor_docs").expect("shipped");
    let hosts: Vec<&str> = module
        .lines()
        .filter_map(|l| l.trim().strip_prefix('"'))
        .filter_map(|l| l.split('"').next())
        .collect();
    assert!(hosts.len() >= 6, "{hosts:?}");
    assert!(hosts.contains(&"docs.aws.amazon.com") && hosts.contains(&"developers.cloudflare.com"));
    let p = compile("module app\nuse stdlib::vendor_docs\ningest fetch\nstage s { tools [fetch] }\nrule docs for fetch { require args.url in hosts vendor_docs }\n");
    for host in hosts {
        let judge = |url: String| {
            let req = Request::new(
                Facts::in_stage("s"),
                vec![Call::new("1", "fetch", json!({ "url": url }))],
            );
            p.decide(&req).decisions[0].allow
        };
        assert!(judge(format!("https://{host}/docs/x")), "{host} is allowed");
        assert!(
            judge(format!("https://{}/", host.to_uppercase())),
            "{host} in capitals"
        );
        assert!(
            !judge(format!("https://{host}.evil.example/")),
            "{host} look-alike"
        );
        assert!(
            !judge(format!("https://evil.{host}/")),
            "{host}: no wildcard subdomains"
        );
        assert!(!judge(format!("http://{host}/")), "{host}: https only");
    }
}

#[test]
fn fmt_formats_use_lines_and_keeps_their_meaning() {
    let messy = "module app\nuse   stdlib::money_preconditions::receipt_received   for [ a,b ]\nuse \"x.gate\"\nwrite a, b\n";
    let out = toolgate_lang::format_source("app.gate", messy).expect("formats");
    assert_eq!(
        out,
        "module app\n\nuse stdlib::money_preconditions::receipt_received for [a, b]\nuse \"x.gate\"\nwrite a, b\n"
    );
    assert_eq!(
        toolgate_lang::format_source("app.gate", &out).expect("formats"),
        out
    );
}
