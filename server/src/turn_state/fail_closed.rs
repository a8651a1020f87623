//! Judging a batch when the shared store cannot be reached or does not answer in time, or
//! when the turn's stored latches name one the judging policy does not declare.
//!
//! The batch is judged with every latch set. A call a latch blocks is then denied with kind
//! `state` and a fixed refusal, unless the batch's own latches already block it (that denial
//! is the policy's, whatever the store holds). A call that sets a latch is denied the same
//! way even where it would be allowed: the store cannot record the latch, so a later batch of
//! the turn, once the store is back, would run unlatched. Every other call is judged as
//! usual, since no latch touches it.
//!
//! The batch is judged with no budget count either (the counts are in the store): a call a
//! budget over batches then denies is denied as `state` the same way ([`counts_unknown`]).
//! A batch with no session has no turn, so only that part applies to it.
//!
//! A turn whose stored latches the policy no longer declares (a reload removed or renamed
//! one, or read a policy file half-written) has every call denied as `state` ([`undeclared`]):
//! which calls that latch blocked is unknown to the policy now judging, and setting "every
//! latch" instead blocks nothing under a policy that declares none.

use std::sync::{Arc, OnceLock};
use toolgate_engine::{Decision, DenyKind, Policy, Response};

/// The `rule` of a `state` denial.
pub const RULE: &str = "session_state";

/// The refusal of a `state` denial (only the shared store fails this way).
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub const REFUSAL: &str = "the session state is unavailable, so this call cannot be judged: an earlier call in this turn may have blocked it, and a latch it sets could not be recorded. It did not run; try again shortly, and do not tell the user it ran.";

/// The refusal of a call a budget over batches governs, when the store keeping the counts
/// cannot be reached.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub const COUNTS_REFUSAL: &str = "the budget counts are unavailable, so this call cannot be judged: how much of its budget is left is unknown. It did not run; try again shortly, and do not tell the user it ran.";

fn shared(cell: &'static OnceLock<Arc<str>>, text: &str) -> Arc<str> {
    cell.get_or_init(|| Arc::from(text)).clone()
}

/// `all` (the batch judged with every latch set) with each call turn state decides denied
/// as `state`; `own` is the batch judged with only its own latch facts.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub fn relabel(policy: &Policy, own: &Response, mut all: Response) -> Response {
    static REFUSAL_TEXT: OnceLock<Arc<str>> = OnceLock::new();
    for (d, o) in all.decisions.iter_mut().zip(&own.decisions) {
        let (sets, _) = policy.latch_bound(&d.tool);
        let by_latch = d.kind == Some(DenyKind::Latch) && o.kind != Some(DenyKind::Latch);
        if by_latch || (d.allow && sets) {
            deny_as_state(d, shared(&REFUSAL_TEXT, REFUSAL));
        }
    }
    counts_unknown(policy, all)
}

/// `judged` (a batch judged with no budget count) with each call a budget over batches
/// denied for want of its count denied as `state` instead: the store that keeps the counts
/// could not be reached.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub fn counts_unknown(policy: &Policy, mut judged: Response) -> Response {
    static REFUSAL_TEXT: OnceLock<Arc<str>> = OnceLock::new();
    for d in &mut judged.decisions {
        let kept = d.kind == Some(DenyKind::Budget)
            && policy.budgets().any(|b| {
                b.scope != toolgate_engine::BudgetScope::Batch && d.rule.as_deref() == Some(b.name)
            });
        if kept {
            deny_as_state(d, shared(&REFUSAL_TEXT, COUNTS_REFUSAL));
        }
    }
    judged
}

/// `own` (the batch judged with only its own latch facts) with every call denied as `state`:
/// the turn set `latch` (`*`: every latch), which `policy` does not declare.
pub fn undeclared(policy: &Policy, mut own: Response, latch: &str) -> Response {
    let what = match latch {
        "*" => "this turn set latches".to_string(),
        name => format!("latch `{name}`, set earlier in this turn, is"),
    };
    let reason: Arc<str> = Arc::from(format!(
        "the policy changed during this turn: {what} not declared by policy `{}` revision {}, so no call of this turn can be judged. It did not run; do not tell the user it ran. Tell the user the policy changed and ask them to send their request again.",
        policy.module(),
        policy.revision()
    ));
    for d in &mut own.decisions {
        deny_as_state(d, reason.clone());
    }
    own
}

fn deny_as_state(d: &mut Decision, reason: Arc<str>) {
    static RULE_TEXT: OnceLock<Arc<str>> = OnceLock::new();
    d.overrule(DenyKind::State, shared(&RULE_TEXT, RULE), reason);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use toolgate_engine::{Latched, Request};

    const POLICY: &str = "module m\nwrite send\ningest fetch\nread look\nstage main { tools [fetch, look, send] }\nlatch tainted { set_by [fetch] blocks [send] }\n";

    fn batch(tools: &[&str], latched: bool) -> Request {
        let calls: Vec<_> = tools
            .iter()
            .enumerate()
            .map(|(i, t)| serde_json::json!({"id": format!("c{i}"), "tool": t, "args": {}}))
            .collect();
        Request::from_value(serde_json::json!({
            "facts": {"stage": "main", "latched": latched},
            "calls": calls,
        }))
        .unwrap()
    }

    fn judged(p: &Policy, r: &Request) -> Response {
        let own = p.decide(r);
        let mut all = r.clone();
        all.facts.latched = all.facts.latched.or(&Latched::Flag(true));
        relabel(p, &own, p.decide(&all))
    }

    #[test]
    fn latch_bound_calls_are_denied_as_state_and_the_rest_judged_as_usual() {
        let p = Policy::compile("m.gate", POLICY).unwrap();
        let kinds =
            |r: &Response| -> Vec<_> { r.decisions.iter().map(|d| (d.allow, d.kind)).collect() };
        let r = judged(&p, &batch(&["send", "look", "nope"], false));
        assert_eq!(
            kinds(&r),
            [
                (false, Some(DenyKind::State)),
                (true, None),
                (false, Some(DenyKind::Unclassified)),
            ]
        );
        let setter = judged(&p, &batch(&["fetch", "look"], false));
        assert_eq!(
            kinds(&setter),
            [(false, Some(DenyKind::State)), (true, None)]
        );
        // Nothing of the allow it overrules survives: the ingest's output flag goes with it.
        assert!(p.decide(&batch(&["fetch"], false)).decisions[0].sanitise_output);
        assert!(!setter.decisions[0].sanitise_output);
        assert_eq!(p.latch_bound("fetch"), (true, false));
        assert_eq!(p.latch_bound("send"), (false, true));
        assert_eq!(p.latch_bound("nope"), (false, false));
        assert_eq!(r.decisions[0].reason.as_deref(), Some(REFUSAL));
        assert_eq!(r.decisions[0].rule.as_deref(), Some(RULE));
    }

    #[test]
    fn an_undeclared_latch_denies_every_call_and_names_the_latch() {
        let p = Policy::compile("m.gate", POLICY).unwrap();
        let r = undeclared(&p, p.decide(&batch(&["look", "fetch"], false)), "gone");
        for d in &r.decisions {
            assert!(!d.allow);
            assert_eq!(d.kind, Some(DenyKind::State));
            assert!(
                d.reason.as_deref().unwrap().contains("latch `gone`"),
                "{d:?}"
            );
        }
        assert_eq!(r.decisions.len(), 2);
    }

    #[test]
    fn a_latch_the_batch_itself_sets_keeps_its_own_denial() {
        let p = Policy::compile("m.gate", POLICY).unwrap();
        let r = judged(&p, &batch(&["send"], true));
        assert_eq!(r.decisions[0].kind, Some(DenyKind::Latch));
        assert_eq!(r.decisions[0].rule.as_deref(), Some("tainted"));
    }
}
