//! Judging invariants against a policy: which allowed calls break one ([`Invariants::check`],
//! [`Invariants::violations`]), and whether one applies to a call whatever its arguments
//! ([`Invariants::applies`]). The compiled forms are `invariant.rs`'s.

use crate::cond::Env;
use crate::hosts::HostList;
use crate::invariant::{Applies, InvCond, Invariant, Invariants, Subject, Violation};
use crate::policy::Policy;
use crate::truth::Truth;
use crate::wire::request::{Latched, Request};
use crate::wire::response::{Decision, Response};

impl Invariants {
    /// Judges `request` with `policy` and returns the response and every violation.
    pub fn check(&self, policy: &Policy, request: &Request) -> (Response, Vec<Violation>) {
        let response = policy.decide(request);
        let violations = self.violations(policy, request, &response);
        (response, violations)
    }

    /// The allowed calls of `response` (the answer to `request`) that break an invariant.
    pub fn violations(
        &self,
        policy: &Policy,
        request: &Request,
        response: &Response,
    ) -> Vec<Violation> {
        let mut out = Vec::new();
        for (i, decision) in response.decisions.iter().enumerate() {
            if !decision.allow {
                continue;
            }
            for inv in &self.list {
                let ctx = Ctx {
                    policy,
                    request,
                    call: i,
                    decision: Some(decision),
                    hosts: &self.hosts,
                };
                if ctx.subject(&inv.subjects) && ctx.guard(inv) == Truth::True {
                    out.push(Violation {
                        invariant: inv.name.clone(),
                        call: i,
                        decision: decision.clone(),
                    });
                }
            }
        }
        out
    }

    /// Whether invariant `index` applies to call `call` of `request` for every possible
    /// argument and every value of the facts a condition reads. Only the stage, the
    /// `latched` fact and the batch's tools are looked at.
    pub fn applies(
        &self,
        index: usize,
        policy: &Policy,
        request: &Request,
        call: usize,
    ) -> Applies {
        let Some(inv) = self.list.get(index) else {
            return Applies::No;
        };
        let ctx = Ctx {
            policy,
            request,
            call,
            decision: None,
            hosts: &self.hosts,
        };
        if !ctx.subject(&inv.subjects) {
            return Applies::No;
        }
        match ctx.guard(inv) {
            Truth::True => Applies::Yes,
            Truth::False => Applies::No,
            Truth::Unknown(_) => Applies::Maybe,
        }
    }
}

/// One call being looked at; `decision: None` means arguments and facts are unknown.
struct Ctx<'a> {
    policy: &'a Policy,
    request: &'a Request,
    call: usize,
    decision: Option<&'a Decision>,
    hosts: &'a [HostList],
}

impl Ctx<'_> {
    fn matches(&self, subject: Subject, tool: &str) -> bool {
        let id = self.policy.tool_id(tool);
        match subject {
            Subject::Any => true,
            Subject::Unclassified => id.is_none(),
            Subject::Tool(t) => id == Some(t),
            Subject::Class(c) => {
                id.is_some_and(|i| self.policy.tools[i.index()].class.selected_by(c))
            }
        }
    }

    fn subject(&self, subjects: &[Subject]) -> bool {
        let Some(call) = self.request.calls.get(self.call) else {
            return false;
        };
        subjects.iter().any(|s| self.matches(*s, &call.tool))
    }

    /// `when` (unknown counts as true) and not `unless` (unknown counts as false).
    fn guard(&self, inv: &Invariant) -> Truth {
        let concrete = self.decision.is_some();
        let when = inv.when.as_ref().map_or(Truth::True, |w| self.eval(w));
        let unless = inv.unless.as_ref().map_or(Truth::False, |u| self.eval(u));
        let (when, unless) = if concrete {
            (
                if when == Truth::False {
                    Truth::False
                } else {
                    Truth::True
                },
                if unless == Truth::True {
                    Truth::True
                } else {
                    Truth::False
                },
            )
        } else {
            (when, unless)
        };
        when.and(unless.not())
    }

    fn eval(&self, c: &InvCond) -> Truth {
        match c {
            InvCond::And(parts) => parts
                .iter()
                .fold(Truth::True, |acc, p| acc.and(self.eval(p))),
            InvCond::Or(parts) => parts
                .iter()
                .fold(Truth::False, |acc, p| acc.or(self.eval(p))),
            InvCond::Not(inner) => self.eval(inner).not(),
            InvCond::Latched => Truth::from_bool(match &self.request.facts.latched {
                Latched::Flag(b) => *b,
                Latched::ByName(m) => m.values().any(|b| *b),
            }),
            InvCond::FailOpen => match self.decision {
                Some(d) => Truth::from_bool(d.fail_open),
                None => Truth::Unknown(0),
            },
            InvCond::Stage { names, negated } => {
                let inside = self
                    .request
                    .facts
                    .stage
                    .as_deref()
                    .is_some_and(|s| names.iter().any(|n| **n == *s));
                Truth::from_bool(inside != *negated)
            }
            InvCond::BatchHas(sel) => Truth::from_bool(
                self.request
                    .calls
                    .iter()
                    .enumerate()
                    .any(|(i, c)| i != self.call && self.matches(*sel, &c.tool)),
            ),
            InvCond::Cond(cond) => {
                if self.decision.is_none() {
                    return Truth::Unknown(0);
                }
                let Some(call) = self.request.calls.get(self.call) else {
                    return Truth::Unknown(0);
                };
                let facts = crate::wire::view::FactsRef::Owned(&self.request.facts);
                let index = crate::provenance::Lazy::new(facts, self.policy);
                let env = Env::judging(&call.args, facts, self.hosts, Some(&index));
                cond.eval(&env)
            }
        }
    }
}
