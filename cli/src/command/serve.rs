//! `toolgate serve DIR`: the decision server (`toolgate-server`) over a policy directory or a
//! bundle. Here are only the flags and what they mean for the server's [`Config`]; the
//! server itself is the library's.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;
use toolgate_server::{
    AskMode, BundleSource, Config, Limits, LogSink, PolicySource, RedisConfig, SessionLimits,
    StoreTls, Widening,
};

/// Arguments of `toolgate serve`.
#[derive(clap::Args)]
pub struct Args {
    /// Directory of `.gate` policy files (or `--bundle URL`).
    #[arg(required_unless_present = "bundle", conflicts_with = "bundle")]
    dir: Option<std::path::PathBuf>,
    /// Serve the signed policy bundle at this http(s) URL, polled with If-None-Match.
    #[arg(long, value_name = "URL")]
    bundle: Option<String>,
    /// The public key (`bundle.pub`) every bundle must be signed with.
    #[arg(long, value_name = "PUB", requires = "bundle")]
    verify_key: Option<std::path::PathBuf>,
    /// Accept bundles without checking any signature (only without --verify-key).
    #[arg(long, requires = "bundle", conflicts_with = "verify_key")]
    insecure_unsigned: bool,
    /// The scope (fleet or policy-set name) this server serves: a bundle whose manifest names
    /// another scope is refused, even when signed with the same key. Required with --bundle.
    #[arg(long, value_name = "NAME", requires = "bundle", value_parser = toolgate_bundle::manifest::parse_scope)]
    scope: Option<String>,
    /// Let an explicit reload (POST /v1/reload, SIGHUP) apply a bundle whose serial is not
    /// above the serving one: a rollback. A poll never applies one, with or without it.
    #[arg(long, requires = "bundle")]
    allow_rollback: bool,
    /// Refuse every bundle whose serial is below N, from the first fetch on and whatever
    /// --allow-rollback says: a restarted replica knows no serving serial to compare with, so
    /// this is what keeps it from taking a replayed old bundle.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "bundle")]
    min_serial: u64,
    /// Seconds between polls of the bundle URL.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..), requires = "bundle")]
    poll_s: u64,
    /// Seconds between polls that download the whole bundle without If-None-Match, so a
    /// server that reuses an ETag for new bytes cannot keep this replica on an old set.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..), requires = "bundle")]
    refetch_s: u64,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8181")]
    addr: SocketAddr,
    /// The decision log and span export, as `toolgate mcp` takes them.
    #[command(flatten)]
    log: super::log_args::LogArgs,
    /// Bearer token for /v1/reload and /v1/check (also TOOLGATE_ADMIN_TOKEN).
    #[arg(long, env = "TOOLGATE_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    max_body: usize,
    /// Largest hook event body (`/v1/hooks`), in bytes; a larger event is answered with a
    /// denial in the agent's format.
    #[arg(long, default_value_t = 32 << 20)]
    max_hook_body: usize,
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
    /// Longest `session` or `turn` id, in bytes (413 beyond).
    #[arg(long, default_value_t = 256)]
    max_id_bytes: usize,
    /// Seconds of inactivity after which a session's exact latch state is dropped; its latched
    /// turns are then judged with every latch set.
    #[arg(long, default_value_t = 3600)]
    session_ttl: u64,
    /// Seconds after the TTL that an expired session's latched turns are still recognised.
    #[arg(long, default_value_t = 86_400)]
    session_keep_expired: u64,
    /// Most sessions held; when full, sessions holding no latch are evicted, and new sessions
    /// are refused (503) rather than latched state dropped.
    #[arg(long, default_value_t = 100_000)]
    max_sessions: usize,
    /// Most bytes the session store holds (ids, turns, latch names, tool outputs); refused as
    /// above.
    #[arg(long, default_value_t = 64 << 20)]
    max_session_bytes: usize,
    /// Timeouts and the connection cap.
    #[command(flatten)]
    http: super::http_args::HttpArgs,
    /// An origin (`https://console.example.com`) whose browser pages may call the server;
    /// repeat for several. Requests with any other `Origin` header are refused (403).
    #[arg(long = "allow-origin")]
    allow_origins: Vec<String>,
    /// Refuse to load or reload policies that compile with any warning.
    #[arg(long)]
    deny_warnings: bool,
    /// What a directory change that widens what is allowed does: `widening=hold` (the
    /// default) keeps the old policies serving until `POST /v1/reload` or SIGHUP;
    /// `widening=allow` applies it like any other change.
    #[arg(long = "reload", default_value = "widening=hold")]
    reload: Widening,
    /// Milliseconds between polls of the policy directory (0 disables watching).
    #[arg(long, default_value_t = 1000)]
    poll_ms: u64,
    /// Shadow mode: judge every decision request with the policies in PATH (a directory of
    /// `.gate` files, or one file) too, without ever answering from them. Calls they decide
    /// otherwise are counted (`toolgate_shadow_flips_total`) and described in the decision
    /// log; PATH is watched and reloaded like DIR (docs/server.md, "Shadow mode").
    #[arg(long, value_name = "PATH")]
    shadow: Option<std::path::PathBuf>,
    /// The module a request that names no `policy` is judged by when several are loaded
    /// (without it, such a request is a 400 listing the loaded modules).
    #[arg(long, value_name = "NAME")]
    default_policy: Option<String>,
    /// Keep turn state (latches, budget counts and approvals) in a Redis or Valkey store
    /// shared by several replicas,
    /// `redis://[:PASSWORD@]HOST:PORT[/DB]`, or `rediss://` for TLS (the server's certificate
    /// is always verified); a Redis or Valkey Cluster as
    /// `redis+cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...]` (some of its nodes; the others
    /// are found from them), `rediss+cluster://` for TLS. In this process when not given.
    /// See docs/deploy.md.
    #[arg(
        long,
        value_name = "URL",
        env = "TOOLGATE_STATE",
        hide_env_values = true
    )]
    state: Option<String>,
    /// Milliseconds a round trip to the --state store may take; past it the batch is judged
    /// fail-closed (calls a latch can block, or that set one, denied with kind `state`).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    state_timeout_ms: u64,
    /// Prefix of every key written to the --state store, so several fleets can share it.
    #[arg(long, default_value = "toolgate", value_parser = key_prefix)]
    state_prefix: String,
    /// Declares the --state store new: one with no toolgate marker is taken as never used.
    /// Without it, a store with no marker may be one that was flushed or restarted empty,
    /// and turns it does not hold are judged latched for TTL + keep-expired. Give it for the
    /// first start of a fleet only, not in a standing configuration.
    #[arg(long, requires = "state")]
    state_new: bool,
    /// PEM file of the CA certificates a `rediss://` store's certificate must chain to,
    /// instead of the system's trust store (for a private CA).
    #[arg(long, value_name = "FILE")]
    state_ca: Option<std::path::PathBuf>,
    /// PEM client certificate for a `rediss://` store that requires one (mutual TLS); needs
    /// --state-key.
    #[arg(long, value_name = "FILE", requires = "state_key")]
    state_cert: Option<std::path::PathBuf>,
    /// PEM private key of --state-cert.
    #[arg(long, value_name = "FILE", requires = "state_cert")]
    state_key: Option<std::path::PathBuf>,
    /// What a call that asks a person does: `deny` (the default) until a person approves it
    /// with `POST /v1/approvals`; `allow-logged`, for agents with nobody to ask, lets it run
    /// and marks it `headless` in the decision log. Reported in /health.
    #[arg(long, value_enum, default_value = "deny")]
    ask: AskArg,
    /// Bearer token for /v1/approvals besides the admin token (also
    /// TOOLGATE_APPROVER_TOKEN): who may approve a call need not be who may reload.
    #[arg(long, env = "TOOLGATE_APPROVER_TOKEN", hide_env_values = true)]
    approver_token: Option<String>,
    /// The AuthZEN PDP identifier (an https URL, no query or fragment) that
    /// /.well-known/authzen-configuration publishes; without it no metadata is served
    /// (docs/server.md, "AuthZEN").
    #[arg(long, value_name = "URL")]
    authzen_pdp: Option<String>,
    /// The stage AuthZEN evaluations are judged in when their context names none (a gateway
    /// knows no stages); without it such an evaluation is denied (kind `stage`).
    #[arg(long, value_name = "NAME")]
    authzen_stage: Option<String>,
    /// Principals from bearer tokens, as `toolgate mcp --listen` takes them.
    #[command(flatten)]
    jwt: super::jwt_args::JwtArgs,
}

/// `--ask`: what a call that asks a person does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum AskArg {
    /// A denial until a person approves it.
    Deny,
    /// Allowed, and logged as `headless`.
    AllowLogged,
}

/// A key prefix: letters, digits, `_`, `-`, `.`, `:`; no `{` or `}`, which would change the
/// store's hash slots.
fn key_prefix(s: &str) -> Result<String, String> {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b))
    {
        Ok(s.to_string())
    } else {
        Err("a key prefix is letters, digits and `_ - . :`".into())
    }
}

/// Runs until SIGTERM or Ctrl-C. A missing directory, or a file, is an error before anything
/// starts: a server that could never load a policy would answer 503 forever.
pub fn run(args: &Args) -> ExitCode {
    if let Some(dir) = &args.dir {
        if !dir.is_dir() {
            let why = if dir.exists() {
                "is not a directory (serve takes a directory of `.gate` files; `toolgate playground FILE` serves one file)"
            } else {
                "does not exist"
            };
            eprintln!("error: `{}` {why}", dir.display());
            return ExitCode::from(2);
        }
    }
    let mut config = config(args);
    match bundle_source(args) {
        Ok(Some(bundle)) => config.policies = PolicySource::Bundle(bundle),
        Ok(None) => {}
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    serve(config)
}

/// The server's configuration from the command line, serving `dir` (`run` puts in the
/// bundle source instead, when there is one: checking it can fail).
pub fn config(args: &Args) -> Config {
    let mut config = Config::new(PolicySource::Path(args.dir.clone().unwrap_or_default()));
    config.addr = args.addr;
    config.limits = Limits {
        body_bytes: args.max_body,
        hook_body_bytes: args.max_hook_body,
        calls: args.max_calls,
        messages: args.max_messages,
        tools: args.max_tools,
        depth: args.max_depth,
        id_bytes: args.max_id_bytes,
    };
    config.sessions = SessionLimits {
        ttl: Duration::from_secs(args.session_ttl),
        keep_expired: Duration::from_secs(args.session_keep_expired),
        max_sessions: args.max_sessions,
        max_bytes: args.max_session_bytes,
    };
    config.http = args.http.limits();
    config.allow_origins = args.allow_origins.clone();
    config.deny_warnings = args.deny_warnings;
    config.log = args.log.config(Some(LogSink::Stdout));
    config.otel_endpoint = args.log.otel_endpoint();
    config.poll = Duration::from_millis(args.poll_ms);
    config.admin_token = args.admin_token.clone().filter(|t| !t.is_empty());
    config.approver_token = args.approver_token.clone().filter(|t| !t.is_empty());
    config.ask = match args.ask {
        AskArg::Deny => AskMode::Deny,
        AskArg::AllowLogged => AskMode::AllowLogged,
    };
    config.default_policy = args.default_policy.clone();
    config.shadow = args.shadow.clone();
    config.authzen_pdp = args.authzen_pdp.clone();
    config.authzen_stage = args.authzen_stage.clone();
    config.jwt = args.jwt.config();
    config.state = args.state.as_ref().map(|url| RedisConfig {
        url: url.clone(),
        timeout: Duration::from_millis(args.state_timeout_ms),
        prefix: args.state_prefix.clone(),
        tls: StoreTls {
            ca: args.state_ca.clone(),
            client: args.state_cert.clone().zip(args.state_key.clone()),
        },
        declared_new: args.state_new,
    });
    config.widening = args.reload;
    config.reload_on_sighup = true;
    config
}

/// Runs the server with `config` until SIGTERM or Ctrl-C.
pub fn serve(config: Config) -> ExitCode {
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
    let served = runtime.block_on(async {
        // Installed before the server announces its listener, so a signal sent on reading
        // that line drains connections and flushes the log instead of killing the process.
        let stop = toolgate_server::signals::Stop::install()?;
        toolgate_server::run(config, stop.recv()).await
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// The bundle source from `--bundle`, `--verify-key`, `--insecure-unsigned`: a bundle needs
/// a key, or an explicit opt-out of verification.
fn bundle_source(args: &Args) -> Result<Option<BundleSource>, String> {
    let Some(url) = &args.bundle else {
        return Ok(None);
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!(
            "--bundle `{url}`: an http:// or https:// URL is needed"
        ));
    }
    let Some(scope) = args.scope.clone() else {
        return Err(
            "--bundle needs --scope NAME: the scope (fleet or policy set) the bundles are built for (`bundle build --scope NAME`)"
                .into(),
        );
    };
    let verify_key = match &args.verify_key {
        Some(path) => Some(path.clone()),
        None if args.insecure_unsigned => {
            eprintln!("toolgate: warning: --insecure-unsigned: bundle signatures are not checked");
            None
        }
        None => return Err(
            "--bundle needs --verify-key PUB (or, to accept unsigned bundles, --insecure-unsigned)"
                .into(),
        ),
    };
    Ok(Some(BundleSource {
        url: url.clone(),
        verify_key,
        poll: Duration::from_secs(args.poll_s),
        refetch: Duration::from_secs(args.refetch_s),
        scope,
        allow_rollback: args.allow_rollback,
        min_serial: args.min_serial,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        args: Args,
    }

    /// The flags' defaults and `Config::new`'s are written twice (clap shows its own in
    /// `--help`): they must agree, or an embedder's server would differ from `serve`'s.
    #[test]
    fn the_flags_defaults_are_the_librarys() {
        if std::env::var_os("TOOLGATE_ADMIN_TOKEN").is_some()
            || std::env::var_os("TOOLGATE_STATE").is_some()
        {
            return;
        }
        let parsed = Serve::try_parse_from(["serve", "policies"]).unwrap();
        let mut expected = Config::new(PolicySource::Path("policies".into()));
        expected.reload_on_sighup = true;
        assert_eq!(config(&parsed.args), expected);
    }
}
