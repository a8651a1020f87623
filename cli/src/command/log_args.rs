//! Where decisions are recorded, as flags of every command that judges calls for others
//! (`serve` and `mcp`), so both take the same names, defaults and meanings and hand the
//! same [`LogConfig`] to the one recorder (`toolgate_server::Decisions`).

use toolgate_server::{LogConfig, LogMode, LogSink};

/// The decision log and span export of a command.
#[derive(clap::Args, Debug, Clone)]
pub struct LogArgs {
    /// Which decisions to log, as JSON lines.
    #[arg(long, value_enum, default_value = "all")]
    log: LogArg,
    /// Also log call arguments and facts (they may hold personal data).
    #[arg(long)]
    log_args: bool,
    /// Decision-log file (appended). Without it (and without --decision-log-url), `serve`
    /// writes the log to standard output, and `mcp`, whose standard output may be the MCP
    /// connection, keeps none.
    #[arg(long)]
    log_file: Option<String>,
    /// Ship the decision log to this http(s) URL in batches (gzip JSON arrays of OPA
    /// decision-log events), retrying with backoff, instead of writing it locally.
    #[arg(long, value_name = "URL", conflicts_with = "log_file")]
    decision_log_url: Option<String>,
    /// Export an OpenTelemetry span per decision to this OTLP/HTTP endpoint (base URL;
    /// spans go to URL/v1/traces as JSON). Off by default.
    #[arg(long, value_name = "URL")]
    otel_endpoint: Option<String>,
    /// Decision-log queue capacity; entries beyond it are dropped and counted.
    #[arg(long, default_value_t = 65_536)]
    log_queue: usize,
}

/// `--log`: which decisions to log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogArg {
    /// Every batch.
    All,
    /// Only batches with at least one denial.
    Denials,
    /// Nothing.
    Off,
}

impl From<LogArg> for LogMode {
    fn from(arg: LogArg) -> LogMode {
        match arg {
            LogArg::All => LogMode::All,
            LogArg::Denials => LogMode::Denials,
            LogArg::Off => LogMode::Off,
        }
    }
}

impl LogArgs {
    /// The log as configured; with neither a file nor a URL it goes to `unnamed`'s sink, or
    /// is off when `unnamed` is `None`.
    pub fn config(&self, unnamed: Option<LogSink>) -> LogConfig {
        let sink = match (&self.decision_log_url, &self.log_file) {
            (Some(url), _) => Some(LogSink::Ship(url.clone())),
            (None, Some(file)) => Some(LogSink::File(file.into())),
            (None, None) => unnamed,
        };
        let mode = if sink.is_some() {
            self.log.into()
        } else {
            LogMode::Off
        };
        LogConfig {
            mode,
            args: self.log_args,
            sink: sink.unwrap_or(LogSink::Stdout),
            queue: self.log_queue,
        }
    }

    /// The OTLP/HTTP endpoint, if spans are exported.
    pub fn otel_endpoint(&self) -> Option<String> {
        self.otel_endpoint.clone()
    }
}
