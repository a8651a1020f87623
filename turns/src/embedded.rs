//! [`EmbeddedTurns`]: the turn state of one session for an executor that embeds toolgate and
//! judges whole model messages in process (the Python and Node packages' `TurnState`, behind
//! their frameworks' `Turn` adapters).
//!
//! It is [`SessionTurns`], the model every other surface uses, with what in-process judging
//! adds, written once here so the language packages only wrap it:
//!
//! - **One call judges a batch** ([`EmbeddedTurns::judge`]): it places the batch into its
//!   turn, decides it with the placed latches and the session's earlier calls merged into the
//!   executor's facts, and records the latches the judgement set. The caller holds one lock
//!   around it, so nothing can fall between placing, judging and latching.
//! - **Turn ids are the framework's own new-turn signal** ([`NewIds::StartTurn`]): an id
//!   never seen starts a turn, a known one goes back to its own turn and latches.
//! - **A verdict cache per model message** ([`EmbeddedTurns::decision`]), for frameworks that
//!   ask about one call at a time after the adapter judged their message whole. A verdict
//!   answers only a call of the batch it was judged in (same batch id, turn, call id, tool,
//!   arguments and policy revision), and only once; every kept verdict is dropped as soon as
//!   a judgement changes any latch of the session, so a verdict judged before a latch is
//!   never served after it.
//! - **Budget counts over batches** ([`crate::budgets`]): `per turn` and `per session` counts
//!   in the session's own state (a turn is the one the batch is placed in; a turn the
//!   session no longer keeps gets no count, so its budgets deny), `per principal` and
//!   `per tenant` counts in the process's [`Book`], shared by every session of the process
//!   and keyed by `facts.principal.sub` and `.tenant` (a batch without them gets no count).
//!   The counts are read, the batch judged and its consumption added under the session's
//!   lock (the caller's) and, for a principal's or tenant's budget, the book's, so two
//!   concurrent batches never spend one remainder. A batch answered from its kept response
//!   is not counted again. Counts are per process and start from zero when it starts; a
//!   request may not bring its own (`facts.spent`: [`EmbeddedTurns::request`]).

use crate::budgets::{self, Book, Counts, Ledger, ScopeIds};
use crate::session::{
    Called, NewIds, Placed, Placement, SessionTurns, TurnError, TurnKey, KEPT_TURNS,
};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};
use toolgate_engine::{
    BudgetScope, Call, Decision, Latched, Policy, Request, RequestError, Response,
};

/// How many judged batches a session keeps verdicts of; the oldest goes first. A batch
/// whose verdicts are gone is judged again, call by call: never allowed by default.
pub const MAX_BATCHES: usize = 64;

/// One session's turns, its budget counts and the verdicts of its recent batches.
#[derive(Debug)]
pub struct EmbeddedTurns {
    turns: SessionTurns,
    /// Verdicts of batches judged with a batch id, oldest first, at most [`MAX_BATCHES`].
    /// Emptied whenever a judgement changes a latch.
    batches: VecDeque<Batch>,
    /// The session's `per turn` and `per session` budget counts (kept as long as the
    /// session; a turn's only while the session may still place the turn).
    counts: Counts,
    /// Where `per principal` and `per tenant` counts are kept: the process's book.
    book: &'static Book,
    /// Whether a batch without `facts.prompt` or `facts.outputs` gets the ones this session
    /// kept. False for an executor that keeps them itself ([`EmbeddedTurns::without_provenance`]).
    keeps_provenance: bool,
}

impl Default for EmbeddedTurns {
    fn default() -> Self {
        EmbeddedTurns::with_book(Book::process())
    }
}

/// Where one embedded batch's counts are: the session's own, and the process's book (locked
/// only for a policy that has a `per principal` or `per tenant` budget).
struct Ledgers<'a> {
    session: &'a mut Counts,
    shared: Option<MutexGuard<'a, Counts>>,
}

impl Ledger for Ledgers<'_> {
    fn counts(&mut self, scope: BudgetScope) -> Option<&mut Counts> {
        match scope {
            BudgetScope::Turn | BudgetScope::Session => Some(self.session),
            BudgetScope::Principal | BudgetScope::Tenant => self.shared.as_deref_mut(),
            BudgetScope::Batch => None,
        }
    }
}

/// One batch judged whole, and what it was judged as.
#[derive(Debug)]
struct Batch {
    /// The caller's id of the model message.
    id: String,
    /// The turn it was judged in (the fingerprint of its id), `None` for no id.
    turn: Option<TurnKey>,
    /// Its calls as the engine read them (ids, tools, arguments).
    calls: Vec<Call>,
    /// The response, one decision per call in the same order.
    response: Response,
    /// Which calls' decisions `decision` has given: each is given once.
    served: Vec<bool>,
    /// Whether what its allowed calls consumed was added to the budget counts (always, for
    /// a policy with no budget over batches). An allowing verdict of a batch that was not
    /// is never served: the call is judged again, and counted then.
    counted: bool,
}

impl EmbeddedTurns {
    /// A session with no turn signalled yet whose `per principal` and `per tenant` counts
    /// are kept in `book`.
    fn with_book(book: &'static Book) -> Self {
        EmbeddedTurns {
            turns: SessionTurns::default(),
            batches: VecDeque::new(),
            counts: Counts::new(Duration::MAX),
            book,
            keeps_provenance: true,
        }
    }

    /// A session whose executor keeps the turn's prompt and outputs itself and sends them
    /// with every batch (the LangChain middleware reads them from the agent's state): a
    /// batch without `facts.prompt` or `facts.outputs` is judged without it, so a check that
    /// reads them denies, instead of being given what this session kept (nothing, here: an
    /// empty outputs list would read as "no call brought anything in"). Latches, recorded
    /// calls, verdicts and budget counts are kept as in any session.
    pub fn without_provenance() -> Self {
        EmbeddedTurns {
            keeps_provenance: false,
            ..EmbeddedTurns::default()
        }
    }

    /// A batch request read from JSON text and checked against `policy` (its module, latch
    /// names and call ids), for [`EmbeddedTurns::judge`]. Refuses one that brings its own
    /// budget counts (`facts.spent`): the turn state keeps them, and an executor that could
    /// say how much was used could spend any budget again.
    pub fn request(policy: &Policy, text: &str) -> Result<Request, RequestError> {
        let request = Request::from_json(text)?;
        policy.check_request(&request)?;
        if request.facts.spent.is_some() {
            return Err(RequestError::Schema {
                path: "facts.spent".into(),
                message: "the turn state keeps budget counts itself, so a request may not carry `facts.spent`".into(),
            });
        }
        Ok(request)
    }

    /// The turn model underneath, to read.
    pub fn turns(&self) -> &SessionTurns {
        &self.turns
    }

    /// The agent's explicit new-turn signal (see [`SessionTurns::signal`]).
    pub fn signal(&mut self, policy: &Policy, id: Option<&str>) -> Result<(), TurnError> {
        self.turns.signal(policy, id)
    }

    /// What a judgement that stopped half-way (a panic) leaves: the current turn latched and
    /// no verdict kept, since it may have set a latch it did not get to record.
    pub fn recover(&mut self) {
        self.turns.latch_current();
        self.batches.clear();
    }

    /// Places, judges and latches one batch as a call of turn `turn` (an unseen id starts a
    /// turn; `None` is the current one). The executor's `facts` are kept, with the turn's
    /// latches ORed into `facts.latched` and the session's recorded calls appended to
    /// `facts.called` (the fact stays absent only when neither has any).
    ///
    /// A policy's budgets over batches are judged with the counts this session and this
    /// process keep (see the module docs; `now` is when the batch is judged, for windows),
    /// and, when `spend`, what the batch's allowed calls consumed is added to them. A
    /// judgement no call runs on (a framework's pre-scan of a message, or a preview of
    /// whether a call asks) passes `spend: false`: the call that runs is judged again, and
    /// counted then. The executor's own `facts.spent` is replaced.
    ///
    /// With `batch` (the framework's id of the model message) the verdicts are kept for
    /// [`EmbeddedTurns::decision`]; judging the same batch again (same id, turn, calls and
    /// policy revision, and no latch changed since) returns the kept response, and counts
    /// nothing again (a batch kept by a judgement that did not spend is judged again by one
    /// that does).
    // One argument each for what a batch is judged with; the packages pass them through.
    #[allow(clippy::too_many_arguments)]
    pub fn judge(
        &mut self,
        policy: &Policy,
        mut request: Request,
        turn: Option<&str>,
        batch: Option<String>,
        now: Instant,
        spend: bool,
    ) -> Result<Response, TurnError> {
        let key = turn.map(TurnKey::of);
        if let Some(id) = batch.as_deref() {
            let kept = self.batches.iter().find(|b| {
                b.id == id
                    && b.turn == key
                    && b.calls == request.calls
                    && same_policy(b, policy)
                    && (b.counted || !spend)
            });
            if let Some(b) = kept {
                return Ok(b.response.clone());
            }
        }
        let placed = self.turns.place(policy, turn, NewIds::StartTurn)?;
        let facts = &mut request.facts;
        facts.latched = placed.latched.or(&facts.latched);
        let recorded = self.turns.called_facts();
        if !recorded.is_empty() {
            facts.called.get_or_insert_with(Vec::new).extend(recorded);
        }
        // The executor's own outputs and prompt win; else what this session recorded, if it
        // keeps them.
        if facts.outputs.is_none() && self.keeps_provenance {
            facts.outputs = self.turns.outputs_fact(&placed);
        }
        if facts.prompt.is_none() && self.keeps_provenance {
            facts.prompt = self.turns.prompt_fact(&placed);
        }
        let counted = spend || !policy.keeps_counts();
        let response = self.decide(policy, &mut request, &placed, now, spend);
        for (call, d) in request.calls.iter().zip(&response.decisions) {
            if d.allow {
                self.turns
                    .expect_output(policy, &placed, &call.id, &call.tool, &call.args);
            }
        }
        if self.record_latches(policy, &placed, &request.calls, &response.latched) {
            self.batches.clear();
        }
        if let Some(id) = batch {
            self.batches.retain(|b| b.id != id);
            if self.batches.len() >= MAX_BATCHES {
                self.batches.pop_front();
            }
            self.batches.push_back(Batch {
                id,
                turn: key,
                served: vec![false; request.calls.len()],
                calls: request.calls,
                response: response.clone(),
                counted,
            });
        }
        Ok(response)
    }

    /// Decides `request`, placed at `placed`, with the counts of `policy`'s budgets over
    /// batches and, when `spend`, adds what it consumed (under the process book's lock when
    /// a budget is a principal's or a tenant's).
    fn decide(
        &mut self,
        policy: &Policy,
        request: &mut Request,
        placed: &Placed,
        now: Instant,
        spend: bool,
    ) -> Response {
        if !policy.keeps_counts() {
            return policy.decide(request);
        }
        // The session is this state itself; a turn is counted only where the session keeps
        // it (an earlier turn it may still place, or the current one).
        let mut digits = [0u8; 20];
        let turn = match placed.placement {
            Placement::Current | Placement::Earlier => placed.turn.map(|n| decimal(n, &mut digits)),
            Placement::Forgotten | Placement::Unknown => None,
        };
        let principal = request.facts.principal.as_ref();
        let scopes = ScopeIds::in_turn(principal, Some(Cow::Borrowed("")), turn.map(Cow::Borrowed));
        let shared = policy
            .budgets()
            .any(|b| matches!(b.scope, BudgetScope::Principal | BudgetScope::Tenant))
            .then(|| self.book.lock());
        let mut ledgers = Ledgers {
            session: &mut self.counts,
            shared,
        };
        let response = budgets::judge_in(
            &mut ledgers,
            policy,
            &scopes,
            now,
            |given| {
                request.facts.spent = given.map(|g| g.into_iter().collect());
                policy.decide(request)
            },
            |r| spend.then_some(r),
        );
        drop(ledgers);
        // A turn the session can no longer place is never counted again.
        let oldest = self.turns.turns().saturating_sub(2 * KEPT_TURNS as u64);
        self.counts.retain(|scope, _, turn| {
            scope != BudgetScope::Turn || turn.parse::<u64>().map_or(true, |n| n >= oldest)
        });
        response
    }

    /// Records the latches a judgement of `calls` reported into the turn they were placed
    /// in; true when that may have changed a latch of the session.
    fn record_latches(
        &mut self,
        policy: &Policy,
        placed: &Placed,
        calls: &[Call],
        latched: &Latched,
    ) -> bool {
        if calls.is_empty() {
            self.turns.latch(policy, placed, "", latched);
        }
        for call in calls {
            // The tool matters only for a call the session could not place, which records
            // the latches its own tool sets; for a placed batch this is one union.
            self.turns.latch(policy, placed, &call.tool, latched);
        }
        match placed.placement {
            Placement::Current | Placement::Earlier => adds(&placed.latched, latched),
            // Nothing the turn did is known here: count it as a change.
            Placement::Forgotten | Placement::Unknown => true,
        }
    }

    /// The kept decision of a batch judged with a batch id (`batch`; `None` is the batch
    /// judged last) for call `call_id` of `tool` with `args`, or `None`: judge the call
    /// alone. Given only for the very call it was judged as (same batch and turn, call id,
    /// tool, arguments and policy revision), only once, and never after a judgement changed
    /// a latch of the session; an allowing one only when its judgement spent budget counts
    /// (or the policy has none over batches).
    pub fn decision(
        &mut self,
        policy: &Policy,
        call_id: &str,
        tool: &str,
        args: &Value,
        turn: Option<&str>,
        batch: Option<&str>,
    ) -> Option<Decision> {
        let at = match batch {
            Some(id) => self.batches.iter().rposition(|b| b.id == id)?,
            None => self.batches.len().checked_sub(1)?,
        };
        let b = self.batches.get_mut(at)?;
        if b.turn != turn.map(TurnKey::of) || !same_policy(b, policy) {
            return None;
        }
        let i = b.calls.iter().position(|c| c.id == call_id)?;
        let call = b.calls.get(i)?;
        if call.tool != tool || call.args != *args {
            return None;
        }
        // An allowing verdict of a judgement that counted nothing: the call that runs is
        // judged (and counted) on its own.
        if !b.counted && b.response.decisions.get(i).is_none_or(|d| d.allow) {
            return None;
        }
        let served = b.served.get_mut(i)?;
        if std::mem::replace(served, true) {
            return None;
        }
        b.response.decisions.get(i).cloned()
    }

    /// Records the output of call `call_id` of `tool` in turn `turn`, for the `facts.outputs`
    /// of the turn's later batches (see [`SessionTurns::record_output`]). An allowed call
    /// whose output the policy reads as untrusted must have its output recorded before the
    /// turn's outputs are sent at all: until then a check that reads them denies.
    pub fn record_output(
        &mut self,
        policy: &Policy,
        call_id: &str,
        tool: &str,
        output: Value,
        turn: Option<&str>,
    ) {
        self.turns
            .record_output(policy, call_id, tool, output, turn);
    }

    /// Keeps `prompt` as the user's message of turn `turn` (`None`: the current one), for
    /// `facts.prompt`, only if that turn is the session's current turn; true when kept (see
    /// [`SessionTurns::set_prompt_of`]). Checked and kept under the caller's one lock, so no
    /// turn can start between the check and the write. A session that does not keep
    /// provenance ([`EmbeddedTurns::without_provenance`]) keeps no prompt.
    pub fn set_prompt(&mut self, prompt: &str, turn: Option<&str>) -> bool {
        self.keeps_provenance && self.turns.set_prompt_of(prompt, turn)
    }

    /// Records that `tool` ran (`ok`: it succeeded) in turn `turn` (see
    /// [`SessionTurns::record_call`]).
    pub fn record_call(&mut self, tool: &str, ok: bool, turn: Option<&str>) {
        self.turns.record_call(tool, ok, turn);
    }

    /// The latches a call of turn `turn` would be judged with now, in a response's shape for
    /// `policy` (one flag for a policy with at most one latch, else a flag for every
    /// declared latch). Changes nothing; an unseen id reads as the new turn it would start,
    /// and a turn that cannot be judged as every latch set.
    pub fn latches(&self, policy: &Policy, turn: Option<&str>) -> Latched {
        let mut probe = self.turns.clone();
        let latched = match probe.place(policy, turn, NewIds::StartTurn) {
            Ok(placed) => placed.latched,
            Err(_) => Latched::Flag(true),
        };
        shaped(policy, &latched)
    }

    /// The calls recorded in turn `turn` (`None`: the current one), oldest first; none for a
    /// turn the session does not know. Changes nothing.
    pub fn recorded(&self, policy: &Policy, turn: Option<&str>) -> Vec<&Called> {
        let mut probe = self.turns.clone();
        let number = match probe.place(policy, turn, NewIds::StartTurn) {
            Ok(Placed {
                placement: Placement::Current | Placement::Earlier,
                turn: Some(n),
                ..
            }) => Some(n),
            _ => return Vec::new(),
        };
        self.turns
            .called()
            .iter()
            .filter(|c| c.turn == number)
            .collect()
    }

    /// Every recorded call, oldest first, with how many turns ago it ran (`None` when its
    /// turn is unknown): a request's `facts.called` entries.
    pub fn called(&self) -> impl Iterator<Item = (&Called, Option<u64>)> {
        let current = self.turns.turns();
        self.turns
            .called()
            .iter()
            .map(move |c| (c, c.turn.map(|t| current.saturating_sub(t))))
    }
}

/// `n` in decimal, written into `digits`.
fn decimal(n: u64, digits: &mut [u8; 20]) -> &str {
    let mut at = digits.len();
    let mut rest = n;
    while let Some(next) = at.checked_sub(1) {
        at = next;
        if let Some(d) = digits.get_mut(at) {
            // `rest % 10` is a digit.
            *d = b'0' + (rest % 10) as u8;
        }
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    // Only ASCII digits were written (a u64 has at most 20).
    std::str::from_utf8(digits.get(at..).unwrap_or_default()).unwrap_or("-")
}

/// True when `batch` was judged by `policy`'s very revision.
fn same_policy(batch: &Batch, policy: &Policy) -> bool {
    *batch.response.policy == *policy.module() && *batch.response.revision == *policy.revision()
}

/// True when recording `new` over `had` (the turn's latches before the judgement, set
/// latches only) sets a latch that was not set. Errs towards true.
fn adds(had: &Latched, new: &Latched) -> bool {
    match (had, new) {
        (_, new) if !new.any() => false,
        (Latched::Flag(true), _) => false,
        (Latched::ByName(had), Latched::ByName(new)) => new
            .iter()
            .any(|(name, set)| *set && !had.get(name).copied().unwrap_or(false)),
        _ => true,
    }
}

/// `latched` in the shape a response gives it for `policy`.
fn shaped(policy: &Policy, latched: &Latched) -> Latched {
    let names: Vec<&str> = policy.latches().collect();
    if names.len() <= 1 {
        return Latched::Flag(latched.any());
    }
    Latched::ByName(
        names
            .into_iter()
            .map(|name| {
                let set = match latched {
                    Latched::Flag(all) => *all,
                    Latched::ByName(m) => m.get(name).copied().unwrap_or(false),
                };
                (Arc::from(name), set)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;
    use toolgate_engine::Facts;

    fn policy() -> Policy {
        Policy::compile(
            "p.gate",
            "module p\ningest fetch\nwrite send\nstage s { tools [fetch, send] }\nlatch t { set_by [fetch] blocks [send] }\n",
        )
        .unwrap()
    }

    fn batch(tools: &[(&str, &str)]) -> Request {
        let calls = tools
            .iter()
            .map(|(id, tool)| Call::new(*id, *tool, json!({})))
            .collect();
        Request::new(Facts::in_stage("s"), calls)
    }

    /// Judges a batch of `tools` (id, tool) in turn `t1`, kept under `batch`.
    fn in_t1(
        s: &mut EmbeddedTurns,
        p: &Policy,
        tools: &[(&str, &str)],
        batch_id: Option<&str>,
    ) -> Response {
        let id = batch_id.map(str::to_owned);
        s.judge(p, batch(tools), Some("t1"), id, Instant::now(), true)
            .unwrap()
    }

    #[test]
    fn a_kept_verdict_answers_its_own_call_once_and_never_after_a_latch() {
        let p = policy();
        let mut s = EmbeddedTurns::default();
        s.signal(&p, Some("t1")).unwrap();
        in_t1(&mut s, &p, &[("c0", "send")], Some("m1"));
        let args = json!({});
        // Another tool, turn or arguments under the same id is another call.
        assert!(s
            .decision(&p, "c0", "fetch", &args, Some("t1"), None)
            .is_none());
        assert!(s
            .decision(&p, "c0", "send", &args, Some("t2"), None)
            .is_none());
        assert!(s
            .decision(&p, "c0", "send", &json!({"a": 1}), Some("t1"), None)
            .is_none());
        let kept = s.decision(&p, "c0", "send", &args, Some("t1"), Some("m1"));
        assert!(kept.unwrap().allow);
        assert!(s
            .decision(&p, "c0", "send", &args, Some("t1"), Some("m1"))
            .is_none());
        // A message whose judgement latches the turn drops every kept verdict.
        in_t1(&mut s, &p, &[("c0", "send")], Some("m2"));
        in_t1(&mut s, &p, &[("c0", "fetch")], Some("m3"));
        assert!(s
            .decision(&p, "c0", "send", &args, Some("t1"), Some("m2"))
            .is_none());
        let again = in_t1(&mut s, &p, &[("c0", "send")], Some("m2"));
        assert!(!again.decisions[0].allow, "judged again, latched");
    }

    #[test]
    fn recovering_latches_the_turn_and_drops_the_verdicts() {
        let p = policy();
        let mut s = EmbeddedTurns::default();
        s.signal(&p, Some("t1")).unwrap();
        in_t1(&mut s, &p, &[("c0", "send")], Some("m1"));
        s.recover();
        assert!(s
            .decision(&p, "c0", "send", &json!({}), Some("t1"), Some("m1"))
            .is_none());
        assert_eq!(s.latches(&p, Some("t1")), Latched::Flag(true));
        assert!(!in_t1(&mut s, &p, &[("c1", "send")], None).decisions[0].allow);
    }

    const SHOP: &str = "module shop\nwrite refund, send\ningest fetch\nstage main { tools [refund, send, fetch] }\nlatch tainted { set_by [fetch] blocks [send] }\nbudget refunds for refund { sum args.amount <= 100 per session }\nbudget sends for send { count <= 2 per turn }\nbudget daily for refund { count <= 3 within 24h per principal }\n";

    fn shop() -> Policy {
        Policy::compile("shop.gate", SHOP).unwrap()
    }

    /// A session whose principal and tenant counts are in `book`, a test's own.
    fn session(book: &'static Book) -> EmbeddedTurns {
        EmbeddedTurns::with_book(book)
    }

    fn book() -> &'static Book {
        Box::leak(Box::new(Book::new(Duration::MAX)))
    }

    /// A batch of `calls` (tool, args) for principal `sub` (with tenant `acme`).
    fn shop_batch(sub: Option<&str>, calls: &[(&str, Value)]) -> Request {
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, (tool, args))| json!({"id": format!("c{i}"), "tool": tool, "args": args}))
            .collect();
        let mut facts = json!({"stage": "main"});
        if let Some(sub) = sub {
            facts["principal"] = json!({"sub": sub, "tenant": "acme"});
        }
        Request::from_value(json!({"facts": facts, "calls": calls})).unwrap()
    }

    /// Judges `calls` for `sub` in `turn` at `now`.
    fn run(
        s: &mut EmbeddedTurns,
        p: &Policy,
        (sub, turn, now): (Option<&str>, Option<&str>, Instant),
        calls: &[(&str, Value)],
    ) -> Response {
        s.judge(p, shop_batch(sub, calls), turn, None, now, true)
            .unwrap()
    }

    fn refund(amount: Value) -> (&'static str, Value) {
        ("refund", json!({ "amount": amount }))
    }

    fn send() -> (&'static str, Value) {
        ("send", json!({}))
    }

    fn allowed(r: &Response) -> Vec<bool> {
        r.decisions.iter().map(|d| d.allow).collect()
    }

    #[test]
    fn a_sessions_sum_is_kept_across_batches_and_the_denial_says_what_is_left() {
        let p = shop();
        let mut s = session(book());
        let ana = (Some("ana"), None, Instant::now());
        for _ in 0..2 {
            let r = run(&mut s, &p, ana, &[refund(json!(40))]);
            assert_eq!(allowed(&r), [true], "{r:?}");
            assert_eq!(r.spent.get("refunds"), Some(&40.0));
        }
        let r = run(&mut s, &p, ana, &[refund(json!(40))]);
        let d = &r.decisions[0];
        assert!(!d.allow);
        assert_eq!(d.kind, Some(toolgate_engine::DenyKind::Budget));
        assert_eq!(d.rule.as_deref(), Some("refunds"));
        let reason = d.reason.as_deref().unwrap();
        assert!(reason.contains("20 of 100 left per session"), "{reason}");
        // Another session of the same process counts on its own.
        let r = run(&mut session(book()), &p, ana, &[refund(json!(40))]);
        assert_eq!(allowed(&r), [true]);
    }

    #[test]
    fn a_turns_count_starts_again_in_a_new_turn_and_an_earlier_turn_keeps_its_own() {
        let p = shop();
        let mut s = session(book());
        let now = Instant::now();
        let sends = [send(), send(), send()];
        let r = run(&mut s, &p, (None, Some("t1"), now), &sends);
        assert_eq!(allowed(&r), [true, true, false]);
        assert_eq!(r.decisions[2].rule.as_deref(), Some("sends"));
        let r = run(&mut s, &p, (None, Some("t2"), now), &sends);
        assert_eq!(allowed(&r), [true, true, false]);
        // A late batch of the first turn finds that turn's count spent.
        let r = run(&mut s, &p, (None, Some("t1"), now), &sends[..1]);
        assert_eq!(allowed(&r), [false]);
    }

    #[test]
    fn a_turn_the_session_no_longer_keeps_is_counted_no_more() {
        let p = shop();
        let mut s = session(book());
        let now = Instant::now();
        let latch = [("fetch", json!({}))];
        run(&mut s, &p, (None, Some("t0"), now), &latch);
        let turns = 3 * KEPT_TURNS;
        for t in 1..=turns {
            run(&mut s, &p, (None, Some(&format!("t{t}")), now), &[send()]);
        }
        // Only the turns the session could still place keep a count.
        assert!(s.counts.len() <= 2 * KEPT_TURNS + 1, "{}", s.counts.len());
        // The first turn latched and was pushed out: judged with every latch, never counted.
        let r = run(&mut s, &p, (None, Some("t0"), now), &[send()]);
        assert_eq!(r.decisions[0].kind, Some(toolgate_engine::DenyKind::Latch));
    }

    #[test]
    fn a_principals_count_is_shared_by_its_sessions_and_slides_with_its_window() {
        let p = shop();
        let book = book();
        let (mut s1, mut s2, mut s3) = (session(book), session(book), session(book));
        let t0 = Instant::now();
        let one = |s: &mut EmbeddedTurns, sub: &str, at: Instant| {
            run(s, &p, (Some(sub), None, at), &[refund(json!(1))]).decisions[0].allow
        };
        assert!(one(&mut s1, "ana", t0));
        assert!(one(&mut s2, "ana", t0));
        assert!(one(&mut s1, "ana", t0));
        assert!(
            !one(&mut s2, "ana", t0),
            "three a day for ana, in any session"
        );
        assert!(one(&mut s3, "ben", t0), "ben has his own count");
        let day = Duration::from_secs(24 * 3600);
        assert!(!one(&mut s3, "ana", t0 + day - Duration::from_secs(1)));
        assert!(one(&mut s3, "ana", t0 + day), "the window slid past them");
        assert_eq!(book.len(), 2);
    }

    #[test]
    fn a_principals_budget_with_no_principal_and_a_non_number_amount_deny() {
        let p = shop();
        let mut s = session(book());
        let now = Instant::now();
        let r = run(&mut s, &p, (None, None, now), &[refund(json!(1))]);
        let d = &r.decisions[0];
        assert_eq!((d.allow, d.rule.as_deref()), (false, Some("daily")));
        assert!(d.reason.as_deref().unwrap().contains("not known"), "{d:?}");
        let r = run(&mut s, &p, (Some("ana"), None, now), &[refund(json!("40"))]);
        let d = &r.decisions[0];
        assert_eq!(
            (d.allow, d.kind),
            (false, Some(toolgate_engine::DenyKind::Budget))
        );
        assert!(r.spent.values().all(|v| *v == 0.0), "{r:?}");
    }

    #[test]
    fn a_batch_answered_again_or_blocked_by_a_carried_latch_consumes_nothing() {
        let p = shop();
        let mut s = session(book());
        let now = Instant::now();
        let two = [refund(json!(50)), refund(json!(50))];
        for _ in 0..3 {
            let r = s
                .judge(
                    &p,
                    shop_batch(Some("cy"), &two),
                    Some("t1"),
                    Some("m1".into()),
                    now,
                    true,
                )
                .unwrap();
            assert_eq!(allowed(&r), [true, true], "the kept response, counted once");
        }
        // The turn latches; a send the latch blocks consumes nothing of its turn's count.
        run(&mut s, &p, (None, Some("t2"), now), &[("fetch", json!({}))]);
        let r = run(&mut s, &p, (None, Some("t2"), now), &[send()]);
        assert_eq!(r.decisions[0].kind, Some(toolgate_engine::DenyKind::Latch));
        let r = run(&mut s, &p, (None, Some("t3"), now), &[send(), send()]);
        assert_eq!(allowed(&r), [true, true]);
    }

    #[test]
    fn concurrent_batches_of_one_principal_never_spend_one_remainder_twice() {
        let p = Arc::new(shop());
        let book = book();
        let sessions: Vec<_> = (0..4)
            .map(|_| Arc::new(std::sync::Mutex::new(session(book))))
            .collect();
        let threads: Vec<_> = (0..16)
            .map(|i| {
                let (p, s) = (Arc::clone(&p), Arc::clone(&sessions[i % 4]));
                std::thread::spawn(move || {
                    let calls = [refund(json!(1)), refund(json!(1))];
                    let who = (Some("dee"), None, Instant::now());
                    let r = run(&mut s.lock().unwrap(), &p, who, &calls);
                    r.decisions.iter().filter(|d| d.allow).count()
                })
            })
            .collect();
        let ran: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(
            ran, 3,
            "the principal's three a day, however the batches raced"
        );
    }

    #[test]
    fn a_request_cannot_bring_its_own_counts() {
        let p = shop();
        let text =
            json!({"facts": {"stage": "main", "spent": {"refunds": 0}}, "calls": []}).to_string();
        let e = EmbeddedTurns::request(&p, &text).unwrap_err();
        assert!(
            matches!(&e, RequestError::Schema { path, .. } if path == "facts.spent"),
            "{e}"
        );
        let fine = json!({"facts": {"stage": "main"}, "calls": []}).to_string();
        assert!(EmbeddedTurns::request(&p, &fine).is_ok());
    }

    #[test]
    fn a_turns_number_is_written_in_decimal() {
        let mut digits = [0u8; 20];
        for n in [0, 7, 10, 4096, u64::MAX] {
            assert_eq!(decimal(n, &mut digits), n.to_string());
        }
    }

    #[test]
    fn a_judgement_no_call_runs_on_counts_nothing_and_its_allows_are_never_served() {
        let p = shop();
        let mut s = session(book());
        let now = Instant::now();
        let two = || shop_batch(Some("eve"), &[refund(json!(60)), ("fetch", json!({}))]);
        let args = json!({"amount": 60});
        // A pre-scan of a message: judged with the counts, adding nothing.
        for _ in 0..3 {
            let r = s
                .judge(&p, two(), None, Some("m1".into()), now, false)
                .unwrap();
            assert_eq!(allowed(&r), [true, true]);
        }
        // Its allow is not served: the call that runs is judged, and counted, on its own.
        assert!(s
            .decision(&p, "c0", "refund", &args, None, Some("m1"))
            .is_none());
        let r = run(&mut s, &p, (Some("eve"), None, now), &[refund(json!(60))]);
        assert_eq!(allowed(&r), [true], "the pre-scans spent nothing");
        let r = run(&mut s, &p, (Some("eve"), None, now), &[refund(json!(60))]);
        assert_eq!(
            allowed(&r),
            [false],
            "the judgement that ran spent 60 of 100"
        );
        // A spending judgement of a batch kept by a pre-scan judges it again, and counts.
        let r = s
            .judge(&p, two(), None, Some("m2".into()), now, false)
            .unwrap();
        assert_eq!(allowed(&r), [false, true]);
        let refunds = || shop_batch(Some("eve"), &[refund(json!(40))]);
        s.judge(&p, refunds(), None, Some("m3".into()), now, false)
            .unwrap();
        let r = s
            .judge(&p, refunds(), None, Some("m3".into()), now, true)
            .unwrap();
        assert_eq!(allowed(&r), [true]);
        let kept = s.decision(&p, "c0", "refund", &json!({"amount": 40}), None, Some("m3"));
        assert!(kept.unwrap().allow, "a counted allow is served");
        let r = run(&mut s, &p, (Some("eve"), None, now), &[refund(json!(1))]);
        assert_eq!(allowed(&r), [false], "100 of 100 spent");
    }

    #[test]
    fn a_pre_scans_denial_is_still_served() {
        let p = shop();
        let mut s = session(book());
        let batch = shop_batch(None, &[("send", json!({})), ("fetch", json!({}))]);
        let r = s
            .judge(
                &p,
                batch,
                Some("t1"),
                Some("m1".into()),
                Instant::now(),
                false,
            )
            .unwrap();
        assert_eq!(allowed(&r), [false, true], "the latch pre-scan");
        let kept = s.decision(&p, "c0", "send", &json!({}), Some("t1"), Some("m1"));
        assert_eq!(kept.unwrap().kind, Some(toolgate_engine::DenyKind::Latch));
    }

    /// A mail policy whose recipient must be typed by the user, or not come from an ingest.
    fn mail(rule: &str) -> Policy {
        let text = format!("module mail\ningest read\nwrite send\nstage s {{ tools [read, send] }}\nrule r for send {{ require {rule} }}\n");
        Policy::compile("mail.gate", &text).unwrap()
    }

    /// Whether a `send` to `to`, judged in turn `turn`, is allowed.
    fn sends(s: &mut EmbeddedTurns, p: &Policy, to: &str, turn: &str) -> bool {
        let request = Request::new(
            Facts::in_stage("s"),
            vec![Call::new("c", "send", json!({ "to": to }))],
        );
        let r = s
            .judge(p, request, Some(turn), None, Instant::now(), true)
            .unwrap();
        r.decisions[0].allow
    }

    #[test]
    fn a_prompt_is_kept_only_for_the_current_turn() {
        let p = mail("args.to from prompt");
        let mut s = EmbeddedTurns::default();
        s.signal(&p, Some("t1")).unwrap();
        s.signal(&p, Some("t2")).unwrap();
        assert!(
            !s.set_prompt("mail eve@evil.example", Some("t1")),
            "an earlier turn's"
        );
        assert!(
            !s.set_prompt("mail eve@evil.example", Some("t9")),
            "an unseen id's"
        );
        assert_eq!(s.turns().turns(), 2, "an unseen id starts no turn");
        assert!(!sends(&mut s, &p, "eve@evil.example", "t2"));
        assert!(s.set_prompt("mail ann@ours.example", Some("t2")));
        assert!(sends(&mut s, &p, "ann@ours.example", "t2"));
        assert!(
            !sends(&mut s, &p, "ann@ours.example", "t1"),
            "only its own turn's"
        );
        assert!(
            s.set_prompt("mail bob@ours.example", None),
            "the current turn's"
        );
        assert!(sends(&mut s, &p, "bob@ours.example", "t2"));
    }

    #[test]
    fn a_session_without_provenance_never_fills_in_outputs_or_a_prompt() {
        let p = mail("args.to not from ingest");
        let mut kept = EmbeddedTurns::default();
        kept.signal(&p, Some("t1")).unwrap();
        assert!(
            sends(&mut kept, &p, "ann@ours.example", "t1"),
            "no call brought anything in"
        );
        let mut s = EmbeddedTurns::without_provenance();
        s.signal(&p, Some("t1")).unwrap();
        assert!(
            !sends(&mut s, &p, "ann@ours.example", "t1"),
            "outputs unknown: denied"
        );
        let p = mail("args.to from prompt");
        assert!(!s.set_prompt("mail ann@ours.example", Some("t1")));
        assert!(!sends(&mut s, &p, "ann@ours.example", "t1"));
    }
}
