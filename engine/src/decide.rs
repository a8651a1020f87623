//! Judging a batch: pre-scan for latches, then each call through the fixed check order.
//!
//! Order per call: unclassified → stage (whitelist, then `max_turns`) → latch → the tool's
//! own rules in source order. The first failing check decides.
//!
//! The core ([`Policy::decide_into`]) writes one text-free [`Verdict`] per call into a
//! caller-owned buffer and allocates nothing once that buffer has room for the batch;
//! [`Policy::decide`] and [`Policy::decide_json`] add the response (ids, names, refusals).

use crate::cond::{Env, Truth, ABSENT, AMBIGUOUS};
use crate::error::RequestError;
use crate::fast_json;
use crate::ids::{RuleId, StageId, ToolId};
use crate::policy::{Policy, RuleInfo, StageInfo};
use crate::request::Request;
use crate::response::{Decision, DenyKind, LatchState, Response};
use crate::strict_url::Ambiguity;
use crate::vault;
use crate::view::{CallLike, FactsRef, LatchedRef};
use std::collections::BTreeMap;
use std::sync::Arc;

/// How many argument-free rules are remembered per batch (the rest are evaluated per call).
pub(crate) const MEMO_SLOTS: usize = 32;

/// The per-batch results of rules that read no call arguments: their value is the same for
/// every call, so "the client sent a photo" is computed once however many payouts the batch
/// holds. Results are kept as bytes so a fresh memo is one small zeroed array.
struct Memo {
    known: u32,
    truths: [u8; MEMO_SLOTS],
}

impl Memo {
    fn new() -> Self {
        Memo {
            known: 0,
            truths: [0; MEMO_SLOTS],
        }
    }

    /// `rule`'s value, computed on first use.
    #[inline]
    fn eval(&mut self, rule: &RuleInfo, env: &Env<'_>) -> Truth {
        let Some(slot) = rule.memo else {
            return rule.cond.eval(env);
        };
        let bit = 1u32 << slot;
        if self.known & bit == 0 {
            self.truths[usize::from(slot)] = rule.cond.eval(env).to_byte();
            self.known |= bit;
        }
        Truth::from_byte(self.truths[usize::from(slot)])
    }
}

/// The outcome for one call, without text: whether it may run and, if not, what denied it.
///
/// Turn it into words with [`Policy::deny_kind`], [`Policy::refusal`] and
/// [`Policy::denied_by`], or let [`Policy::decide`] build the full [`Decision`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict(Outcome);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// `tool`: the id resolved for the call, kept so the response needs no second lookup.
    Allow {
        fail_open: bool,
        tool: ToolId,
    },
    Unclassified,
    NoStage,
    UnknownStage,
    Whitelist(StageId),
    Turns(StageId),
    Latch(u8),
    Rule(RuleId),
    /// The rule denied because a URL it checks is ambiguous, for this reason.
    Url(RuleId, Ambiguity),
}

impl Verdict {
    /// Whether the executor may dispatch the call.
    pub fn allowed(self) -> bool {
        matches!(self.0, Outcome::Allow { .. })
    }

    /// True when the call was allowed only because a fail-open rule's facts were absent.
    pub fn fail_open(self) -> bool {
        matches!(
            self.0,
            Outcome::Allow {
                fail_open: true,
                ..
            }
        )
    }
}

/// What every call of a batch is judged against.
struct Batch<'a> {
    stage: ActiveStage<'a>,
    /// Turns used in the active stage.
    turns: u64,
    /// The latch mask after the pre-scan.
    latched: u64,
    facts: FactsRef<'a>,
}

/// The active stage as the request gives it.
enum ActiveStage<'a> {
    Known(&'a StageInfo),
    Unknown,
    Missing,
}

impl Policy {
    /// Judges every call of `request` and builds the response. A denial is a normal result;
    /// this never fails.
    pub fn decide(&self, request: &Request) -> Response {
        let facts = FactsRef::Owned(&request.facts);
        let mut verdicts = Vec::with_capacity(request.calls.len());
        let latched = self.run(facts, &request.calls, &mut verdicts);
        self.respond(facts, &request.calls, &verdicts, latched)
    }

    /// Judges every call of `request` into `out` (cleared first), one [`Verdict`] per call in
    /// request order, and returns the batch's latch state.
    ///
    /// This is the allocation-free core: reuse `out` across batches and nothing is allocated
    /// once it has grown to the largest batch.
    pub fn decide_into(&self, request: &Request, out: &mut Vec<Verdict>) -> LatchState {
        let facts = FactsRef::Owned(&request.facts);
        let latched = self.run(facts, &request.calls, out);
        self.latch_state(latched, facts.latched())
    }

    /// Parses `json` as a request and judges it.
    ///
    /// Fails only when the request is malformed, or names a policy other than this one.
    /// Valid requests are read in one pass without copying: strings stay borrowed, message
    /// texts and custom facts the policy never reads are checked for syntax and skipped.
    /// A request the fast reader refuses is read again by [`Request::from_json`], so errors
    /// carry the same line, column or field path either way.
    pub fn decide_json(&self, json: &str) -> Result<Response, RequestError> {
        let Some(view) = fast_json::parse(json, &self.custom_facts) else {
            let request = Request::from_json(json)?;
            self.check_request(&request)?;
            return Ok(self.decide(&request));
        };
        let facts = FactsRef::Borrowed(&view.facts);
        self.check_module(view.policy.as_deref())?;
        self.check_latch_names(facts.latched())?;
        let mut verdicts = Vec::with_capacity(view.calls.len());
        let latched = self.run(facts, &view.calls, &mut verdicts);
        Ok(self.respond(facts, &view.calls, &verdicts, latched))
    }

    /// Why a verdict denies, or `None` for an allow.
    pub fn deny_kind(&self, verdict: Verdict) -> Option<DenyKind> {
        Some(match verdict.0 {
            Outcome::Allow { .. } => return None,
            Outcome::Unclassified => DenyKind::Unclassified,
            Outcome::NoStage
            | Outcome::UnknownStage
            | Outcome::Whitelist(_)
            | Outcome::Turns(_) => DenyKind::Stage,
            Outcome::Latch(_) => DenyKind::Latch,
            Outcome::Rule(r) | Outcome::Url(r, _) => self.rules[r.index()].kind,
        })
    }

    /// The refusal the model reads for a denying verdict, or `None` for an allow.
    pub fn refusal(&self, verdict: Verdict) -> Option<&Arc<str>> {
        Some(match verdict.0 {
            Outcome::Allow { .. } => return None,
            Outcome::Unclassified => &self.fixed.unclassified,
            Outcome::NoStage => &self.fixed.no_stage,
            Outcome::UnknownStage => &self.fixed.unknown_stage,
            Outcome::Whitelist(s) => &self.stages[s.index()].whitelist_refusal,
            Outcome::Turns(s) => &self.stages[s.index()].turns_refusal,
            Outcome::Latch(l) => &self.latches[usize::from(l)].refusal,
            Outcome::Rule(r) => &self.rules[r.index()].refusal,
            Outcome::Url(r, why) => {
                let rule = &self.rules[r.index()];
                rule.url_refusals.get(why as usize).unwrap_or(&rule.refusal)
            }
        })
    }

    /// The name of the policy element that denied, or `None` for an allow. An undeclared
    /// stage is named by `stage`, the request's own stage fact.
    pub fn denied_by<'a>(&'a self, verdict: Verdict, stage: Option<&'a str>) -> Option<&'a str> {
        match verdict.0 {
            Outcome::UnknownStage => Some(stage.unwrap_or(&self.fixed.rule_no_stage)),
            _ => self.denied_by_arc(verdict).map(|name| &**name),
        }
    }

    /// The shared core: latch pre-scan, then one verdict per call. Returns the latch mask.
    ///
    /// The pre-scan writes each call's resolved tool id into its own slot of `out` (as an
    /// allow, or `Unclassified` for an unknown name), and the second pass replaces it with the
    /// verdict, so no other buffer is needed whatever the batch size.
    fn run<C: CallLike>(&self, facts: FactsRef<'_>, calls: &[C], out: &mut Vec<Verdict>) -> u64 {
        // Pre-scan: the latch reflects the whole batch's intent, not its array order. A setter
        // counts whether or not its own call is allowed.
        let mut latched = self.initial_latches(facts.latched());
        out.clear();
        out.extend(calls.iter().map(|call| {
            Verdict(match self.tool_id(call.tool()) {
                Some(tool) => {
                    latched |= self.tools[tool.index()].sets;
                    Outcome::Allow {
                        fail_open: false,
                        tool,
                    }
                }
                None => Outcome::Unclassified,
            })
        }));

        let stage = match facts.stage() {
            None => ActiveStage::Missing,
            Some(name) => match self.stage_id(name) {
                Some(id) => ActiveStage::Known(&self.stages[id.index()]),
                None => ActiveStage::Unknown,
            },
        };
        let batch = Batch {
            stage,
            turns: facts.stage_turns().unwrap_or(0),
            latched,
            facts,
        };
        let mut memo = Memo::new();
        for (slot, call) in out.iter_mut().zip(calls) {
            let id = match slot.0 {
                Outcome::Allow { tool, .. } => Some(tool),
                _ => None,
            };
            slot.0 = self.judge(call, id, &batch, &mut memo);
        }
        latched
    }

    fn respond<C: CallLike>(
        &self,
        facts: FactsRef<'_>,
        calls: &[C],
        verdicts: &[Verdict],
        latched: u64,
    ) -> Response {
        let stage = facts.stage();
        let decisions = calls
            .iter()
            .zip(verdicts)
            .map(|(call, v)| {
                let mut d = Decision {
                    id: call.id().to_owned(),
                    tool: call.tool().to_owned(),
                    allow: v.allowed(),
                    kind: self.deny_kind(*v),
                    rule: match v.0 {
                        Outcome::UnknownStage => Some(Arc::from(stage.unwrap_or_default())),
                        _ => self.denied_by_arc(*v).cloned(),
                    },
                    reason: self.refusal(*v).cloned(),
                    fail_open: v.fail_open(),
                    detokenise: Vec::new(),
                    opaque_tokens: Vec::new(),
                    sanitise_output: false,
                };
                if let Outcome::Allow { tool: id, .. } = v.0 {
                    let tool = &self.tools[id.index()];
                    d.sanitise_output = tool.sanitise_output;
                    if self.vault_aware {
                        vault::sort_tokens(
                            call.args(),
                            &tool.detokenise,
                            &mut d.detokenise,
                            &mut d.opaque_tokens,
                        );
                    }
                }
                d
            })
            .collect();
        Response {
            policy: self.module.clone(),
            revision: self.revision.clone(),
            latched: self.latch_state(latched, facts.latched()),
            decisions,
        }
    }

    /// [`Policy::denied_by`] as the shared name, for everything but an undeclared stage.
    fn denied_by_arc(&self, verdict: Verdict) -> Option<&Arc<str>> {
        Some(match verdict.0 {
            Outcome::Allow { .. } | Outcome::UnknownStage => return None,
            Outcome::Unclassified => &self.fixed.rule_unclassified,
            Outcome::NoStage => &self.fixed.rule_no_stage,
            Outcome::Whitelist(s) | Outcome::Turns(s) => &self.stages[s.index()].name,
            Outcome::Latch(l) => &self.latches[usize::from(l)].name,
            Outcome::Rule(r) | Outcome::Url(r, _) => &self.rules[r.index()].name,
        })
    }

    /// The latch mask the request's `latched` fact carries in. A set flag under a name this
    /// policy does not declare sets every latch: unsure which latch it meant (a renamed latch,
    /// a typo in a request built in Rust), the engine assumes all rather than none. The JSON
    /// readers refuse such a name outright ([`Policy::check_request`]).
    #[inline]
    pub(crate) fn initial_latches(&self, fact: LatchedRef<'_>) -> u64 {
        let all = all_bits(self.latches.len());
        match fact {
            LatchedRef::Flag(false) => 0,
            LatchedRef::Flag(true) => all,
            named => {
                let mut mask = 0;
                for (name, set) in named.entries() {
                    if set {
                        match self.latch_index(name) {
                            Some(i) => mask |= 1 << i,
                            None => return all,
                        }
                    }
                }
                mask
            }
        }
    }

    #[inline]
    fn latch_state(&self, mask: u64, fact: LatchedRef<'_>) -> LatchState {
        if self.latches.len() <= 1 {
            return LatchState::Flag(mask != 0 || (self.latches.is_empty() && fact.any()));
        }
        let map: BTreeMap<Arc<str>, bool> = self
            .latches
            .iter()
            .enumerate()
            .map(|(i, l)| (l.name.clone(), mask & (1 << i) != 0))
            .collect();
        LatchState::ByName(map)
    }

    fn judge<C: CallLike>(
        &self,
        call: &C,
        id: Option<ToolId>,
        batch: &Batch<'_>,
        memo: &mut Memo,
    ) -> Outcome {
        let Some(id) = id else {
            return Outcome::Unclassified;
        };
        let (stage_id, stage) = match batch.stage {
            ActiveStage::Known(s) => (s.id, s),
            ActiveStage::Unknown => return Outcome::UnknownStage,
            ActiveStage::Missing => return Outcome::NoStage,
        };
        if !stage.tools.contains(id) {
            return Outcome::Whitelist(stage_id);
        }
        if stage.max_turns.is_some_and(|max| batch.turns > max) {
            return Outcome::Turns(stage_id);
        }
        let tool = &self.tools[id.index()];
        let blocking = tool.blocked_by & batch.latched;
        if blocking != 0 {
            // At most 64 latches, so the index fits in a u8.
            return Outcome::Latch(blocking.trailing_zeros() as u8);
        }
        if tool.rules.is_empty() {
            return Outcome::Allow {
                fail_open: false,
                tool: id,
            };
        }
        let env = Env::new(call.args(), batch.facts, &self.host_lists);
        let mut fail_open = false;
        for &rule_id in tool.rules.iter() {
            let rule = &self.rules[rule_id.index()];
            match memo.eval(rule, &env) {
                Truth::True => {}
                Truth::Unknown(ABSENT) if rule.fail_open => fail_open = true,
                // Host rules are never memoised, so the reason is this rule's own.
                Truth::Unknown(flags) if flags & AMBIGUOUS != 0 => {
                    return match env.ambiguity.get() {
                        Some(why) => Outcome::Url(rule_id, why),
                        None => Outcome::Rule(rule_id),
                    }
                }
                Truth::False | Truth::Unknown(_) => return Outcome::Rule(rule_id),
            }
        }
        Outcome::Allow {
            fail_open,
            tool: id,
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
