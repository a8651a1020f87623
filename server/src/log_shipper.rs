//! `--decision-log-url URL`: the decision log shipped over HTTP in OPA's decision-log event
//! format, so a collector built for OPA ingests it.
//!
//! Entries go through the decision log's bounded queue (`--log-queue`): a decision only
//! `try_send`s, and a full queue drops the entry and counts it, so shipping never blocks or
//! slows a decision. One task takes what is queued (up to [`MAX_BATCH`] entries), POSTs it
//! as one gzip-compressed JSON array, and retries a failed batch with exponential backoff
//! ([`MIN_BACKOFF`] doubling up to [`MAX_BACKOFF`]) while new entries wait in the queue. A
//! batch the collector refuses as malformed (a 4xx other than 408 and 429) would never be
//! taken and is dropped and counted. At shutdown the queue is drained, and a failing batch
//! gets [`LAST_TRIES`] more tries at most [`SHUTDOWN_BACKOFF`] apart, then is counted as
//! abandoned.
//!
//! Each event has OPA's fields: `decision_id`, `timestamp` (RFC 3339), `labels` (`id` of
//! this server process, `version`, `app`), `path`, `input` (session, turn and each call's
//! id and tool; arguments and facts only with `--log-args`, otherwise listed in `erased`),
//! `result` (the decisions, latch state, policy and revision) and `bundles` (each policy's
//! revision under its module name).

use super::config::LogMode;
use super::decision_log::{DecisionLog, Format, Line, LineDecision};
use super::http_client::error_chain;
use super::ServerError;
use flate2::write::GzEncoder;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};
use tokio::sync::mpsc;

/// Most entries in one batch.
pub const MAX_BATCH: usize = 1000;
/// The first retry's delay.
pub const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// The longest delay between retries.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Tries left for a failing batch once the server is shutting down.
pub const LAST_TRIES: u32 = 3;
/// The longest delay between those last tries.
pub const SHUTDOWN_BACKOFF: Duration = Duration::from_millis(500);
/// Longest wait for one POST.
const POST_TIMEOUT: Duration = Duration::from_secs(10);

/// What the shipper did, for `/metrics`.
#[derive(Default)]
pub struct Stats {
    shipped: AtomicU64,
    batches: AtomicU64,
    send_errors: AtomicU64,
    abandoned: AtomicU64,
}

impl Stats {
    /// The counters in Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, help, v) in [
            ("shipped", "Decision-log entries the collector accepted.", &self.shipped),
            ("batches", "Decision-log batches the collector accepted.", &self.batches),
            (
                "send_errors",
                "Failed decision-log POSTs (each retry counts).",
                &self.send_errors,
            ),
            (
                "abandoned",
                "Decision-log entries given up after the collector refused their batch or at shutdown.",
                &self.abandoned,
            ),
        ] {
            out.push_str(&format!(
                "# HELP toolgate_decision_log_{name}_total {help}\n\
                 # TYPE toolgate_decision_log_{name}_total counter\n\
                 toolgate_decision_log_{name}_total {}\n",
                v.load(Relaxed)
            ));
        }
        out
    }
}

/// The labels on every event.
#[derive(Serialize)]
pub struct Labels {
    id: String,
    version: &'static str,
    app: &'static str,
}

/// How entries are written when shipped: OPA decision-log events.
struct OpaEvents {
    labels: Labels,
    /// The shipper's counters.
    stats: Arc<Stats>,
}

#[derive(Serialize)]
struct Event<'a> {
    decision_id: &'a str,
    timestamp: String,
    labels: &'a Labels,
    path: String,
    input: Input<'a>,
    result: EventResult<'a>,
    bundles: BTreeMap<&'a str, Revision<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    erased: Vec<String>,
}

#[derive(Serialize)]
struct Input<'a> {
    session: Option<&'a str>,
    turn: Option<&'a str>,
    calls: Vec<Call<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    facts: Option<&'a Value>,
}

#[derive(Serialize)]
struct Call<'a> {
    id: &'a str,
    tool: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<&'a Value>,
}

#[derive(Serialize)]
struct EventResult<'a> {
    decisions: &'a [LineDecision<'a>],
    latched: &'a toolgate_engine::LatchState,
    policy: &'a str,
    revision: &'a str,
    session_state: Option<toolgate_turns::Origin>,
}

#[derive(Serialize)]
struct Revision<'a> {
    revision: &'a str,
}

impl Format for OpaEvents {
    /// The shipper's counters in Prometheus text format.
    fn render_stats(&self) -> String {
        self.stats.render()
    }

    /// One log entry as an OPA decision-log event.
    fn event(&self, line: &Line<'_>) -> serde_json::Result<String> {
        let args = line.args.as_deref();
        let calls = line
            .decisions
            .iter()
            .enumerate()
            .map(|(i, d)| Call {
                id: d.id,
                tool: d.tool,
                args: args.and_then(|a| a.get(i).copied()),
            })
            .collect();
        let mut erased = Vec::new();
        if args.is_none() {
            erased.push("/input/facts".to_string());
            erased.extend((0..line.decisions.len()).map(|i| format!("/input/calls/{i}/args")));
        }
        let at = UNIX_EPOCH + Duration::from_millis(line.ts_ms as u64);
        serde_json::to_string(&Event {
            decision_id: line.decision_id,
            timestamp: humantime::format_rfc3339_millis(at).to_string(),
            labels: &self.labels,
            path: format!("toolgate/{}/decide", line.policy),
            input: Input {
                session: line.session,
                turn: line.turn,
                calls,
                facts: line.facts.as_ref(),
            },
            result: EventResult {
                decisions: &line.decisions,
                latched: line.latched,
                policy: line.policy,
                revision: line.revision,
                session_state: line.session_state,
            },
            bundles: BTreeMap::from([(
                line.policy,
                Revision {
                    revision: line.revision,
                },
            )]),
            erased,
        })
    }
}

/// Starts shipping to `url`: the decision log whose entries are OPA events, and the task
/// that POSTs them, which finishes once the log is closed and the queue is drained.
pub fn start(
    mode: LogMode,
    log_args: bool,
    url: String,
    capacity: usize,
    instance: u64,
) -> Result<(DecisionLog, tokio::task::JoinHandle<()>), ServerError> {
    let client = super::http_client::client(POST_TIMEOUT)?;
    let (tx, rx) = mpsc::channel::<String>(capacity.max(1));
    let stats = Arc::new(Stats::default());
    let format = OpaEvents {
        labels: Labels {
            id: format!("{:012x}", instance & 0xffff_ffff_ffff),
            version: env!("CARGO_PKG_VERSION"),
            app: "toolgate",
        },
        stats: stats.clone(),
    };
    let handle = tokio::spawn(ship(rx, client, url, stats));
    Ok((
        DecisionLog::with_format(tx, mode, log_args, Box::new(format)),
        handle,
    ))
}

/// Takes batches off the queue and POSTs them until the queue is closed and empty.
async fn ship(
    mut rx: mpsc::Receiver<String>,
    client: reqwest::Client,
    url: String,
    stats: Arc<Stats>,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(line) => batch.push(line),
                Err(_) => break,
            }
        }
        let n = batch.len() as u64;
        let Ok(body) = gzip_array(&batch) else {
            stats.abandoned.fetch_add(n, Relaxed);
            continue;
        };
        drop(batch);
        let mut backoff = MIN_BACKOFF;
        let mut last_tries = LAST_TRIES;
        loop {
            match post(&client, &url, &body).await {
                Ok(()) => {
                    stats.shipped.fetch_add(n, Relaxed);
                    stats.batches.fetch_add(1, Relaxed);
                    break;
                }
                Err(Retry::Never(e)) => {
                    eprintln!("toolgate: decision log: the collector refused a batch of {n}: {e}; dropped");
                    stats.abandoned.fetch_add(n, Relaxed);
                    break;
                }
                Err(Retry::Later(e)) => {
                    let failures = stats.send_errors.fetch_add(1, Relaxed);
                    if failures.is_power_of_two() || failures == 0 {
                        eprintln!("toolgate: decision log: cannot ship to {url}: {e}; retrying");
                    }
                    let mut wait = backoff;
                    if rx.is_closed() {
                        // Shutting down: a few quick tries, so SIGTERM is not held up.
                        last_tries = last_tries.saturating_sub(1);
                        if last_tries == 0 {
                            stats.abandoned.fetch_add(n, Relaxed);
                            break;
                        }
                        wait = wait.min(SHUTDOWN_BACKOFF);
                    }
                    tokio::time::sleep(wait).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
}

enum Retry {
    Later(String),
    Never(String),
}

async fn post(client: &reqwest::Client, url: &str, body: &[u8]) -> Result<(), Retry> {
    let response = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::CONTENT_ENCODING, "gzip")
        .body(body.to_vec())
        .send()
        .await
        .map_err(|e| Retry::Later(error_chain(&e)))?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else if status.is_client_error()
        && status != reqwest::StatusCode::REQUEST_TIMEOUT
        && status != reqwest::StatusCode::TOO_MANY_REQUESTS
    {
        Err(Retry::Never(format!("the collector answered {status}")))
    } else {
        Err(Retry::Later(format!("the collector answered {status}")))
    }
}

/// The entries (each a JSON object) as one gzip-compressed JSON array.
fn gzip_array(lines: &[String]) -> std::io::Result<Vec<u8>> {
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(b"[")?;
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            gz.write_all(b",")?;
        }
        gz.write_all(line.as_bytes())?;
    }
    gz.write_all(b"]")?;
    gz.finish()
}
