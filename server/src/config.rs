//! What a server is started with: [`Config`] and its parts. Plain data, built in code (no
//! command-line parser here); [`Config::new`] gives `toolgate serve`'s defaults, and the
//! binary's flags only fill these fields in.
//!
//! A leaf: it names no other module of the crate, so every component can read its part of
//! the configuration without reaching back into the server.

use crate::limits::Limits;
use crate::reload_gate::Widening;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;
use toolgate_turns::SessionLimits;

/// Everything a server needs. Build it with [`Config::new`] and set the fields that differ
/// from the defaults, which are `toolgate serve`'s.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Config {
    /// The address [`run`](crate::run) listens on. For a server started with
    /// [`Server::start`](crate::Server::start) and mounted elsewhere, the address its routes
    /// are served at: it gives the server's own origin for the `Origin` check, and whether
    /// admin endpoints may go without a token (only on loopback). Default `127.0.0.1:8181`.
    pub addr: SocketAddr,
    /// Where the policies come from: a directory (or one file), or a signed bundle.
    pub policies: PolicySource,
    /// Request caps (body, calls, messages, tools, depth, ids).
    pub limits: Limits,
    /// Bounds of the in-memory turn-state store, and the session TTL of every store.
    pub sessions: SessionLimits,
    /// Timeouts and the connection cap of the accept loop.
    pub http: HttpLimits,
    /// Origins besides the server's own that a browser request may come from
    /// (`--allow-origin`).
    pub allow_origins: Vec<String>,
    /// Refuse a load or reload whose policies have any warning (`--deny-warnings`).
    pub deny_warnings: bool,
    /// The decision log.
    pub log: LogConfig,
    /// How often the policy directory is polled for changes; zero disables watching.
    /// Default one second. Not used with a bundle, which has its own poll interval.
    pub poll: Duration,
    /// The bearer token of the admin endpoints (`--admin-token`); `None` allows them on
    /// loopback only.
    pub admin_token: Option<String>,
    /// The module a request that names none is judged by when several are loaded
    /// (`--default-policy`).
    pub default_policy: Option<String>,
    /// A path printed after the listening line by [`run`](crate::run) (`toolgate
    /// playground`'s page); needs the `playground` feature.
    pub announce: Option<String>,
    /// A shared turn-state store (`--state`, the `redis` feature), which keeps budget
    /// counts and approvals too; `None` keeps them all in this process.
    pub state: Option<RedisConfig>,
    /// Export a span per decision request to this OTLP/HTTP endpoint (`--otel-endpoint`,
    /// the `otel` feature).
    pub otel_endpoint: Option<String>,
    /// What the directory watcher and the bundle poller do with a change that widens what
    /// is allowed (`--reload widening=hold|allow`). Default: hold it back.
    pub widening: Widening,
    /// Reload on SIGHUP, as an explicit reload (`toolgate serve` does). Default `false`: a
    /// library does not take over the process's signals unless asked.
    pub reload_on_sighup: bool,
    /// What an ask does when nobody answers it (`--ask`). Default: it is a denial until a
    /// person approves it through `POST /v1/approvals`.
    pub ask: AskMode,
    /// The bearer token of `/v1/approvals` (`--approver-token`), besides the admin token:
    /// who may approve need not be who may reload.
    pub approver_token: Option<String>,
    /// A shadow policy set (`--shadow PATH`): a directory of `.gate` files, or one file,
    /// loaded like [`Config::policies`]' directory and judged beside it on every
    /// `/v1/decide` batch without ever answering; where it decides a call otherwise, the
    /// decision log and `/metrics` say so (docs/server.md, "Shadow mode"). It is watched
    /// (every [`Config::poll`]) and reloaded by `POST /v1/reload` and SIGHUP like the serving
    /// set, without the reload gate. A shadow set that does not load at startup stops the
    /// server. Default `None`.
    pub shadow: Option<PathBuf>,
    /// The AuthZEN Policy Decision Point identifier (`--authzen-pdp`, an `https` URL with no
    /// query or fragment) that `/.well-known/authzen-configuration` names, with the endpoint
    /// URLs below it. A PEP checks it against the URL it fetched the metadata from, so it is
    /// configured, never read off a request's `Host`. Default `None`: no metadata (the
    /// evaluation endpoints answer either way).
    pub authzen_pdp: Option<String>,
    /// The stage an AuthZEN evaluation is judged in when its `context` names none
    /// (`--authzen-stage`): a gateway knows no stages. Default `None`: such an evaluation is
    /// judged as any request without a stage, and denied.
    pub authzen_stage: Option<String>,
    /// Principals from verified bearer tokens (`--jwks`, `--jwt-issuer`, `--jwt-audience`):
    /// with it, `facts.principal` is the token's and a request may not bring its own.
    /// Default `None`: a request's `facts.principal` is taken as the executor sent it.
    pub jwt: Option<JwtConfig>,
}

/// How bearer tokens are verified (`docs/server.md`, "Principals from bearer tokens").
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JwtConfig {
    /// The issuer's key set: a JWKS file, or an `https://` URL (`http://` only to a
    /// loopback host).
    pub jwks: String,
    /// The `iss` a token must have.
    pub issuer: String,
    /// The `aud` values a token may name (one is enough).
    pub audience: Vec<String>,
    /// The claim read as `principal.tenant` (default `tenant`).
    pub tenant_claim: String,
}

impl JwtConfig {
    /// Tokens of `issuer` for `audience`, keys from `jwks`, the tenant in claim `tenant`.
    pub fn new(
        jwks: impl Into<String>,
        issuer: impl Into<String>,
        audience: impl Into<String>,
    ) -> Self {
        JwtConfig {
            jwks: jwks.into(),
            issuer: issuer.into(),
            audience: vec![audience.into()],
            tenant_claim: "tenant".into(),
        }
    }
}

/// What the server does with a call that asks a person (`--ask`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AskMode {
    /// An ask is a denial until a person approves the call (`POST /v1/approvals`).
    #[default]
    Deny,
    /// For agents with nobody to ask: every ask is allowed, and the decision log marks the
    /// call `headless`.
    AllowLogged,
}

impl Config {
    /// A configuration with `toolgate serve`'s defaults, serving `policies`.
    pub fn new(policies: PolicySource) -> Config {
        Config {
            addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8181),
            policies,
            limits: Limits::default(),
            sessions: SessionLimits {
                ttl: Duration::from_secs(3600),
                keep_expired: Duration::from_secs(86_400),
                max_sessions: 100_000,
                max_bytes: 64 << 20,
            },
            http: HttpLimits::default(),
            allow_origins: Vec::new(),
            deny_warnings: false,
            log: LogConfig::default(),
            poll: Duration::from_secs(1),
            admin_token: None,
            default_policy: None,
            announce: None,
            state: None,
            otel_endpoint: None,
            widening: Widening::default(),
            reload_on_sighup: false,
            ask: AskMode::Deny,
            approver_token: None,
            shadow: None,
            authzen_pdp: None,
            authzen_stage: None,
            jwt: None,
        }
    }
}

/// Where a server's policies come from.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PolicySource {
    /// A directory of `.gate` files, each served under its module name and watched for
    /// changes (`*.invariants.gate` aside); or one `.gate` file, as `toolgate playground`
    /// serves it.
    Path(PathBuf),
    /// A signed bundle downloaded over HTTP(S) and polled (the `bundles` feature).
    Bundle(BundleSource),
}

/// Where bundles come from and how they are checked (`serve --bundle`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleSource {
    /// The bundle's URL (`http://` or `https://`).
    pub url: String,
    /// The public key file (`bundle.pub`) every bundle must be signed with, read when the
    /// server starts; `None` accepts unsigned bundles (`--insecure-unsigned`).
    pub verify_key: Option<PathBuf>,
    /// How often to poll.
    pub poll: Duration,
    /// How often a poll downloads the whole bundle without `If-None-Match`.
    pub refetch: Duration,
    /// The scope every bundle's manifest must name (`--scope`).
    pub scope: String,
    /// Whether an explicit reload may apply a bundle whose serial is not above the serving
    /// one (`--allow-rollback`); a poll never does.
    pub allow_rollback: bool,
    /// The lowest serial ever applied (`--min-serial`), at startup too, and whatever
    /// `allow_rollback` says: what a restarted replica, which knows no serving serial yet,
    /// still refuses.
    pub min_serial: u64,
}

/// The decision log: which decisions, with what, and where to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// Which decisions to log. Default: all.
    pub mode: LogMode,
    /// Log call arguments and facts too (`--log-args`; they may hold personal data).
    pub args: bool,
    /// Where entries go. Default: standard output.
    pub sink: LogSink,
    /// Queue capacity; entries beyond it are dropped and counted. Default 65 536.
    pub queue: usize,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            mode: LogMode::All,
            args: false,
            sink: LogSink::Stdout,
            queue: 65_536,
        }
    }
}

/// Which decisions are logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogMode {
    /// Every batch.
    All,
    /// Only batches with at least one denial.
    Denials,
    /// Nothing.
    Off,
}

/// Where decision-log entries go.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogSink {
    /// JSON lines on standard output.
    Stdout,
    /// JSON lines appended to this file (`--log-file`).
    File(PathBuf),
    /// Batches of OPA decision-log events POSTed to this http(s) URL
    /// (`--decision-log-url`, the `shipper` feature).
    Ship(String),
}

/// Timeouts and the connection cap of the accept loop (`conn::serve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// From waiting for a request to its last header byte.
    pub header_timeout: Duration,
    /// From the headers to the last body byte.
    pub body_timeout: Duration,
    /// A connection with no request in flight and no byte moving is closed after this.
    pub idle_timeout: Duration,
    /// Most connections open at once.
    pub max_connections: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(5),
            max_connections: 1024,
        }
    }
}

/// Where the shared turn-state store is, and how long a round trip may take (`--state`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisConfig {
    /// `redis://[:PASSWORD@]HOST:PORT[/DB]`, `rediss://` for TLS, or `unix://PATH`; a
    /// cluster as `redis+cluster://HOST:PORT[,HOST:PORT...]` (`rediss+cluster://` for TLS).
    pub url: String,
    /// Longest a round trip may take before the batch is judged fail-closed.
    pub timeout: Duration,
    /// Prefix of every key toolgate writes, so several fleets can share one store.
    pub prefix: String,
    /// TLS material for a `rediss://` store (files, read when the store is opened).
    pub tls: StoreTls,
    /// The operator declared the store new (`--state-new`): a store with no marker is taken
    /// as never used, not as one that lost its data.
    pub declared_new: bool,
}

/// Files for TLS to the store: `--state-ca`, and `--state-cert` with `--state-key`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreTls {
    /// PEM CA certificates that replace the system's trust store.
    pub ca: Option<PathBuf>,
    /// PEM client certificate and its private key, for a store that requires one.
    pub client: Option<(PathBuf, PathBuf)>,
}
