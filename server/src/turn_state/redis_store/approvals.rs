//! Approvals in the shared store (`approvals.lua`): the asks waiting for a person and the
//! approvals given, kept for every replica, so an ask made through one replica is listed and
//! answered through any other, and any replica's next batch of the session uses the approval.
//!
//! # Keys and bounds
//!
//! A session's approvals are two hashes under its hash tag, `PREFIX:a:{SESSION}` (the waiting
//! asks' times and weights, and the approvals) and `PREFIX:a:{SESSION}:asks` (the asks as
//! JSON), so in a cluster they are in one slot, judged by that slot's marker, and every
//! script is one round trip to one shard. The tag is the session alone, not the module: a
//! session's book holds the asks of every policy that judged it, as in memory, and
//! `GET /v1/approvals?session=S` names no module (a digest binds its module and revision).
//! Each entry carries its own expiry, on the store's clock (`TIME`); a key lives until its
//! last entry expires. Bounds per session: [`MAX_PENDING`] waiting asks (the oldest goes for
//! a new one) and [`MAX_SESSION_ARGS_BYTES`] of their arguments (an ask over it is not
//! recorded, so it stays a denial); the store's `maxmemory` bounds the whole, and a full
//! store records nothing (under `noeviction` it refuses the write), which denies.
//!
//! # Used once, across replicas
//!
//! A batch that asks takes the approvals of exactly the digests it asked with one script
//! (`take`), which removes them atomically: two replicas' batches racing for one approval
//! find it once. A batch that took an approval and did not use it gives it back with the
//! script that records its asks (`finish`), keeping the times it had. A replica that dies
//! between the take and the give-back, or whose give-back does not reach the store, loses
//! the approval: a denial, never a second use.
//!
//! # A store that went back in time
//!
//! Every take adds one to the counter (`seq`) of its slot's marker (`common.lua`). A restart
//! from a snapshot taken before the take, or a failover to a replica that had not received
//! it, shows that counter lower than a replica that saw it after the take remembers, and that
//! replica records the loss in the marker (`lost_at`). From then on an approval or an ask the
//! store holds from before `lost_at` is refused: the store may have got back an approval that
//! was used. Unlike a turn, which is judged latched only within the loss's horizon
//! (`--session-ttl` + `--session-keep-expired`), this holds past it too: an approval may be
//! valid for up to 24 hours, longer than a short horizon. A flush or an empty restart loses every
//! approval, which denies. As for latches, a restore is seen by a replica that saw the
//! counter after the take (the replica that took it; on a single node, where one marker
//! counts for every session, any replica that judged a batch since): one that did not
//! (restarted since, or in a cluster idle in that slot) cannot tell, and if it reaches the
//! restored store first it may take the approval once more.

use super::{RedisStore, Unavailable};
use crate::approvals::{
    Answered, Granted, NewAsk, Pending, Until, MAX_PENDING, MAX_SESSION_ARGS_BYTES,
};

/// A session's two keys: its book and its asks' texts, under the session's hash tag.
fn approval_keys(prefix: &str, session: &str) -> (String, String) {
    let book = format!("{prefix}:a:{{{session}}}");
    let asks = format!("{book}:asks");
    (book, asks)
}

/// A number in a script's reply.
fn number<T: std::str::FromStr>(text: &str) -> Result<T, Unavailable> {
    text.parse().map_err(|_| Unavailable)
}

impl RedisStore {
    /// Runs `approvals.lua` in `mode` for `session` with `args` after the mode; its reply
    /// past the four common fields (the first is the status).
    async fn approvals_script(
        &self,
        session: &str,
        mode: &str,
        args: impl FnOnce(&mut redis::ScriptInvocation<'_>),
    ) -> Result<(String, Vec<String>), Unavailable> {
        self.ensure_checked().await?;
        let keys = approval_keys(self.prefix(), session);
        let slot = self.marker_slot(&keys.0);
        let mut inv = self.common_args(&self.approvals, keys, slot, "");
        inv.arg(mode);
        args(&mut inv);
        let mut reply = self.run(slot, inv).await?;
        if reply.len() < 4 {
            return Err(Unavailable);
        }
        let rest = reply.split_off(4);
        Ok((reply.swap_remove(0), rest))
    }

    /// Takes the usable approvals of `session` for `digests` out of the store, atomically:
    /// no other batch, through any replica, finds them after this.
    pub(crate) async fn take_approvals(
        &self,
        session: &str,
        digests: &[String],
    ) -> Result<Vec<Granted>, Unavailable> {
        let (_, rest) = self
            .approvals_script(session, "take", |inv| {
                for d in digests {
                    inv.arg(d);
                }
            })
            .await?;
        rest.chunks(3)
            .map(|c| match c {
                [approval, at, expires] => Ok(Granted {
                    approval: approval.clone(),
                    until: Until::Store {
                        at_ms: number(at)?,
                        expires_ms: number(expires)?,
                    },
                }),
                _ => Err(Unavailable),
            })
            .collect()
    }

    /// Gives back the approvals a batch of `session` took and did not use, and records its
    /// asks as waiting, in one round trip.
    pub(crate) async fn finish_approvals(
        &self,
        session: &str,
        unused: &[Granted],
        asks: Vec<NewAsk>,
    ) -> Result<(), Unavailable> {
        let back: Vec<(&str, u64, u64)> = unused
            .iter()
            .filter_map(|g| match g.until {
                Until::Store { at_ms, expires_ms } => {
                    Some((g.approval.as_str(), at_ms, expires_ms))
                }
                // Not the store's: never taken from it.
                Until::Instant(_) => None,
            })
            .collect();
        let mut texts = Vec::with_capacity(asks.len());
        for ask in asks {
            let bytes = ask.args_bytes();
            let window = u64::try_from(ask.window.as_millis()).unwrap_or(u64::MAX);
            let approval = ask.approval.clone();
            let text = serde_json::to_string(&ask.into_pending(0)).map_err(|_| Unavailable)?;
            texts.push((approval, window, bytes, text));
        }
        self.approvals_script(session, "finish", |inv| {
            inv.arg(MAX_PENDING)
                .arg(MAX_SESSION_ARGS_BYTES)
                .arg(back.len());
            for (approval, at, expires) in &back {
                inv.arg(*approval).arg(*at).arg(*expires);
            }
            for (approval, window, bytes, text) in &texts {
                inv.arg(approval).arg(*window).arg(*bytes).arg(text);
            }
        })
        .await?;
        Ok(())
    }

    /// Records a person's answer to the waiting ask `approval` of `session`; `None` when no
    /// such ask waits (never asked, answered already, expired, or from before a loss).
    pub(crate) async fn answer_approval(
        &self,
        session: &str,
        approval: &str,
        granted: bool,
    ) -> Result<Option<Answered>, Unavailable> {
        let (status, rest) = self
            .approvals_script(session, "answer", |inv| {
                inv.arg(approval)
                    .arg(if granted { "approve" } else { "reject" });
            })
            .await?;
        if status == "not_pending" {
            return Ok(None);
        }
        let [text, asked, window] = <[String; 3]>::try_from(rest).map_err(|_| Unavailable)?;
        let mut ask: Pending = serde_json::from_str(&text).map_err(|_| Unavailable)?;
        ask.asked_at_ms = number(&asked)?;
        Ok(Some(Answered {
            approval: ask.approval.clone(),
            granted,
            expires_in_ms: granted.then_some(number(&window)?),
            ask,
        }))
    }

    /// The asks waiting in `session`, oldest first, each with the milliseconds it has left.
    pub(crate) async fn waiting_approvals(
        &self,
        session: &str,
    ) -> Result<Vec<(Pending, u128)>, Unavailable> {
        let (_, rest) = self.approvals_script(session, "list", |_| {}).await?;
        rest.chunks(3)
            .map(|c| match c {
                [asked, left, text] => {
                    let mut ask: Pending = serde_json::from_str(text).map_err(|_| Unavailable)?;
                    ask.asked_at_ms = number(asked)?;
                    Ok((ask, number(left)?))
                }
                _ => Err(Unavailable),
            })
            .collect()
    }
}
