//! toolgate's decision of one call as an AuthZEN Decision.
//!
//! `decision` is the call's `allow`. The `context` says why, in the spec's non-normative
//! shape for reasons (`reason_user` for the model or person, `reason_admin` for the
//! operator, keyed by the HTTP status the decision stands for), and in `context.toolgate`
//! what a toolgate-aware PEP needs to enforce it: the decision id of the log line, the
//! policy and revision, the deny kind and rule, an ask's approval digest, and the duties of
//! an allowed call (`sanitise_output`, `detokenise`, `opaque_tokens`). The spec lets a PEP
//! reject a permit whose context it does not understand, which is the right answer for a PEP
//! that cannot carry out those duties.

use crate::api_error::ApiError;
use serde_json::{json, Map, Value};
use toolgate_engine::Response;

/// The AuthZEN decision of a one-call batch.
pub(super) fn decision(response: &Response, decision_id: &str) -> Value {
    let mut toolgate = Map::new();
    toolgate.insert("decision_id".into(), decision_id.into());
    toolgate.insert("policy".into(), (*response.policy).into());
    toolgate.insert("revision".into(), (*response.revision).into());
    let Some(d) = response.decisions.first() else {
        // A batch of one call always has one decision; without one nothing was allowed.
        return json!({"decision": false, "context": {"toolgate": toolgate}});
    };
    let mut context = Map::new();
    if let Some(kind) = d.kind {
        toolgate.insert("kind".into(), kind.as_str().into());
        let rule = d.rule.as_deref().unwrap_or(kind.as_str());
        if let Some(r) = &d.rule {
            toolgate.insert("rule".into(), (**r).into());
        }
        if let Some(reason) = &d.reason {
            context.insert("reason_user".into(), json!({ "403": **reason }));
        }
        context.insert(
            "reason_admin".into(),
            json!({ "403": format!(
                "denied by {} `{rule}` of policy {} (revision {})",
                kind.as_str(),
                response.policy,
                response.revision
            ) }),
        );
    }
    if let Some(a) = &d.approval {
        toolgate.insert("approval".into(), a.as_str().into());
    }
    if d.fail_open {
        toolgate.insert("fail_open".into(), true.into());
    }
    if d.sanitise_output {
        toolgate.insert("sanitise_output".into(), true.into());
    }
    if !d.detokenise.is_empty() {
        toolgate.insert("detokenise".into(), json!(d.detokenise));
    }
    if !d.opaque_tokens.is_empty() {
        toolgate.insert("opaque_tokens".into(), json!(d.opaque_tokens));
    }
    if !d.shadow_denials.is_empty() {
        toolgate.insert("shadow_denials".into(), json!(d.shadow_denials));
    }
    context.insert("toolgate".into(), Value::Object(toolgate));
    json!({"decision": d.allow, "context": context})
}

/// The decision of an evaluation that could not be judged: closed, with the error the
/// single endpoint would have answered, as the spec's per-evaluation errors show.
pub(super) fn failed(error: &ApiError) -> Value {
    json!({"decision": false, "context": {"error": error.as_value()}})
}
