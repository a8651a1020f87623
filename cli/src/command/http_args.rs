//! The accept loop's bounds, as flags of every command that listens for HTTP (`serve` and
//! `mcp --listen`), so both take the same names, defaults and checks.

use std::time::Duration;
use toolgate_server::HttpLimits;

/// Timeouts and the connection cap of a listener.
#[derive(clap::Args, Debug, Clone)]
pub struct HttpArgs {
    /// Milliseconds a client may take from opening a connection (or finishing a request) to
    /// the last byte of the next request's headers.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout_ms: u64,
    /// Milliseconds a client may take to send a request body once its headers are in (408).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    body_timeout_ms: u64,
    /// Milliseconds a keep-alive connection may sit with no request and no byte moving.
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout_ms: u64,
    /// Most connections open at once; beyond it a connection gets a 503 and is closed.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
}

impl HttpArgs {
    /// The limits the accept loop enforces.
    pub fn limits(&self) -> HttpLimits {
        HttpLimits {
            header_timeout: Duration::from_millis(self.header_timeout_ms),
            body_timeout: Duration::from_millis(self.body_timeout_ms),
            idle_timeout: Duration::from_millis(self.idle_timeout_ms),
            max_connections: self.max_connections,
        }
    }
}
