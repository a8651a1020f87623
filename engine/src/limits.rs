//! The engine's fixed limits, in one leaf module that imports nothing, so the compiler, the
//! import resolver, the judge and the policy tables all read them without importing each
//! other.

/// The largest policy source accepted, in bytes, counting every imported module.
pub const MAX_SOURCE_BYTES: usize = 4 << 20;

/// How deeply `use` imports may nest.
pub const MAX_IMPORT_DEPTH: usize = 8;

/// How many rules per policy get a slot in the per-batch memo of fact-only conditions; a rule
/// past the last slot is evaluated for each call instead.
pub(crate) const MEMO_SLOTS: usize = 32;

/// The most bytes of tool output text one request's provenance index takes in (`facts.outputs`
/// of a turn). A turn past it is judged as if every value were untrusted, and a denial says
/// so: a cap that failed open would let an attacker hide an injected value behind filler.
pub const MAX_INDEXED_BYTES: usize = 4 << 20;
