//! One batch's use of the server's approvals.
//!
//! The engine judges the batch as sent. Only when some call asks does the keeper act:
//! under `--ask allow-logged` it lets every ask run (logged as such); otherwise it takes the
//! session's unexpired approvals for exactly the digests asked out of the store, and the
//! batch is judged again with them as `facts.approvals`. Once the batch is judged for good,
//! [`Keeper::finish`] spends the approvals its decisions used, gives the rest back, and
//! records its remaining asks as waiting for a person. Taking before judging makes single
//! use hold under concurrent batches of one session: a batch that finds an approval taken
//! by another asks again, which denies.

use super::{Approvals, Granted, NewAsk};
use crate::config::AskMode;
use serde_json::Value;
use std::time::Instant;
use toolgate_engine::{Decision, DenyKind, Policy, Response};

/// One batch's use of the approvals.
pub(crate) struct Keeper<'a> {
    approvals: &'a Approvals,
    mode: AskMode,
    session: Option<&'a str>,
    now: Instant,
    taken: Vec<Granted>,
    /// True once `--ask allow-logged` let the batch's asks run.
    headless: bool,
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
    pub(crate) fn new(
        approvals: &'a Approvals,
        mode: AskMode,
        session: Option<&'a str>,
        now: Instant,
    ) -> Self {
        Keeper {
            approvals,
            mode,
            session,
            now,
            taken: Vec::new(),
            headless: false,
        }
    }

    /// The approvals to judge the batch again with, when `response` asks and some ask can
    /// run; `None` keeps `response`.
    pub(crate) fn again(&mut self, response: &Response) -> Option<Vec<String>> {
        let asks: Vec<&str> = response.decisions.iter().filter_map(asked).collect();
        if asks.is_empty() {
            return None;
        }
        if self.mode == AskMode::AllowLogged {
            self.headless = true;
            let mut all: Vec<String> = asks.iter().map(|a| a.to_string()).collect();
            all.extend(self.taken.iter().map(|g| g.approval.clone()));
            return Some(all);
        }
        let session = self.session?;
        let fresh: Vec<&str> = asks
            .iter()
            .copied()
            .filter(|a| !self.taken.iter().any(|g| g.approval == *a))
            .collect();
        if !fresh.is_empty() {
            let taken = self.approvals.take(session, &fresh, self.now);
            self.taken.extend(taken);
        }
        let usable = self
            .taken
            .iter()
            .any(|g| asks.contains(&g.approval.as_str()));
        usable.then(|| self.taken.iter().map(|g| g.approval.clone()).collect())
    }

    /// Whether `--ask allow-logged` let asks of this batch run.
    pub(crate) fn headless(&self) -> bool {
        self.headless
    }

    /// After the batch is judged for good: spends the approvals `response` used, gives the
    /// others back, and records its asks as waiting (`args` gives a call's arguments by its
    /// index in the batch).
    pub(crate) fn finish<'v>(
        self,
        policy: &Policy,
        response: &Response,
        turn: Option<&str>,
        args: impl Fn(usize) -> Option<&'v Value>,
    ) {
        let Some(session) = self.session else {
            return;
        };
        let used = |g: &Granted| {
            response
                .decisions
                .iter()
                .any(|d| d.allow && d.approval.as_deref() == Some(g.approval.as_str()))
        };
        let unused: Vec<Granted> = self.taken.into_iter().filter(|g| !used(g)).collect();
        self.approvals.give_back(session, unused);
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
        if !asks.is_empty() {
            self.approvals.note(session, asks, self.now);
        }
    }
}
