//! Where every judged batch goes, whichever surface judged it: the decision pipeline's
//! sinks, written once.
//!
//! `/v1/decide`, `/v1/data/{module}/decide`, AuthZEN, `/v1/hooks` and the MCP proxy
//! (`toolgate mcp`, over stdio and `--listen`) each judge in their own terms, then hand the
//! batch to [`Decisions::record`]: a decision id, the metrics, the decision-log line (a file,
//! standard output or the OPA shipper) and, for a surface without the HTTP tracing
//! middleware, the OpenTelemetry span. So a decision is logged, counted and traced the same
//! way wherever it was made, and a sink added here reaches every surface at once.
//!
//! A [`Decisions`] needs no axum and no [`crate::Server`]: the MCP proxy starts one from its
//! own flags ([`Decisions::start`]) and ends it with [`Decisions::close`], which drains the
//! log and flushes the spans.

use crate::config::{LogConfig, LogSink};
use crate::decision_log::{DecisionLog, Entry};
use crate::error::ServerError;
use crate::metrics::{Gauges, Metrics};
use crate::shadow::Flips;
use crate::tracing_otel::Otel;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::task::JoinHandle;
use toolgate_engine::{Request, Response};
use toolgate_turns::Origin;

/// The decision sinks of one process: the metrics registry, the decision log, the span
/// exporter and the decision-id counter.
pub struct Decisions {
    metrics: Metrics,
    log: DecisionLog,
    otel: Option<Arc<Otel>>,
    counter: AtomicU64,
    boot: u64,
    /// The log's writer task, awaited by [`Decisions::close`].
    writer: Mutex<Option<JoinHandle<()>>>,
}

/// One judged batch, as a surface hands it to [`Decisions::record`].
pub struct Record<'a> {
    started: Instant,
    response: &'a Response,
    origin: Option<Origin>,
    session: Option<&'a str>,
    turn: Option<&'a str>,
    request: Option<&'a Request>,
    shadow: Option<&'a Flips>,
    headless: bool,
    traced: bool,
}

impl<'a> Record<'a> {
    /// The batch `response` answers, judged from `started` on.
    pub fn new(started: Instant, response: &'a Response) -> Self {
        Record {
            started,
            response,
            origin: None,
            session: None,
            turn: None,
            request: None,
            shadow: None,
            headless: false,
            traced: false,
        }
    }

    /// The session and turn the batch was judged in.
    pub fn session(mut self, session: Option<&'a str>, turn: Option<&'a str>) -> Self {
        self.session = session;
        self.turn = turn;
        self
    }

    /// Where the turn state it was judged with came from.
    pub fn origin(mut self, origin: Option<Origin>) -> Self {
        self.origin = origin;
        self
    }

    /// The whole request, for a log that keeps arguments and facts (`--log-args`).
    pub fn request(mut self, request: Option<&'a Request>) -> Self {
        self.request = request;
        self
    }

    /// Asks [`Decisions::record`] to export the batch's span itself: for a surface that no
    /// HTTP tracing middleware wraps (the MCP proxy). The HTTP routes leave it off; their
    /// span is the request's, made by the middleware around the handler.
    pub fn traced(mut self) -> Self {
        self.traced = true;
        self
    }

    /// What the shadow set decided otherwise.
    pub(crate) fn shadow(mut self, shadow: Option<&'a Flips>) -> Self {
        self.shadow = shadow;
        self
    }

    /// Whether `--ask allow-logged` let the batch's asks run.
    pub(crate) fn headless(mut self, headless: bool) -> Self {
        self.headless = headless;
        self
    }
}

impl Decisions {
    /// Opens the decision log as `log` says and, with `otel_endpoint`, the span exporter.
    /// Needs a tokio runtime (the log is written by a task of its own).
    ///
    /// Fails on a log file that cannot be opened, or a sink or exporter this build has no
    /// feature for ([`ServerError::Unsupported`]).
    pub async fn start(log: &LogConfig, otel_endpoint: Option<&str>) -> Result<Self, ServerError> {
        Self::start_as(log, otel_endpoint, crate::clock::boot_stamp()).await
    }

    /// [`Decisions::start`] with the process's boot stamp, the prefix of its decision ids.
    pub(crate) async fn start_as(
        log: &LogConfig,
        otel_endpoint: Option<&str>,
        boot: u64,
    ) -> Result<Self, ServerError> {
        let (log, writer) = match &log.sink {
            LogSink::Ship(url) => {
                crate::log_shipper::start(log.mode, log.args, url.clone(), log.queue, boot)?
            }
            sink => {
                let file = match sink {
                    LogSink::File(path) => Some(path.as_path()),
                    _ => None,
                };
                DecisionLog::start(log.mode, log.args, file, log.queue)
                    .await
                    .map_err(ServerError::DecisionLog)?
            }
        };
        let otel = otel_endpoint.map(Otel::start).transpose()?.map(Arc::new);
        Ok(Decisions {
            metrics: Metrics::default(),
            log,
            otel,
            counter: AtomicU64::new(0),
            boot,
            writer: Mutex::new(Some(writer)),
        })
    }

    /// A unique id for a decision: the process's prefix and a counter.
    pub fn next_id(&self) -> String {
        let n = self.counter.fetch_add(1, Relaxed);
        format!("{:012x}-{n:08x}", self.boot & 0xffff_ffff_ffff)
    }

    /// Records one judged batch in every sink and returns its decision id: the metrics
    /// (decisions by kind, latency, a turn judged from a forgotten state), the decision log
    /// and, when the record asks for it, the span.
    pub fn record(&self, record: Record<'_>) -> String {
        let id = self.next_id();
        self.metrics
            .observe(record.response, record.started.elapsed().as_micros() as u64);
        if record.origin == Some(Origin::Expired) {
            self.metrics.sessions_expired.fetch_add(1, Relaxed);
        }
        self.log.record(
            Entry {
                decision_id: &id,
                session: record.session,
                turn: record.turn,
                request: record.request,
                response: record.response,
                session_state: record.origin,
                headless: record.headless,
                shadow: record.shadow,
            },
            &self.metrics,
        );
        if record.traced {
            if let Some(otel) = &self.otel {
                otel.export(record.response, &id);
            }
        }
        id
    }

    /// The metrics registry (the HTTP layer's refusals and connections count here too).
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The decision log.
    pub(crate) fn log(&self) -> &DecisionLog {
        &self.log
    }

    /// The span exporter, with `--otel-endpoint`: the HTTP routes' tracing middleware.
    pub(crate) fn otel(&self) -> Option<&Arc<Otel>> {
        self.otel.as_ref()
    }

    /// Hands an HTTP decision route's span (the tracing middleware's) the batch it judged,
    /// when spans are exported.
    pub(crate) fn attach(&self, reply: &mut axum::response::Response, judged: &Response, id: &str) {
        crate::tracing_otel::attach(self.otel.as_deref(), reply, judged, id);
    }

    /// Counts one connection or request refused by an HTTP accept loop.
    pub fn refused(&self, why: crate::metrics::Refusal) {
        self.metrics.refused(why);
    }

    /// Counts a connection accepted by an HTTP accept loop.
    pub fn opened(&self) {
        self.metrics.connections_total.fetch_add(1, Relaxed);
        self.metrics.connections_open.fetch_add(1, Relaxed);
    }

    /// Counts an accepted connection closed.
    pub fn closed(&self) {
        self.metrics.connections_open.fetch_sub(1, Relaxed);
    }

    /// The sinks' own series in Prometheus text format: decisions, latency, the HTTP
    /// layer's counters and the log's. `sessions_live` and `sessions_bytes` are what the
    /// surface's turn state holds, `policies` how many policies it serves.
    pub fn render_metrics(
        &self,
        sessions_live: usize,
        sessions_bytes: usize,
        policies: usize,
    ) -> String {
        let mut text = self.metrics.render(&Gauges {
            sessions_live,
            sessions_bytes,
            policies,
            log_lost: self.log.lost(),
        });
        text.push_str(&self.log.render_metrics());
        text
    }

    /// Closes the log and waits until what it holds is written (or shipped), and flushes
    /// the spans still buffered. Decisions recorded after this are counted, not logged.
    pub async fn close(self: &Arc<Self>) {
        self.log.close();
        let flushing = self.clone();
        let _ =
            tokio::task::spawn_blocking(move || flushing.otel.as_ref().map(|o| o.shutdown())).await;
        let writer = self.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(writer) = writer {
            let _ = writer.await;
        }
    }
}
