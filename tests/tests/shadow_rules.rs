//! Rules marked `shadow` (issue 26): judged and reported in `shadow_denials`, never denying,
//! invisible to the check order and the change gate treats marking a rule shadow as
//! dropping it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;
use toolgate_engine::{Policy, Request};
use toolgate_prove::{diff, Config};

const POLICY: &str = r#"module pay
write refund
stage main { tools [refund] }
rule cap for refund { require args.amount <= 500 }
rule stricter for refund {
  shadow
  require args.amount <= 100
  refusal "refunds over 100 need a manager"
}
rule gold_only for refund {
  shadow
  require facts.tier == "gold"
  on_missing allow
}
"#;

fn decide(p: &Policy, amount: f64, facts: serde_json::Value) -> toolgate_engine::Decision {
    let mut facts = facts;
    facts["stage"] = json!("main");
    let text = json!({"facts": facts, "calls": [{"id": "c", "tool": "refund", "args": {"amount": amount}}]}).to_string();
    let fast = p.decide_json(&text).unwrap();
    assert_eq!(fast, p.decide(&Request::from_json(&text).unwrap()));
    fast.decisions.into_iter().next().unwrap()
}

#[test]
fn a_shadow_rule_reports_what_it_would_deny_and_never_denies() {
    let p = Policy::compile("pay.gate", POLICY).unwrap();
    let d = decide(&p, 300.0, json!({}));
    assert!(d.allow);
    // `gold_only` is fail-open on the absent tier, as it would be if it decided.
    assert_eq!(
        d.shadow_denials.iter().map(|s| &**s).collect::<Vec<_>>(),
        ["stricter"]
    );
    let d = decide(&p, 300.0, json!({"tier": "silver"}));
    assert_eq!(d.shadow_denials.len(), 2);
    let d = decide(&p, 50.0, json!({"tier": "gold"}));
    assert!(d.allow && d.shadow_denials.is_empty());
    let shown = serde_json::to_value(&d).unwrap();
    assert!(shown.get("shadow_denials").is_none(), "{shown}");
    // A call denied by a deciding rule lists none: the shadow rule changes nothing there.
    let d = decide(&p, 900.0, json!({"tier": "silver"}));
    assert!(!d.allow && d.shadow_denials.is_empty());
    assert_eq!(d.rule.as_deref(), Some("cap"));
}

#[test]
fn a_shadow_rule_cannot_ask_and_is_written_once() {
    let ask = "module m\nwrite w\nstage main { tools [w] }\nrule r for w {\n  shadow\n  ask when args.x exists\n}\n";
    let err = Policy::compile("m.gate", ask).unwrap_err().to_string();
    assert!(err.contains("shadow rule `r` cannot ask"), "{err}");
    let twice = "module m\nwrite w\nstage main { tools [w] }\nrule r for w {\n  shadow\n  shadow\n  require true\n}\n";
    assert!(Policy::compile("m.gate", twice).is_err());
}

#[test]
fn fmt_keeps_shadow() {
    let messy = "module m\nwrite w\nstage main { tools [w] }\nrule r for w { shadow   require args.n <= 1 }\n";
    let out = toolgate_lang::format_source("m.gate", messy).unwrap();
    assert!(
        out.contains("rule r for w {\n  shadow\n  require args.n <= 1\n}"),
        "{out}"
    );
}

#[test]
fn marking_a_rule_shadow_is_a_widening_for_the_gate() {
    let deciding = POLICY.replace(
        "  shadow\n  require args.amount <= 100",
        "  require args.amount <= 100",
    );
    let old = Policy::compile("pay.gate", &deciding).unwrap();
    let new = Policy::compile("pay.gate", POLICY).unwrap();
    let d = diff(
        &old,
        &new,
        &Config {
            cases: 512,
            seed: 42,
        },
    );
    assert!(!d.widenings.is_empty(), "{d:?}");
    let w = &d.widenings[0];
    assert!(new.decide(&w.request).decisions[w.call].allow);
    assert!(!old.decide(&w.request).decisions[w.call].allow);
}
