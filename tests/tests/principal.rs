//! `principal.sub`, `principal.tenant`, `principal.claims.NAME`: rules that read who the
//! agent acts for, from `facts.principal`. Both request readers agree on its shape, an absent
//! principal denies, and the change gate searches it like any fact.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use toolgate_engine::{Policy, Request, RequestError};
use toolgate_prove::{diff, Config};

const ADMIN_ONLY: &str = r#"module users
write delete_user, rename_user
read list_users
stage main { tools [delete_user, rename_user, list_users] }
rule admins_delete for delete_user {
  require principal.claims.role == "admin"
  refusal "only an admin may delete a user"
}
rule own_tenant for [delete_user, rename_user] {
  require principal.tenant == "acme"
  refusal "only people of acme may change acme's users"
}
"#;

fn policy(text: &str) -> Policy {
    Policy::compile("users.gate", text).unwrap_or_else(|e| panic!("{e}"))
}

fn request(principal: Option<Value>, tool: &str) -> String {
    let mut facts = json!({"stage": "main"});
    if let Some(p) = principal {
        facts["principal"] = p;
    }
    json!({"facts": facts, "calls": [{"id": "c1", "tool": tool, "args": {"id": 7}}]}).to_string()
}

/// The decision of the one call, by both readers, which must agree.
fn allowed(p: &Policy, text: &str) -> bool {
    let fast = p.decide_json(text).expect("a well-formed request");
    let req = Request::from_json(text).expect("a well-formed request");
    let strict = p.decide(&req);
    assert_eq!(
        serde_json::to_value(&fast).unwrap(),
        serde_json::to_value(&strict).unwrap()
    );
    fast.decisions[0].allow
}

/// The widening `diff` shows for a call of `tool` (seed 42, 512 cases), checked: NEW allows
/// its request and OLD denies it.
fn shown_widening(old: &Policy, new: &Policy, tool: &str) -> toolgate_prove::Change {
    let d = diff(
        old,
        new,
        &Config {
            cases: 512,
            seed: 42,
        },
    );
    let w = d
        .widenings
        .iter()
        .find(|w| w.request.calls[w.call].tool == tool)
        .unwrap_or_else(|| panic!("no widening found: {d:?}"))
        .clone();
    assert!(new.decide(&w.request).decisions[w.call].allow);
    assert!(!old.decide(&w.request).decisions[w.call].allow);
    w
}

#[test]
fn a_rule_reads_the_principals_claims_and_tenant() {
    let p = policy(ADMIN_ONLY);
    let admin = json!({"sub": "u1", "tenant": "acme", "claims": {"role": "admin"}});
    let member = json!({"sub": "u2", "tenant": "acme", "claims": {"role": "member"}});
    let other = json!({"sub": "u3", "tenant": "globex", "claims": {"role": "admin"}});
    assert!(allowed(&p, &request(Some(admin.clone()), "delete_user")));
    assert!(!allowed(&p, &request(Some(member.clone()), "delete_user")));
    assert!(allowed(&p, &request(Some(member), "rename_user")));
    assert!(!allowed(&p, &request(Some(other), "delete_user")));
    let refusal = p
        .decide_json(&request(
            Some(json!({"sub": "u2", "tenant": "acme", "claims": {"role": "member"}})),
            "delete_user",
        ))
        .unwrap();
    assert_eq!(
        refusal.decisions[0].reason.as_deref(),
        Some("only an admin may delete a user")
    );
}

#[test]
fn no_principal_or_a_missing_claim_denies() {
    let p = policy(ADMIN_ONLY);
    assert!(!allowed(&p, &request(None, "delete_user")));
    assert!(!allowed(&p, &request(None, "rename_user")));
    assert!(!allowed(
        &p,
        &request(Some(json!({"sub": "u1", "tenant": "acme"})), "delete_user")
    ));
    // A read is not touched by either rule.
    assert!(allowed(&p, &request(None, "list_users")));
    // Under `not`, a missing principal still denies: unknown is not false.
    let p = policy(
        "module m\nwrite delete_user\nstage main { tools [delete_user] }\nrule not_guests for delete_user {\n  require not principal.claims.role == \"guest\"\n  refusal \"no guests\"\n}\n",
    );
    assert!(!allowed(&p, &request(None, "delete_user")));
    assert!(allowed(
        &p,
        &request(Some(json!({"claims": {"role": "admin"}})), "delete_user")
    ));
}

#[test]
fn a_malformed_principal_is_refused_with_its_path_by_both_readers() {
    let p = policy(ADMIN_ONLY);
    for (principal, at) in [
        (json!("u1"), "facts.principal"),
        (json!({"sub": 7}), "facts.principal.sub"),
        (json!({"sub": ""}), "facts.principal.sub"),
        (json!({"claims": ["admin"]}), "facts.principal.claims"),
        (json!({"subject": "u1"}), "facts.principal.subject"),
        (json!({"role": "admin"}), "facts.principal.role"),
    ] {
        let text = request(Some(principal.clone()), "list_users");
        let err = Request::from_json(&text).expect_err(&format!("{principal} must be refused"));
        let RequestError::Schema { path, .. } = &err else {
            panic!("expected a schema error, got {err:?}");
        };
        assert_eq!(path, at, "{principal}");
        let fast = p
            .decide_json(&text)
            .expect_err("the one-pass reader refuses it too");
        assert_eq!(fast.to_string(), err.to_string());
    }
    let err = Request::from_json(&request(Some(json!({"subject": "u1"})), "x")).unwrap_err();
    assert!(err.to_string().contains("did you mean `sub`"), "{err}");
}

#[test]
fn principal_paths_are_checked_at_compile_time() {
    for (cond, says) in [
        (
            "principal.subject == \"u1\"",
            "did you mean `principal.sub`",
        ),
        ("principal.claims == \"x\"", "needs a claim name"),
        ("principal.sub.id == \"x\"", "has no fields"),
        ("facts.principal.sub == \"u1\"", "write `principal.sub`"),
        ("principal.role == \"admin\"", "principal.claims"),
    ] {
        let text = format!("module m\nwrite w\nstage main {{ tools [w] }}\nrule r for w {{\n  require {cond}\n  refusal \"no\"\n}}\n");
        let err = Policy::compile("m.gate", &text)
            .expect_err(cond)
            .to_string();
        assert!(err.contains(says), "`{cond}`: {err}");
    }
}

#[test]
fn the_change_gate_finds_a_dropped_principal_check() {
    let old = policy(ADMIN_ONLY);
    let new = policy(&ADMIN_ONLY.replace(
        "require principal.claims.role == \"admin\"",
        "require principal.claims.role in [\"admin\", \"support\"]",
    ));
    let w = shown_widening(&old, &new, "delete_user");
    assert_eq!(
        w.request
            .facts
            .principal
            .as_ref()
            .and_then(|p| p["claims"]["role"].as_str()),
        Some("support")
    );
    // The same policy against itself: nothing.
    assert!(diff(
        &old,
        &old,
        &Config {
            cases: 512,
            seed: 42
        }
    )
    .widenings
    .is_empty());
}

/// A stage that only admins may be in: `require` on the stage, not on each tool.
const ADMIN_STAGE: &str = r#"module users
write delete_user, rename_user
read list_users
stage main { tools [rename_user, list_users] }
stage admin_console {
  tools [delete_user, list_users]
  max_turns 3
  require principal.claims.role == "admin"
}
rule small_ids for delete_user {
  require args.id is number and args.id < 1000
}
"#;

fn staged(principal: Option<Value>, stage: &str, tool: &str) -> String {
    let mut facts = json!({"stage": stage});
    if let Some(p) = principal {
        facts["principal"] = p;
    }
    json!({"facts": facts, "calls": [{"id": "c1", "tool": tool, "args": {"id": 7}}]}).to_string()
}

#[test]
fn a_stage_requires_its_principal_once_for_every_tool_it_lists() {
    let p = policy(ADMIN_STAGE);
    let admin = json!({"sub": "u1", "claims": {"role": "admin"}});
    let member = json!({"sub": "u2", "claims": {"role": "member"}});
    assert!(allowed(
        &p,
        &staged(Some(admin.clone()), "admin_console", "delete_user")
    ));
    assert!(allowed(
        &p,
        &staged(Some(admin.clone()), "admin_console", "list_users")
    ));
    for who in [Some(member.clone()), None, Some(json!({"sub": "u3"}))] {
        for tool in ["delete_user", "list_users"] {
            assert!(
                !allowed(&p, &staged(who.clone(), "admin_console", tool)),
                "{who:?} {tool}"
            );
        }
    }
    // The same member is served in the stage with no `require`.
    assert!(allowed(
        &p,
        &staged(Some(member.clone()), "main", "rename_user")
    ));
    let r = p
        .decide_json(&staged(Some(member), "admin_console", "delete_user"))
        .unwrap();
    let d = &r.decisions[0];
    assert_eq!(d.kind, Some(toolgate_engine::DenyKind::Stage));
    assert_eq!(d.rule.as_deref(), Some("admin_console"));
    let reason = d.reason.as_deref().unwrap();
    assert!(
        reason.contains("stage `admin_console`") && reason.contains("admin"),
        "{reason}"
    );
    // The checks before it keep their order: a tool the stage does not list, or turns used
    // up, is refused as before, whoever asks.
    let r = p
        .decide_json(&staged(None, "admin_console", "rename_user"))
        .unwrap();
    assert!(r.decisions[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("not available in the current stage"));
    let mut used_up: Value =
        serde_json::from_str(&staged(Some(admin), "admin_console", "list_users")).unwrap();
    used_up["facts"]["stage_turns"] = json!(4);
    let r = p.decide_json(&used_up.to_string()).unwrap();
    assert!(r.decisions[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("at most 3 turns"));
}

#[test]
fn a_stage_requirement_is_explained_and_withholds_its_tools_from_the_offer() {
    let p = policy(ADMIN_STAGE);
    let member = json!({"sub": "u2", "claims": {"role": "member"}});
    let req = Request::from_json(&staged(
        Some(member.clone()),
        "admin_console",
        "delete_user",
    ))
    .unwrap();
    let explained = serde_json::to_string(&p.explain(&req)).unwrap();
    assert!(explained.contains("stage require"), "{explained}");
    assert!(explained.contains("not met"), "{explained}");
    let defs: Vec<toolgate_engine::ToolDef> = serde_json::from_value(json!([
        {"name": "delete_user", "description": "deletes"},
        {"name": "list_users", "description": "lists"}
    ]))
    .unwrap();
    let offer = p.offer(&req.facts, &defs);
    assert!(offer.tools.is_empty(), "{offer:?}");
    assert_eq!(offer.withheld.len(), 2);
    assert!(offer
        .withheld
        .iter()
        .all(|w| w.reason == toolgate_engine::WithheldReason::StageRefused));
    let mut admin = req.facts.clone();
    admin.principal = Some(json!({"claims": {"role": "admin"}}));
    assert_eq!(p.offer(&admin, &defs).tools.len(), 2);
}

#[test]
fn a_stage_requirement_may_not_read_arguments() {
    let text = ADMIN_STAGE.replace(
        "require principal.claims.role == \"admin\"",
        "require args.id < 10",
    );
    let err = Policy::compile("users.gate", &text)
        .unwrap_err()
        .to_string();
    assert!(err.contains("reads the call's arguments"), "{err}");
    assert!(err.contains("users.gate:8:11"), "{err}");
    assert!(
        err.contains("write a `rule`") || err.contains("in a `rule`"),
        "{err}"
    );
}

#[test]
fn the_change_gate_finds_a_loosened_stage_requirement() {
    let old = policy(ADMIN_STAGE);
    let new = policy(&ADMIN_STAGE.replace(
        "require principal.claims.role == \"admin\"",
        "require principal.claims.role in [\"admin\", \"support\"]",
    ));
    let cfg = Config {
        cases: 512,
        seed: 42,
    };
    shown_widening(&old, &new, "delete_user");
    // Dropping the requirement altogether is a widening too; adding one is not.
    let open = policy(&ADMIN_STAGE.replace("  require principal.claims.role == \"admin\"\n", ""));
    assert!(diff(&old, &open, &cfg).widens());
    assert!(
        !diff(&open, &old, &cfg).widens(),
        "{:?}",
        diff(&open, &old, &cfg)
    );
    assert!(!diff(&old, &old, &cfg).widens());
}

#[test]
fn the_change_gate_looks_behind_a_stage_requirement_at_the_rules() {
    // Same stage requirement in both; the rule of a tool only that stage lists is loosened.
    // With no principal the stage denies in both, so only a principal that passes the
    // stage shows the change.
    let old = policy(ADMIN_STAGE);
    let new = policy(&ADMIN_STAGE.replace("args.id < 1000", "args.id < 100000"));
    let w = shown_widening(&old, &new, "delete_user");
    let principal = w.request.facts.principal.as_ref();
    assert_eq!(
        principal.and_then(|p| p["claims"]["role"].as_str()),
        Some("admin")
    );
}

#[test]
fn an_invariant_is_checked_past_a_stage_requirement() {
    const ONLY_ADMINS: &str = "invariant only_admins_delete {\n  never allow delete_user unless principal.claims.role == \"admin\"\n}\n";
    let checked = |policy_text: &str| {
        let p = policy(&format!("{policy_text}{ONLY_ADMINS}"));
        let cfg = Config {
            cases: 2000,
            seed: 7,
        };
        toolgate_prove::check_policy(&p, None, &cfg)
            .unwrap()
            .remove(0)
    };
    let wider = ADMIN_STAGE.replace(
        "require principal.claims.role == \"admin\"",
        "require principal.claims.role in [\"admin\", \"support\"]",
    );
    let r = checked(&wider);
    assert!(!r.passed(), "a support principal may delete: {r:?}");
    // With the stage open to admins only, it holds.
    let r = checked(ADMIN_STAGE);
    assert!(r.passed(), "{r:?}");
}

#[test]
fn a_stage_requirement_survives_formatting() {
    let formatted = toolgate_lang::format_source("users.gate", ADMIN_STAGE).unwrap();
    assert!(
        formatted.contains("require principal.claims.role == \"admin\""),
        "{formatted}"
    );
    let a = policy(ADMIN_STAGE);
    let b = policy(&formatted);
    for who in [
        json!({"claims": {"role": "admin"}}),
        json!({"claims": {"role": "x"}}),
    ] {
        let text = staged(Some(who), "admin_console", "delete_user");
        assert_eq!(allowed(&a, &text), allowed(&b, &text));
    }
}
