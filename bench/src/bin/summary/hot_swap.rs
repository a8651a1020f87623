//! Decision latency on one thread while another swaps the policy in a PolicyStore
//! continuously (compile + swap, as a reload does). Criterion cannot give a p99, so each
//! decision is timed here with `Instant`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolgate_bench::documents::bench_documents;
use toolgate_bench::engines::toolgate;
use toolgate_bench::BenchError;
use toolgate_engine::{PolicySet, PolicyStore, Request};

/// Decisions timed per phase (each a batch-4 document).
pub const DECISIONS: usize = 200_000;
/// Alternations of the quiet and the swapping phase (pooled, to spread machine noise).
pub const ROUNDS: usize = 3;

/// Percentiles in nanoseconds.
#[derive(Debug, Clone, Copy)]
pub struct Latency {
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
}

/// Both phases.
pub struct HotSwap {
    /// No swapping.
    pub quiet: Latency,
    /// While another thread swaps continuously.
    pub swapping: Latency,
    /// Swaps completed during the swapping phases.
    pub swaps: u64,
}

fn err(message: String) -> BenchError {
    BenchError::Engine {
        engine: "toolgate",
        message,
    }
}

fn set(generation: u64) -> Result<PolicySet, BenchError> {
    PolicySet::new(vec![toolgate::compile_workload()?], generation).map_err(|e| err(e.to_string()))
}

fn run(store: &PolicyStore, requests: &[Request], out: &mut Vec<u64>) {
    for i in 0..DECISIONS {
        let r = &requests[i % requests.len()];
        let t = Instant::now();
        let snapshot = store.snapshot();
        if let Some(p) = snapshot.get("workload") {
            std::hint::black_box(p.decide(r));
        }
        drop(snapshot);
        out.push(t.elapsed().as_nanos() as u64);
    }
}

fn percentiles(mut v: Vec<u64>) -> Latency {
    v.sort_unstable();
    let at = |q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)];
    Latency {
        p50: at(0.50),
        p99: at(0.99),
        p999: at(0.999),
    }
}

/// Runs the quiet and swapping phases, alternating.
pub fn measure() -> Result<HotSwap, BenchError> {
    let requests: Vec<Request> = bench_documents(4)
        .iter()
        .map(|d| Request::from_json(&d.json).map_err(|e| err(e.to_string())))
        .collect::<Result<_, _>>()?;
    let store = Arc::new(PolicyStore::new(set(0)?));
    let mut quiet = Vec::with_capacity(DECISIONS * ROUNDS);
    let mut swapping = Vec::with_capacity(DECISIONS * ROUNDS);
    let swaps = Arc::new(AtomicU64::new(0));
    // Warm up.
    run(&store, &requests, &mut Vec::with_capacity(DECISIONS));
    for _ in 0..ROUNDS {
        run(&store, &requests, &mut quiet);
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (store, stop, swaps) = (store.clone(), stop.clone(), swaps.clone());
            std::thread::spawn(move || -> Result<(), BenchError> {
                let mut generation = 1;
                while !stop.load(Ordering::Relaxed) {
                    store.swap(set(generation)?);
                    generation += 1;
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })
        };
        // Let the swapper start before timing.
        std::thread::sleep(Duration::from_millis(20));
        run(&store, &requests, &mut swapping);
        stop.store(true, Ordering::Relaxed);
        swapper
            .join()
            .map_err(|_| err("the swapping thread panicked".into()))??;
    }
    Ok(HotSwap {
        quiet: percentiles(quiet),
        swapping: percentiles(swapping),
        swaps: swaps.load(Ordering::Relaxed),
    })
}
