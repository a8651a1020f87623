//! The counts of budgets over batches: written once in `toolgate_turns::budgets` (which count
//! a batch reads, `Scopes`, and the in-memory `Book` that judges a batch under its lock), for
//! the server, its shared store (`turn_state::redis_store::budgets`) and the in-process turn
//! states of the language packages. Re-exported here under the paths the server's modules
//! use. The server's book lives in memory: a restart starts every count from zero, which
//! `docs/server.md` says; under `--state redis` the counts live in the store.

pub(crate) use toolgate_turns::budgets::{Book, Given, Scopes};
