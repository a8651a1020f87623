//! A server built from a [`Config`]: its shared state, its background tasks (the directory
//! watcher or the bundle poller, the session sweeper, SIGHUP), its router, and [`run`],
//! which is `toolgate serve` without the flags.

use super::config::{Config, PolicySource};
use super::decider::Decider;
use super::decisions::Decisions;
use super::error::{Feature, ServerError};
use super::state::AppState;
use super::turn_state::{ApprovalStore, HookSessions, TurnState};
use super::{
    approvals_routes, authzen, bearer, bundle, conn, guard, hooks, loader, outputs_route,
    reload_gate, routes, shadow, tracing_otel,
};
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post};
use axum::Router;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use toolgate_engine::PolicyStore;

/// How long open connections may take to finish their requests after shutdown begins.
const DRAIN: Duration = Duration::from_secs(10);

/// A started server: the serving policy set, turn state, decision log, metrics and the
/// tasks that keep them current. Mount its routes with [`router`] (or serve them with
/// [`run`]), and end it with [`Server::shutdown`], which flushes the decision log. Dropped
/// without it, the background tasks run on until the runtime ends, and what the log still
/// queues may be lost.
pub struct Server {
    state: Arc<AppState>,
    tasks: Vec<JoinHandle<()>>,
}

impl Server {
    /// Opens the decision log and the turn-state store, loads the policies once (a set
    /// that does not load still starts the server: `/health` answers 503 until a reload
    /// works), and starts the watcher or bundle poller, the session sweeper and, with
    /// [`Config::reload_on_sighup`], the SIGHUP handler. Needs a tokio runtime.
    ///
    /// Fails on what can never work: a decision log that cannot be opened, a turn-state
    /// store or bundle key that is refused, a signal that cannot be handled, or a part of
    /// the configuration this build has no feature for.
    pub async fn start(config: Config) -> Result<Server, ServerError> {
        let boot = crate::clock::boot_stamp();
        let decisions = Arc::new(
            Decisions::start_as(&config.log, config.otel_endpoint.as_deref(), boot).await?,
        );
        let sessions = TurnState::open(config.state.as_ref(), config.sessions, boot)?;
        let budgets = super::budgets::Book::new(
            config
                .sessions
                .ttl
                .saturating_add(config.sessions.keep_expired),
        );
        let limits = config.sessions;
        let approvals = ApprovalStore::beside(&sessions);
        let hook_sessions = HookSessions::beside(&sessions, || {
            hooks::sessions(limits.max_sessions, limits.ttl, limits.keep_expired)
        });
        let (dir, bundle) = match config.policies {
            PolicySource::Path(dir) => (dir, None),
            PolicySource::Bundle(source) => (PathBuf::new(), Some(bundle::Bundle::new(source)?)),
        };
        // The policy set starts empty; the first load below fills it.
        let decider = Decider {
            policies: PolicyStore::default(),
            turns: sessions,
            hook_sessions,
            approvals,
            budgets,
            decisions,
            shadow: config.shadow.map(shadow::Shadow::new),
            ask: config.ask,
            limits: config.limits,
            default_policy: config.default_policy,
        };
        let state = Arc::new(AppState {
            decider,
            http: config.http,
            origins: super::origins::Origins::new(config.addr, &config.allow_origins),
            deny_warnings: config.deny_warnings,
            dir,
            admin_token: config.admin_token,
            loopback: config.addr.ip().is_loopback(),
            loads: loader::Loads::default(),
            gate: reload_gate::GateState::new(config.widening),
            reload_lock: tokio::sync::Mutex::new(0),
            bundle,
            approver_token: config.approver_token.filter(|t| !t.is_empty()),
            authzen_pdp: config
                .authzen_pdp
                .as_deref()
                .map(authzen::pdp_identifier)
                .transpose()?,
            authzen_stage: config.authzen_stage,
            bearer: match config.jwt {
                Some(jwt) => Some(bearer::Verifier::new(jwt).await?),
                None => None,
            },
        });
        // A shadow set that does not load is a mistake in the command line or the files, and
        // there is no answer it could degrade to: the server does not start.
        if let Some(Err(diagnostics)) = state.reload_shadow("startup").await {
            let path = state
                .decider
                .shadow
                .as_ref()
                .map(|s| s.path().to_path_buf());
            return Err(ServerError::Shadow {
                path: path.unwrap_or_default(),
                diagnostics: toolgate_loader::log_text::escape_keeping_lines(
                    &diagnostics.to_string(),
                )
                .into_owned(),
            });
        }
        // A failed first load still starts the server: /health says 503 until a reload works.
        let _ = state.clone().reload("startup", None).await;
        state.decider.turns.announce().await?;
        // Installed before `run` announces the listener: a signal sent the moment a
        // supervisor reads that line must reach the handler, not the default action.
        let hup = match config.reload_on_sighup {
            true => super::signals::Reload::install()?,
            false => None,
        };
        let mut tasks = Vec::new();
        if let Some(b) = &state.bundle {
            tasks.push(tokio::spawn(poll_bundle(state.clone(), b.poll_every())));
        } else if !config.poll.is_zero() {
            tasks.push(tokio::spawn(watch(
                state.clone(),
                config.poll,
                Watched::Serving,
            )));
        }
        if state.decider.shadow.is_some() && !config.poll.is_zero() {
            tasks.push(tokio::spawn(watch(
                state.clone(),
                config.poll,
                Watched::Shadow,
            )));
        }
        tasks.push(tokio::spawn(sweep(state.clone(), limits.ttl)));
        if let Some(hup) = hup {
            tasks.push(tokio::spawn(on_sighup(state.clone(), hup)));
        }
        Ok(Server { state, tasks })
    }

    /// The decision pipeline this server's routes judge with: the same policy set, turn
    /// state, approvals, budgets, shadow set and sinks. A program that embeds the server
    /// judges a batch in process with [`Decider::decide`], with no HTTP in between; the
    /// decision is logged, counted and traced like one the routes made.
    pub fn decider(&self) -> &Decider {
        &self.state.decider
    }

    /// The server's routes ([`router`]).
    pub fn router(&self) -> Router {
        router(self)
    }

    /// Stops the background tasks, closes the decision log and waits until what it holds
    /// is written (or shipped), and flushes the spans still buffered. Routes still mounted
    /// elsewhere keep judging, but log nothing more.
    pub async fn shutdown(self) {
        for task in &self.tasks {
            task.abort();
        }
        let decisions = self.state.decider.decisions.clone();
        drop(self.state);
        decisions.close().await;
    }
}

/// The server's routes as an axum [`Router`], every guard included (the `Origin` and
/// `Content-Type` checks, the body timeout, JSON errors, the body caps and, with
/// `--otel-endpoint`, the tracing middleware): merge it into another app, or nest it under
/// a prefix. Serving it on axum's own loop leaves out what the accept loop adds (the
/// connection cap, header and idle timeouts, JSON for hyper's own errors; see
/// [`crate::conn`]).
pub fn router(server: &Server) -> Router {
    let state = &server.state;
    let body_limit = state.decider.limits.body_bytes;
    // The routes that judge batches: with `--otel-endpoint`, each request is one span.
    let decide = Router::new()
        .route("/v1/decide", post(routes::decide))
        .route("/v1/data/{module}/decide", post(routes::data_decide))
        .route(
            "/v1/hooks/{agent}",
            post(hooks::hook).layer(DefaultBodyLimit::max(state.decider.limits.hook_body_bytes)),
        );
    let routes = Router::new()
        .merge(tracing_otel::wrap(decide, state.decider.decisions.otel()))
        .route("/v1/offer", post(routes::offer))
        .route("/v1/outputs", post(outputs_route::record))
        .route("/v1/check", post(routes::check))
        .route("/v1/reload", post(routes::reload))
        .route("/v1/policies", get(routes::policies))
        .route(
            "/v1/approvals",
            get(approvals_routes::waiting).post(approvals_routes::answer_ask),
        )
        .route("/access/v1/evaluation", post(authzen::evaluation))
        .route("/access/v1/evaluations", post(authzen::evaluations))
        .route("/.well-known/authzen-configuration", get(authzen::metadata))
        .route("/health", get(routes::health))
        .route("/metrics", get(routes::metrics));
    #[cfg(feature = "playground")]
    let routes = {
        use super::playground;
        routes
            .route("/playground", get(playground::page))
            .route("/playground/app.js", get(playground::script))
            .route("/playground/app.css", get(playground::style))
            .route("/playground/icon.svg", get(playground::icon))
            .route("/v1/playground", post(playground::run))
            .route("/v1/playground/file", get(playground::file))
            .route("/v1/policies/{module}/source", get(playground::source))
    };
    let routes = routes.fallback(routes::not_found);
    routes
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(state.clone(), guard::guard))
        .with_state(state.clone())
}

/// Runs a server as `toolgate serve` does: listens on [`Config::addr`], starts the
/// [`Server`], says `toolgate: listening on http://ADDR` on standard error, and serves on
/// the hardened accept loop ([`crate::conn::serve`]) until `shutdown` resolves; then stops
/// accepting, gives open connections up to ten seconds to finish, and flushes the decision
/// log. `toolgate serve` passes SIGINT and SIGTERM ([`crate::signals::Stop`]).
///
/// With port 0 in [`Config::addr`], the port the system picked is what the server's own
/// origin is made of.
pub async fn run(
    mut config: Config,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    if config.announce.is_some() {
        Feature::Playground.require()?;
    }
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(|source| ServerError::Listen {
            addr: config.addr,
            source,
        })?;
    let local = listener.local_addr().map_err(ServerError::LocalAddr)?;
    config.addr = local;
    let announce = config.announce.take();
    let server = Server::start(config).await?;
    eprintln!("toolgate: listening on http://{local}");
    if let Some(path) = &announce {
        eprintln!("toolgate: playground at http://{local}{path}");
    }
    conn::serve(
        listener,
        server.router(),
        server.state.clone(),
        async {
            shutdown.await;
            eprintln!("toolgate: shutting down; flushing the decision log");
        },
        DRAIN,
    )
    .await;
    server.shutdown().await;
    Ok(())
}

/// Polls the directory; reloads once a change has been stable for one more interval. A file
/// still being written is caught three ways: the change must be stable for that interval, a
/// load during which the directory changed is discarded (and retried at the next poll), and
/// a prefix that happens to compile is held back by the reload gate when it widens.
async fn watch(state: Arc<AppState>, every: Duration, watched: Watched) {
    let dir = match (&watched, &state.decider.shadow) {
        (Watched::Shadow, Some(shadow)) => shadow.path().to_path_buf(),
        (Watched::Shadow, None) => return,
        (Watched::Serving, _) => state.dir.clone(),
    };
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
        match watched {
            Watched::Serving => {
                let _ = state.clone().reload("watch", None).await;
            }
            Watched::Shadow => {
                let _ = state.reload_shadow("watch").await;
            }
        }
    }
}

/// Which policy set a directory watcher reloads.
enum Watched {
    /// The serving set, through the reload gate.
    Serving,
    /// The shadow set (`--shadow`).
    Shadow,
}

/// Fetches the bundle every `every`, gating and installing what changed.
async fn poll_bundle(state: Arc<AppState>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        let _ = state.clone().reload("poll", None).await;
    }
}

async fn sweep(state: Arc<AppState>, ttl: Duration) {
    let every = (ttl / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
    loop {
        tokio::time::sleep(every).await;
        let now = Instant::now();
        state.decider.turns.expire(now);
        state.decider.hook_sessions.expire(now);
        state.decider.approvals.expire(now);
        state.decider.budgets.expire(now);
    }
}

async fn on_sighup(state: Arc<AppState>, mut hup: super::signals::Reload) {
    while hup.recv().await {
        let _ = state.reload_shadow("sighup").await;
        let _ = state.clone().reload("sighup", None).await;
    }
}
