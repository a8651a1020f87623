//! Verified tokens by their SHA-256, each until its own `exp`: a repeated token costs a hash
//! and a map lookup instead of a signature check.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;

/// The most tokens kept; past it, expired ones are dropped, and a new token is verified
/// every time until there is room.
const MAX_ENTRIES: usize = 10_000;

/// The cache.
#[derive(Default)]
pub(super) struct Cache {
    entries: Mutex<HashMap<[u8; 32], (Value, u64, u64)>>,
}

impl Cache {
    /// The principal of `token` when it was verified before, against key-set generation
    /// `generation` (a refreshed set may have dropped its key), and has not expired by `now`.
    pub(super) fn get(&self, token: &str, now: u64, generation: u64) -> Option<Value> {
        let key = digest(token);
        let entries = self.entries.lock().ok()?;
        let (principal, exp, seen) = entries.get(&key)?;
        (now < *exp && *seen == generation).then(|| principal.clone())
    }

    /// Keeps `token`'s `principal` until `exp`, for key-set generation `generation`.
    pub(super) fn put(
        &self,
        token: &str,
        principal: Value,
        (exp, generation): (u64, u64),
        now: u64,
    ) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, (_, e, _)| now < *e);
        }
        if entries.len() < MAX_ENTRIES {
            entries.insert(digest(token), (principal, exp, generation));
        }
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}
