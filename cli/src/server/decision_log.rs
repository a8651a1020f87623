//! The decision log: one JSON line per decision, written by a task of its own so that
//! writing never blocks a decision. A full queue drops entries and counts them.

use arc_swap::ArcSwapOption;
use serde_json::{json, Value};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use toolgate_engine::{Origin, Request, Response};

use super::metrics::Metrics;

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
            let mut buf = tokio::io::BufWriter::new(&mut sink);
            while let Some(line) = rx.recv().await {
                let _ = buf.write_all(line.as_bytes()).await;
                let _ = buf.write_all(b"\n").await;
                if rx.is_empty() {
                    let _ = buf.flush().await;
                }
            }
            let _ = buf.flush().await;
        });
        let tx = ArcSwapOption::from((mode != LogMode::Off).then(|| Arc::new(tx)));
        Ok((DecisionLog { tx, mode, log_args }, handle))
    }

    /// True when entries carry the request's facts and arguments (`--log-args`) and logging
    /// is on: only then does an entry need the whole request as sent, which the one-pass
    /// reader does not keep (it skips message texts and facts the policy never reads).
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
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let decisions: Vec<Value> = response
            .decisions
            .iter()
            .map(|d| json!({"id": d.id, "tool": d.tool, "allow": d.allow, "kind": d.kind, "rule": d.rule}))
            .collect();
        let mut entry = json!({
            "ts_ms": ts,
            "decision_id": decision_id,
            "policy": response.policy,
            "revision": response.revision,
            "session": session,
            "turn": turn,
            "session_state": session_state,
            "latched": response.latched,
            "decisions": decisions,
        });
        if let (true, Some(request)) = (self.log_args, request) {
            if let Value::Object(m) = &mut entry {
                let req = request.to_value();
                m.insert(
                    "facts".into(),
                    req.get("facts").cloned().unwrap_or(Value::Null),
                );
                let args: Vec<Value> = request.calls.iter().map(|c| c.args.clone()).collect();
                m.insert("args".into(), Value::Array(args));
            }
        }
        if tx.try_send(entry.to_string()).is_err() {
            metrics.log_dropped.fetch_add(1, Relaxed);
        }
    }

    /// Closes the queue; the writer drains what is left and exits.
    pub fn close(&self) {
        self.tx.store(None);
    }
}
