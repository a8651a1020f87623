//! Judging a batch: pre-scan for latches, then each call through the fixed check order.
//!
//! Order per call: unclassified → stage (whitelist, then `max_turns`) → latch → the tool's
//! own rules in source order. The first failing check decides.

use crate::cond::{Env, Truth, ABSENT};
use crate::error::RequestError;
use crate::ids::ToolId;
use crate::policy::Policy;
use crate::request::{Call, Latched, Request};
use crate::response::{Decision, DenyKind, LatchState, Response};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The active stage as the request gives it.
enum ActiveStage<'a> {
    Known(&'a crate::policy::StageInfo),
    Unknown(&'a str),
    Missing,
}

impl Policy {
    /// Judges every call of `request`. A denial is a normal result; this never fails.
    pub fn decide(&self, request: &Request) -> Response {
        let facts = &request.facts;
        let ids: Vec<Option<ToolId>> = request
            .calls
            .iter()
            .map(|c| self.tool_index.get(c.tool.as_str()).copied())
            .collect();

        // Pre-scan: the latch reflects the whole batch's intent, not its array order. A setter
        // counts whether or not its own call is allowed.
        let mut latched = self.initial_latches(&facts.latched);
        for id in ids.iter().flatten() {
            latched |= self.tools[id.index()].sets;
        }

        let stage = match facts.stage.as_deref() {
            None => ActiveStage::Missing,
            Some(name) => match self.stage_index.get(name) {
                Some(id) => ActiveStage::Known(&self.stages[id.index()]),
                None => ActiveStage::Unknown(name),
            },
        };
        let turns = facts.stage_turns.unwrap_or(0);

        let decisions = request
            .calls
            .iter()
            .zip(&ids)
            .map(|(call, id)| self.judge(call, *id, &stage, turns, latched, request))
            .collect();

        Response {
            policy: self.module.clone(),
            revision: self.revision.clone(),
            latched: self.latch_state(latched, &facts.latched),
            decisions,
        }
    }

    /// Parses `json` as a [`Request`] and judges it.
    ///
    /// Fails only when the request is malformed, or names a policy other than this one.
    pub fn decide_json(&self, json: &str) -> Result<Response, RequestError> {
        let request = Request::from_json(json)?;
        self.check_target(&request)?;
        Ok(self.decide(&request))
    }

    /// Errors when `request` names a policy module other than this one.
    pub fn check_target(&self, request: &Request) -> Result<(), RequestError> {
        match &request.policy {
            Some(p) if **p != *self.module => Err(RequestError::WrongPolicy {
                requested: p.clone(),
                loaded: self.module.to_string(),
            }),
            _ => Ok(()),
        }
    }

    fn initial_latches(&self, fact: &Latched) -> u64 {
        match fact {
            Latched::Flag(false) => 0,
            Latched::Flag(true) => all_bits(self.latches.len()),
            Latched::ByName(map) => self
                .latches
                .iter()
                .enumerate()
                .filter(|(_, l)| map.get(&*l.name).copied().unwrap_or(false))
                .fold(0, |acc, (i, _)| acc | (1 << i)),
        }
    }

    fn latch_state(&self, mask: u64, fact: &Latched) -> LatchState {
        if self.latches.len() <= 1 {
            let carried = match fact {
                Latched::Flag(b) => *b,
                Latched::ByName(m) => m.values().any(|b| *b),
            };
            return LatchState::Flag(mask != 0 || (self.latches.is_empty() && carried));
        }
        let map: BTreeMap<Arc<str>, bool> = self
            .latches
            .iter()
            .enumerate()
            .map(|(i, l)| (l.name.clone(), mask & (1 << i) != 0))
            .collect();
        LatchState::ByName(map)
    }

    fn judge(
        &self,
        call: &Call,
        id: Option<ToolId>,
        stage: &ActiveStage<'_>,
        turns: u64,
        latched: u64,
        request: &Request,
    ) -> Decision {
        let deny = |kind, rule: &Arc<str>, reason: &Arc<str>| Decision {
            id: call.id.clone(),
            tool: call.tool.clone(),
            allow: false,
            kind: Some(kind),
            rule: Some(rule.clone()),
            reason: Some(reason.clone()),
            fail_open: false,
        };
        let Some(id) = id else {
            return deny(
                DenyKind::Unclassified,
                &self.fixed.rule_unclassified,
                &self.fixed.unclassified,
            );
        };
        let stage = match stage {
            ActiveStage::Known(s) => s,
            ActiveStage::Unknown(name) => {
                return deny(
                    DenyKind::Stage,
                    &Arc::from(*name),
                    &self.fixed.unknown_stage,
                );
            }
            ActiveStage::Missing => {
                return deny(
                    DenyKind::Stage,
                    &self.fixed.rule_no_stage,
                    &self.fixed.no_stage,
                )
            }
        };
        if !stage.tools.contains(id) {
            return deny(DenyKind::Stage, &stage.name, &stage.whitelist_refusal);
        }
        if stage.max_turns.is_some_and(|max| turns > max) {
            return deny(DenyKind::Stage, &stage.name, &stage.turns_refusal);
        }
        let tool = &self.tools[id.index()];
        let blocking = tool.blocked_by & latched;
        if blocking != 0 {
            let latch = &self.latches[blocking.trailing_zeros() as usize];
            return deny(DenyKind::Latch, &latch.name, &latch.refusal);
        }
        let env = Env {
            args: &call.args,
            facts: &request.facts,
            hosts: &self.host_lists,
        };
        let mut fail_open = false;
        for rule_id in tool.rules.iter() {
            let rule = &self.rules[rule_id.index()];
            match rule.cond.eval(&env) {
                Truth::True => {}
                Truth::Unknown(ABSENT) if rule.fail_open => fail_open = true,
                Truth::False | Truth::Unknown(_) => {
                    return deny(rule.kind, &rule.name, &rule.refusal)
                }
            }
        }
        Decision {
            id: call.id.clone(),
            tool: call.tool.clone(),
            allow: true,
            kind: None,
            rule: None,
            reason: None,
            fail_open,
        }
    }
}

fn all_bits(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}
