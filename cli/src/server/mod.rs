//! `toolgate serve`: the sidecar decision server (tokio + hyper + axum).
//!
//! Policies live behind `arc-swap`; a decision loads the current set once and is judged by
//! exactly one revision. Reloads (directory change, SIGHUP, `POST /v1/reload`) compile
//! everything first and swap only when every file compiles (and, with `--deny-warnings`, has
//! no warning). `conn` is the accept loop (connection cap, header and idle timeouts, JSON for
//! hyper's own errors); `guard` runs before every handler (`Origin`, `Content-Type`, the body
//! read within its timeout) and gives every error response a JSON body.

mod api_error;
pub mod bundle;
mod conn;
pub mod decision_log;
mod guard;
mod hooks;
mod limits;
mod loader;
mod log_shipper;
mod metrics;
mod playground;
pub mod reload_gate;
mod routes;
mod state;
mod tracing_otel;
mod turn_state;

pub use conn::HttpLimits;
pub use limits::Limits;
pub use turn_state::redis_store::{RedisConfig, StoreTls};

use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post};
use axum::Router;
use decision_log::{DecisionLog, LogMode};
use state::AppState;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolgate_engine::PolicyStore;
use toolgate_turns::{SessionLimits, SessionStore};
use turn_state::TurnState;

/// Everything `serve` needs.
pub struct Config {
    /// Address to listen on.
    pub addr: SocketAddr,
    /// Directory of `.gate` files.
    pub dir: PathBuf,
    /// Request caps.
    pub limits: Limits,
    /// Bounds of the session store.
    pub sessions: SessionLimits,
    /// Timeouts and the connection cap.
    pub http: HttpLimits,
    /// Origins besides the server's own that a browser request may come from.
    pub allow_origins: Vec<String>,
    /// Refuse a load or reload whose policies have any warning.
    pub deny_warnings: bool,
    /// Which decisions to log.
    pub log: LogMode,
    /// Log arguments and facts too.
    pub log_args: bool,
    /// Log file; standard output when `None`.
    pub log_file: Option<String>,
    /// Decision-log queue capacity.
    pub log_queue: usize,
    /// Ship the decision log to this URL (OPA's event format) instead of a file.
    pub log_url: Option<String>,
    /// How often the directory is polled for changes; zero disables watching.
    pub poll: Duration,
    /// Admin bearer token.
    pub admin_token: Option<String>,
    /// The module a request that names none is judged by when several are loaded.
    pub default_policy: Option<String>,
    /// A path to announce after the listening line (`toolgate playground`'s page).
    pub announce: Option<String>,
    /// A shared turn-state store; `None` keeps turn state in this process.
    pub state: Option<RedisConfig>,
    /// Serve a signed bundle from this source instead of `dir`.
    pub bundle: Option<bundle::Source>,
    /// Export a span per decision request to this OTLP/HTTP endpoint.
    pub otel_endpoint: Option<String>,
    /// What the watcher does with a change that widens (`--reload widening=hold|allow`).
    pub widening: reload_gate::Widening,
}

/// How long open connections may take to finish their requests after SIGTERM.
const DRAIN: Duration = Duration::from_secs(10);

/// Builds the router over shared state.
fn router(state: Arc<AppState>) -> Router {
    let body_limit = state.limits.body_bytes;
    let routes = Router::new()
        .route("/v1/decide", post(routes::decide))
        .route("/v1/data/{module}/decide", post(routes::data_decide))
        .route("/v1/offer", post(routes::offer))
        .route(
            "/v1/hooks/{agent}",
            post(hooks::hook).layer(DefaultBodyLimit::max(state.limits.hook_body_bytes)),
        )
        .route("/v1/check", post(routes::check))
        .route("/v1/reload", post(routes::reload))
        .route("/v1/policies", get(routes::policies))
        .route("/health", get(routes::health))
        .route("/metrics", get(routes::metrics))
        .route("/playground", get(playground::page))
        .route("/playground/app.js", get(playground::script))
        .route("/playground/app.css", get(playground::style))
        .route("/playground/icon.svg", get(playground::icon))
        .route("/v1/playground", post(playground::run))
        .route("/v1/playground/file", get(playground::file))
        .route("/v1/policies/{module}/source", get(playground::source))
        .fallback(routes::not_found);
    tracing_otel::wrap(routes, &state)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(state.clone(), guard::guard))
        .with_state(state)
}

/// Runs the server until SIGTERM or Ctrl-C, then drains the decision log.
pub async fn run(config: Config) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.addr))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let boot = state::boot_stamp();
    let (log, writer) = match &config.log_url {
        Some(url) => log_shipper::start(
            config.log,
            config.log_args,
            url.clone(),
            config.log_queue,
            boot,
        )?,
        None => DecisionLog::start(
            config.log,
            config.log_args,
            config.log_file.clone(),
            config.log_queue,
        )
        .await
        .map_err(|e| format!("cannot open the decision log: {e}"))?,
    };
    let sessions = match &config.state {
        None => TurnState::Memory(SessionStore::new(config.sessions)),
        Some(redis) => TurnState::Redis(Arc::new(
            turn_state::redis_store::RedisStore::open(redis, config.sessions, boot)
                .map_err(|e| format!("--state: {e}"))?,
        )),
    };
    let hook_sessions = turn_state::HookSessions::beside(&sessions, || {
        hooks::sessions(
            config.sessions.max_sessions,
            config.sessions.ttl,
            config.sessions.keep_expired,
        )
    });
    let state = Arc::new(AppState {
        store: PolicyStore::default(),
        sessions,
        hook_sessions,
        metrics: Default::default(),
        log,
        limits: config.limits,
        http: config.http,
        origins: guard::Origins::new(local, &config.allow_origins),
        deny_warnings: config.deny_warnings,
        dir: config.dir.clone(),
        default_policy: config.default_policy.clone(),
        admin_token: config.admin_token.clone(),
        loopback: local.ip().is_loopback(),
        last_ok: Mutex::new(None),
        last_attempt: Mutex::new(None),
        gate: reload_gate::GateState::new(config.widening),
        reload_lock: tokio::sync::Mutex::new(0),
        counter: AtomicU64::new(0),
        boot,
        bundle: config.bundle.map(bundle::Bundle::new).transpose()?,
        otel: config
            .otel_endpoint
            .as_deref()
            .map(tracing_otel::Otel::start)
            .transpose()?,
    });
    // A failed first load still starts the server: /health says 503 until a reload works.
    let _ = state.clone().reload("startup", None).await;
    state
        .sessions
        .announce()
        .await
        .map_err(|e| format!("--state: {e}"))?;
    // Handlers go in before the announcement: a signal sent the moment a supervisor reads
    // it must reach them, not the default action (which would skip the log flush).
    let stop = crate::signals::Stop::install()?;
    let hup = crate::signals::Reload::install()?;
    eprintln!("toolgate: listening on http://{local}");
    if let Some(path) = &config.announce {
        eprintln!("toolgate: playground at http://{local}{path}");
    }

    if let Some(b) = &state.bundle {
        tokio::spawn(bundle::poll(state.clone(), b.poll_every()));
    } else if !config.poll.is_zero() {
        tokio::spawn(watch(state.clone(), config.poll));
    }
    tokio::spawn(sweep(state.clone(), config.sessions.ttl));
    if let Some(hup) = hup {
        tokio::spawn(on_sighup(state.clone(), hup));
    }

    conn::serve(
        listener,
        router(state.clone()),
        state.clone(),
        shutdown_signal(stop),
        DRAIN,
    )
    .await;
    state.log.close();
    let flushing = state.clone();
    let _ = tokio::task::spawn_blocking(move || flushing.otel.as_ref().map(|o| o.shutdown())).await;
    drop(state);
    let _ = writer.await;
    Ok(())
}

/// Polls the directory; reloads once a change has been stable for one more interval. A file
/// still being written is caught three ways: the change must be stable for that interval, a
/// load during which the directory changed is discarded (and retried at the next poll), and
/// a prefix that happens to compile is held back by the reload gate when it widens.
async fn watch(state: Arc<AppState>, every: Duration) {
    let dir = state.dir.clone();
    let mut last = loader::fingerprint(&dir);
    loop {
        tokio::time::sleep(every).await;
        let now = loader::fingerprint(&dir);
        if now == last {
            continue;
        }
        tokio::time::sleep(every.min(Duration::from_millis(250))).await;
        let settled = loader::fingerprint(&dir);
        if settled != now {
            continue;
        }
        last = settled;
        let _ = state.clone().reload("watch", None).await;
    }
}

async fn sweep(state: Arc<AppState>, ttl: Duration) {
    let every = (ttl / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
    loop {
        tokio::time::sleep(every).await;
        let now = Instant::now();
        state.sessions.expire(now);
        state.hook_sessions.expire(now);
    }
}

async fn on_sighup(state: Arc<AppState>, mut hup: crate::signals::Reload) {
    while hup.recv().await {
        let _ = state.clone().reload("sighup", None).await;
    }
}

async fn shutdown_signal(stop: crate::signals::Stop) {
    stop.recv().await;
    eprintln!("toolgate: shutting down; flushing the decision log");
}
