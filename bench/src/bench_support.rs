//! What every criterion bench shares: the measurement settings, the equivalence gate and the
//! prepared inputs per batch size.

use crate::documents::{bench_documents, Document};
use crate::engines::{cedar::CedarGate, floor};
use crate::BenchError;
use criterion::Criterion;
use std::time::Duration;

/// Settings that keep the whole `cargo bench` run within about ten minutes.
pub fn criterion() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(800))
        .measurement_time(Duration::from_secs(3))
        .sample_size(40)
        .configure_from_args()
}

/// A bench binary's `main`: the equivalence gate, then `bench` with [`criterion`]'s settings.
pub fn run(bench: fn(&mut Criterion)) {
    require_equivalence();
    let mut c = criterion();
    bench(&mut c);
    c.final_summary();
}

/// Runs the equivalence check and exits with the first difference if any engine disagrees.
pub fn require_equivalence() {
    match crate::ensure_equivalent() {
        Ok(s) => eprintln!(
            "equivalence: {} cases, {} calls ({} allowed, {} denied) agree on every engine",
            s.cases, s.calls, s.allowed, s.denied
        ),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}

/// Exits with `e` when a fixture cannot be prepared.
pub fn or_exit<T>(r: Result<T, BenchError>) -> T {
    r.unwrap_or_else(|e| {
        eprintln!("cannot prepare the benchmark: {e}");
        std::process::exit(1)
    })
}

/// The 8 documents of one batch size, pre-parsed for every engine.
pub struct Prepared {
    /// The documents.
    pub docs: Vec<Document>,
    /// toolgate's typed requests.
    pub requests: Vec<toolgate_engine::Request>,
    /// The floor's typed facts.
    pub facts: Vec<floor::Facts>,
    /// serde_json values (Cedar's "build" input).
    pub values: Vec<serde_json::Value>,
    /// regorus input values.
    pub rego_inputs: Vec<regorus::Value>,
    /// Cedar requests, one per call, per document.
    pub cedar_requests: Vec<Vec<cedar_policy::Request>>,
}

impl Prepared {
    /// Prepares the documents of `batch` calls.
    pub fn new(batch: usize, cedar: &CedarGate) -> Result<Prepared, BenchError> {
        let docs = bench_documents(batch);
        let requests = docs
            .iter()
            .map(|d| toolgate_engine::Request::from_json(&d.json))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| BenchError::Engine {
                engine: "toolgate",
                message: e.to_string(),
            })?;
        let values = docs
            .iter()
            .map(|d| serde_json::from_str(&d.json))
            .collect::<Result<Vec<serde_json::Value>, _>>()
            .map_err(|e| BenchError::Engine {
                engine: "serde_json",
                message: e.to_string(),
            })?;
        let facts = values.iter().map(floor::Facts::from_value).collect();
        let rego_inputs = docs
            .iter()
            .map(|d| crate::engines::rego::input(&d.json))
            .collect::<Result<Vec<_>, _>>()?;
        let cedar_requests = values
            .iter()
            .map(|v| cedar.build(v))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Prepared {
            docs,
            requests,
            facts,
            values,
            rego_inputs,
            cedar_requests,
        })
    }
}
