//! Decision latency on one thread while another swaps the policy in a PolicyStore
//! continuously. Criterion cannot give a p99, so each decision is timed here with `Instant`.
//!
//! Three phases, alternated so machine noise spreads over all of them:
//! - quiet: nothing else runs;
//! - swapping: another thread swaps continuously between two already compiled policies,
//!   as fast as it can (the swap itself: the atomic store, the retired set handed back and
//!   freed);
//! - reloading: another thread compiles the policy and swaps it in, over and over (what a
//!   reload costs the machine, compile included).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolgate_bench::documents::bench_documents;
use toolgate_bench::engines::toolgate;
use toolgate_bench::BenchError;
use toolgate_engine::{Policy, PolicySet, PolicyStore, Request};

/// Decisions timed per phase and round (each a batch-4 document).
pub const DECISIONS: usize = 60_000;
/// Alternations of the three phases (pooled, to spread machine noise).
pub const ROUNDS: usize = 10;
/// Compiled policies the swapping phase cycles through.
const POOL: usize = 16;

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

/// Latency while another thread does one kind of work, and how much of it it did.
#[derive(Debug, Clone, Copy)]
pub struct Phase {
    /// The reader's latency.
    pub latency: Latency,
    /// Swaps completed by the other thread.
    pub swaps: u64,
}

/// All three phases.
pub struct HotSwap {
    /// No other thread.
    pub quiet: Latency,
    /// Another thread swapping compiled policies continuously.
    pub swapping: Phase,
    /// Another thread compiling and swapping continuously.
    pub reloading: Phase,
}

fn err(message: String) -> BenchError {
    BenchError::Engine {
        engine: "toolgate",
        message,
    }
}

fn set(policies: Vec<Arc<Policy>>, generation: u64) -> Result<PolicySet, BenchError> {
    PolicySet::with_shared(policies, generation).map_err(|e| err(e.to_string()))
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

/// Times `DECISIONS` decisions into `out` while `work` runs on another thread (its
/// argument is the generation to publish; it returns after one swap).
fn timed_beside(
    store: &Arc<PolicyStore>,
    requests: &[Request],
    out: &mut Vec<u64>,
    swaps: &AtomicU64,
    work: impl Fn(&PolicyStore, u64) -> Result<(), BenchError> + Send + 'static,
) -> Result<(), BenchError> {
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let other = {
        let (store, stop, count) = (store.clone(), stop.clone(), count.clone());
        std::thread::spawn(move || -> Result<(), BenchError> {
            let mut generation = 1;
            while !stop.load(Ordering::Relaxed) {
                work(&store, generation)?;
                generation += 1;
                count.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
    };
    // Let the other thread start before timing.
    std::thread::sleep(Duration::from_millis(20));
    run(store, requests, out);
    stop.store(true, Ordering::Relaxed);
    other
        .join()
        .map_err(|_| err("the swapping thread panicked".into()))??;
    swaps.fetch_add(count.load(Ordering::Relaxed), Ordering::Relaxed);
    Ok(())
}

/// Runs the three phases, alternating.
pub fn measure() -> Result<HotSwap, BenchError> {
    let requests: Vec<Request> = bench_documents(4)
        .iter()
        .map(|d| Request::from_json(&d.json).map_err(|e| err(e.to_string())))
        .collect::<Result<_, _>>()?;
    // Separately compiled policies, taken in turn: a swap takes a reference to the policy it
    // publishes, and that count shares a cache line with the policy's hottest fields, so
    // re-publishing the one a reader is using would measure that line bouncing between
    // cores, which a real reload (a freshly compiled policy) never does.
    let pool: Arc<Vec<Arc<Policy>>> = Arc::new(
        (0..POOL)
            .map(|_| toolgate::compile_workload().map(Arc::new))
            .collect::<Result<_, _>>()?,
    );
    let store = Arc::new(PolicyStore::new(set(vec![pool[0].clone()], 0)?));
    let mut quiet = Vec::with_capacity(DECISIONS * ROUNDS);
    let mut swapping = Vec::with_capacity(DECISIONS * ROUNDS);
    let mut reloading = Vec::with_capacity(DECISIONS * ROUNDS);
    let (swaps, reloads) = (AtomicU64::new(0), AtomicU64::new(0));
    // Warm up.
    run(&store, &requests, &mut Vec::with_capacity(DECISIONS));
    for _ in 0..ROUNDS {
        run(&store, &requests, &mut quiet);
        let pool = pool.clone();
        timed_beside(&store, &requests, &mut swapping, &swaps, move |store, g| {
            let next = pool[g as usize % POOL].clone();
            store.swap(set(vec![next], g)?);
            Ok(())
        })?;
        timed_beside(&store, &requests, &mut reloading, &reloads, |store, g| {
            store.swap(set(vec![Arc::new(toolgate::compile_workload()?)], g)?);
            Ok(())
        })?;
    }
    Ok(HotSwap {
        quiet: percentiles(quiet),
        swapping: Phase {
            latency: percentiles(swapping),
            swaps: swaps.load(Ordering::Relaxed),
        },
        reloading: Phase {
            latency: percentiles(reloading),
            swaps: reloads.load(Ordering::Relaxed),
        },
    })
}
