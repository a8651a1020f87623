//! `toolgate mcp`: run an MCP proxy that judges every tool call against a policy.
//!
//! Start-up checks everything that can be checked once (the policy compiles, the stage
//! exists, the facts file is well-formed and agrees with the policy, the upstream server
//! completes the handshake) and exits 2 with the reason on stderr when one fails, before the
//! client is answered at all. After that, nothing the client or upstream sends ends the proxy
//! but the client closing the connection.
//!
//! Protocol versions (those of `rmcp` 3.11): over stdio 2024-11-05, 2025-03-26, 2025-06-18,
//! 2025-11-25 and 2026-07-28; over `--listen` the ones with sessions, 2024-11-05 to
//! 2025-11-25 (`toolgate_mcp::http` says why); upstream, whichever upstream agrees to.

use super::{compile_file, display_name, read_input};
use rmcp::ServiceExt;
use serde_json::Value;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use toolgate_engine::{schema, Facts, Policy};
use toolgate_mcp::{Config, DenyAs, Proxy, Upstream};
use toolgate_server::bearer::Verifier;
use toolgate_server::Decisions;

/// The facts the proxy keeps itself; a facts file may not give them.
const PROXY_FACTS: [&str; 3] = [schema::STAGE, schema::LATCHED, schema::CALLED];

/// Arguments of `toolgate mcp`.
#[derive(clap::Args)]
pub struct Args {
    /// The policy every tool call is judged against.
    #[arg(long, value_name = "FILE")]
    policy: String,
    /// The stage calls are judged in (default: the policy's only stage).
    #[arg(long, value_name = "NAME")]
    stage: Option<String>,
    /// A JSON object of further facts (`messages`, `fields`, custom facts), merged under
    /// the proxy's own stage, latches and earlier calls.
    #[arg(long, value_name = "FILE")]
    facts: Option<String>,
    /// How a denied call is answered: a tool result with `isError: true` the model reads, or
    /// a JSON-RPC error.
    #[arg(long, value_enum, default_value = "result")]
    deny_as: DenyAs,
    /// How long the upstream server may take to answer one request (`30s`, `500ms`, `2m`;
    /// a bare number is seconds); after it the client gets an error.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = parse_duration)]
    call_timeout: Duration,
    /// How long the upstream server may take to start and complete the MCP handshake; kept
    /// apart from --call-timeout, since a server that starts slowly (an interpreter importing
    /// its SDK on a busy machine) is not one that hangs on a call.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    connect_timeout: Duration,
    /// The upstream MCP server's Streamable HTTP endpoint, instead of a command to start.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    upstream: Option<String>,
    /// Serve MCP over Streamable HTTP at `http://ADDR/mcp` instead of on stdin/stdout.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// With --listen: most MCP sessions open at once; a new one past it is refused with a
    /// JSON-RPC error.
    #[arg(long, value_name = "N", default_value_t = 1024, requires = "listen")]
    max_sessions: usize,
    /// With --listen: how long a session may go without a request before it is closed (the
    /// client then re-initialises; its latched turns stay latched, see --keep-expired).
    #[arg(long, value_name = "DURATION", default_value = "300s", value_parser = parse_duration, requires = "listen")]
    session_idle: Duration,
    /// With --listen: how long an ended session's latched turns are remembered, for the
    /// client's next sessions.
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = parse_duration, requires = "listen")]
    keep_expired: Duration,
    /// With --listen: an origin besides loopback ones that a request's `Origin` may name
    /// (repeatable).
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "listen")]
    allow_origins: Vec<String>,
    /// With --listen: the largest request body, in bytes (413 beyond it).
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20, requires = "listen")]
    max_body: usize,
    /// With --listen: timeouts and the connection cap, as `toolgate serve` takes them.
    #[command(flatten)]
    http: super::http_args::HttpArgs,
    /// The decision log and span export, as `toolgate serve` takes them; each judged
    /// `tools/call` is one entry. With --listen, `GET /metrics` serves the counts.
    #[command(flatten)]
    log: super::log_args::LogArgs,
    /// With --listen: principals from `Authorization: Bearer` tokens, as `toolgate serve`
    /// takes them; a request with an invalid token is refused (401), and each call is judged
    /// with its request's principal.
    #[command(flatten)]
    jwt: super::jwt_args::JwtArgs,
    /// The upstream MCP server to start, with its arguments (after `--`).
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// Runs the proxy until the client disconnects. Exit 0 then; exit 2 when start-up fails.
pub fn run(args: &Args) -> ExitCode {
    let config = match configure(args) {
        Ok(config) => config,
        Err(message) => return fail(&message),
    };
    // One thread: the SDK spawns a task per request in the order requests arrive, and a
    // single-threaded scheduler first polls them in that order. A call is judged before its
    // task first awaits, so the calls of one connection are judged in arrival order: a write
    // sent right behind a fetch, without waiting for its answer, meets the fetch's latch.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}")),
    };
    match runtime.block_on(serve(args, config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => fail(&message),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("toolgate mcp: error: {message}");
    ExitCode::from(2)
}

async fn serve(args: &Args, mut config: Config) -> Result<(), String> {
    // Opened before the upstream starts, so a log that cannot be written stops the proxy
    // before any call could go unrecorded.
    let decisions = Decisions::start(&args.log.config(None), args.log.otel_endpoint().as_deref())
        .await
        .map(Arc::new)
        .map_err(|e| e.to_string())?;
    config.decisions = Some(decisions.clone());
    let served = proxy(args, config).await;
    decisions.close().await;
    served
}

async fn proxy(args: &Args, config: Config) -> Result<(), String> {
    // Keys are loaded before upstream starts: a JWKS that cannot be read stops the proxy.
    let bearer = match args.jwt.config() {
        Some(jwt) => Some(Arc::new(
            Verifier::new(jwt).await.map_err(|e| e.to_string())?,
        )),
        None => None,
    };
    let upstream = connect(args, args.connect_timeout).await?;
    let config = Arc::new(config);
    if let Some(addr) = &args.listen {
        let listen = toolgate_mcp::http::Listen {
            addr: addr.clone(),
            max_sessions: args.max_sessions,
            idle: args.session_idle,
            keep_expired: args.keep_expired,
            allow_origins: args.allow_origins.clone(),
            http: args.http.limits(),
            max_body: args.max_body,
            bearer,
        };
        return toolgate_mcp::http::serve(config, upstream, &listen)
            .await
            .map_err(|e| e.to_string());
    }
    let running = Proxy::new(config, upstream)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("the client did not complete the MCP handshake: {e}"))?;
    running
        .waiting()
        .await
        .map_err(|e| format!("the connection to the client failed: {e}"))?;
    Ok(())
}

/// The upstream server: `--upstream URL`, or the command after `--`.
async fn connect(args: &Args, timeout: Duration) -> Result<Upstream, String> {
    if let Some(url) = &args.upstream {
        return Upstream::http(url, timeout)
            .await
            .map_err(|e| format!("{url}: {e}"));
    }
    let Some((command, command_args)) = args.command.split_first() else {
        return Err(
            "no upstream server: give its command after `--` (toolgate mcp --policy FILE -- COMMAND [ARGS...]) or its URL (--upstream URL)"
                .into(),
        );
    };
    Upstream::spawn(command, command_args, timeout)
        .await
        .map_err(|e| e.to_string())
}

/// Everything the proxy needs that does not depend on the connections.
fn configure(args: &Args) -> Result<Config, String> {
    let text = read_input(&args.policy)?;
    let policy = compile_file(&args.policy, &text)
        .map_err(|e| format!("policy does not compile\n{}", e.render().trim_end()))?;
    let stage =
        toolgate_mcp::choose_stage(&policy, args.stage.as_deref()).map_err(|e| e.to_string())?;
    let facts = match &args.facts {
        Some(path) => read_facts(&policy, path)?,
        None => Facts::default(),
    };
    if args.jwt.config().is_some() {
        if args.listen.is_none() {
            return Err(
                "--jwks needs --listen: over stdio no request carries a bearer token".into(),
            );
        }
        if facts.principal.is_some() {
            return Err("with --jwks the principal comes from each request's bearer token, so the facts file may not give `principal`".into());
        }
    }
    Ok(Config {
        policy: Arc::new(policy),
        stage,
        facts,
        deny_as: args.deny_as,
        call_timeout: args.call_timeout,
        decisions: None,
    })
}

/// Reads `--facts`: a JSON object with the decision request's `facts` schema, less the facts
/// the proxy keeps itself.
fn read_facts(policy: &Policy, path: &str) -> Result<Facts, String> {
    let name = display_name(path);
    let text = read_input(path)?;
    let value = toolgate_engine::parse_json(&text).map_err(|e| format!("{name}: {e}"))?;
    let Value::Object(object) = &value else {
        return Err(format!(
            "{name}: the facts file must be a JSON object, found {}",
            toolgate_mcp::json_type(&value)
        ));
    };
    if let Some(key) = PROXY_FACTS.iter().find(|k| object.contains_key(**k)) {
        return Err(format!(
            "{name}: `{key}` cannot come from a facts file: the proxy keeps it (the stage is --stage, the latches and earlier calls are counted per connection)"
        ));
    }
    let facts = Facts::from_value(value).map_err(|e| format!("{name}: {e}"))?;
    policy
        .check_facts(&facts)
        .map_err(|e| format!("{name}: {e}"))?;
    Ok(facts)
}

/// Parses `30s`, `500ms`, `2m`, `1h` (humantime's units and forms) or a bare number of
/// seconds, from above 0 to 24 hours.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let bare = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let parsed = if bare {
        text.parse()
            .map(Duration::from_secs)
            .map_err(|e| e.to_string())
    } else {
        humantime::parse_duration(text).map_err(|e| e.to_string())
    };
    match parsed {
        Ok(d) if !d.is_zero() && d <= Duration::from_secs(86_400) => Ok(d),
        Ok(_) => Err(format!(
            "`{text}` is out of range: give more than 0 and at most 24 hours"
        )),
        Err(e) => Err(format!(
            "`{text}` is not a duration ({e}; try `30s`, `500ms`, `2m`)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_read_with_their_units_and_refuse_nonsense() {
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        for bad in ["", "0", "-1s", "25h", "2d", "s", "1e9", "99999999m", "NaNs"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
