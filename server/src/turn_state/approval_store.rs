//! Where the server keeps approvals: beside its turn state. In this process's memory
//! ([`Approvals`]) when turn state is, or in the shared store (`--state redis://...`,
//! [`super::redis_store::approvals`]) when turn state is there, so every replica on one store
//! lists, answers and uses the same asks and approvals.
//!
//! A batch meets its approvals inside the turn state's judge ([`super::TurnState::judge`]),
//! between its judgements: [`approved_now`] in memory, under the judge's lock, and
//! [`approved_shared`] against the store, one round trip that takes exactly the approvals
//! the batch asked for. What the batch leaves ([`Finished`]) is written after it by
//! [`ApprovalStore::finish`].
//!
//! A shared store that cannot be reached takes, records and answers nothing: an ask stays a
//! denial (kind `ask`), `/v1/approvals` answers 503 ([`GrantError::Unavailable`]), and an
//! approval a batch took and could not give back is lost, which denies.

#[cfg(feature = "redis")]
use super::redis_store::RedisStore;
use super::TurnState;
use crate::approvals::batch::{Finished, Keeper};
use crate::approvals::{Answered, Approvals, GrantError, Pending};
#[cfg(feature = "redis")]
use std::sync::Arc;
use std::time::Instant;
use toolgate_engine::Response;

/// The store of approvals.
pub enum ApprovalStore {
    /// This process's memory, bounded, swept by the server.
    Memory(Approvals),
    /// The shared store of the turn state.
    #[cfg(feature = "redis")]
    Shared(Arc<RedisStore>),
}

/// The shared store could not list a session's asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the shared store that keeps approvals cannot be reached, so the waiting asks cannot be listed; try again shortly")]
pub struct WaitingUnavailable;

/// `first`, a judgement of the batch with the keeper's approvals, or the batch judged
/// `again` with the approvals the in-memory book gives its asks.
pub(super) fn approved_now(
    book: Option<&Approvals>,
    keeper: &mut Keeper<'_>,
    first: Response,
    again: impl FnOnce(&[String]) -> Response,
) -> Response {
    let now = keeper.now();
    let taken = match (keeper.wanted(&first), book) {
        (Some((session, digests)), Some(book)) => book.take(session, &digests, now),
        _ => Vec::new(),
    };
    keeper.judged(first, taken, again)
}

/// [`approved_now`] against the shared store: one round trip to take the approvals, only
/// for a judgement that asks for some no take has tried yet. A store that cannot be reached
/// gives none: the asks stay denials.
#[cfg(feature = "redis")]
pub(super) async fn approved_shared(
    store: &RedisStore,
    keeper: &mut Keeper<'_>,
    first: Response,
    again: impl FnOnce(&[String]) -> Response,
) -> Response {
    let mut taken = Vec::new();
    if let Some((session, digests)) = keeper.wanted(&first) {
        taken = store
            .take_approvals(session, &digests)
            .await
            .unwrap_or_default();
    }
    keeper.judged(first, taken, again)
}

impl ApprovalStore {
    /// The approvals of a server whose turn state is `turns`: in the shared store when that
    /// is, else in memory.
    pub fn beside(turns: &TurnState) -> Self {
        match turns {
            #[cfg(feature = "redis")]
            TurnState::Redis(store) => ApprovalStore::Shared(store.clone()),
            TurnState::Memory(_) => ApprovalStore::Memory(Approvals::default()),
        }
    }

    /// The in-memory book, when approvals are kept in memory.
    pub(super) fn memory(&self) -> Option<&Approvals> {
        match self {
            ApprovalStore::Memory(book) => Some(book),
            #[cfg(feature = "redis")]
            ApprovalStore::Shared(_) => None,
        }
    }

    /// Writes what a judged batch leaves: gives back the approvals it did not use and records
    /// its asks as waiting. A shared store that cannot be reached records nothing (the asks
    /// cannot be approved) and loses what it was to get back: both deny.
    pub(crate) async fn finish(&self, done: Option<Finished<'_>>) {
        let Some(done) = done else {
            return;
        };
        match self {
            ApprovalStore::Memory(book) => {
                book.give_back(done.session, done.unused);
                if !done.asks.is_empty() {
                    book.note(done.session, done.asks, done.now);
                }
            }
            #[cfg(feature = "redis")]
            ApprovalStore::Shared(store) => {
                let _ = store
                    .finish_approvals(done.session, &done.unused, done.asks)
                    .await;
            }
        }
    }

    /// Records a person's answer to the waiting ask `approval` of `session`
    /// ([`Approvals::answer`]); [`GrantError::Unavailable`] when the shared store cannot be
    /// reached.
    pub async fn answer(
        &self,
        session: &str,
        approval: &str,
        granted: bool,
        now: Instant,
    ) -> Result<Answered, GrantError> {
        match self {
            ApprovalStore::Memory(book) => book.answer(session, approval, granted, now),
            #[cfg(feature = "redis")]
            ApprovalStore::Shared(store) => store
                .answer_approval(session, approval, granted)
                .await
                .map_err(|_| GrantError::Unavailable)?
                .ok_or_else(|| GrantError::NotPending(session.to_string())),
        }
    }

    /// The asks waiting in `session`, oldest first, each with the milliseconds it has left.
    pub async fn waiting(
        &self,
        session: &str,
        now: Instant,
    ) -> Result<Vec<(Pending, u128)>, WaitingUnavailable> {
        match self {
            ApprovalStore::Memory(book) => Ok(book.waiting(session, now)),
            #[cfg(feature = "redis")]
            ApprovalStore::Shared(store) => store
                .waiting_approvals(session)
                .await
                .map_err(|_| WaitingUnavailable),
        }
    }

    /// Drops what the in-memory book no longer needs; the shared store's keys expire by
    /// themselves.
    pub fn expire(&self, now: Instant) {
        #[cfg_attr(not(feature = "redis"), allow(irrefutable_let_patterns))]
        if let ApprovalStore::Memory(book) = self {
            book.expire(now);
        }
    }

    /// The `approvals` object of `/health` (besides the ask mode): where they are kept and,
    /// in memory, what is held; `up` says whether the shared store answers.
    pub fn health(&self, up: bool) -> serde_json::Map<String, serde_json::Value> {
        let mut out = serde_json::Map::new();
        match self {
            ApprovalStore::Memory(book) => {
                let (sessions, waiting, approved) = book.held();
                out.insert("store".into(), "memory".into());
                out.insert("sessions".into(), sessions.into());
                out.insert("waiting".into(), waiting.into());
                out.insert("approved".into(), approved.into());
            }
            #[cfg(feature = "redis")]
            ApprovalStore::Shared(_) => {
                out.insert("store".into(), "redis".into());
                out.insert("up".into(), up.into());
            }
        }
        let _ = up;
        out
    }
}
