//! The shared store's own metrics: round trips, failures by cause, latency. Rendered after the
//! server's other metrics, Prometheus naming (`_total`, `_seconds`, no per-session labels).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds of the latency buckets, in microseconds.
const BUCKETS_US: [u64; 12] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000,
];

/// Why a round trip to the store failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No answer within `--state-timeout-ms`.
    Timeout,
    /// The connection could not be made or broke.
    Connection,
    /// The store answered with an error (out of memory, a script error, ...).
    Reply,
}

const FAILURES: [(Failure, &str); 3] = [
    (Failure::Timeout, "timeout"),
    (Failure::Connection, "connection"),
    (Failure::Reply, "reply"),
];

/// A latency histogram over fixed buckets, rendered in seconds. Lock-free.
pub struct Histogram {
    bounds_us: &'static [u64],
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum_us: AtomicU64,
}

impl Histogram {
    /// An empty histogram with these bucket bounds (microseconds, ascending).
    pub fn new(bounds_us: &'static [u64]) -> Self {
        Histogram {
            bounds_us,
            buckets: bounds_us.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
        }
    }

    /// Counts one observation.
    pub fn observe(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        if let Some(i) = self.bounds_us.iter().position(|b| us <= *b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_us.fetch_add(us, Relaxed);
    }

    /// `# HELP`, `# TYPE` and the cumulative buckets, sum and count of `name`.
    pub fn render(&self, name: &str, help: &str, out: &mut String) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bucket, bound) in self.buckets.iter().zip(self.bounds_us) {
            cumulative += bucket.load(Relaxed);
            let le = *bound as f64 / 1e6;
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let count = self.count.load(Relaxed);
        let sum = self.sum_us.load(Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// Counters of one shared store.
pub struct Stats {
    ok: AtomicU64,
    failed: [AtomicU64; 3],
    latency: Histogram,
    /// Whether the last round trip worked.
    pub up: AtomicBool,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            ok: AtomicU64::new(0),
            failed: Default::default(),
            latency: Histogram::new(&BUCKETS_US),
            up: AtomicBool::new(false),
        }
    }
}

impl Stats {
    /// Counts one round trip that took `took` and ended in `result`.
    pub fn observe(&self, took: Duration, result: Result<(), Failure>) {
        match result {
            Ok(()) => {
                self.ok.fetch_add(1, Relaxed);
                self.up.store(true, Relaxed);
            }
            Err(why) => {
                if let Some(i) = FAILURES.iter().position(|(f, _)| *f == why) {
                    self.failed[i].fetch_add(1, Relaxed);
                }
                self.up.store(false, Relaxed);
            }
        }
        self.latency.observe(took);
    }

    /// Prometheus exposition text.
    pub fn render(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP toolgate_state_requests_total Round trips to the shared turn-state store, by result.\n# TYPE toolgate_state_requests_total counter"
        );
        let _ = writeln!(
            out,
            "toolgate_state_requests_total{{result=\"ok\"}} {}",
            self.ok.load(Relaxed)
        );
        for (i, (_, name)) in FAILURES.iter().enumerate() {
            let _ = writeln!(
                out,
                "toolgate_state_requests_total{{result=\"{name}\"}} {}",
                self.failed[i].load(Relaxed)
            );
        }
        let errors: u64 = self.failed.iter().map(|f| f.load(Relaxed)).sum();
        let _ = writeln!(
            out,
            "# HELP toolgate_state_errors_total Round trips to the shared store that failed (each failed batch was judged fail-closed).\n# TYPE toolgate_state_errors_total counter\ntoolgate_state_errors_total {errors}"
        );
        self.latency.render(
            "toolgate_state_seconds",
            "Time of one round trip to the shared store.",
            out,
        );
        let _ = writeln!(
            out,
            "# HELP toolgate_state_up Whether the last round trip to the shared store worked (1) or failed (0).\n# TYPE toolgate_state_up gauge\ntoolgate_state_up {}",
            u8::from(self.up.load(Relaxed))
        );
    }
}
