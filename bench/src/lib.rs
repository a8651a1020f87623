//! Benchmarks of toolgate against regorus (Rego, interpreter and RVM), cedar-policy and a
//! hand-written Rust floor, on the agent tool-call workload of `shared/peer-bench/WORKLOAD.md`.
//!
//! The library holds what the criterion benches, the `summary` binary and the equivalence test
//! share: the engines' loaders, the case generator and the equivalence check.

pub mod bench_support;
pub mod cases;
pub mod documents;
pub mod engines;
pub mod equivalence;
pub mod rng;
pub mod scaling;
pub mod url_host;
pub mod verdict;
pub mod workload;

/// Why a benchmark cannot run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// An engine refused to load the workload or to evaluate a case.
    #[error("{engine}: {message}")]
    Engine {
        /// Which engine.
        engine: &'static str,
        /// What it said.
        message: String,
    },
    /// Two engines (or an engine and the expected answer) disagree.
    #[error("engines disagree, refusing to benchmark: {0}")]
    Mismatch(String),
}

/// Runs the full equivalence check, as the benches do before measuring anything.
pub fn ensure_equivalent() -> Result<equivalence::Summary, BenchError> {
    equivalence::check_all(&cases::all())
}
