//! Live heap bytes of compiled policies and of sessions, from the counting allocator.

use super::counting_alloc::live_bytes;
use std::time::{Duration, Instant};
use toolgate_bench::documents::bench_documents;
use toolgate_bench::engines::toolgate;
use toolgate_bench::BenchError;
use toolgate_engine::Request;
use toolgate_turns::{SessionLimits, SessionStore};

/// Sessions stored for the per-session figure.
pub const SESSIONS: usize = 10_000;

/// The memory figures.
pub struct Memory {
    /// Live bytes of the compiled workload policy.
    pub workload_policy: isize,
    /// Live bytes of the compiled 1000-tool policy.
    pub scaling_policy: isize,
    /// Bytes per live session in a SessionStore (latched state, 16-byte ids).
    pub per_session: f64,
}

/// Measures on this thread; other threads must be idle.
pub fn measure() -> Result<Memory, BenchError> {
    let big_source = toolgate_bench::scaling::source();
    let before = live_bytes();
    let workload = toolgate::compile_workload()?;
    let workload_policy = live_bytes() - before;

    let before = live_bytes();
    let big = toolgate::compile("scaling.gate", &big_source)?;
    let scaling_policy = live_bytes() - before;
    drop(big);

    // A latched state as the engine returns it.
    let doc = bench_documents(4).remove(7);
    let request = Request::from_json(&doc.json).map_err(|e| BenchError::Engine {
        engine: "toolgate",
        message: e.to_string(),
    })?;
    let state = workload.decide(&request).latched;
    let ids: Vec<String> = (0..SESSIONS).map(|i| format!("sess-{i:011}")).collect();
    let now = Instant::now();
    let store = SessionStore::new(SessionLimits {
        ttl: Duration::from_secs(3600),
        keep_expired: Duration::from_secs(86_400),
        max_sessions: SESSIONS * 2,
        max_bytes: usize::MAX,
    });
    let before = live_bytes();
    for id in &ids {
        store
            .begin(&workload, id, "turn-0001", now)
            .map_err(|e| BenchError::Engine {
                engine: "toolgate",
                message: e.to_string(),
            })?;
        store.record(&workload, id, "turn-0001", &state, now);
    }
    let per_session = (live_bytes() - before) as f64 / SESSIONS as f64;
    if store.len() != SESSIONS {
        return Err(BenchError::Engine {
            engine: "toolgate",
            message: format!("session store holds {} of {SESSIONS}", store.len()),
        });
    }
    drop(store);
    drop(workload);
    Ok(Memory {
        workload_policy,
        scaling_policy,
        per_session,
    })
}
