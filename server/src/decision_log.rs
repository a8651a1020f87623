//! The decision log: one JSON line per decision, written by a task of its own so that
//! writing never blocks a decision, in batches (one write per couple of milliseconds under
//! load). A full queue drops entries and counts them.

use arc_swap::ArcSwapOption;
use serde::Serialize;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use toolgate_engine::{DenyKind, LatchState, Request, Response};
use toolgate_turns::Origin;

use super::config::LogMode;
use super::metrics::Metrics;

/// How long the writer lets entries gather before one write: at most this much is in memory
/// only (SIGTERM drains it), and a busy server writes once per interval, not per decision.
const LINGER: std::time::Duration = std::time::Duration::from_millis(2);
/// The most entries in one write.
const BATCH_LINES: usize = 4096;

/// How entries are written when they are not JSON lines: the shipper's OPA events
/// (`log_shipper.rs`), which implements it, so this module never names the shipper.
pub trait Format: Send + Sync {
    /// One log entry as the sink takes it.
    fn event(&self, line: &Line<'_>) -> serde_json::Result<String>;
    /// The sink's counters in Prometheus text format.
    fn render_stats(&self) -> String;
    /// A person's answer to an ask as the sink takes it; a JSON line unless the sink says
    /// otherwise.
    fn answer(&self, line: &AnswerLine<'_>) -> serde_json::Result<String> {
        serde_json::to_string(line)
    }
}

/// The log line of a person's answer to an ask (`POST /v1/approvals`).
#[derive(Serialize)]
pub struct AnswerLine<'a> {
    /// Always `approval`: what tells this line from a decision's.
    pub event: &'static str,
    /// The digest answered.
    pub approval: &'a str,
    /// Whether the call was approved.
    pub granted: bool,
    /// Who answered, as the approver said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approver: Option<&'a str>,
    /// The session, turn, call, tool and rule of the ask.
    pub session: &'a str,
    /// See `session`.
    pub turn: Option<&'a str>,
    /// See `session`.
    pub call_id: &'a str,
    /// See `session`.
    pub tool: &'a str,
    /// See `session`.
    pub rule: &'a str,
    /// The policy that asked.
    pub policy: &'a str,
    /// See `policy`.
    pub revision: &'a str,
    /// When it was answered, in Unix milliseconds.
    pub ts_ms: u128,
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
    /// What the batch consumed of budgets over batches (absent when nothing).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(super) spent: &'a std::collections::BTreeMap<std::sync::Arc<str>, f64>,
    pub(super) ts_ms: u128,
    pub(super) turn: Option<&'a str>,
}

/// One call's decision in a log line.
#[derive(Serialize)]
pub(super) struct LineDecision<'a> {
    pub(super) allow: bool,
    /// On an ask, the digest asked for; on an allow, the approval it used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) approval: Option<&'a str>,
    /// An ask let run by `--ask allow-logged`, with nobody asked.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) headless: bool,
    pub(super) id: &'a str,
    pub(super) kind: Option<DenyKind>,
    pub(super) rule: Option<&'a str>,
    /// What the shadow set (`--shadow`) decided, where it flipped this call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) shadow: Option<crate::shadow::ShadowLine<'a>>,
    /// The policy's own rules marked `shadow` that would have denied this call.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub(super) shadow_denials: &'a [std::sync::Arc<str>],
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
    /// Whether `--ask allow-logged` let this batch's asks run.
    pub headless: bool,
    /// The calls the shadow set (`--shadow`) decided otherwise, if any did.
    pub shadow: Option<&'a crate::shadow::Flips>,
}

/// The sending side of the log, shared by the handlers.
pub struct DecisionLog {
    tx: ArcSwapOption<mpsc::Sender<String>>,
    mode: LogMode,
    log_args: bool,
    /// OPA events for `--decision-log-url`; JSON lines when `None`.
    shipped: Option<Box<dyn Format>>,
    /// How the writer fares: entries lost to failed writes, and the failure now, if any.
    writes: Arc<Writes>,
}

/// What the writer task reports about its writes, read by `/metrics` and `/health`.
#[derive(Default)]
struct Writes {
    /// Entries in batches whose write failed.
    lost: AtomicU64,
    /// Writes that failed.
    failures: AtomicU64,
    /// The last write's error while writes fail; `None` once one succeeds again.
    failing: Mutex<Option<String>>,
}

impl Writes {
    /// Records one batch's write: a failure counts its `entries` as lost, and the first
    /// failure after a success is said on stderr (not every one, which would flood it).
    fn record(&self, result: std::io::Result<()>, entries: usize, sink: &str) {
        let Ok(mut failing) = self.failing.lock() else {
            return;
        };
        match result {
            Ok(()) => {
                if failing.take().is_some() {
                    eprintln!("toolgate: the decision log ({sink}) is written again");
                }
            }
            Err(e) => {
                self.lost.fetch_add(entries as u64, Relaxed);
                self.failures.fetch_add(1, Relaxed);
                if failing.is_none() {
                    eprintln!(
                        "toolgate: error: cannot write the decision log ({sink}): {e}; entries are lost until a write succeeds (counted in toolgate_log_dropped_total)"
                    );
                }
                *failing = Some(e.to_string());
            }
        }
    }
}

impl DecisionLog {
    /// Starts the writer task; it writes to `path`, or standard output when `None`.
    /// Returns the log and the writer's handle, which finishes once every sender is dropped
    /// and the queue is drained.
    pub async fn start(
        mode: LogMode,
        log_args: bool,
        path: Option<&std::path::Path>,
        capacity: usize,
    ) -> std::io::Result<(DecisionLog, tokio::task::JoinHandle<()>)> {
        let (tx, mut rx) = mpsc::channel::<String>(capacity.max(1));
        let mut sink: Box<dyn tokio::io::AsyncWrite + Unpin + Send> = match path {
            Some(p) => Box::new(
                tokio::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .await?,
            ),
            None => Box::new(tokio::io::stdout()),
        };
        let writes = Arc::new(Writes::default());
        let report = writes.clone();
        let sink_name = match path {
            Some(p) => format!(
                "`{}`",
                toolgate_loader::log_text::escape(&p.to_string_lossy())
            ),
            None => "standard output".to_string(),
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
                let entries = lines.len();
                for line in lines.drain(..) {
                    batch.extend_from_slice(line.as_bytes());
                    batch.push(b'\n');
                }
                // A file's write may only fail at the flush (tokio writes in the background).
                let written = match sink.write_all(&batch).await {
                    Ok(()) => sink.flush().await,
                    Err(e) => Err(e),
                };
                report.record(written, entries, &sink_name);
                batch.clear();
            }
            let _ = sink.flush().await;
        });
        let log = DecisionLog {
            tx: ArcSwapOption::from((mode != LogMode::Off).then(|| Arc::new(tx))),
            mode,
            log_args,
            shipped: None,
            writes,
        };
        Ok((log, handle))
    }

    /// A log whose entries, written as `format` says, go to `tx` (`--decision-log-url`).
    #[cfg(feature = "shipper")]
    pub(super) fn with_format(
        tx: mpsc::Sender<String>,
        mode: LogMode,
        log_args: bool,
        format: Box<dyn Format>,
    ) -> DecisionLog {
        DecisionLog {
            tx: ArcSwapOption::from((mode != LogMode::Off).then(|| Arc::new(tx))),
            mode,
            log_args,
            shipped: Some(format),
            writes: Arc::default(),
        }
    }

    /// Entries lost because their write failed (a full disk, `/dev/full`, a closed pipe).
    pub fn lost(&self) -> u64 {
        self.writes.lost.load(Relaxed)
    }

    /// The write error while the log cannot be written, for `/health`; `None` while it can.
    pub fn failing(&self) -> Option<String> {
        self.writes.failing.lock().ok().and_then(|f| f.clone())
    }

    /// The writer's failed writes, and the shipper's counters with `--decision-log-url`, in
    /// Prometheus text format.
    pub fn render_metrics(&self) -> String {
        let mut out = format!(
            "# HELP toolgate_log_write_errors_total Decision-log writes that failed; their entries count in toolgate_log_dropped_total.\n# TYPE toolgate_log_write_errors_total counter\ntoolgate_log_write_errors_total {}\n",
            self.writes.failures.load(Relaxed)
        );
        if let Some(f) = &self.shipped {
            out.push_str(&f.render_stats());
        }
        out
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
            headless,
            shadow,
        } = entry;
        let guard = self.tx.load();
        let Some(tx) = guard.as_ref() else { return };
        // A batch the shadow set would have denied part of is logged under `denials` too.
        if self.mode == LogMode::Denials
            && shadow.is_none()
            && response.decisions.iter().all(|d| d.allow)
        {
            return;
        }
        let ts_ms = crate::clock::now_ms();
        // Serialised straight from the response: no JSON tree is built for the entry. The
        // fields are in the order the tree's sorted map wrote them before.
        let with_request = request.filter(|_| self.log_args);
        let line = Line {
            args: with_request.map(|r| r.calls.iter().map(|c| &c.args).collect()),
            decision_id,
            decisions: response
                .decisions
                .iter()
                .enumerate()
                .map(|(i, d)| LineDecision {
                    allow: d.allow,
                    approval: d.approval.as_deref(),
                    headless: headless && d.allow && d.approval.is_some(),
                    id: &d.id,
                    kind: d.kind,
                    rule: d.rule.as_deref(),
                    shadow: shadow.and_then(|f| f.line(i)),
                    shadow_denials: &d.shadow_denials,
                    tool: &d.tool,
                })
                .collect(),
            facts: with_request.map(|r| r.to_value().get("facts").cloned().unwrap_or(Value::Null)),
            latched: &response.latched,
            policy: &response.policy,
            revision: &response.revision,
            session,
            session_state,
            spent: &response.spent,
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

    /// Queues the log line of a person's answer to an ask. Written whatever the log mode
    /// but off: an approval is an audit event.
    pub fn record_answer(
        &self,
        session: &str,
        answered: &crate::approvals::Answered,
        approver: Option<&str>,
        metrics: &Metrics,
    ) {
        let guard = self.tx.load();
        let Some(tx) = guard.as_ref() else { return };
        let ask = &answered.ask;
        let line = AnswerLine {
            event: "approval",
            approval: &answered.approval,
            granted: answered.granted,
            approver,
            session,
            turn: ask.turn.as_deref(),
            call_id: &ask.call_id,
            tool: &ask.tool,
            rule: &ask.rule,
            policy: &ask.policy,
            revision: &ask.revision,
            ts_ms: crate::clock::now_ms(),
        };
        let entry = match &self.shipped {
            Some(format) => format.answer(&line),
            None => serde_json::to_string(&line),
        };
        if entry.map_or(true, |entry| tx.try_send(entry).is_err()) {
            metrics.log_dropped.fetch_add(1, Relaxed);
        }
    }

    /// Closes the queue; the writer drains what is left and exits.
    pub fn close(&self) {
        self.tx.store(None);
    }
}
