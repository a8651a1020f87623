//! Counters and a latency histogram, rendered as Prometheus text. Lock-free atomics only.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use toolgate_engine::{DenyKind, Response};

/// Upper bounds of the latency buckets, in microseconds.
const BUCKETS_US: [u64; 12] = [
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 50_000,
];
const KINDS: [DenyKind; 10] = [
    DenyKind::Unclassified,
    DenyKind::Stage,
    DenyKind::Latch,
    DenyKind::Host,
    DenyKind::Args,
    DenyKind::Precondition,
    DenyKind::Rule,
    DenyKind::State,
    DenyKind::Budget,
    DenyKind::Ask,
];

/// Why the HTTP layer refused a request or closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// An `Origin` that is neither the server's own nor allowed (403).
    Origin,
    /// A POST body not declared `application/json` (415).
    ContentType,
    /// Request headers not complete within the header timeout (connection closed).
    HeaderTimeout,
    /// A request body not complete within the body timeout (408).
    BodyTimeout,
    /// A keep-alive connection idle past the idle timeout (closed).
    IdleTimeout,
    /// A connection over the connection cap (503).
    Connections,
    /// Bytes that are not an HTTP/1.1 request (400, 414, 431).
    Malformed,
}

const REFUSALS: [(Refusal, &str); 7] = [
    (Refusal::Origin, "origin"),
    (Refusal::ContentType, "content_type"),
    (Refusal::HeaderTimeout, "header_timeout"),
    (Refusal::BodyTimeout, "body_timeout"),
    (Refusal::IdleTimeout, "idle_timeout"),
    (Refusal::Connections, "connections"),
    (Refusal::Malformed, "malformed"),
];

/// The server's metrics.
#[derive(Default)]
pub struct Metrics {
    allowed: AtomicU64,
    denied: [AtomicU64; KINDS.len()],
    latency_buckets: [AtomicU64; 12],
    latency_count: AtomicU64,
    latency_sum_us: AtomicU64,
    /// Successful reloads.
    pub reloads_ok: AtomicU64,
    /// Failed reloads (nothing was swapped).
    pub reloads_failed: AtomicU64,
    /// Decision-log entries dropped because the queue was full.
    pub log_dropped: AtomicU64,
    /// Requests refused with a client error.
    pub client_errors: AtomicU64,
    /// Batches refused because the session store was full.
    pub sessions_refused: AtomicU64,
    /// Batches of turns whose exact state was gone, judged with every latch set.
    pub sessions_expired: AtomicU64,
    /// Connections accepted and served.
    pub connections_total: AtomicU64,
    /// Connections open now.
    pub connections_open: AtomicU64,
    http_refused: [AtomicU64; 7],
}

/// The figures the metrics text reads from elsewhere.
pub struct Gauges {
    /// Sessions held.
    pub sessions_live: usize,
    /// Bytes the session store holds.
    pub sessions_bytes: usize,
    /// Policies in the serving set.
    pub policies: usize,
    /// Decision-log entries the writer could not write (counted with the queue's drops).
    pub log_lost: u64,
}

impl Metrics {
    /// Counts one refusal by the HTTP layer.
    pub fn refused(&self, why: Refusal) {
        if let Some(i) = REFUSALS.iter().position(|(r, _)| *r == why) {
            self.http_refused[i].fetch_add(1, Relaxed);
        }
    }

    /// Counts one response's decisions and its latency.
    pub fn observe(&self, response: &Response, micros: u64) {
        for d in &response.decisions {
            match d.kind {
                None => {
                    self.allowed.fetch_add(1, Relaxed);
                }
                Some(k) => {
                    if let Some(i) = KINDS.iter().position(|x| *x == k) {
                        self.denied[i].fetch_add(1, Relaxed);
                    }
                }
            }
        }
        let bucket = BUCKETS_US.iter().position(|b| micros <= *b);
        if let Some(i) = bucket {
            self.latency_buckets[i].fetch_add(1, Relaxed);
        }
        self.latency_count.fetch_add(1, Relaxed);
        self.latency_sum_us.fetch_add(micros, Relaxed);
    }

    /// Prometheus exposition text.
    pub fn render(&self, gauges: &Gauges) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP toolgate_decisions_total Call decisions by outcome and deny kind."
        );
        let _ = writeln!(out, "# TYPE toolgate_decisions_total counter");
        let _ = writeln!(
            out,
            "toolgate_decisions_total{{allow=\"true\",kind=\"\"}} {}",
            self.allowed.load(Relaxed)
        );
        for (i, k) in KINDS.iter().enumerate() {
            let _ = writeln!(
                out,
                "toolgate_decisions_total{{allow=\"false\",kind=\"{}\"}} {}",
                k.as_str(),
                self.denied[i].load(Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP toolgate_decide_seconds Time to judge one batch, from parsed body to response."
        );
        let _ = writeln!(out, "# TYPE toolgate_decide_seconds histogram");
        let mut cumulative = 0;
        for (i, b) in BUCKETS_US.iter().enumerate() {
            cumulative += self.latency_buckets[i].load(Relaxed);
            let _ = writeln!(
                out,
                "toolgate_decide_seconds_bucket{{le=\"{}\"}} {cumulative}",
                *b as f64 / 1e6
            );
        }
        let count = self.latency_count.load(Relaxed);
        let _ = writeln!(out, "toolgate_decide_seconds_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(
            out,
            "toolgate_decide_seconds_sum {}",
            self.latency_sum_us.load(Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "toolgate_decide_seconds_count {count}");
        for (name, help, v) in [
            (
                "toolgate_reloads_ok_total",
                "Policy reloads that swapped in a new set.",
                self.reloads_ok.load(Relaxed),
            ),
            (
                "toolgate_reloads_failed_total",
                "Policy reloads refused; the old set kept serving.",
                self.reloads_failed.load(Relaxed),
            ),
            (
                "toolgate_log_dropped_total",
                "Decision-log entries lost: dropped on a full queue, or in a write that failed.",
                self.log_dropped.load(Relaxed) + gauges.log_lost,
            ),
            (
                "toolgate_client_errors_total",
                "Requests refused as malformed or over a limit.",
                self.client_errors.load(Relaxed),
            ),
            (
                "toolgate_sessions_refused_total",
                "Batches refused (503) because the session store was full of latched state.",
                self.sessions_refused.load(Relaxed),
            ),
            (
                "toolgate_sessions_expired_total",
                "Batches of latched turns whose exact state had expired or been pushed out, judged with every latch set.",
                self.sessions_expired.load(Relaxed),
            ),
            (
                "toolgate_connections_total",
                "Connections accepted within the connection cap.",
                self.connections_total.load(Relaxed),
            ),
        ] {
            unlabelled(&mut out, "counter", name, help, v);
        }
        let _ = writeln!(
            out,
            "# HELP toolgate_http_refused_total Requests refused and connections closed by the HTTP layer, by reason.\n# TYPE toolgate_http_refused_total counter"
        );
        for (i, (_, reason)) in REFUSALS.iter().enumerate() {
            let _ = writeln!(
                out,
                "toolgate_http_refused_total{{reason=\"{reason}\"}} {}",
                self.http_refused[i].load(Relaxed)
            );
        }
        for (name, help, v) in [
            (
                "toolgate_connections_open",
                "Connections open now.",
                self.connections_open.load(Relaxed) as usize,
            ),
            (
                "toolgate_sessions_live",
                "Sessions whose turn latch state is held.",
                gauges.sessions_live,
            ),
            (
                "toolgate_sessions_bytes",
                "Bytes the session store holds, as counted against --max-session-bytes.",
                gauges.sessions_bytes,
            ),
            (
                "toolgate_policies_loaded",
                "Policies in the serving set.",
                gauges.policies,
            ),
        ] {
            unlabelled(&mut out, "gauge", name, help, v);
        }
        out
    }
}

/// `toolgate_policy_info{policy,revision} 1` for each policy serving now: the Prometheus
/// "info" pattern, so a dashboard can join any series on the revision that produced it.
pub fn render_policy_info(set: &toolgate_engine::PolicySet, out: &mut String) {
    let _ = writeln!(
        out,
        "# HELP toolgate_policy_info The policies serving now, by module and revision (always 1).\n# TYPE toolgate_policy_info gauge"
    );
    for p in set.iter() {
        let _ = writeln!(
            out,
            "toolgate_policy_info{{policy=\"{}\",revision=\"{}\"}} 1",
            label(p.module()),
            label(p.revision())
        );
    }
}

/// One series without labels, with its `HELP` and `TYPE` lines: `kind` is `counter` or
/// `gauge`.
pub(crate) fn unlabelled(
    out: &mut String,
    kind: &str,
    name: &str,
    help: &str,
    value: impl std::fmt::Display,
) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
    );
}

/// A label value with `\`, `"` and newlines escaped, as the text format requires.
pub(crate) fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
