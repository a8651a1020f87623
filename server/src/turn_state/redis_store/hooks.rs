//! `/v1/hooks` sessions in the shared store: [`SessionTurns`] serialized by
//! `toolgate_turns::codec`, read, judged in Rust and written back by compare-and-set
//! (`hook.lua`), so the turn model stays written once and two replicas judging events of one
//! session at once never lose each other's latches: the later write finds the version
//! changed, and its event is judged again on the state the other wrote.
//!
//! The store's loss detection (`common.lua`) covers these sessions: a session the store may
//! have lost, or first wrote before a loss was seen, is judged as unreadable state (every
//! latch set until the user's next explicit turn signal).

use super::{RedisStore, Unavailable};
use crate::turn_state::HookKey;
use toolgate_turns::{codec, SessionTurns};

/// Most times one event is judged again because another replica wrote its session first.
const MAX_ATTEMPTS: usize = 8;

/// Why a hook session's state could not be read or written; the surface denies the call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SharedHookError {
    /// The store did not answer in time, or answered something this version cannot read.
    #[error(
        "the shared turn state store cannot be reached, so this session's latches are unknown"
    )]
    Unavailable,
    /// Other replicas kept writing the session while this event was judged.
    #[error("the session's turn state kept changing under this event ({MAX_ATTEMPTS} attempts)")]
    Contended,
}

impl From<Unavailable> for SharedHookError {
    fn from(_: Unavailable) -> Self {
        SharedHookError::Unavailable
    }
}

/// The state the store holds for a session, as `hook.lua` returned it.
struct Held {
    /// The store may have lost the session's latches.
    lost: bool,
    /// The serialized state ("" when the store holds none).
    state: String,
    /// Its version, for the compare-and-set.
    version: String,
}

/// A write for `hook.lua`: the new state, if the session is still at `version`.
struct Write<'a> {
    version: &'a str,
    state: &'a [u8],
    latched: bool,
    judged_lost: bool,
}

impl RedisStore {
    /// Runs `f` on the state of the hook session `key` and writes the result back, judging
    /// again (at most [`MAX_ATTEMPTS`] times) when another replica wrote the session first.
    /// `f` may therefore run more than once; only the run whose state was written counts.
    pub async fn with_hook_session<R>(
        &self,
        key: HookKey<'_>,
        mut f: impl FnMut(&mut SessionTurns) -> R,
    ) -> Result<R, SharedHookError> {
        self.ensure_checked().await?;
        let (mut held, _) = self.hook_script(key, None).await?;
        for _ in 0..MAX_ATTEMPTS {
            let mut state = if held.lost {
                SessionTurns::recovered()
            } else if held.state.is_empty() {
                SessionTurns::default()
            } else {
                codec::decode_or_recovered(&held.state)
            };
            let result = f(&mut state);
            let text = codec::encode(&state).map_err(|_| SharedHookError::Unavailable)?;
            if !held.lost && text == held.state.as_bytes() {
                return Ok(result);
            }
            let write = Write {
                version: &held.version,
                state: &text,
                latched: state.holds_latch(),
                judged_lost: held.lost,
            };
            match self.hook_script(key, Some(write)).await? {
                (_, true) => return Ok(result),
                (now_held, false) => held = now_held,
            }
        }
        Err(SharedHookError::Contended)
    }

    /// One run of `hook.lua`: a read, or `write` if the session is still at its version.
    /// Gives the state the store holds (before the write) and whether the write happened.
    async fn hook_script(
        &self,
        key: HookKey<'_>,
        write: Option<Write<'_>>,
    ) -> Result<(Held, bool), Unavailable> {
        let hash = format!(
            "{}:h:{{{}:{}:{}}}",
            self.prefix, key.agent, key.module, key.session
        );
        let slot = self.marker_slot(&hash);
        let mut inv = self.common_args(&self.hook, (hash.clone(), hash), slot, "");
        match &write {
            None => {
                inv.arg("read");
            }
            Some(w) => {
                inv.arg("write")
                    .arg(w.version)
                    .arg(w.state)
                    .arg(if w.latched { "latched" } else { "" })
                    .arg(if w.judged_lost { "lost" } else { "ok" });
            }
        }
        let reply = self.run(slot, inv).await?;
        let Ok([status, state, _, _, version, written]) = <[String; 6]>::try_from(reply) else {
            return Err(Unavailable);
        };
        let lost = match status.as_str() {
            "ok" => false,
            "lost" => true,
            _ => return Err(Unavailable),
        };
        Ok((
            Held {
                lost,
                state,
                version,
            },
            written == "1",
        ))
    }
}
