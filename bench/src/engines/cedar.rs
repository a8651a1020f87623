//! cedar-policy: one `is_authorized` per call, a static entity store, caller-side facts.

use crate::url_host::extract_host;
use crate::verdict::Verdict;
use crate::BenchError;
use cedar_policy::{
    Authorizer, Context, Decision, Entities, EntityId, EntityTypeName, EntityUid, PolicyId,
    PolicySet, Request, RestrictedExpression,
};
use serde_json::Value;
use std::collections::HashMap;
use std::str::FromStr;

/// The workload's Cedar policies.
pub const WORKLOAD_CEDAR: &str = include_str!("../../policies/workload.cedar");
/// The static entity store: tools in their `ToolClass` and `Stage` groups.
pub const WORKLOAD_ENTITIES: &str = include_str!("../../policies/workload.entities.json");

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::Engine {
        engine: "cedar",
        message: e.to_string(),
    }
}

/// Parses the policy set (the "PolicySet parse" benchmark).
pub fn parse_policies() -> Result<PolicySet, BenchError> {
    PolicySet::from_str(WORKLOAD_CEDAR).map_err(err)
}

/// Everything loaded once: policies, entities, the authorizer and the caller's rule ranking.
pub struct CedarGate {
    policies: PolicySet,
    entities: Entities,
    authorizer: Authorizer,
    ranks: HashMap<PolicyId, Verdict>,
    principal: EntityUid,
    action: EntityUid,
    tool_type: EntityTypeName,
    stage_type: EntityTypeName,
}

impl CedarGate {
    /// Loads the workload.
    pub fn new() -> Result<CedarGate, BenchError> {
        let policies = parse_policies()?;
        let entities = Entities::from_json_str(WORKLOAD_ENTITIES, None).map_err(err)?;
        let mut ranks = HashMap::new();
        for p in policies.policies() {
            if let Some(id) = p.annotation("id") {
                let v = Verdict::from_name(id)
                    .ok_or_else(|| err(format!("@id(\"{id}\") is not a workload rule")))?;
                ranks.insert(p.id().clone(), v);
            }
        }
        Ok(CedarGate {
            policies,
            entities,
            authorizer: Authorizer::new(),
            ranks,
            principal: EntityUid::from_str(r#"Session::"current""#).map_err(err)?,
            action: EntityUid::from_str(r#"Action::"call_tool""#).map_err(err)?,
            tool_type: EntityTypeName::from_str("Tool").map_err(err)?,
            stage_type: EntityTypeName::from_str("Stage").map_err(err)?,
        })
    }

    /// Builds one request per call from a parsed document (the caller-side work).
    pub fn build(&self, doc: &Value) -> Result<Vec<Request>, BenchError> {
        let facts = doc.get("facts");
        let f = |k: &str| facts.and_then(|f| f.get(k));
        let mut base: Vec<(String, RestrictedExpression)> = Vec::with_capacity(6);
        if let Some(stage) = f("stage").and_then(Value::as_str) {
            let uid =
                EntityUid::from_type_name_and_id(self.stage_type.clone(), EntityId::new(stage));
            base.push(("stage".into(), RestrictedExpression::new_entity_uid(uid)));
        }
        base.push((
            "latched".into(),
            RestrictedExpression::new_bool(f("latched") == Some(&Value::Bool(true))),
        ));
        let calls: &[Value] = doc
            .get("calls")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        let tool_names = calls
            .iter()
            .filter_map(|c| c.get("tool").and_then(Value::as_str));
        base.push((
            "batch_tools".into(),
            RestrictedExpression::new_set(
                tool_names.map(|t| RestrictedExpression::new_string(t.to_owned())),
            ),
        ));
        // The last 10 client messages' media kinds.
        let mut kinds: Vec<&str> = Vec::new();
        if let Some(ms) = f("messages").and_then(Value::as_array) {
            let window = ms
                .iter()
                .rev()
                .filter(|m| m.get("from").and_then(Value::as_str) == Some("client"))
                .take(10);
            for m in window {
                if let Some(media) = m.get("media").and_then(Value::as_array) {
                    kinds.extend(media.iter().filter_map(Value::as_str));
                }
            }
        }
        base.push((
            "window_media".into(),
            RestrictedExpression::new_set(
                kinds
                    .into_iter()
                    .map(|k| RestrictedExpression::new_string(k.to_owned())),
            ),
        ));
        let fields = f("fields")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| {
                v.as_str()
                    .map(|s| (k.clone(), RestrictedExpression::new_string(s.to_owned())))
            });
        base.push((
            "fields".into(),
            RestrictedExpression::new_record(fields).map_err(err)?,
        ));
        let called = f("called")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| c.get("ok") == Some(&Value::Bool(true)))
            .filter_map(|c| c.get("tool").and_then(Value::as_str))
            .map(|t| RestrictedExpression::new_string(t.to_owned()));
        base.push(("called".into(), RestrictedExpression::new_set(called)));
        let base = Context::from_pairs(base).map_err(err)?;

        calls
            .iter()
            .map(|call| {
                let tool = call.get("tool").and_then(Value::as_str).unwrap_or("");
                let resource =
                    EntityUid::from_type_name_and_id(self.tool_type.clone(), EntityId::new(tool));
                let args = call.get("args");
                let mut extra: Vec<(String, RestrictedExpression)> = Vec::new();
                if let Some(host) = args
                    .and_then(|a| a.get("url"))
                    .and_then(Value::as_str)
                    .and_then(extract_host)
                {
                    extra.push((
                        "host".into(),
                        RestrictedExpression::new_string(host.to_ascii_lowercase()),
                    ));
                }
                if let Some(amount) = args.and_then(|a| a.get("amount")).and_then(Value::as_f64) {
                    extra.push((
                        "amount".into(),
                        RestrictedExpression::new_decimal(decimal_up(amount)),
                    ));
                }
                let context = if extra.is_empty() {
                    base.clone()
                } else {
                    base.clone().merge(extra).map_err(err)?
                };
                Request::new(
                    self.principal.clone(),
                    self.action.clone(),
                    resource,
                    context,
                    None,
                )
                .map_err(err)
            })
            .collect()
    }

    /// Authorises one prebuilt request and names the verdict.
    pub fn authorize(&self, request: &Request) -> Result<Verdict, BenchError> {
        let response = self
            .authorizer
            .is_authorized(request, &self.policies, &self.entities);
        if let Some(e) = response.diagnostics().errors().next() {
            return Err(err(format!("evaluation error: {e}")));
        }
        match response.decision() {
            Decision::Allow => Ok(Verdict::Allow),
            Decision::Deny => response
                .diagnostics()
                .reason()
                .filter_map(|id| self.ranks.get(id).copied())
                .min_by_key(|v| v.rank())
                .ok_or_else(|| err("denied with no forbid satisfied")),
        }
    }

    /// Authorises every call of a batch.
    pub fn verdicts(&self, requests: &[Request]) -> Result<Vec<Verdict>, BenchError> {
        requests.iter().map(|r| self.authorize(r)).collect()
    }
}

/// `x` as a Cedar decimal literal: 4 places, rounded toward +inf, clamped into +-9e14.
pub fn decimal_up(x: f64) -> String {
    let scaled = (x * 10_000.0).ceil().clamp(-9e18, 9e18);
    // In range by the clamp; NaN cannot come from JSON.
    let n = scaled as i64;
    let sign = if n < 0 { "-" } else { "" };
    let a = n.unsigned_abs();
    format!("{sign}{}.{:04}", a / 10_000, a % 10_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_round_up_to_four_places() {
        assert_eq!(decimal_up(250.0), "250.0000");
        assert_eq!(decimal_up(250.0001), "250.0001");
        assert_eq!(decimal_up(-1.5), "-1.5000");
        assert_eq!(decimal_up(1e300), "900000000000000.0000");
    }
}
