//! Budget counts over batches in the shared store (`budget.lua`), shared by every replica,
//! checked and consumed in the batch's one round trip with its turn state; in a Redis Cluster,
//! a principal's or a tenant's count in one more round trip, to its own slot.
//!
//! # Why two replicas never spend one remainder
//!
//! The judge runs in Rust, before the round trip: a batch is judged with the counts this
//! replica saw last (0 for one it never saw), and the script it sends with its turn state
//! (`exchange.lua`, or `budget_only.lua` for a batch with no session) carries, per count, the
//! count it was judged with, what its allowed calls consumed, the limit and whether a call
//! was denied by that budget. The script runs atomically in the store, so it sees every other
//! replica's consumption that came before it, and adds the batch's only if that judgement
//! stands with what the store holds now (`used`):
//!
//! - `used` is the count the batch was judged with: exact;
//! - or `used` is at least that count and `used + consumed <= limit`: every allowed call still
//!   fits (each needed at most `consumed` on top of the count), and every call the budget
//!   denied would be denied with more used;
//! - or `used` is lower (a window slid) and no call was denied by the budget: the lower count
//!   changes no decision.
//!
//! Otherwise the script writes nothing (neither counts nor latches) and answers the counts it
//! holds; the replica judges the batch again with them and sends it again (at most
//! [`MAX_ATTEMPTS`] times, then the batch is judged fail-closed). A second batch racing for
//! the same remainder therefore finds the first one's consumption in `used` and is judged
//! again, so the sum allowed never exceeds the limit, however many replicas there are. A
//! call that asks is never allowed, so a count that rose under it changes only whether it
//! asks or is denied.
//!
//! One more case needs the turn's latches: the batch is judged with only its own latches,
//! and when the turn carried another one (set by an earlier batch) it is judged again with
//! it, which may allow calls the first judgement's budget denied. `exchange.lua` then adds
//! no count ("deferred") and answers the counts it holds; the replica judges the batch with
//! the turn's latches and those counts (never the ones it judged with first: another replica
//! may have spent since) and sends its consumption with `budget_only.lua`, under the same
//! check. That is the only case with a second round trip on a single node besides a
//! conflict. The exchange recorded the batch's own latches already, and they are the same
//! for every judgement of the batch: a batch sets the latch of every setter it holds, allowed
//! or not (`docs/language.md`, "Pre-scan").
//!
//! # Counts in other slots (a Redis Cluster)
//!
//! In a cluster every key of one script must be in one slot. A turn's and a session's count
//! carry the session's hash tag (`PREFIX:b:LEN:{MODULE:SESSION}:BUDGET:SCOPE`, `LEN` the
//! session id's length, so no two sessions' keys meet), so they are in its slot and ride in
//! its exchange as on a single node: no round trip of their own. A principal's and a
//! tenant's count is shared by every session, so it has a hash tag of its own
//! (`PREFIX:b:{MODULE:BUDGET:SCOPE}`), which spreads those counts over the shards; each is
//! checked and consumed on its shard by `budget_only.lua`, atomically there under the check
//! above: one more round trip per distinct slot the batch's counts are in besides the
//! session's (the slots' scripts are sent at once). A batch reads a principal's or a
//! tenant's count only when one of its calls is a tool the budget counts
//! ([`BatchCounts::drop_unread`]): a batch none of whose calls such a budget counts makes
//! its one round trip. Each slot's marker judges the counts in
//! it, so a shard that lost its data has its own counts taken as spent in full (below).
//!
//! Across slots nothing is atomic: the exchange, or one slot's script, may have added the
//! batch's consumption when another slot's check fails. The batch is then judged again with
//! that slot's fresh counts (the counts already written keep the values their judgement
//! used), and the response is fenced ([`BatchCounts::fence`]): a call is allowed only if
//! every judgement already written allowed it, and otherwise gets that judgement's
//! decision. So every call finally allowed was allowed by the judgement whose consumption
//! each of its counts holds, each added under a passing check: in a count written earlier,
//! the calls allowed are among those it counted, and amounts are at least 0, so what they
//! consume is at most what was added; in a count written with the final response, its
//! `spent` (the judgement's, capped by the fence's: both at least what the calls left
//! allowed consume). What a written count holds beyond what the final response
//! allowed is an over-count, which only ever denies more; a latch the exchange recorded for
//! a call then denied is likewise only in the denying direction. Nothing is ever taken back,
//! so no reply lost in flight can undercount either.
//!
//! # Windows, expiry and losses
//!
//! Windows slide on the store's clock (`TIME` inside the script), so replicas' clocks never
//! matter; a window keeps at most [`MAX_ENTRIES`] entries, merging the oldest two under the
//! later time (an amount is only ever counted longer). A count expires a minute past its
//! window, or, unwindowed, TTL + keep-expired after its last use (the horizon of the turn
//! state that names its session). The store's loss marker (`common.lua`) of the count's slot
//! covers it: every count written moves that marker's counter, and a count the store may
//! have lost (missing, or first written before the loss was seen, while the loss's horizon
//! or the count's window since the loss lasts) is taken as spent in full and written so, as
//! a lost turn is written latched: a windowed one frees up as its window slides, an
//! unwindowed one stays spent for the life of its turn or session. In a cluster that is the
//! marker of the count's own slot: a flushed shard's principal counts are taken as spent,
//! the other shards' stay exact.

use super::{join_all, RedisStore, StoreConnection, Unavailable};
use crate::budgets::Scopes;
use std::collections::HashMap;
use std::sync::Mutex;
use toolgate_engine::{BudgetScope, DenyKind, Policy, Response};

/// Most times one batch is judged again because its counts changed under it.
pub(crate) const MAX_ATTEMPTS: usize = 8;
/// The most entries one windowed count keeps before it merges its oldest (as the book does).
const MAX_ENTRIES: usize = 4_096;
/// The most counts a replica remembers having seen, before it forgets them all.
const MAX_SEEN: usize = 100_000;

/// One count a batch reads: where it is stored and what bounds it.
#[derive(Debug, Clone)]
struct Count {
    /// Its key.
    key: String,
    /// The slot whose marker judges it, and whose script checks and adds it.
    slot: u16,
    /// Its budget's name.
    name: String,
    /// The budget's window (ms, 0 for none).
    window: u64,
    /// The budget's limit.
    max: f64,
    /// Whether it is a principal's or a tenant's (shared by every session).
    shared: bool,
}

/// The counts one batch reads, with the keys they are stored under, which of them its
/// consumption was written to, and the judgements written ([`BatchCounts::fence`]).
#[derive(Debug, Clone)]
pub struct BatchCounts {
    counts: Vec<Count>,
    /// Per count, the count the batch is judged with: what the store answered last, or, once
    /// written, the count the judgement written to it was judged with.
    used: Vec<f64>,
    /// Per count, whether the batch's consumption was added to it.
    written: Vec<bool>,
    /// The calls every judgement written so far allowed, with their consumption: the most the
    /// final response may allow (`None` before the first write).
    fence: Option<Response>,
}

/// What a script call said of a batch's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// The batch read no count there.
    None,
    /// Its consumption was added.
    Added,
    /// Added later: the turn carried a latch the batch did not set ([`RedisStore::add_counts`]).
    Deferred,
}

/// The counts this replica saw last, per key: what a batch is judged with first.
#[derive(Debug, Default)]
pub(super) struct Seen(Mutex<HashMap<String, f64>>);

impl Seen {
    fn get(&self, key: &str) -> f64 {
        self.0
            .lock()
            .ok()
            .and_then(|m| m.get(key).copied())
            .unwrap_or(0.0)
    }

    fn learn<'a>(&self, counts: impl Iterator<Item = (&'a str, f64)>) {
        if let Ok(mut m) = self.0.lock() {
            if m.len() >= MAX_SEEN {
                m.clear();
            }
            for (key, used) in counts {
                m.insert(key.to_owned(), used);
            }
        }
    }
}

impl BatchCounts {
    /// The counts to judge the batch with (`facts.spent`).
    pub fn given(&self) -> Vec<(String, f64)> {
        self.counts
            .iter()
            .zip(&self.used)
            .map(|(c, used)| (c.name.clone(), *used))
            .collect()
    }

    /// Drops the counts of a principal or a tenant that no call of the batch can consume
    /// from, before anything is written (`judged` is the batch's first judgement): they change
    /// no decision, and in a cluster each costs a round trip. One whose budget `judged`
    /// consumed from or denied a call by stays all the same. A judgement without a count
    /// denies every call its budget governs, so a count dropped wrongly could only deny. A
    /// turn's and a session's counts stay: they ride in the session's exchange, and every
    /// batch of the session renews them (an unwindowed one lives TTL + keep-expired past its
    /// last use, as the session's turn state does).
    pub fn drop_unread(&mut self, policy: &Policy, judged: &Response) {
        if self.written.iter().any(|w| *w) {
            return;
        }
        let read = |c: &Count| {
            !c.shared
                || judged.spent.contains_key(c.name.as_str())
                || judged.decisions.iter().any(|d| {
                    policy.budget_counts(&c.name, &d.tool)
                        || (d.kind == Some(DenyKind::Budget)
                            && d.rule.as_deref() == Some(c.name.as_str()))
                })
        };
        let keep: Vec<bool> = self.counts.iter().map(read).collect();
        if keep.iter().all(|k| *k) {
            return;
        }
        let mut kept = keep.iter().copied();
        self.counts.retain(|_| kept.next().unwrap_or(true));
        let mut kept = keep.iter().copied();
        self.used.retain(|_| kept.next().unwrap_or(true));
        self.written.truncate(self.counts.len());
    }

    /// `response` allowing no call a judgement already written denied: each such call gets
    /// that judgement's decision, and each budget's `spent` is at most what the written
    /// judgements consumed (the calls left allowed are among theirs, and amounts are at
    /// least 0, so it still covers what they consume). The module documentation says why.
    pub fn fence(&self, mut response: Response) -> Response {
        let Some(fence) = &self.fence else {
            return response;
        };
        for (d, f) in response.decisions.iter_mut().zip(&fence.decisions) {
            if d.allow && !f.allow {
                *d = f.clone();
            }
        }
        response.spent = response
            .spent
            .into_iter()
            .map(|(name, n)| {
                let cap = fence.spent.get(&name).copied().unwrap_or(0.0);
                (name, n.min(cap))
            })
            .filter(|(_, n)| *n > 0.0)
            .collect();
        response
    }

    /// Records that `judged`'s consumption was added to some counts.
    fn wrote(&mut self, judged: &Response) {
        self.fence = Some(self.fence(judged.clone()));
    }

    /// The counts in `slot` the batch's consumption is not yet added to.
    fn pending(&self, slot: u16) -> Vec<usize> {
        (0..self.counts.len())
            .filter(|&i| self.counts[i].slot == slot && !self.written[i])
            .collect()
    }

    /// The slots of the counts the batch's consumption is not yet added to, each once.
    fn pending_slots(&self) -> Vec<u16> {
        let mut slots: Vec<u16> = (0..self.counts.len())
            .filter(|&i| !self.written[i])
            .map(|i| self.counts[i].slot)
            .collect();
        slots.sort_unstable();
        slots.dedup();
        slots
    }

    /// Appends the keys of counts `which` (from KEYS[4]) and `budget.lua`'s arguments for
    /// `judged`.
    fn push(&self, inv: &mut redis::ScriptInvocation<'_>, judged: &Response, which: &[usize]) {
        inv.arg(which.len()).arg(MAX_ENTRIES);
        for &i in which {
            let (c, used) = (&self.counts[i], self.used[i]);
            let denied = judged.decisions.iter().any(|d| {
                d.kind == Some(DenyKind::Budget) && d.rule.as_deref() == Some(c.name.as_str())
            });
            inv.key(&c.key)
                .arg(c.window)
                .arg(c.max.to_string())
                .arg(used.to_string())
                .arg(
                    judged
                        .spent
                        .get(c.name.as_str())
                        .copied()
                        .unwrap_or(0.0)
                        .to_string(),
                )
                .arg(if denied { "1" } else { "0" });
        }
    }

    /// Takes a script's reply on counts `which`, judged as `judged`: the counts it holds
    /// (from its sixth entry on) and what it did. Added: the counts are written, `judged`
    /// fences the final response, and they keep the counts they were judged with; deferred
    /// or a conflict: they take the store's. Unavailable when there are not as many counts as
    /// asked for, one is not a number, or the status is unknown.
    fn settle(
        &mut self,
        which: &[usize],
        judged: &Response,
        reply: &[String],
        seen: &Seen,
    ) -> Result<Option<Counted>, Unavailable> {
        let fresh: Vec<f64> = reply
            .get(5..)
            .ok_or(Unavailable)?
            .iter()
            .map(|n| n.parse::<f64>().map_err(|_| Unavailable))
            .collect::<Result<_, _>>()?;
        if fresh.len() != which.len() {
            return Err(Unavailable);
        }
        let counted = match reply.get(4).map(String::as_str) {
            Some("ok") => Some(Counted::Added),
            Some("deferred") => Some(Counted::Deferred),
            Some("conflict") => None,
            _ => return Err(Unavailable),
        };
        seen.learn(
            which
                .iter()
                .zip(&fresh)
                .map(|(&i, n)| (self.counts[i].key.as_str(), *n)),
        );
        if counted == Some(Counted::Added) {
            for &i in which {
                self.written[i] = true;
            }
            // Only a count still to write can make the batch be judged again.
            if self.written.iter().any(|w| !*w) {
                self.wrote(judged);
            }
        } else {
            for (&i, n) in which.iter().zip(fresh) {
                self.used[i] = n;
            }
        }
        Ok(counted)
    }
}

impl RedisStore {
    /// The counts of `policy`'s budgets over batches a batch of `scopes` reads, each first
    /// at the value this replica saw last. On a single node every count is under its marker
    /// (slot 0's); in a cluster a turn's and a session's count are under the session's hash
    /// tag (its slot, so they ride in its exchange), a principal's and a tenant's under one
    /// of their own.
    pub fn counts(&self, policy: &Policy, scopes: &Scopes) -> BatchCounts {
        let prefix = self.prefix();
        let module = policy.module();
        let counts: Vec<Count> = scopes
            .counted(policy)
            .into_iter()
            .map(|c| {
                let name = c.budget.name;
                let scope = &c.scope;
                let key = match (&self.conn, c.budget.scope, scopes.session()) {
                    (StoreConnection::Single(_), ..) => {
                        format!("{prefix}:b:{module}:{name}:{scope}")
                    }
                    // The session id's length first, so no two sessions' keys meet.
                    (
                        StoreConnection::Cluster(_),
                        BudgetScope::Turn | BudgetScope::Session,
                        Some(session),
                    ) => format!(
                        "{prefix}:b:{}:{{{module}:{session}}}:{name}:{scope}",
                        session.len()
                    ),
                    (StoreConnection::Cluster(_), ..) => {
                        format!("{prefix}:b:{{{module}:{name}:{scope}}}")
                    }
                };
                Count {
                    slot: self.marker_slot(&key),
                    key,
                    name: name.to_string(),
                    window: c.budget.window.map_or(0, super::millis),
                    max: c.budget.max,
                    shared: matches!(c.budget.scope, BudgetScope::Principal | BudgetScope::Tenant),
                }
            })
            .collect();
        let used = counts
            .iter()
            .map(|c| self.budget_seen.get(&c.key))
            .collect();
        BatchCounts {
            written: vec![false; counts.len()],
            counts,
            used,
            fence: None,
        }
    }

    /// Appends the counts of `counts` in `slot` for `judged` to an exchange
    /// (`exchange.lua`); which ones, for [`RedisStore::counted`].
    pub(super) fn push_counts(
        inv: &mut redis::ScriptInvocation<'_>,
        counts: Option<(&BatchCounts, &Response)>,
        slot: u16,
    ) -> Vec<usize> {
        let Some((counts, judged)) = counts else {
            return Vec::new();
        };
        let which = counts.pending(slot);
        if !which.is_empty() {
            counts.push(inv, judged, &which);
        }
        which
    }

    /// What an exchange's reply says of the counts `which` it carried: added, deferred, or
    /// a conflict (the counts then hold what the store does, and the batch is judged again).
    pub(super) fn counted(
        &self,
        counts: Option<(&mut BatchCounts, &Response)>,
        which: &[usize],
        reply: &[String],
    ) -> Result<Option<Counted>, Unavailable> {
        match counts {
            Some((counts, judged)) if !which.is_empty() => {
                counts.settle(which, judged, reply, &self.budget_seen)
            }
            _ => Ok(Some(Counted::None)),
        }
    }

    /// Adds what `judged` consumed to every count of `counts` it is not yet added to, one
    /// round trip per slot (`budget_only.lua`, the slots' scripts at once), each under the
    /// module documentation's check: true when every count holds it, false when some counts
    /// changed under the batch (they then hold the store's; judge again with them, and
    /// [`BatchCounts::fence`] the new judgement by the ones written).
    pub async fn add_counts(
        &self,
        counts: &mut BatchCounts,
        judged: &Response,
    ) -> Result<bool, Unavailable> {
        let slots = counts.pending_slots();
        if slots.is_empty() {
            return Ok(true);
        }
        self.ensure_checked().await?;
        let calls = slots.iter().map(|&slot| {
            let which = counts.pending(slot);
            let marker = super::marker_key(self.prefix(), slot);
            let mut inv = self.common_args(&self.budget_only, (marker.clone(), marker), slot, "");
            counts.push(&mut inv, judged, &which);
            async move { (which, self.run(slot, inv).await) }
        });
        let replies = join_all(calls.collect()).await;
        let mut all = true;
        let mut down = false;
        for (which, reply) in replies {
            match reply.and_then(|r| counts.settle(&which, judged, &r, &self.budget_seen)) {
                Ok(Some(_)) => {}
                Ok(None) => all = false,
                Err(Unavailable) => down = true,
            }
        }
        if down {
            return Err(Unavailable);
        }
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const POLICY: &str = "module m\nwrite refund\nstage main { tools [refund] }\nbudget b for refund { sum args.amount <= 6 within 1h per principal }\n";

    /// Two refunds of 1 and 5, judged with `used` of the 6 already spent.
    fn judged(policy: &Policy, used: f64) -> Response {
        let text = serde_json::json!({"facts": {"stage": "main", "spent": {"b": used}},
            "calls": [{"id": "a", "tool": "refund", "args": {"amount": 1}},
                      {"id": "b", "tool": "refund", "args": {"amount": 5}}]})
        .to_string();
        policy.decide(&toolgate_engine::Request::from_json(&text).unwrap())
    }

    fn counts() -> BatchCounts {
        BatchCounts {
            counts: Vec::new(),
            used: Vec::new(),
            written: Vec::new(),
            fence: None,
        }
    }

    #[test]
    fn only_the_principals_counts_a_call_can_consume_from_are_read() {
        let policy = Policy::compile(
            "m.gate",
            &format!(
                "{}budget other for note {{ count <= 1 within 1h per principal }}\n\
                 budget mine for note {{ count <= 1 per session }}\n",
                POLICY
                    .replace("write refund", "write refund, note")
                    .replace("tools [refund]", "tools [refund, note]")
            ),
        )
        .unwrap();
        let count = |name: &str, shared: bool| Count {
            key: format!("k:{name}"),
            slot: 0,
            name: name.into(),
            window: 0,
            max: 1.0,
            shared,
        };
        let mut c = BatchCounts {
            counts: vec![count("b", true), count("other", true), count("mine", false)],
            used: vec![0.0, 0.0, 0.0],
            written: vec![false; 3],
            fence: None,
        };
        let refunds = judged(&policy, 0.0);
        assert!(policy.budget_counts("b", "refund"));
        assert!(!policy.budget_counts("other", "refund"));
        assert!(!policy.budget_counts("b", "nothing"));
        c.drop_unread(&policy, &refunds);
        let names: Vec<_> = c.given().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["b", "mine"], "the session's stays, to be renewed");
        assert_eq!(c.written.len(), 2);
    }

    #[test]
    fn a_fence_allows_only_what_every_written_judgement_allowed_and_caps_the_spent() {
        let policy = Policy::compile("m.gate", POLICY).unwrap();
        let allows = |r: &Response| -> Vec<bool> { r.decisions.iter().map(|d| d.allow).collect() };
        let mut c = counts();
        // Nothing written yet: nothing fenced.
        let fresh = judged(&policy, 0.0);
        assert_eq!(allows(&c.fence(fresh.clone())), [true, true]);
        // Written with 3 spent: the 5 did not fit. Judged again with a count that slid back
        // to 0, the 5 would fit, but its consumption was written nowhere.
        let written = judged(&policy, 3.0);
        assert_eq!(allows(&written), [true, false]);
        c.wrote(&written);
        let fenced = c.fence(fresh);
        assert_eq!(allows(&fenced), [true, false]);
        assert_eq!(fenced.decisions[1], written.decisions[1]);
        assert_eq!(fenced.spent.get("b").copied(), Some(1.0));
        // A judgement stricter than the fence stands as it is.
        let strict = judged(&policy, 5.5);
        assert_eq!(allows(&strict), [false, false]);
        assert_eq!(c.fence(strict.clone()), strict);
        assert!(c.fence(strict).spent.is_empty());
    }
}
