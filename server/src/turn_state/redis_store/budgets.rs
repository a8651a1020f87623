//! Budget counts over batches in the shared store (`budget.lua`), shared by every replica,
//! checked and consumed in the batch's one round trip with its turn state.
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
//! the turn's latches and those counts and sends its consumption with `budget_only.lua`,
//! under the same check. That is the only case with a second round trip besides a conflict.
//!
//! Windows slide on the store's clock (`TIME` inside the script), so replicas' clocks never
//! matter; a window keeps at most [`MAX_ENTRIES`] entries, merging the oldest two under the
//! later time (an amount is only ever counted longer). A count expires a minute past its
//! window, or, unwindowed, TTL + keep-expired after its last use (the horizon of the turn
//! state that names its session). The store's loss marker (`common.lua`) covers the counts:
//! every count written moves its counter, and a count the store may have lost (missing, or
//! first written before the loss was seen, while the loss's horizon or the count's window
//! since the loss lasts) is taken as spent in full and written so, as a lost turn is written
//! latched: a windowed one frees up as its window slides, an unwindowed one stays spent for
//! the life of its turn or session.
//!
//! A Redis Cluster keeps no counts: a count of a principal or a tenant is in another slot
//! than the session's keys, so it cannot ride in the session's script. Every budget over
//! batches then denies, as it did before counts were kept in the store.

use super::{RedisStore, StoreConnection, Unavailable};
use crate::budgets::Scopes;
use std::collections::HashMap;
use std::sync::Mutex;
use toolgate_engine::{DenyKind, Policy, Response};

/// Most times one batch is judged again because its counts changed under it.
pub(crate) const MAX_ATTEMPTS: usize = 8;
/// The most entries one windowed count keeps before it merges its oldest (as the book does).
const MAX_ENTRIES: usize = 4_096;
/// The most counts a replica remembers having seen, before it forgets them all.
const MAX_SEEN: usize = 100_000;

/// The counts one batch reads, with the keys they are stored under.
#[derive(Debug, Clone)]
pub struct BatchCounts {
    /// Per count: its key, its budget's name, window (ms, 0 for none) and limit.
    counts: Vec<(String, String, u64, f64)>,
    /// Per count, the count the batch is judged with.
    used: Vec<f64>,
}

/// What a script call said of a batch's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// The batch read no count.
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

    fn learn(&self, counts: &BatchCounts) {
        if let Ok(mut m) = self.0.lock() {
            if m.len() >= MAX_SEEN {
                m.clear();
            }
            for ((key, ..), used) in counts.counts.iter().zip(&counts.used) {
                m.insert(key.clone(), *used);
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
            .map(|((_, name, ..), used)| (name.clone(), *used))
            .collect()
    }

    /// Whether the batch reads no count at all.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Takes the counts of a reply (from its sixth entry on); false when there are not as
    /// many as asked for, or one is not a number.
    fn read(&mut self, reply: &[String]) -> bool {
        let fresh: Option<Vec<f64>> = reply
            .get(5..)
            .map(|r| r.iter().map(|n| n.parse::<f64>().ok()).collect())
            .unwrap_or(None);
        match fresh {
            Some(f) if f.len() == self.used.len() => {
                self.used = f;
                true
            }
            _ => false,
        }
    }

    /// Appends the counts' keys (from KEYS[4]) and `budget.lua`'s arguments for `judged`.
    fn push(&self, inv: &mut redis::ScriptInvocation<'_>, judged: &Response) {
        inv.arg(self.counts.len()).arg(MAX_ENTRIES);
        for ((key, name, window, max), used) in self.counts.iter().zip(&self.used) {
            let denied = judged.decisions.iter().any(|d| {
                d.kind == Some(DenyKind::Budget) && d.rule.as_deref() == Some(name.as_str())
            });
            inv.key(key)
                .arg(window)
                .arg(max.to_string())
                .arg(used.to_string())
                .arg(
                    judged
                        .spent
                        .get(name.as_str())
                        .copied()
                        .unwrap_or(0.0)
                        .to_string(),
                )
                .arg(if denied { "1" } else { "0" });
        }
    }
}

impl RedisStore {
    /// Whether this store keeps budget counts: a single node does, a cluster does not (see
    /// the module documentation).
    pub fn keeps_counts(&self) -> bool {
        matches!(self.conn, StoreConnection::Single(_))
    }

    /// The counts of `policy`'s budgets over batches a batch of `scopes` reads, each first
    /// at the value this replica saw last; none in a cluster, so every such budget denies.
    pub fn counts(&self, policy: &Policy, scopes: &Scopes) -> BatchCounts {
        let counts: Vec<_> = if self.keeps_counts() {
            scopes
                .counted(policy)
                .into_iter()
                .map(|c| {
                    let key = format!(
                        "{}:b:{}:{}:{}",
                        self.prefix(),
                        policy.module(),
                        c.budget.name,
                        c.scope
                    );
                    let window = c.budget.window.map_or(0, super::millis);
                    (key, c.budget.name.to_string(), window, c.budget.max)
                })
                .collect()
        } else {
            Vec::new()
        };
        let used = counts
            .iter()
            .map(|(key, ..)| self.budget_seen.get(key))
            .collect();
        BatchCounts { counts, used }
    }

    /// Appends `counts` for `judged` to an exchange (`exchange.lua`).
    pub(super) fn push_counts(
        inv: &mut redis::ScriptInvocation<'_>,
        counts: Option<(&BatchCounts, &Response)>,
    ) {
        if let Some((counts, judged)) = counts.filter(|(c, _)| !c.is_empty()) {
            counts.push(inv, judged);
        }
    }

    /// What an exchange's reply says of `counts`: added, deferred, or a conflict (the
    /// counts then hold what the store does, and the batch is judged again).
    pub(super) fn counted(
        &self,
        counts: Option<&mut BatchCounts>,
        reply: &[String],
    ) -> Result<Option<Counted>, Unavailable> {
        let Some(counts) = counts.filter(|c| !c.is_empty()) else {
            return Ok(Some(Counted::None));
        };
        if !counts.read(reply) {
            return Err(Unavailable);
        }
        self.budget_seen.learn(counts);
        match reply.get(4).map(String::as_str) {
            Some("ok") => Ok(Some(Counted::Added)),
            Some("deferred") => Ok(Some(Counted::Deferred)),
            Some("conflict") => Ok(None),
            _ => Err(Unavailable),
        }
    }

    /// Adds what `judged` consumed to `counts` in one round trip (`budget_only.lua`), under
    /// the module documentation's check: true when added, false when the counts changed
    /// under the batch (`counts` then hold the store's; judge again with them).
    pub async fn add_counts(
        &self,
        counts: &mut BatchCounts,
        judged: &Response,
    ) -> Result<bool, Unavailable> {
        if counts.is_empty() {
            return Ok(true);
        }
        self.ensure_checked().await?;
        // Counts are kept on a single node only, whose one marker is slot 0's.
        let slot = 0;
        let marker = super::marker_key(self.prefix(), slot);
        let mut inv = self.common_args(&self.budget_only, (marker.clone(), marker), slot, "");
        counts.push(&mut inv, judged);
        let reply = self.run(slot, inv).await?;
        match self.counted(Some(counts), &reply)? {
            Some(_) => Ok(true),
            None => Ok(false),
        }
    }
}
