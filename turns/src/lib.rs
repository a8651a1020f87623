//! Turn state for toolgate: one model of turns and latches, written once and used by every
//! surface.
//!
//! A latch is write-once-true for the user's turn. Keeping that promise needs state between
//! batches (or, on the per-call surfaces, between calls), and the promise is only as strong
//! as the weakest place that state is kept. This crate is that place:
//!
//! - [`SessionTurns`] (`session.rs`): the turn model of one session on a surface that sees
//!   one call at a time (coding-agent hooks, `/v1/hooks`, the MCP proxy): which events start
//!   a turn, how turn ids are remembered, how the policy travels with the state, and what
//!   unreadable state means. Its contract is in the module's docs.
//! - [`SessionStore`] (`store.rs`): the memory backend of `/v1/decide`, where the executor
//!   names each batch's session and turn.
//! - [`TurnsMap`] (`memory.rs`): [`SessionTurns`] by key in memory, bounded.
//! - [`StateDir`] (`file.rs`): [`SessionTurns`] in files, for `toolgate hook`.
//! - [`EmbeddedTurns`] (`embedded.rs`): [`SessionTurns`] with the batch judgement and the
//!   per-message verdict cache an in-process executor needs (the Python and Node packages).
//! - [`budgets`]: the counts of budgets over batches, and the [`Book`] that keeps them in one
//!   process: the server's, and the in-process turn states' `per principal` and `per tenant`
//!   counts.
//! - [`codec`]: the one serialized form of [`SessionTurns`], for the files and the server's
//!   shared store.
//!
//! None of them ever reads a clock (callers pass `now`) or loses a latch in the allowing
//! direction: a full store refuses, unreadable state is every latch set.

pub mod budgets;
pub mod codec;
mod embedded;
mod file;
mod memory;
pub mod outputs;
pub mod session;
mod store;

pub use budgets::Book;
pub use embedded::{EmbeddedTurns, MAX_BATCHES};
pub use file::{Locked, StateDir, StateError, MAX_STATE_BYTES};
pub use memory::{MapError, TurnsMap, TurnsMapLimits};
pub use outputs::{MAX_KEPT_OUTPUT_BYTES, NO_CALL_ID};
pub use session::{
    Called, NewIds, Placed, Placement, PolicyStamp, SessionTurns, TurnError, TurnKey, KEPT_TURNS,
    MAX_CALLED, MAX_FORGOTTEN, MAX_TURN_IDS,
};
pub use store::{
    Carried, Origin, SessionError, SessionLimits, SessionStore, MAX_LATCHED_TURNS, RECENT_TURNS,
};
