//! One batch's use of the server's approvals.
//!
//! The engine judges the batch as sent. Only when some call asks does the keeper act:
//! under `--ask allow-logged` it lets every ask run (logged as such); otherwise it has the
//! session's unexpired approvals for exactly the digests asked taken out of their store
//! ([`Keeper::wanted`]), and the batch is judged again with them as `facts.approvals`
//! ([`Keeper::judged`]). Once the
//! batch is judged for good, [`Keeper::finish`] says which approvals its decisions left
//! unused (to be given back) and which asks remain (to be recorded as waiting for a person).
//! Taking before judging makes single use hold under concurrent batches of one session,
//! through one replica or several: a take is one atomic step of the store (a lock in memory,
//! a script in the shared store), and a batch that finds an approval taken by another asks
//! again, which denies.
//!
//! The keeper holds no store: the turn state's judge, which knows where approvals are kept,
//! takes them between the judgements of a batch (`turn_state::ApprovalStore`).

use super::{Granted, NewAsk};
use crate::config::AskMode;
use serde_json::Value;
use std::time::Instant;
use toolgate_engine::{Decision, DenyKind, Policy, Response};

/// One batch's use of the approvals.
pub(crate) struct Keeper<'a> {
    mode: AskMode,
    session: Option<&'a str>,
    now: Instant,
    /// The approvals taken for this batch, each usable by it once.
    taken: Vec<Granted>,
    /// The digests a take has asked the store for (found or not): none is asked twice.
    tried: Vec<String>,
    /// True once `--ask allow-logged` let the batch's asks run.
    headless: bool,
    /// Under `--ask allow-logged`, the approvals to judge the last judgement again with.
    let_run: Option<Vec<String>>,
}

/// What a batch leaves for the store once it is judged ([`Keeper::finish`]).
pub(crate) struct Finished<'a> {
    /// The batch's session.
    pub(crate) session: &'a str,
    /// When the batch started (the in-memory book's clock).
    pub(crate) now: Instant,
    /// The approvals it took and did not use: they go back.
    pub(crate) unused: Vec<Granted>,
    /// Its asks, to wait for a person.
    pub(crate) asks: Vec<NewAsk>,
}

/// The digest of a decision that asks.
fn asked(d: &Decision) -> Option<&str> {
    match d.kind {
        Some(DenyKind::Ask) => d.approval.as_deref(),
        _ => None,
    }
}

impl<'a> Keeper<'a> {
    /// The keeper of a batch of `session` (none: the batch names no session, and only
    /// `--ask allow-logged` can let its asks run).
    pub(crate) fn new(mode: AskMode, session: Option<&'a str>, now: Instant) -> Self {
        Keeper {
            mode,
            session,
            now,
            taken: Vec::new(),
            tried: Vec::new(),
            headless: false,
            let_run: None,
        }
    }

    /// When the batch started.
    pub(crate) fn now(&self) -> Instant {
        self.now
    }

    /// The approvals taken for the batch so far, to judge it with; `None` when none was.
    pub(crate) fn granted(&self) -> Option<Vec<String>> {
        (!self.taken.is_empty()).then(|| self.taken.iter().map(|g| g.approval.clone()).collect())
    }

    /// For `response`, a judgement of the batch with [`Keeper::granted`]: the batch's session
    /// and the digests of its asks no take has tried yet, whose approvals are to be taken
    /// out of their store and handed to [`Keeper::judged`]; `None` when there is nothing to
    /// take (no ask, no session, every ask tried, or `--ask allow-logged`, which lets every
    /// ask run instead).
    pub(crate) fn wanted(&mut self, response: &Response) -> Option<(&'a str, Vec<String>)> {
        let asks: Vec<&str> = response.decisions.iter().filter_map(asked).collect();
        if asks.is_empty() {
            return None;
        }
        if self.mode == AskMode::AllowLogged {
            self.headless = true;
            let mut all: Vec<String> = asks.iter().map(|a| a.to_string()).collect();
            all.extend(self.taken.iter().map(|g| g.approval.clone()));
            self.let_run = Some(all);
            return None;
        }
        let session = self.session?;
        let mut fresh: Vec<String> = Vec::new();
        for a in asks {
            if !self.tried.iter().any(|t| t == a) && !fresh.iter().any(|f| f == a) {
                fresh.push(a.to_string());
            }
        }
        if fresh.is_empty() {
            return None;
        }
        self.tried.extend(fresh.iter().cloned());
        Some((session, fresh))
    }

    /// `first` (the judgement given to [`Keeper::wanted`]), or the batch judged `again`
    /// with the approvals `taken` out of the store for it added (each is for a digest
    /// `first` asked), or, under `--ask allow-logged`, with every ask's.
    pub(crate) fn judged(
        &mut self,
        first: Response,
        taken: Vec<Granted>,
        again: impl FnOnce(&[String]) -> Response,
    ) -> Response {
        if let Some(all) = self.let_run.take() {
            return again(&all);
        }
        if taken.is_empty() {
            return first;
        }
        self.taken.extend(taken);
        let all: Vec<String> = self.taken.iter().map(|g| g.approval.clone()).collect();
        again(&all)
    }

    /// Whether `--ask allow-logged` let asks of this batch run.
    pub(crate) fn headless(&self) -> bool {
        self.headless
    }

    /// When the store refused the batch's session (503): every approval taken goes back,
    /// and no ask is recorded (the batch was answered with none).
    pub(crate) fn refused(self) -> Option<Finished<'a>> {
        let session = self.session?;
        (!self.taken.is_empty()).then_some(Finished {
            session,
            now: self.now,
            unused: self.taken,
            asks: Vec::new(),
        })
    }

    /// After the batch is judged for good: the approvals `response` left unused and its
    /// asks, for the batch's session (`args` gives a call's arguments by its index in the
    /// batch); `None` when it has no session, or nothing to give back or record.
    pub(crate) fn finish<'v>(
        self,
        policy: &Policy,
        response: &Response,
        turn: Option<&str>,
        args: impl Fn(usize) -> Option<&'v Value>,
    ) -> Option<Finished<'a>> {
        let session = self.session?;
        let used = |g: &Granted| {
            response
                .decisions
                .iter()
                .any(|d| d.allow && d.approval.as_deref() == Some(g.approval.as_str()))
        };
        let unused: Vec<Granted> = self.taken.into_iter().filter(|g| !used(g)).collect();
        let asks: Vec<NewAsk> = response
            .decisions
            .iter()
            .enumerate()
            .filter_map(|(i, d)| {
                let approval = asked(d)?;
                Some(NewAsk {
                    approval: approval.to_string(),
                    call_id: d.id.to_string(),
                    tool: d.tool.to_string(),
                    rule: d.rule.as_deref().unwrap_or_default().to_string(),
                    reason: d.reason.as_deref().unwrap_or_default().to_string(),
                    args: args(i).cloned().unwrap_or(Value::Null),
                    turn: turn.map(str::to_string),
                    policy: response.policy.to_string(),
                    revision: response.revision.to_string(),
                    window: policy.approval_window(),
                })
            })
            .collect();
        (!unused.is_empty() || !asks.is_empty()).then_some(Finished {
            session,
            now: self.now,
            unused,
            asks,
        })
    }
}
