//! toolgate itself, through its public API only.

use crate::verdict::Verdict;
use crate::BenchError;
use toolgate_engine::{DenyKind, Policy, Request, Response};

/// The workload policy source.
pub const WORKLOAD_GATE: &str = include_str!("../../policies/workload.gate");

/// Compiles the workload policy.
pub fn compile_workload() -> Result<Policy, BenchError> {
    compile("workload.gate", WORKLOAD_GATE)
}

/// Compiles `source`, turning diagnostics into a readable error.
pub fn compile(name: &str, source: &str) -> Result<Policy, BenchError> {
    Policy::compile(name, source).map_err(|e| BenchError::Engine {
        engine: "toolgate",
        message: e.render(),
    })
}

/// Maps a toolgate response to verdicts: `unclassified` and `stage` denials are R1, any other
/// denial is named by its rule (or latch) name, which the policy spells as the workload's id.
pub fn verdicts(response: &Response) -> Result<Vec<Verdict>, BenchError> {
    response
        .decisions
        .iter()
        .map(|d| {
            if d.allow {
                return Ok(Verdict::Allow);
            }
            match d.kind {
                Some(DenyKind::Unclassified | DenyKind::Stage) => Ok(Verdict::R1StageWhitelist),
                _ => d
                    .rule
                    .as_deref()
                    .and_then(Verdict::from_name)
                    .ok_or_else(|| BenchError::Engine {
                        engine: "toolgate",
                        message: format!("unexpected denial {:?} / {:?}", d.kind, d.rule),
                    }),
            }
        })
        .collect()
}

/// The verdicts of the allocation-free core (`decide_into`), named the same way as
/// [`verdicts`] names a full response, so the equivalence check covers both paths.
pub fn verdicts_into(policy: &Policy, request: &Request) -> Result<Vec<Verdict>, BenchError> {
    let mut out = Vec::new();
    policy.decide_into(request, &mut out);
    out.iter()
        .map(|v| {
            if v.allowed() {
                return Ok(Verdict::Allow);
            }
            match policy.deny_kind(*v) {
                Some(DenyKind::Unclassified | DenyKind::Stage) => Ok(Verdict::R1StageWhitelist),
                kind => policy
                    .denied_by(*v, request.facts.stage.as_deref())
                    .and_then(Verdict::from_name)
                    .ok_or_else(|| BenchError::Engine {
                        engine: "toolgate",
                        message: format!("unexpected denial {kind:?}"),
                    }),
            }
        })
        .collect()
}
