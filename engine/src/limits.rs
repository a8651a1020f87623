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
