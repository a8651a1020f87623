//! The decision log: one JSON line per decision, written by a task of its own so that
//! writing never blocks a decision, in batches (one write per couple of milliseconds under
//! load). A full queue drops entries and counts them.

use arc_swap::ArcSwapOption;
use serde::Serialize;
use serde_json::Value;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use toolgate_engine::{DenyKind, LatchState, Request, Response};
use toolgate_turns::Origin;

use super::metrics::Metrics;

/// How long the writer lets entries gather before one write: at most this much is in memory
/// only (SIGTERM drains it), and a busy server writes once per interval, not per decision.
const LINGER: std::time::Duration = std::time::Duration::from_millis(2);
/// The most entries in one write.
const BATCH_LINES: usize = 4096;

/// Which decisions are logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogMode {
    /// Every batch.
    All,
    /// Only batches with at least one denial.
    Denials,
    /// Nothing.
    Off,
}

/// One log line, as written.
#[derive(Serialize)]
pub(super) struct Line<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) args: Option<Vec<&'a Value>>,
    pub(super) decision_id: &'a str,
    pub(super) decisions: Vec<LineDecision<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) facts: Option<Value>,
    pub(super) latched: &'a LatchState,
    pub(super) policy: &'a str,
    pub(super) revision: &'a str,
    pub(super) session: Option<&'a str>,
    pub(super) session_state: Option<Origin>,
    pub(super) ts_ms: u128,
    pub(super) turn: Option<&'a str>,
}

/// One call's decision in a log line.
#[derive(Serialize)]
pub(super) struct LineDecision<'a> {
    pub(super) allow: bool,
    pub(super) id: &'a str,
    pub(super) kind: Option<DenyKind>,
    pub(super) rule: Option<&'a str>,
    pub(super) tool: &'a str,
}

/// What one log entry is written from.
pub struct Entry<'a> {
    /// The decision id the response carries.
    pub decision_id: &'a str,
    /// The request's `session` id, if any.
    pub session: Option<&'a str>,
    /// The request's `turn` id, if any.
    pub turn: Option<&'a str>,
    /// The whole request: only the strict path has it, and `--log-args` needs it.
    pub request: Option<&'a Request>,
    /// The engine's response.
    pub response: &'a Response,
    /// Where the server's latch state came from, for session requests.
    pub session_state: Option<Origin>,
}

/// The sending side of the log, shared by the handlers.
pub struct DecisionLog {
    tx: ArcSwapOption<mpsc::Sender<String>>,
    mode: LogMode,
    log_args: bool,
    /// OPA events for `--decision-log-url`; JSON lines when `None`.
    shipped: Option<super::log_shipper::Format>,
}

impl DecisionLog {
    /// Starts the writer task; it writes to `path`, or standard output when `None`.
    /// Returns the log and the writer's handle, which finishes once every sender is dropped
    /// and the queue is drained.
    pub async fn start(
        mode: LogMode,
        log_args: bool,
        path: Option<String>,
        capacity: usize,
    ) -> std::io::Result<(DecisionLog, tokio::task::JoinHandle<()>)> {
        let (tx, mut rx) = mpsc::channel::<String>(capacity.max(1));
        let mut sink: Box<dyn tokio::io::AsyncWrite + Unpin + Send> = match &path {
            Some(p) => Box::new(
                tokio::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .await?,
            ),
            None => Box::new(tokio::io::stdout()),
        };
        let handle = tokio::spawn(async move {
            let mut lines = Vec::with_capacity(BATCH_LINES);
            let mut batch = Vec::with_capacity(64 * 1024);
            // Wait for an entry, let more queue up for LINGER, then write them all at once:
            // one write (and one wake of this task) per batch instead of per decision. While
            // it sleeps the task is not waiting on the queue, so senders wake nobody.
            while rx.recv_many(&mut lines, BATCH_LINES).await > 0 {
                tokio::time::sleep(LINGER).await;
                while lines.len() < BATCH_LINES {
                    match rx.try_recv() {
                        Ok(line) => lines.push(line),
                        Err(_) => break,
                    }
                }
                for line in lines.drain(..) {
                    batch.extend_from_slice(line.as_bytes());
                    batch.push(b'\n');
                }
                let _ = sink.write_all(&batch).await;
                let _ = sink.flush().await;
                batch.clear();
            }
            let _ = sink.flush().await;
        });
        let log = DecisionLog {
            tx: ArcSwapOption::from((mode != LogMode::Off).then(|| Arc::new(tx))),
            mode,
            log_args,
            shipped: None,
        };
        Ok((log, handle))
    }

    /// A log whose entries, written as `format` says, go to `tx` (`--decision-log-url`).
    pub(super) fn with_format(
        tx: mpsc::Sender<String>,
        mode: LogMode,
        log_args: bool,
        format: super::log_shipper::Format,
    ) -> DecisionLog {
        DecisionLog {
            tx: ArcSwapOption::from((mode != LogMode::Off).then(|| Arc::new(tx))),
            mode,
            log_args,
            shipped: Some(format),
        }
    }

    /// The shipper's counters in Prometheus text format; empty without `--decision-log-url`.
    pub fn render_metrics(&self) -> String {
        self.shipped
            .as_ref()
            .map(|f| f.stats.render())
            .unwrap_or_default()
    }

    /// True when entries carry the request's facts and arguments (`--log-args`) and logging
    /// is on: only then does an entry need the whole request, which the one-pass reader does
    /// not keep (it skips facts the policy never reads).
    pub fn needs_request(&self) -> bool {
        self.log_args && self.tx.load().is_some()
    }

    /// Queues an entry for a judged batch, or counts it dropped when the queue is full.
    /// `session_state` is where the server's latch state came from, for session requests.
    /// `request` is the whole request, needed only when [`DecisionLog::needs_request`].
    pub fn record(&self, entry: Entry<'_>, metrics: &Metrics) {
        let Entry {
            decision_id,
            session,
            turn,
            request,
            response,
            session_state,
        } = entry;
        let guard = self.tx.load();
        let Some(tx) = guard.as_ref() else { return };
        if self.mode == LogMode::Denials && response.decisions.iter().all(|d| d.allow) {
            return;
        }
        let ts_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        // Serialised straight from the response: no JSON tree is built for the entry. The
        // fields are in the order the tree's sorted map wrote them before.
        let with_request = request.filter(|_| self.log_args);
        let line = Line {
            args: with_request.map(|r| r.calls.iter().map(|c| &c.args).collect()),
            decision_id,
            decisions: response
                .decisions
                .iter()
                .map(|d| LineDecision {
                    allow: d.allow,
                    id: &d.id,
                    kind: d.kind,
                    rule: d.rule.as_deref(),
                    tool: &d.tool,
                })
                .collect(),
            facts: with_request.map(|r| r.to_value().get("facts").cloned().unwrap_or(Value::Null)),
            latched: &response.latched,
            policy: &response.policy,
            revision: &response.revision,
            session,
            session_state,
            ts_ms,
            turn,
        };
        let entry = match &self.shipped {
            Some(format) => format.event(&line),
            None => serde_json::to_string(&line),
        };
        let Ok(entry) = entry else {
            metrics.log_dropped.fetch_add(1, Relaxed);
            return;
        };
        if tx.try_send(entry).is_err() {
            metrics.log_dropped.fetch_add(1, Relaxed);
        }
    }

    /// Closes the queue; the writer drains what is left and exits.
    pub fn close(&self) {
        self.tx.store(None);
    }
}
