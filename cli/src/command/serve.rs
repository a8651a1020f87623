//! `toolgate serve DIR`: run the decision server over a policy directory.

use crate::server::decision_log::LogMode;
use crate::server::{self, Config, Limits};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `toolgate serve`.
#[derive(clap::Args)]
pub struct Args {
    /// Directory of `.gate` policy files.
    dir: std::path::PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8181")]
    addr: SocketAddr,
    /// Which decisions to log, as JSON lines.
    #[arg(long, value_enum, default_value = "all")]
    log: LogMode,
    /// Also log call arguments and facts (they may hold personal data).
    #[arg(long)]
    log_args: bool,
    /// Decision-log file (appended); standard output when not given.
    #[arg(long)]
    log_file: Option<String>,
    /// Decision-log queue capacity; entries beyond it are dropped and counted.
    #[arg(long, default_value_t = 65_536)]
    log_queue: usize,
    /// Bearer token for /v1/reload and /v1/check (also TOOLGATE_ADMIN_TOKEN).
    #[arg(long, env = "TOOLGATE_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    max_body: usize,
    /// Most calls in one batch.
    #[arg(long, default_value_t = 256)]
    max_calls: usize,
    /// Most messages in facts.messages.
    #[arg(long, default_value_t = 10_000)]
    max_messages: usize,
    /// Most tool definitions in one /v1/offer request.
    #[arg(long, default_value_t = 1024)]
    max_tools: usize,
    /// Deepest JSON nesting accepted.
    #[arg(long, default_value_t = 64)]
    max_depth: usize,
    /// Seconds of inactivity after which a session's latch state is dropped.
    #[arg(long, default_value_t = 3600)]
    session_ttl: u64,
    /// Most sessions held; the least recently used are evicted first.
    #[arg(long, default_value_t = 100_000)]
    max_sessions: usize,
    /// Milliseconds between polls of the policy directory (0 disables watching).
    #[arg(long, default_value_t = 1000)]
    poll_ms: u64,
}

/// Runs until SIGTERM or Ctrl-C.
pub fn run(args: &Args) -> ExitCode {
    let config = Config {
        addr: args.addr,
        dir: args.dir.clone(),
        limits: Limits {
            body_bytes: args.max_body,
            calls: args.max_calls,
            messages: args.max_messages,
            tools: args.max_tools,
            depth: args.max_depth,
        },
        session_ttl: Duration::from_secs(args.session_ttl),
        max_sessions: args.max_sessions,
        log: args.log,
        log_args: args.log_args,
        log_file: args.log_file.clone(),
        log_queue: args.log_queue,
        poll: Duration::from_millis(args.poll_ms),
        admin_token: args.admin_token.clone().filter(|t| !t.is_empty()),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(server::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
