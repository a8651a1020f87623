//! The approvals the server keeps: the asks it answered, waiting for a person
//! (`GET /v1/approvals`), and the approvals people gave (`POST /v1/approvals`), each usable
//! once, within its policy's window ([`Policy::approval_window`]).
//!
//! A request cannot carry `facts.approvals` to the server: an approval is recorded for a
//! session by a holder of the approver (or admin) token, so the agent that asked cannot
//! approve itself. How a batch uses them is in [`batch`]: the engine judges the batch, and
//! only when it asks does the server look for approvals. A batch that asks nothing costs one
//! scan of its decisions.
//!
//! Where they are kept is the turn state's choice (`turn_state::ApprovalStore`): here, in
//! this process's memory ([`Approvals`]), or, under `--state redis://...`, in the shared
//! store beside the turn state (`turn_state::redis_store::approvals`), so every replica
//! lists, answers and uses the same ones. This module knows no store: it holds what an ask
//! and an approval are, the in-memory book, and the keeper of one batch.
//!
//! In memory, bounded: at most [`MAX_PENDING`] asks per session, and the arguments of all
//! pending asks together at most [`MAX_ARGS_BYTES`]. An ask that does not fit is not
//! recorded, so it cannot be approved: it stays a denial. A restart forgets every approval,
//! which denies.
//!
//! [`Policy::approval_window`]: toolgate_engine::Policy::approval_window

pub(crate) mod batch;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most asks one session may have waiting; the oldest is dropped for a new one.
pub const MAX_PENDING: usize = 64;
/// The most bytes of arguments (as JSON) all waiting asks together may hold.
pub const MAX_ARGS_BYTES: usize = 16 << 20;
/// The most sessions with waiting asks or unused approvals.
pub const MAX_SESSIONS: usize = 100_000;
/// In the shared store, the most bytes of arguments (as JSON) one session's waiting asks
/// together may hold: the store has no total of its own to keep (its `maxmemory` is that
/// bound), so the bound is per session, four of the largest request bodies by default.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub const MAX_SESSION_ARGS_BYTES: usize = 4 << 20;

/// One ask waiting for a person.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pending {
    /// The digest an approval carries.
    pub approval: String,
    /// The call's id in the batch that asked.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The rule or latch that asked.
    pub rule: String,
    /// The refusal the model read.
    pub reason: String,
    /// The call's arguments, as the person approves them.
    pub args: Value,
    /// The turn that asked.
    pub turn: Option<String>,
    /// The judging policy's module and revision.
    pub policy: String,
    /// See `policy`.
    pub revision: String,
    /// When it asked, in Unix milliseconds (the shared store's clock, under `--state`).
    #[serde(default)]
    pub asked_at_ms: u128,
}

/// A waiting ask in the in-memory book, with when it expires and what it weighs.
#[derive(Debug, Clone)]
struct Held {
    ask: Pending,
    window: Duration,
    expires: Instant,
    bytes: usize,
}

/// Until when an approval taken for a batch may be used, as the place it came from counts
/// time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// The in-memory book: this process's monotonic clock.
    Instant(Instant),
    /// The shared store: when the approval was given and when it expires, in the store's
    /// milliseconds (`TIME`), so giving it back keeps both.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    Store {
        /// When the person approved it.
        at_ms: u64,
        /// When it expires.
        expires_ms: u64,
    },
}

/// One approval a person gave, not used yet.
#[derive(Debug, Clone)]
pub(crate) struct Granted {
    pub(crate) approval: String,
    pub(crate) until: Until,
}

/// One session's waiting asks and unused approvals.
#[derive(Default)]
struct Book {
    pending: Vec<Held>,
    granted: Vec<(String, Instant)>,
}

impl Book {
    fn sweep(&mut self, now: Instant) -> usize {
        let mut freed = 0;
        self.pending.retain(|p| {
            let keep = p.expires > now;
            if !keep {
                freed += p.bytes;
            }
            keep
        });
        self.granted.retain(|(_, expires)| *expires > now);
        freed
    }

    fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.granted.is_empty()
    }
}

#[derive(Default)]
struct Books {
    by_session: HashMap<Box<str>, Book>,
    args_bytes: usize,
}

/// Why an approval could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    /// No ask with that digest is waiting in the session: it was never asked, was answered
    /// already, or expired.
    #[error("no ask with this approval digest is waiting in session `{0}` (it was never asked, is answered already, or expired)")]
    NotPending(String),
    /// The shared store that keeps approvals (`--state`) could not be reached in time: no
    /// answer was recorded.
    #[error("the shared store that keeps approvals cannot be reached, so no answer was recorded; try again shortly")]
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    Unavailable,
}

/// What recording a person's answer gave.
#[derive(Debug, Serialize)]
pub struct Answered {
    /// The digest answered.
    pub approval: String,
    /// Whether the call was approved.
    pub granted: bool,
    /// How long the approval may be used, in milliseconds (approved calls only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_ms: Option<u128>,
    /// The ask that was answered.
    pub ask: Pending,
}

/// The server's approvals.
#[derive(Default)]
pub struct Approvals {
    books: Mutex<Books>,
}

impl Approvals {
    /// Records asks that wait for a person in `session`. An ask already waiting keeps its
    /// first time; one that does not fit the bounds is not recorded.
    pub(crate) fn note(&self, session: &str, asks: Vec<NewAsk>, now: Instant) {
        let Ok(mut books) = self.books.lock() else {
            return;
        };
        let books = &mut *books;
        if !books.by_session.contains_key(session) && books.by_session.len() >= MAX_SESSIONS {
            return;
        }
        let book = books.by_session.entry(session.into()).or_default();
        for ask in asks {
            if book.pending.iter().any(|p| p.ask.approval == ask.approval) {
                continue;
            }
            let bytes = ask.args_bytes();
            if books.args_bytes.saturating_add(bytes) > MAX_ARGS_BYTES {
                continue;
            }
            if book.pending.len() >= MAX_PENDING {
                let dropped = book.pending.remove(0);
                books.args_bytes -= dropped.bytes;
            }
            books.args_bytes += bytes;
            let window = ask.window;
            book.pending.push(Held {
                ask: ask.into_pending(crate::clock::now_ms()),
                window,
                expires: now + window,
                bytes,
            });
        }
        if book.is_empty() {
            books.by_session.remove(session);
        }
    }

    /// Records a person's answer to the waiting ask `approval` of `session`: approved, it
    /// may be used once within its policy's window from now; refused, it is dropped.
    pub fn answer(
        &self,
        session: &str,
        approval: &str,
        granted: bool,
        now: Instant,
    ) -> Result<Answered, GrantError> {
        let not_pending = || GrantError::NotPending(session.to_string());
        let mut books = self.books.lock().map_err(|_| not_pending())?;
        let books = &mut *books;
        let book = books.by_session.get_mut(session).ok_or_else(not_pending)?;
        books.args_bytes -= book.sweep(now);
        let at = book
            .pending
            .iter()
            .position(|p| p.ask.approval == approval)
            .ok_or_else(not_pending)?;
        let held = book.pending.remove(at);
        books.args_bytes -= held.bytes;
        let expires_in_ms = granted.then(|| {
            book.granted.retain(|(a, _)| a != approval);
            book.granted
                .push((held.ask.approval.clone(), now + held.window));
            held.window.as_millis()
        });
        if book.is_empty() {
            books.by_session.remove(session);
        }
        Ok(Answered {
            approval: held.ask.approval.clone(),
            granted,
            expires_in_ms,
            ask: held.ask,
        })
    }

    /// The asks waiting in `session`, oldest first, each with the milliseconds it has left.
    pub fn waiting(&self, session: &str, now: Instant) -> Vec<(Pending, u128)> {
        let Ok(mut books) = self.books.lock() else {
            return Vec::new();
        };
        let books = &mut *books;
        let Some(book) = books.by_session.get_mut(session) else {
            return Vec::new();
        };
        books.args_bytes -= book.sweep(now);
        book.pending
            .iter()
            .map(|p| {
                (
                    p.ask.clone(),
                    p.expires.saturating_duration_since(now).as_millis(),
                )
            })
            .collect()
    }

    /// Takes the unexpired approvals of `session` whose digest is in `asked` out of the
    /// book, for one batch: no other batch can use them until [`Approvals::give_back`].
    pub(crate) fn take(&self, session: &str, asked: &[String], now: Instant) -> Vec<Granted> {
        let Ok(mut books) = self.books.lock() else {
            return Vec::new();
        };
        let Some(book) = books.by_session.get_mut(session) else {
            return Vec::new();
        };
        book.granted.retain(|(_, expires)| *expires > now);
        let mut taken = Vec::new();
        book.granted.retain(|(approval, expires)| {
            let hit = asked.contains(approval);
            if hit {
                taken.push(Granted {
                    approval: approval.clone(),
                    until: Until::Instant(*expires),
                });
            }
            !hit
        });
        taken
    }

    /// Returns approvals a batch took and did not use.
    pub(crate) fn give_back(&self, session: &str, unused: Vec<Granted>) {
        let unused: Vec<(String, Instant)> = unused
            .into_iter()
            .filter_map(|g| match g.until {
                Until::Instant(expires) => Some((g.approval, expires)),
                // Not this book's: never taken from it.
                Until::Store { .. } => None,
            })
            .collect();
        if unused.is_empty() {
            return;
        }
        let Ok(mut books) = self.books.lock() else {
            return;
        };
        books
            .by_session
            .entry(session.into())
            .or_default()
            .granted
            .extend(unused);
    }

    /// Drops expired asks and approvals.
    pub fn expire(&self, now: Instant) {
        let Ok(mut books) = self.books.lock() else {
            return;
        };
        let books = &mut *books;
        let mut freed = 0;
        books.by_session.retain(|_, book| {
            freed += book.sweep(now);
            !book.is_empty()
        });
        books.args_bytes -= freed;
    }

    /// (sessions, waiting asks, unused approvals) held, for `/health`.
    pub fn held(&self) -> (usize, usize, usize) {
        let Ok(books) = self.books.lock() else {
            return (0, 0, 0);
        };
        let (mut pending, mut granted) = (0, 0);
        for b in books.by_session.values() {
            pending += b.pending.len();
            granted += b.granted.len();
        }
        (books.by_session.len(), pending, granted)
    }
}

/// An ask to record (see [`Approvals::note`]).
pub(crate) struct NewAsk {
    pub(crate) approval: String,
    pub(crate) call_id: String,
    pub(crate) tool: String,
    pub(crate) rule: String,
    pub(crate) reason: String,
    pub(crate) args: Value,
    pub(crate) turn: Option<String>,
    pub(crate) policy: String,
    pub(crate) revision: String,
    pub(crate) window: Duration,
}

impl NewAsk {
    /// The bytes its arguments take as JSON: what the bounds count.
    pub(crate) fn args_bytes(&self) -> usize {
        serde_json::to_string(&self.args).map_or(usize::MAX, |s| s.len())
    }

    /// The ask as listed, asked at `asked_at_ms`.
    pub(crate) fn into_pending(self, asked_at_ms: u128) -> Pending {
        Pending {
            approval: self.approval,
            call_id: self.call_id,
            tool: self.tool,
            rule: self.rule,
            reason: self.reason,
            args: self.args,
            turn: self.turn,
            policy: self.policy,
            revision: self.revision,
            asked_at_ms,
        }
    }
}
