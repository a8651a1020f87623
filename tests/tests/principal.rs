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
    let d = diff(
        &old,
        &new,
        &Config {
            cases: 512,
            seed: 42,
        },
    );
    let w = d
        .widenings
        .iter()
        .find(|w| w.request.calls[w.call].tool == "delete_user")
        .unwrap_or_else(|| panic!("no widening found: {d:?}"));
    assert_eq!(
        w.request
            .facts
            .principal
            .as_ref()
            .and_then(|p| p["claims"]["role"].as_str()),
        Some("support")
    );
    assert!(new.decide(&w.request).decisions[w.call].allow);
    assert!(!old.decide(&w.request).decisions[w.call].allow);
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
