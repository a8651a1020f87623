//! The wall clock as logs, answers and decision ids write it.

use std::time::{SystemTime, UNIX_EPOCH};

/// The wall clock in Unix milliseconds (0 before 1970).
pub(crate) fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// Milliseconds since the Unix epoch at start-up: the process's prefix of decision ids.
pub fn boot_stamp() -> u64 {
    now_ms() as u64
}
