//! Judging a batch: pre-scan for latches, then each call through the fixed check order.
//!
//! Order per call: unclassified → stage (whitelist, then `max_turns`) → latch → the tool's
//! own rules in source order. The first failing check decides. A call that passes them all
//! asks a person instead of running when a set latch `asks` for its tool, or a rule's `ask
//! when` holds (the first in that order names the ask); an approval in `facts.approvals`
//! for exactly that ask lets it run. This is the only place the
//! order is written: [`Policy::explain`] narrates it through a recording [`Trace`], and
//! [`Policy::offer`] asks the same [`ActiveStage::gate`] and [`blocking_latch`].
//!
//! The core ([`Policy::decide_into`]) writes one text-free [`Verdict`] per call into a
//! caller-owned buffer and allocates nothing once that buffer has room for the batch;
//! [`Policy::decide`] and [`Policy::decide_json`] add the response (ids, names, refusals).

use crate::cond::Env;
use crate::error::RequestError;
use crate::ids::{RuleId, StageId, ToolId};
use crate::policy::{Policy, RuleInfo, StageInfo};
use crate::provenance::Lazy;
use crate::strict_url::Ambiguity;
use crate::truth::{Truth, ABSENT, AMBIGUOUS};
use crate::vault;
use crate::wire::fast_json;
use crate::wire::request::Latched;
use crate::wire::request::Request;
use crate::wire::response::{Decision, DenyKind, LatchState, Response};
use crate::wire::view::{CallLike, FactsRef, LatchedRef, RequestView};
use crate::CallLabel;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::limits::MEMO_SLOTS;

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
    /// `approved`: it asked, and `facts.approvals` holds the approval (which element asked
    /// is worked out again when the response is put into words, so a verdict stays 8 bytes).
    Allow {
        fail_open: bool,
        approved: bool,
        tool: ToolId,
    },
    /// It passed every check, and this set latch `asks` for its tool.
    AskLatch(u8),
    /// It passed every check, and this rule's `ask when` holds.
    AskRule(RuleId),
    Unclassified,
    NoStage,
    UnknownStage,
    Whitelist(StageId),
    Turns(StageId),
    /// The stage's `require` does not hold for this request's principal and facts.
    StageRequire(StageId),
    Latch(u8),
    Rule(RuleId),
    /// The rule denied, and its requirement of this index is the first that failed.
    Part(RuleId, u16),
    /// The rule denied because a URL it checks is ambiguous, for this reason.
    Url(RuleId, Ambiguity),
    /// It passed every check, but the call would take this budget (its index) past its
    /// limit, or its amount is not a number of at least 0.
    Budget(u16),
    /// This set latch `blocks tainted` the tool, and a value of the call's arguments comes
    /// from untrusted output (or the request carries no outputs to tell).
    Tainted(u8),
    /// The rule denied, and one of its `from ingest` / `mentions ingest` tests held.
    Provenance(RuleId),
}

/// What asked a person about a call: a set latch that `asks` for its tool (its index), or a
/// rule whose `ask when` held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asker {
    Latch(u8),
    Rule(RuleId),
}

impl Asker {
    fn outcome(self) -> Outcome {
        match self {
            Asker::Latch(l) => Outcome::AskLatch(l),
            Asker::Rule(r) => Outcome::AskRule(r),
        }
    }
}

impl Verdict {
    /// A slot's value before `run` judges its call (every slot is overwritten).
    const PENDING: Verdict = Verdict(Outcome::Unclassified);

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

/// How many of a tool's budgets keep the call's amount between the check and the
/// consumption (the rest read it again).
const AMOUNTS: usize = 4;

/// What every call of a batch is judged against.
struct Batch<'a> {
    stage: ActiveStage<'a>,
    /// Turns used in the active stage.
    turns: u64,
    /// The latch mask after the pre-scan.
    latched: u64,
    facts: FactsRef<'a>,
    /// The request's provenance index, built on the first test that reads it.
    provenance: &'a crate::provenance::Lazy<'a>,
    /// The request's session and turn, which an approval is bound to.
    ids: Ids<'a>,
    /// The approvals calls of this batch have used so far: an approval lets one call run,
    /// so a second call with the same digest in the batch asks again. Empty (no allocation)
    /// unless an approval is used.
    used: std::cell::RefCell<Vec<crate::approval::Raw>>,
    /// What the allowed calls of this batch have consumed so far, per budget. Empty (no
    /// allocation) until a call of a tool with a budget passes every other check.
    spent: std::cell::RefCell<crate::budget::Tally>,
}

/// A request's `session` and `turn` fields.
#[derive(Clone, Copy, Default)]
pub(crate) struct Ids<'a> {
    pub(crate) session: Option<&'a str>,
    pub(crate) turn: Option<&'a str>,
}

impl<'a> Ids<'a> {
    fn of(session: Option<&'a str>, turn: Option<&'a str>) -> Self {
        Ids { session, turn }
    }
}

/// The active stage as the request gives it.
#[derive(Clone, Copy)]
pub(crate) enum ActiveStage<'a> {
    /// The stage the policy declares under the request's name (its `require`, if any, holds).
    Known(&'a StageInfo),
    /// That stage, but its `require` does not hold (false or unknown) for this request.
    Refused(&'a StageInfo),
    /// The request names a stage the policy does not declare.
    Unknown,
    /// The request names no stage.
    Missing,
}

/// What the stage check says about one classified tool, in check order: the stage must be
/// known, must list the tool, must have turns left, and its `require` must hold.
#[derive(Clone, Copy)]
pub(crate) enum StageGate<'a> {
    /// The request names no stage.
    Missing,
    /// The request names a stage the policy does not declare.
    Unknown,
    /// The stage does not list the tool.
    NotListed(&'a StageInfo),
    /// The stage lists the tool but has used up its `max_turns` (the bound).
    TurnsUsedUp(&'a StageInfo, u64),
    /// The stage lists the tool, with turns left, but its `require` does not hold.
    Refused(&'a StageInfo),
    /// The stage lets the tool through.
    Open(&'a StageInfo),
}

impl<'a> ActiveStage<'a> {
    /// The stage check for `tool` with `turns` used in the stage.
    #[inline]
    pub(crate) fn gate(self, tool: ToolId, turns: u64) -> StageGate<'a> {
        let (stage, holds) = match self {
            ActiveStage::Known(s) => (s, true),
            ActiveStage::Refused(s) => (s, false),
            ActiveStage::Unknown => return StageGate::Unknown,
            ActiveStage::Missing => return StageGate::Missing,
        };
        if !stage.tools.contains(tool) {
            return StageGate::NotListed(stage);
        }
        match stage.max_turns {
            Some(max) if turns > max => StageGate::TurnsUsedUp(stage, max),
            _ if !holds => StageGate::Refused(stage),
            _ => StageGate::Open(stage),
        }
    }
}

/// The latch that blocks a tool blocked by the latches in `blocked_by` when the latches in
/// `latched` are set: the first declared, or `None`.
#[inline]
pub(crate) fn blocking_latch(blocked_by: u64, latched: u64) -> Option<u8> {
    let blocking = blocked_by & latched;
    // At most 64 latches, so the index fits in a u8.
    (blocking != 0).then(|| blocking.trailing_zeros() as u8)
}

/// One check the judge ran for a call, and what it found; a [`Trace`] receives them in the
/// order they ran. A denying check is the last one of its call.
pub(crate) enum Check<'a> {
    /// Whether the policy classifies the call's tool (`None`: it does not).
    Class(Option<ToolId>),
    /// The stage check, with the turns used in the stage.
    Stage(StageGate<'a>, u64),
    /// One latch that blocks the tool (`index` into the policy's latches) and whether it is
    /// set; latches are checked in declaration order up to the first set one.
    Latch { index: usize, set: bool },
    /// A set latch that `blocks tainted` the tool (`index`), and whether an argument value
    /// came from untrusted output (or the request carries no outputs to tell).
    Tainted { index: usize, tainted: bool },
    /// A call that passed every check asks a person: `latch` (its index) or else `rule`
    /// asked, and `approved` says whether `facts.approvals` holds the approval.
    Ask {
        /// The latch that asked, if a latch did.
        latch: Option<usize>,
        /// The rule that asked, if a rule did.
        rule: Option<RuleId>,
        /// Whether the approval was given.
        approved: bool,
    },
    /// A budget the tool consumes from: what the call would take (`None`: its amount is not
    /// a number of at least 0), what was left before it, and whether it fits.
    Budget {
        /// The budget's index.
        budget: usize,
        /// The call's amount.
        amount: Option<f64>,
        /// What was left of the budget before this call (`None`: its count is not known).
        left: Option<f64>,
    },
    /// One of the tool's rules: its value, whether the call got past it, and what it read.
    Rule {
        /// The rule.
        rule: RuleId,
        /// What its condition evaluated to.
        truth: Truth,
        /// Whether the call got past it (a fail-open rule passes on absent facts).
        passed: bool,
        /// The environment the condition read.
        env: &'a Env<'a>,
    },
}

/// A request read by the one-pass reader for one policy ([`Policy::read_json`]), ready to be
/// judged by [`Policy::decide_read`]. Its strings borrow from the text it was read from.
#[derive(Debug)]
pub struct ReadRequest<'a> {
    view: RequestView<'a>,
}

impl ReadRequest<'_> {
    /// The `policy` field: the module the request names, if any.
    pub fn policy(&self) -> Option<&str> {
        self.view.policy.as_deref()
    }

    /// The `session` field (a server's session id), if any.
    pub fn session(&self) -> Option<&str> {
        self.view.session.as_deref()
    }

    /// The `turn` field (a server's turn id), if any.
    pub fn turn(&self) -> Option<&str> {
        self.view.turn.as_deref()
    }

    /// How many calls the batch holds.
    pub fn calls(&self) -> usize {
        self.view.calls.len()
    }

    /// How many messages `facts.messages` holds, if it is given.
    pub fn messages(&self) -> Option<usize> {
        self.view.facts.messages.as_ref().map(|m| m.rows.len())
    }

    /// The id, tool and arguments of the batch's call at `index`, if there is one.
    pub fn call(&self, index: usize) -> Option<(&str, &str, &serde_json::Value)> {
        self.view
            .calls
            .get(index)
            .map(|c| (c.id(), c.tool(), c.args()))
    }

    /// The arguments of the batch's call at `index`, if there is one.
    pub fn call_args(&self, index: usize) -> Option<&serde_json::Value> {
        self.view.calls.get(index).map(|c| &c.args)
    }

    /// Whether the request itself carries `facts.approvals` (non-empty).
    pub fn has_approvals(&self) -> bool {
        self.view
            .facts
            .approvals
            .as_ref()
            .is_some_and(|a| !a.is_empty())
    }

    /// Replaces `facts.approvals` with `approvals`: the approvals a keeper (the server) holds
    /// for the request's session. Each must have a digest's shape
    /// ([`crate::is_approval_digest`]); one that has not approves nothing.
    pub fn grant(&mut self, approvals: &[String]) {
        self.view.facts.approvals = Some(approvals.iter().map(|a| a.clone().into()).collect());
    }

    /// Whether the request itself carries `facts.outputs`.
    pub fn has_outputs(&self) -> bool {
        self.view.facts.outputs.is_some()
    }

    /// Sets `facts.outputs` to `outputs`: the turn's outputs a keeper (the server) holds for
    /// the request's session. `outputs` should have the shape
    /// [`validate_outputs`](crate::validate_outputs) accepts; the judge reads what it is given.
    pub fn set_outputs(&mut self, outputs: serde_json::Value) {
        self.view.facts.outputs = Some(outputs);
    }

    /// The request's `facts.outputs`, if it carries them.
    pub fn outputs(&self) -> Option<&serde_json::Value> {
        self.view.facts.outputs.as_ref()
    }

    /// Whether the request itself carries `facts.spent`.
    pub fn has_spent(&self) -> bool {
        self.view.facts.spent.is_some()
    }

    /// Sets `facts.spent` to `counts` (budget name, consumed so far): the counts a keeper
    /// (the server) holds for the request's scopes. Names should be the policy's budgets
    /// ([`Policy::budgets`]); a budget left out denies.
    pub fn set_spent(&mut self, counts: Vec<(String, f64)>) {
        self.view.facts.spent = Some(counts.into_iter().map(|(k, n)| (k.into(), n)).collect());
    }

    /// The request's `facts.principal`, if it carries one (or a keeper set one).
    pub fn principal(&self) -> Option<&serde_json::Value> {
        self.view.facts.principal.as_ref()
    }

    /// Whether the request itself carries `facts.principal`.
    pub fn has_principal(&self) -> bool {
        self.view.facts.principal.is_some()
    }

    /// Sets `facts.principal` to `principal` (or removes it): the principal a keeper (the
    /// server) verified, from a bearer token. `principal` should have the shape
    /// [`crate::principal_value`] builds; the judge reads whatever it is given.
    pub fn set_principal(&mut self, principal: Option<serde_json::Value>) {
        self.view.facts.principal = principal;
    }

    /// Unions `carried` (a session's latch state) into the request's `latched` fact: a latch
    /// set in either is set, exactly as [`Latched::or`] does for an owned request. Call it
    /// after [`Policy::read_json`] has checked the request's own latch names, so carried
    /// state can never hide an undeclared name the executor sent.
    pub fn carry(&mut self, carried: &Latched) {
        self.view.facts.latched = self.view.facts.latched.or(carried);
    }
}

/// Where the judge reports the checks it runs. [`NoTrace`], the decision path's sink, does
/// nothing and compiles away; [`Policy::explain`]'s sink turns each check into a step.
pub(crate) trait Trace {
    /// Whether the sink records anything: work done only to report (the latches that passed)
    /// is skipped when it does not, at compile time.
    const ON: bool;
    /// The judge moves to the next call of the batch, in request order.
    fn next_call(&mut self);
    /// The judge ran `check` for the current call.
    fn record(&mut self, check: Check<'_>);
}

/// The trace of the decision path: records nothing.
pub(crate) struct NoTrace;

impl Trace for NoTrace {
    const ON: bool = false;
    #[inline(always)]
    fn next_call(&mut self) {}
    #[inline(always)]
    fn record(&mut self, _: Check<'_>) {}
}

impl Policy {
    /// Judges every call of `request` and builds the response. A denial is a normal result;
    /// this never fails.
    pub fn decide(&self, request: &Request) -> Response {
        self.decide_traced(request, &mut NoTrace)
    }

    /// [`Policy::decide`], reporting every check the judge runs to `trace`.
    #[inline]
    pub(crate) fn decide_traced<T: Trace>(&self, request: &Request, trace: &mut T) -> Response {
        let facts = FactsRef::Owned(&request.facts);
        let mut stack = [Verdict::PENDING; ON_STACK];
        let mut heap = Vec::new();
        let verdicts = slots(&mut stack, &mut heap, request.calls.len());
        let ids = Ids::of(request.session.as_deref(), request.turn.as_deref());
        let index = Lazy::new(facts, self);
        let latched = self.run(facts, &index, ids, &request.calls, verdicts, trace);
        self.respond(facts, &index, ids, &request.calls, verdicts, latched)
    }

    /// Judges every call of `request` into `out` (cleared first), one [`Verdict`] per call in
    /// request order, and returns the batch's latch state.
    ///
    /// This is the allocation-free core: reuse `out` across batches and nothing is allocated
    /// once it has grown to the largest batch.
    pub fn decide_into(&self, request: &Request, out: &mut Vec<Verdict>) -> LatchState {
        let facts = FactsRef::Owned(&request.facts);
        out.clear();
        out.resize(request.calls.len(), Verdict::PENDING);
        let ids = Ids::of(request.session.as_deref(), request.turn.as_deref());
        let index = Lazy::new(facts, self);
        let latched = self.run(facts, &index, ids, &request.calls, out, &mut NoTrace);
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
        self.check_spent_names(facts)?;
        let mut stack = [Verdict::PENDING; ON_STACK];
        let mut heap = Vec::new();
        let verdicts = slots(&mut stack, &mut heap, view.calls.len());
        let ids = Ids::of(view.session.as_deref(), view.turn.as_deref());
        let index = Lazy::new(facts, self);
        let latched = self.run(facts, &index, ids, &view.calls, verdicts, &mut NoTrace);
        Ok(self.respond(facts, &index, ids, &view.calls, verdicts, latched))
    }

    /// Reads `json` with the one-pass reader and checks it against this policy (the module
    /// it names, its latch names), without judging it: the server reads a request once, starts
    /// its session from the ids read in the same pass, then judges with
    /// [`Policy::decide_read`].
    ///
    /// `None` when the one-pass reader refuses the text or a check fails; it never explains
    /// why. The caller then reads the text with [`Request::from_json`] and
    /// [`Policy::check_request`], which say why with a line, column or field path (or, for
    /// the rare request only the one-pass reader refuses, such as one whose keys collide in
    /// its duplicate-key hash, accept it).
    pub fn read_json<'a>(&self, json: &'a str) -> Option<ReadRequest<'a>> {
        let view = fast_json::parse(json, &self.custom_facts)?;
        self.check_module(view.policy.as_deref()).ok()?;
        self.check_latch_names(FactsRef::Borrowed(&view.facts).latched())
            .ok()?;
        self.check_spent_names(FactsRef::Borrowed(&view.facts))
            .ok()?;
        Some(ReadRequest { view })
    }

    /// Judges a request read by [`Policy::read_json`] (with any session state carried in by
    /// [`ReadRequest::carry`]). Like [`Policy::decide`], this never fails.
    pub fn decide_read(&self, request: &ReadRequest<'_>) -> Response {
        let view = &request.view;
        let facts = FactsRef::Borrowed(&view.facts);
        let mut stack = [Verdict::PENDING; ON_STACK];
        let mut heap = Vec::new();
        let verdicts = slots(&mut stack, &mut heap, view.calls.len());
        let ids = Ids::of(view.session.as_deref(), view.turn.as_deref());
        let index = Lazy::new(facts, self);
        let latched = self.run(facts, &index, ids, &view.calls, verdicts, &mut NoTrace);
        self.respond(facts, &index, ids, &view.calls, verdicts, latched)
    }

    /// Why a verdict denies, or `None` for an allow.
    pub fn deny_kind(&self, verdict: Verdict) -> Option<DenyKind> {
        Some(match verdict.0 {
            Outcome::Allow { .. } => return None,
            Outcome::Unclassified => DenyKind::Unclassified,
            Outcome::NoStage
            | Outcome::UnknownStage
            | Outcome::Whitelist(_)
            | Outcome::Turns(_)
            | Outcome::StageRequire(_) => DenyKind::Stage,
            Outcome::Latch(_) => DenyKind::Latch,
            Outcome::Tainted(_) | Outcome::Provenance(_) => DenyKind::Provenance,
            Outcome::Budget(_) => DenyKind::Budget,
            Outcome::AskLatch(_) | Outcome::AskRule(_) => DenyKind::Ask,
            Outcome::Rule(r) | Outcome::Part(r, _) | Outcome::Url(r, _) => {
                self.rules[r.index()].kind
            }
        })
    }

    /// The refusal of a denying verdict, or `None` for an allow. For a rule with several
    /// requirements this is the whole rule's refusal: a verdict from [`Policy::decide_into`]
    /// does not say which requirement failed; [`Policy::decide`] works that out and names it.
    pub fn refusal(&self, verdict: Verdict) -> Option<&Arc<str>> {
        Some(match verdict.0 {
            Outcome::Allow { .. } => return None,
            Outcome::Unclassified => &self.fixed.unclassified,
            Outcome::NoStage => &self.fixed.no_stage,
            Outcome::UnknownStage => &self.fixed.unknown_stage,
            Outcome::Whitelist(s) => &self.stages[s.index()].whitelist_refusal,
            Outcome::Turns(s) => &self.stages[s.index()].turns_refusal,
            Outcome::StageRequire(s) => &self.stages[s.index()].require_refusal,
            Outcome::Latch(l) => &self.latches[usize::from(l)].refusal,
            Outcome::Tainted(l) => &self.latches[usize::from(l)].tainted_refusal,
            Outcome::Provenance(r) => &self.rules[r.index()].refusal,
            Outcome::AskLatch(l) => &self.latches[usize::from(l)].ask_reason,
            Outcome::AskRule(r) => &self.rules[r.index()].ask_reason,
            Outcome::Budget(b) => &self.budgets[usize::from(b)].refusal,
            Outcome::Rule(r) => &self.rules[r.index()].refusal,
            Outcome::Part(r, k) => {
                let rule = &self.rules[r.index()];
                rule.parts
                    .get(usize::from(k))
                    .map_or(&rule.refusal, |p| &p.refusal)
            }
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
    fn run<C: CallLike, T: Trace>(
        &self,
        facts: FactsRef<'_>,
        provenance: &Lazy<'_>,
        ids: Ids<'_>,
        calls: &[C],
        out: &mut [Verdict],
        trace: &mut T,
    ) -> u64 {
        // Pre-scan: the latch reflects the whole batch's intent, not its array order. A setter
        // counts whether or not its own call is allowed.
        let mut latched = self.initial_latches(facts.latched());
        for (slot, call) in out.iter_mut().zip(calls) {
            *slot = Verdict(match self.tool_id(call.tool()) {
                Some(tool) => {
                    latched |= self.tools[tool.index()].sets;
                    Outcome::Allow {
                        fail_open: false,
                        approved: false,
                        tool,
                    }
                }
                None => Outcome::Unclassified,
            });
        }

        let batch = Batch {
            stage: self.judged_stage(facts),
            turns: facts.stage_turns().unwrap_or(0),
            latched,
            facts,
            provenance,
            ids,
            used: Default::default(),
            spent: Default::default(),
        };
        let mut memo = Memo::new();
        for (slot, call) in out.iter_mut().zip(calls) {
            let id = match slot.0 {
                Outcome::Allow { tool, .. } => Some(tool),
                _ => None,
            };
            trace.next_call();
            slot.0 = self.judge(call, id, &batch, &mut memo, trace);
        }
        latched
    }

    /// Whether the stage check of a call of `tool` in `stage`, `stage_turns` turns in, comes
    /// down to the stage's `require`: the stage is declared, lists the tool, has turns left
    /// and has a `require`. Such a call's stage denial depends on the principal and facts, so
    /// `toolgate diff` and the invariant checker search it instead of taking it as settled.
    #[doc(hidden)]
    pub fn stage_requirement_decides(
        &self,
        stage: Option<&str>,
        tool: &str,
        stage_turns: Option<u64>,
    ) -> bool {
        let (Some(s), Some(t)) = (stage.and_then(|s| self.stage_id(s)), self.tool_id(tool)) else {
            return false;
        };
        let stage = &self.stages[s.index()];
        stage.require.is_some()
            && matches!(
                ActiveStage::Refused(stage).gate(t, stage_turns.unwrap_or(0)),
                StageGate::Refused(_)
            )
    }

    /// The stage a request's `stage` fact names, with its `require` judged once for the
    /// whole batch: it reads no call arguments, and anything but true refuses the stage.
    #[inline]
    pub(crate) fn judged_stage(&self, facts: FactsRef<'_>) -> ActiveStage<'_> {
        match facts.stage() {
            None => ActiveStage::Missing,
            Some(name) => match self.stage_id(name) {
                Some(id) => {
                    let stage = &self.stages[id.index()];
                    match &stage.require {
                        None => ActiveStage::Known(stage),
                        Some(cond) => {
                            let env = Env::new(&Value::Null, facts, &self.host_lists);
                            if cond.eval(&env) == Truth::True {
                                ActiveStage::Known(stage)
                            } else {
                                ActiveStage::Refused(stage)
                            }
                        }
                    }
                }
                None => ActiveStage::Unknown,
            },
        }
    }

    /// A rule's denial narrowed to the requirement that failed, when the rule has several
    /// (`RuleInfo::parts`); any other verdict as it is.
    fn pinpoint<C: CallLike>(
        &self,
        v: Verdict,
        call: &C,
        facts: FactsRef<'_>,
        provenance: &Lazy<'_>,
    ) -> Verdict {
        match v.0 {
            Outcome::Rule(id) if !self.rules[id.index()].parts.is_empty() => {
                let env = Env::judging(call.args(), facts, &self.host_lists, Some(provenance));
                Verdict(failed_part(id, &self.rules[id.index()], &env))
            }
            _ => v,
        }
    }

    fn respond<C: CallLike>(
        &self,
        facts: FactsRef<'_>,
        provenance: &Lazy<'_>,
        ids: Ids<'_>,
        calls: &[C],
        verdicts: &[Verdict],
        latched: u64,
    ) -> Response {
        let stage = facts.stage();
        let mut decisions = Vec::with_capacity(calls.len());
        // The budgets' consumption replayed in request order, so a budget denial can say
        // what was left (the verdicts stay 8 bytes).
        let mut spent = crate::budget::Tally::default();
        for (call, v) in calls.iter().zip(verdicts) {
            let v = self.pinpoint(*v, call, facts, provenance);
            let budget_reason = self.budget_reason(v, call, facts, &mut spent);
            let (mut detokenise, mut opaque_tokens) = (Vec::new(), Vec::new());
            let sanitise_output = match v.0 {
                Outcome::Allow { tool: id, .. } => {
                    let tool = &self.tools[id.index()];
                    if self.vault_aware {
                        vault::sort_tokens(
                            call.args(),
                            &tool.detokenise,
                            &mut detokenise,
                            &mut opaque_tokens,
                        );
                    }
                    tool.sanitise_output
                }
                _ => false,
            };
            let asker = match v.0 {
                Outcome::AskLatch(l) => Some(Asker::Latch(l)),
                Outcome::AskRule(r) => Some(Asker::Rule(r)),
                Outcome::Allow {
                    approved: true,
                    tool,
                    ..
                } => self.first_asker(tool, call, facts, provenance, latched),
                _ => None,
            };
            let approval =
                asker.map(|by| crate::approval::text(&self.asked(by, call, ids).digest()));
            let shadow_denials = self.shadow_denials(v, call, facts, provenance);
            let provenance_hit = match v.0 {
                Outcome::Tainted(_) => {
                    Some(crate::provenance_words::args_hit(call.args(), provenance))
                }
                Outcome::Provenance(r) => crate::provenance_words::rule_hit(
                    &self.rules[r.index()].cond,
                    call.args(),
                    provenance,
                ),
                _ => None,
            };
            let reason = match &provenance_hit {
                Some(hit) => self
                    .refusal(v)
                    .map(|r| Arc::from(format!("{r} {}", crate::provenance_words::sentence(hit)))),
                None => budget_reason.or_else(|| self.refusal(v).cloned()),
            };
            // Built in its slot, with every field known first: the decision is not moved.
            decisions.push(Decision {
                id: CallLabel::from(call.id()),
                tool: CallLabel::from(call.tool()),
                allow: v.allowed(),
                kind: self.deny_kind(v),
                rule: match v.0 {
                    Outcome::UnknownStage => Some(Arc::from(stage.unwrap_or_default())),
                    _ => self.denied_by_arc(v).cloned(),
                },
                reason,
                fail_open: v.fail_open(),
                detokenise,
                opaque_tokens,
                sanitise_output,
                approval,
                shadow_denials,
                provenance: provenance_hit,
            });
        }
        Response {
            policy: self.module.clone(),
            revision: self.revision.clone(),
            latched: self.latch_state(latched, facts.latched()),
            decisions,
            spent: self
                .budgets
                .iter()
                .enumerate()
                .map(|(i, b)| (b, spent.get(i)))
                .filter(|(b, n)| b.scope != crate::BudgetScope::Batch && *n > 0.0)
                .map(|(b, n)| (b.name.clone(), n))
                .collect(),
        }
    }

    /// [`Policy::denied_by`] as the shared name, for everything but an undeclared stage.
    fn denied_by_arc(&self, verdict: Verdict) -> Option<&Arc<str>> {
        Some(match verdict.0 {
            Outcome::Allow { .. } | Outcome::UnknownStage => return None,
            Outcome::Unclassified => &self.fixed.rule_unclassified,
            Outcome::NoStage => &self.fixed.rule_no_stage,
            Outcome::Whitelist(s) | Outcome::Turns(s) | Outcome::StageRequire(s) => {
                &self.stages[s.index()].name
            }
            Outcome::Latch(l) | Outcome::AskLatch(l) | Outcome::Tainted(l) => {
                &self.latches[usize::from(l)].name
            }
            Outcome::Budget(b) => &self.budgets[usize::from(b)].name,
            Outcome::Rule(r)
            | Outcome::Part(r, _)
            | Outcome::Url(r, _)
            | Outcome::AskRule(r)
            | Outcome::Provenance(r) => &self.rules[r.index()].name,
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

    /// The check order: the one place it is written.
    fn judge<C: CallLike, T: Trace>(
        &self,
        call: &C,
        id: Option<ToolId>,
        batch: &Batch<'_>,
        memo: &mut Memo,
        trace: &mut T,
    ) -> Outcome {
        trace.record(Check::Class(id));
        let Some(id) = id else {
            return Outcome::Unclassified;
        };
        let gate = batch.stage.gate(id, batch.turns);
        trace.record(Check::Stage(gate, batch.turns));
        match gate {
            StageGate::Missing => return Outcome::NoStage,
            StageGate::Unknown => return Outcome::UnknownStage,
            StageGate::NotListed(s) => return Outcome::Whitelist(s.id),
            StageGate::TurnsUsedUp(s, _) => return Outcome::Turns(s.id),
            StageGate::Refused(s) => return Outcome::StageRequire(s.id),
            StageGate::Open(_) => {}
        }
        let tool = &self.tools[id.index()];
        if T::ON {
            // The latches that block this tool, in declaration order, up to the first set one:
            // the same one `blocking_latch` picks.
            let mut rest = tool.blocked_by;
            while rest != 0 {
                let index = rest.trailing_zeros() as usize;
                let set = batch.latched & (1 << index) != 0;
                trace.record(Check::Latch { index, set });
                if set {
                    break;
                }
                rest &= rest - 1;
            }
        }
        // One test for both kinds of latch block (`latch_mask` is their union), so a policy
        // without `blocks tainted` judges with the code it had before.
        if tool.latch_mask & batch.latched != 0 {
            if let Some(latch) = blocking_latch(tool.blocked_by, batch.latched) {
                return Outcome::Latch(latch);
            }
            if let Some(outcome) = self.tainted(call, tool.blocked_tainted, batch, trace) {
                return outcome;
            }
        }
        // Two copies of the rest, one with the ask checks compiled in: a tool nothing can make
        // ask is judged by the same code as before asks existed.
        if tool.may_ask {
            self.judge_rules::<true, C, T>(call, id, batch, memo, trace)
        } else {
            self.judge_rules::<false, C, T>(call, id, batch, memo, trace)
        }
    }

    /// A set latch that `blocks tainted` the tool (one of `blocked_tainted`): its denial when
    /// an argument value came from untrusted output. Out of line and cold, so a policy
    /// without provenance judges with the code it had before.
    #[cold]
    #[inline(never)]
    fn tainted<C: CallLike, T: Trace>(
        &self,
        call: &C,
        blocked_tainted: u64,
        batch: &Batch<'_>,
        trace: &mut T,
    ) -> Option<Outcome> {
        let latch = blocking_latch(blocked_tainted, batch.latched)?;
        let tainted = crate::provenance::tainted(call.args(), batch.provenance.get());
        trace.record(Check::Tainted {
            index: usize::from(latch),
            tainted,
        });
        tainted.then_some(Outcome::Tainted(latch))
    }

    /// The rest of the check order for a call that passed the stage and latch checks: the
    /// tool's rules, then (with `ASK`) whether it asks.
    #[inline(always)]
    fn judge_rules<const ASK: bool, C: CallLike, T: Trace>(
        &self,
        call: &C,
        id: ToolId,
        batch: &Batch<'_>,
        memo: &mut Memo,
        trace: &mut T,
    ) -> Outcome {
        let tool = &self.tools[id.index()];
        // A set latch that asks for the tool names the ask, unless a rule denies first.
        let mut ask = if ASK {
            blocking_latch(tool.asked_by, batch.latched).map(Asker::Latch)
        } else {
            None
        };
        if tool.rules.is_empty() {
            return self.settle(ask, false, id, call, batch, trace);
        }
        let env = Env::judging(
            call.args(),
            batch.facts,
            &self.host_lists,
            Some(batch.provenance),
        );
        let mut fail_open = false;
        for &rule_id in tool.rules.iter() {
            let rule = &self.rules[rule_id.index()];
            let truth = memo.eval(rule, &env);
            let denied = match truth {
                Truth::True => None,
                Truth::Unknown(ABSENT) if rule.fail_open => {
                    fail_open = true;
                    None
                }
                // Host rules are never memoised, so the reason is this rule's own.
                Truth::Unknown(flags) if flags & AMBIGUOUS != 0 => {
                    Some(match env.ambiguity.get() {
                        Some(why) => Outcome::Url(rule_id, why),
                        None => Outcome::Rule(rule_id),
                    })
                }
                // Which of its requirements failed is worked out only when the response is
                // put into words (`pinpoint`), so the verdicts stay as cheap as before.
                Truth::False | Truth::Unknown(_)
                    if rule.reads_provenance
                        && crate::provenance_words::rule_hit(
                            &rule.cond,
                            call.args(),
                            batch.provenance,
                        )
                        .is_some() =>
                {
                    Some(Outcome::Provenance(rule_id))
                }
                Truth::False | Truth::Unknown(_) => Some(Outcome::Rule(rule_id)),
            };
            trace.record(Check::Rule {
                rule: rule_id,
                truth,
                passed: denied.is_none(),
                env: &env,
            });
            if let Some(outcome) = denied {
                return outcome;
            }
            // A rule that passed asks when one of its `ask when` holds, or is unknown: unsure
            // whether a person should see the call, one does.
            if ASK && ask.is_none() {
                if let Some(cond) = &rule.ask {
                    if cond.eval(&env) != Truth::False {
                        ask = Some(Asker::Rule(rule_id));
                    }
                }
            }
        }
        self.settle(ask, fail_open, id, call, batch, trace)
    }

    /// The outcome of a call that passed every check: an allow, or the ask `ask` unless
    /// `facts.approvals` holds its approval.
    #[inline(always)]
    fn settle<C: CallLike, T: Trace>(
        &self,
        ask: Option<Asker>,
        fail_open: bool,
        tool: ToolId,
        call: &C,
        batch: &Batch<'_>,
        trace: &mut T,
    ) -> Outcome {
        let budgeted = !self.tools[tool.index()].budgets.is_empty();
        // The amounts of the tool's first budgets, read once for the check and the consumption.
        let mut amounts = [0.0; AMOUNTS];
        if budgeted {
            if let Some(over) = self.over_budget(tool, call, batch, &mut amounts, trace) {
                return over;
            }
        }
        let outcome = match ask {
            None => Outcome::Allow {
                fail_open,
                approved: false,
                tool,
            },
            Some(by) => self.ask_or_approved(by, fail_open, tool, call, batch, trace),
        };
        // Only an allowed call consumes: a denial or an ask takes nothing.
        if budgeted && matches!(outcome, Outcome::Allow { .. }) {
            self.consume(tool, call, &amounts, &mut batch.spent.borrow_mut());
        }
        outcome
    }

    /// The rules marked `shadow` that would deny a call that is allowed or asks: each judged
    /// as the judge would (an absent fact passes a fail-open rule). Empty, with nothing
    /// evaluated, for a tool without shadow rules.
    fn shadow_denials<C: CallLike>(
        &self,
        v: Verdict,
        call: &C,
        facts: FactsRef<'_>,
        provenance: &Lazy<'_>,
    ) -> Vec<Arc<str>> {
        let tool = match v.0 {
            Outcome::Allow { tool, .. } => tool,
            Outcome::AskLatch(_) | Outcome::AskRule(_) => match self.tool_id(call.tool()) {
                Some(t) => t,
                None => return Vec::new(),
            },
            _ => return Vec::new(),
        };
        let shadow = &self.tools[tool.index()].shadow_rules;
        if shadow.is_empty() {
            return Vec::new();
        }
        let env = Env::judging(call.args(), facts, &self.host_lists, Some(provenance));
        shadow
            .iter()
            .map(|&r| &self.rules[r.index()])
            .filter(|rule| match rule.cond.eval(&env) {
                Truth::True => false,
                Truth::Unknown(ABSENT) => !rule.fail_open,
                Truth::False | Truth::Unknown(_) => true,
            })
            .map(|rule| rule.name.clone())
            .collect()
    }

    /// Adds an allowed call of `tool` to `tally`: its amount for each of the tool's budgets,
    /// from `known` (the amounts the check read, by position) or read again past it. The one
    /// place consumption is written: the judge and the response's replay both call it.
    fn consume<C: CallLike>(
        &self,
        tool: ToolId,
        call: &C,
        known: &[f64],
        tally: &mut crate::budget::Tally,
    ) {
        for (k, &b) in self.tools[tool.index()].budgets.iter().enumerate() {
            let amount = match known.get(k) {
                Some(a) => *a,
                None => self.budget_amount(usize::from(b), call).unwrap_or(0.0),
            };
            tally.add(usize::from(b), amount);
        }
    }

    /// For the response, in request order: the refusal of a budget denial, with what is
    /// left; an allowed call is added to `spent` as the judge added it.
    fn budget_reason<C: CallLike>(
        &self,
        v: Verdict,
        call: &C,
        facts: FactsRef<'_>,
        spent: &mut crate::budget::Tally,
    ) -> Option<Arc<str>> {
        match v.0 {
            Outcome::Allow { tool, .. } => {
                self.consume(tool, call, &[], spent);
                None
            }
            Outcome::Budget(b) => {
                let index = usize::from(b);
                let info = &self.budgets[index];
                let Some(before) = self.spent_before(index, facts) else {
                    return Some(
                        format!(
                            "{}: {}, so nothing is taken to be left",
                            info.refusal,
                            crate::budget::unknown_count(&info.name)
                        )
                        .into(),
                    );
                };
                let left = crate::text::number((info.max - before - spent.get(index)).max(0.0));
                let per = crate::budget::per_text(info.scope, None);
                Some(
                    match self.budget_amount(index, call) {
                        None => format!(
                            "{}: {}",
                            info.refusal,
                            crate::budget::bad_amount(&info.sum_text())
                        ),
                        Some(amount) => format!(
                            "{} ({left} of {} left {per}; this call needs {})",
                            info.refusal,
                            crate::text::number(info.max),
                            crate::text::number(amount)
                        ),
                    }
                    .into(),
                )
            }
            _ => None,
        }
    }

    /// The first budget of `tool` the call does not fit in, in source order: its amount is
    /// not a number of at least 0, or the batch's allowed calls have already taken so much
    /// that it would pass the limit. Out of line: a tool without budgets never calls it.
    #[inline(never)]
    fn over_budget<C: CallLike, T: Trace>(
        &self,
        tool: ToolId,
        call: &C,
        batch: &Batch<'_>,
        amounts: &mut [f64; AMOUNTS],
        trace: &mut T,
    ) -> Option<Outcome> {
        let spent = batch.spent.borrow();
        for (k, &b) in self.tools[tool.index()].budgets.iter().enumerate() {
            let index = usize::from(b);
            let amount = self.budget_amount(index, call);
            if let (Some(slot), Some(a)) = (amounts.get_mut(k), amount) {
                *slot = a;
            }
            // A budget over several batches starts from what its keeper says was consumed;
            // without that count nothing is known to be left.
            let Some(before) = self.spent_before(index, batch.facts) else {
                trace.record(Check::Budget {
                    budget: index,
                    amount,
                    left: None,
                });
                return Some(Outcome::Budget(b));
            };
            let left = self.budgets[index].max - before - spent.get(index);
            let left = Some(left);
            trace.record(Check::Budget {
                budget: index,
                amount,
                left,
            });
            match (amount, left) {
                (Some(a), Some(left)) if a <= left => {}
                _ => return Some(Outcome::Budget(b)),
            }
        }
        None
    }

    /// What budget `index`'s scope consumed before this batch: 0 for `per batch`, else
    /// `facts.spent.NAME` (`None` when the keeper gave no count).
    pub(crate) fn spent_before(&self, index: usize, facts: FactsRef<'_>) -> Option<f64> {
        let b = &self.budgets[index];
        if b.scope == crate::BudgetScope::Batch {
            return Some(0.0);
        }
        facts.spent(&b.name)
    }

    /// What a call consumes from budget `index`: 1 for `count`, else the argument it sums
    /// when that is a finite number of at least 0 (`None` otherwise: a negative amount would
    /// give budget back, so it is refused like a missing one).
    pub(crate) fn budget_amount<C: CallLike>(&self, index: usize, call: &C) -> Option<f64> {
        let Some(path) = &self.budgets[index].sum else {
            return Some(1.0);
        };
        crate::cond::arg_at(call.args(), path)
            .and_then(serde_json::Value::as_f64)
            .filter(|n| n.is_finite() && *n >= 0.0)
    }

    /// [`Policy::settle`] for a call that asks: out of line, so the judge of a policy
    /// without asks stays as small as before.
    #[cold]
    #[inline(never)]
    fn ask_or_approved<C: CallLike, T: Trace>(
        &self,
        by: Asker,
        fail_open: bool,
        tool: ToolId,
        call: &C,
        batch: &Batch<'_>,
        trace: &mut T,
    ) -> Outcome {
        let approved = batch.facts.has_approvals() && {
            let digest = self.asked(by, call, batch.ids).digest();
            let mut used = batch.used.borrow_mut();
            let fresh = batch.facts.approves(&digest) && !used.contains(&digest);
            if fresh {
                used.push(digest);
            }
            fresh
        };
        if T::ON {
            let (latch, rule) = match by {
                Asker::Latch(l) => (Some(usize::from(l)), None),
                Asker::Rule(r) => (None, Some(r)),
            };
            trace.record(Check::Ask {
                latch,
                rule,
                approved,
            });
        }
        if approved {
            Outcome::Allow {
                fail_open,
                approved: true,
                tool,
            }
        } else {
            by.outcome()
        }
    }

    /// The element that asked about a call of `tool` that passed every check: the first set
    /// latch that `asks` for it, else the first of its rules whose `ask when` holds (or
    /// cannot be told): the judge's own choice, worked out again for the response.
    fn first_asker<C: CallLike>(
        &self,
        tool: ToolId,
        call: &C,
        facts: FactsRef<'_>,
        provenance: &Lazy<'_>,
        latched: u64,
    ) -> Option<Asker> {
        let info = &self.tools[tool.index()];
        if let Some(l) = blocking_latch(info.asked_by, latched) {
            return Some(Asker::Latch(l));
        }
        let env = Env::judging(call.args(), facts, &self.host_lists, Some(provenance));
        info.rules.iter().find_map(|&r| {
            let cond = self.rules[r.index()].ask.as_ref()?;
            (cond.eval(&env) != Truth::False).then_some(Asker::Rule(r))
        })
    }

    /// What an approval of `call`, asked by `by`, is for.
    fn asked<'a, C: CallLike>(
        &'a self,
        by: Asker,
        call: &'a C,
        ids: Ids<'a>,
    ) -> crate::approval::Subject<'a> {
        let element: &Arc<str> = match by {
            Asker::Latch(l) => &self.latches[usize::from(l)].name,
            Asker::Rule(r) => &self.rules[r.index()].name,
        };
        crate::approval::Subject {
            module: &self.module,
            revision: &self.revision,
            element,
            tool: call.tool(),
            args: call.args(),
            session: ids.session,
            turn: ids.turn,
        }
    }
}

/// A denying rule's outcome: the first of its requirements that does not hold, when it has
/// several, so the refusal names that one. Runs only for a denial being put into words, and
/// allocates nothing.
fn failed_part(id: RuleId, rule: &RuleInfo, env: &Env<'_>) -> Outcome {
    rule.parts
        .iter()
        .position(|p| !matches!(p.cond.eval(env), Truth::True))
        .and_then(|k| u16::try_from(k).ok())
        .map_or(Outcome::Rule(id), |k| Outcome::Part(id, k))
}

/// Batches of up to this many calls keep their verdicts on the stack on the paths that build
/// a response, so the verdicts cost no allocation beside the response's own.
const ON_STACK: usize = 16;

/// `n` verdict slots: the front of `stack` when they fit, else `heap` grown to `n`.
fn slots<'a>(
    stack: &'a mut [Verdict; ON_STACK],
    heap: &'a mut Vec<Verdict>,
    n: usize,
) -> &'a mut [Verdict] {
    if n <= ON_STACK {
        &mut stack[..n]
    } else {
        heap.resize(n, Verdict::PENDING);
        heap
    }
}

fn all_bits(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

#[cfg(test)]
mod size {
    /// A verdict stays 8 bytes: `decide_into`'s buffer and the judge's copies cost what they
    /// did before asks (an ask's element is worked out again for the response).
    #[test]
    fn a_verdict_is_eight_bytes() {
        assert_eq!(std::mem::size_of::<super::Verdict>(), 8);
    }
}
