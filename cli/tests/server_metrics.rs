//! `/metrics` follows Prometheus naming (issue 16 section 3): counters end in `_total`,
//! histograms are in `_seconds`, every sample has a `# TYPE`, no label is per session, and
//! `toolgate_policy_info{policy,revision}` names what is serving.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::server_support::*;

use serde_json::json;
use std::collections::HashMap;

/// Labels that would make one series per session, turn, call or decision.
const PER_REQUEST_LABELS: [&str; 5] = ["session", "turn", "call", "id", "decision_id"];

/// Checks the naming rules; returns each family's type.
fn check_names(text: &str) -> HashMap<String, String> {
    let mut types = HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            match kind {
                "counter" => assert!(name.ends_with("_total"), "counter {name} lacks _total"),
                "histogram" => assert!(
                    name.ends_with("_seconds"),
                    "histogram {name} is not in _seconds"
                ),
                "gauge" => assert!(
                    !name.ends_with("_total"),
                    "gauge {name} is named like a counter"
                ),
                other => panic!("{name}: unexpected type {other}"),
            }
            assert!(name.starts_with("toolgate_"), "{name}");
            assert!(
                types.insert(name.to_string(), kind.to_string()).is_none(),
                "{name} twice"
            );
        }
    }
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name = line.split(['{', ' ']).next().unwrap();
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        assert!(types.contains_key(family), "{name} has no # TYPE");
        if let Some(labels) = line
            .split_once('{')
            .map(|(_, l)| l.split_once('}').unwrap().0)
        {
            for pair in labels.split("\",") {
                let key = pair.split('=').next().unwrap();
                assert!(
                    !PER_REQUEST_LABELS.contains(&key),
                    "{line}: per-request label {key}"
                );
            }
        }
    }
    types
}

#[test]
fn metrics_follow_prometheus_naming_and_name_the_serving_revision() {
    let s = start(
        "metrics-names",
        &[("gate.gate", POLICY_A)],
        &["--poll-ms", "0"],
    );
    let session_call = json!({"session": "s", "turn": "t", "facts": {"stage": "main"},
                              "calls": [{"id": "c", "tool": "send", "args": {}}]});
    let (st, _) = post_json(&s.addr, "/v1/decide", &session_call);
    assert_eq!(st, 200);
    let (_, text) = http(&s.addr, "GET", "/metrics", &[], b"");
    let types = check_names(&text);
    assert_eq!(
        types.get("toolgate_policy_info").map(String::as_str),
        Some("gauge")
    );
    assert_eq!(
        types.get("toolgate_decide_seconds").map(String::as_str),
        Some("histogram")
    );
    let revision = |addr: &str| {
        let (_, v) = get_json(addr, "/v1/policies");
        v["policies"][0]["revision"].as_str().unwrap().to_string()
    };
    let first = revision(&s.addr);
    let info = |rev: &str| format!("toolgate_policy_info{{policy=\"gate\",revision=\"{rev}\"}}");
    assert_eq!(metric(&text, &info(&first)), Some(1.0), "{text}");
    // A reload replaces the series: only the revision serving now is listed.
    std::fs::write(s.dir.join("gate.gate"), POLICY_B).unwrap();
    let (st, v) = http(&s.addr, "POST", "/v1/reload", &[], b"");
    assert_eq!(st, 200, "{v}");
    let second = revision(&s.addr);
    assert_ne!(first, second);
    let (_, text) = http(&s.addr, "GET", "/metrics", &[], b"");
    check_names(&text);
    assert_eq!(metric(&text, &info(&second)), Some(1.0), "{text}");
    assert_eq!(metric(&text, &info(&first)), None, "{text}");
    assert_eq!(text.matches("toolgate_policy_info{").count(), 1, "{text}");
}

#[test]
fn shadow_metrics_follow_the_same_naming() {
    let shadow = temp_dir("metrics-shadow-set");
    std::fs::write(shadow.join("gate.gate"), POLICY_B).unwrap();
    let s = start(
        "metrics-shadow",
        &[("gate.gate", POLICY_A)],
        &["--poll-ms", "0", "--shadow", shadow.to_str().unwrap()],
    );
    let (st, _) = post_json(&s.addr, "/v1/decide", &batch("send"));
    assert_eq!(st, 200);
    let (_, text) = http(&s.addr, "GET", "/metrics", &[], b"");
    let types = check_names(&text);
    for (name, kind) in [
        ("toolgate_shadow_flips_total", "counter"),
        ("toolgate_shadow_missing_total", "counter"),
        ("toolgate_shadow_batches_total", "counter"),
        ("toolgate_shadow_policies_loaded", "gauge"),
    ] {
        assert_eq!(types.get(name).map(String::as_str), Some(kind), "{name}");
    }
    // `send` is outside the shadow's stage: denied by the stage, named by it.
    let flip = r#"toolgate_shadow_flips_total{policy="gate",rule="main",from="allow",to="deny"}"#;
    assert_eq!(metric(&text, flip), Some(1.0), "{text}");
    let _ = std::fs::remove_dir_all(shadow);
}
