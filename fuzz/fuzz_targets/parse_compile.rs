//! The parser and the compiler on arbitrary bytes: as `&str` when the bytes are UTF-8, and
//! always as their lossy UTF-8 form. Neither may panic or hang; a failure must carry at least
//! one error diagnostic that renders with the file name; a policy that compiles must judge a
//! batch of every tool in every stage (and in an undefined one) without breaking the
//! response's invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use toolgate_engine::{Call, Facts, Latched, Policy, Request};
use toolgate_fuzz::{check_order_independent, check_response};
use toolgate_lang::SourceFile;

fuzz_target!(|data: &[u8]| {
    match std::str::from_utf8(data) {
        Ok(text) => check(text),
        Err(_) => check(&String::from_utf8_lossy(data)),
    }
});

fn check(text: &str) {
    let parsed = toolgate_lang::parse(text);
    if let Err(diagnostics) = &parsed {
        assert!(diagnostics.iter().any(|d| d.is_error()), "{diagnostics:?}");
        let rendered = toolgate_lang::render_all(diagnostics, &SourceFile::new("fuzz.gate", text));
        assert!(rendered.contains("fuzz.gate:"), "{rendered}");
    }
    match Policy::compile("fuzz.gate", text) {
        Ok(policy) => {
            assert!(parsed.is_ok(), "compiled although the parser failed");
            for w in policy.warnings() {
                assert!(!w.render(policy.source()).is_empty());
            }
            judge_everything(&policy);
        }
        Err(e) => {
            assert!(e.errors().count() > 0, "a compile error with no errors");
            let rendered = e.render();
            assert!(rendered.contains("fuzz.gate:"), "{rendered}");
            assert!(!e.to_string().is_empty());
        }
    }
}

/// Every tool the policy classifies plus one it doesn't, in every stage plus an undefined one
/// and none, latched and not.
fn judge_everything(policy: &Policy) {
    let mut tools: Vec<String> = policy.tools().map(|(t, _)| t.to_string()).collect();
    tools.push("fuzz_unclassified_tool".to_string());
    let calls: Vec<Call> = tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            Call::new(
                format!("c{i}"),
                t.clone(),
                json!({"url": "https://example.com/", "amount": 1}),
            )
        })
        .collect();
    let mut stages: Vec<Option<String>> = policy.stages().map(|s| Some(s.to_string())).collect();
    stages.push(Some("fuzz_undefined_stage".to_string()));
    stages.push(None);
    for stage in stages {
        for latched in [false, true] {
            let facts = Facts {
                stage: stage.clone(),
                latched: Latched::Flag(latched),
                ..Facts::default()
            };
            let request = Request::new(facts, calls.clone());
            let r = policy.decide(&request);
            check_response(policy, &request, &r);
            check_order_independent(policy, &request, &r);
            if latched && policy.latches().next().is_some() {
                assert!(r.latched.any(), "latched: true in, false out");
            }
        }
    }
}
