//! What every handler shares: the policy store, sessions, metrics, the log, the config.

use super::api_error::ApiError;
use super::config::HttpLimits;
use super::decider::Decider;
use super::loader::{load_complete, off_thread, say_failed, LoadError, LoadReport, Loads};
use super::origins::Origins;
use super::reload_gate::{reload_gate, GateOutcome, GateState, Installer, ReloadError, Source};
use axum::http::{HeaderMap, StatusCode};
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use toolgate_engine::PolicySet;

/// Shared server state.
pub struct AppState {
    /// The decision pipeline: policy set, turn state, approvals, budgets, shadow set, sinks.
    pub decider: Decider,
    /// Timeouts and the connection cap.
    pub http: HttpLimits,
    /// Origins a browser request may come from.
    pub origins: Origins,
    /// Refuse a load whose policies have any warning.
    pub deny_warnings: bool,
    /// The policy directory (or, for `toolgate playground`, one policy file).
    pub dir: PathBuf,
    /// Bearer token for admin endpoints, if set.
    pub admin_token: Option<String>,
    /// Whether the server listens on loopback only.
    pub loopback: bool,
    /// The last successful load and the last attempt, successful or not.
    pub loads: Loads,
    /// The reload gate's mode, held change and counters.
    pub gate: GateState,
    /// Serialises reloads so generations are numbered in order.
    pub reload_lock: tokio::sync::Mutex<u64>,
    /// The signed bundle the policies come from (`--bundle`), instead of `dir`.
    pub bundle: Option<super::bundle::Bundle>,
    /// The bearer token of `/v1/approvals` besides the admin token (`--approver-token`).
    pub approver_token: Option<String>,
    /// The AuthZEN PDP identifier its metadata names (`--authzen-pdp`), without a trailing
    /// slash; `None` publishes no metadata.
    pub authzen_pdp: Option<String>,
    /// The stage of AuthZEN evaluations whose context names none (`--authzen-stage`).
    pub authzen_stage: Option<String>,
    /// Verifies bearer tokens (`--jwks`); `None` takes a request's `facts.principal` as sent.
    pub bearer: Option<super::bearer::Verifier>,
}

impl AppState {
    /// Checks the admin bearer token; refuses admin calls beyond loopback without one.
    pub fn admin(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        match &self.admin_token {
            Some(token) => {
                let given = headers
                    .get(axum::http::header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .unwrap_or("");
                if constant_time_eq(given.as_bytes(), token.as_bytes()) {
                    Ok(())
                } else {
                    Err(ApiError::forbidden(
                        StatusCode::UNAUTHORIZED,
                        "admin endpoint: send `Authorization: Bearer TOKEN`",
                    ))
                }
            }
            None if self.loopback => Ok(()),
            None => Err(ApiError::forbidden(
                StatusCode::FORBIDDEN,
                "admin endpoints are disabled when listening beyond loopback without --admin-token",
            )),
        }
    }

    /// Checks the bearer token of `/v1/approvals`: the approver token or the admin token.
    /// With neither set, approvals are answered on loopback only.
    pub fn approver(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let Some(approver) = &self.approver_token else {
            return self.admin(headers);
        };
        let given = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if constant_time_eq(given.as_bytes(), approver.as_bytes())
            || self.admin_token.is_some() && self.admin(headers).is_ok()
        {
            Ok(())
        } else {
            Err(ApiError::forbidden(
                StatusCode::UNAUTHORIZED,
                "approvals: send `Authorization: Bearer TOKEN` with the approver or admin token",
            ))
        }
    }

    /// Who sent a hook event, from its `Authorization: Bearer` header:
    ///
    /// - the admin token (`--admin-token`): the server's own wiring, no principal;
    /// - with `--jwks`, any other token is verified: a valid one is the caller, with its
    ///   principal (the events then judge and touch only that principal's sessions); one that
    ///   is not valid is refused with the reason;
    /// - no token: no principal, unless `--admin-token` is set, which every hook event must
    ///   then carry (or a valid token), so a forged `UserPromptSubmit` cannot end a latched
    ///   turn.
    ///
    /// `Err` says why the event is refused, in words for the agent.
    pub async fn hook_caller(
        &self,
        headers: &HeaderMap,
    ) -> Result<Option<serde_json::Value>, HookRefused> {
        if self.admin_token.is_some() && self.admin(headers).is_ok() {
            return Ok(None);
        }
        let needs_token = self.admin_token.is_some();
        if let Some(verifier) = &self.bearer {
            match verifier.principal(headers).await {
                Ok(Some(principal)) => return Ok(Some(principal)),
                Ok(None) if !needs_token => return Ok(None),
                Ok(None) => {}
                Err(e) => return Err(HookRefused::InvalidToken(e.to_string())),
            }
        }
        if needs_token {
            return Err(HookRefused::NoToken {
                jwks: self.bearer.is_some(),
            });
        }
        Ok(None)
    }

    /// Recompiles the whole directory (or fetches the bundle, with `--bundle`) and swaps it
    /// in through [`AppState::install`]: only if every file compiles, the directory did not
    /// change while it was read, and the reload gate admits it. `digest` (bundles only)
    /// names the bundle an explicit reload is to apply; see [`super::bundle::reload`].
    pub async fn reload(
        self: Arc<Self>,
        trigger: &str,
        digest: Option<String>,
    ) -> Result<u64, ReloadError> {
        if let Some(b) = &self.bundle {
            return super::bundle::reload(b, self.clone(), trigger, digest).await;
        }
        let dir = self.dir.clone();
        let deny_warnings = self.deny_warnings;
        let source = Source::from_trigger(trigger);
        // An explicit reload applies a held change only as it was reported: the set named by
        // `digest`, or else the one under `pending`.
        let expect = match source {
            Source::Explicit => digest.or_else(|| self.gate.pending_digest()),
            _ => None,
        };
        self.install(trigger, source, None, expect, move |next| {
            load_complete(&dir, next, deny_warnings)
        })
        .await
    }

    /// Reloads the shadow set (`--shadow`) through its one install path
    /// ([`super::shadow::Shadow::install`]), when there is one: the same triggers as the
    /// serving set, never the reload gate (the shadow answers nothing). `None` without
    /// `--shadow`; else the shadow generation now serving, or why the load failed.
    pub async fn reload_shadow(&self, trigger: &str) -> Option<Result<u64, LoadError>> {
        let shadow = self.decider.shadow.as_ref()?;
        Some(shadow.install(trigger, self.deny_warnings).await)
    }

    /// The one place a new policy set is swapped in, for a directory and a bundle alike:
    /// `build` makes the set for the next generation (off the async threads), then the
    /// reload gate ([`super::reload_gate::reload_gate`]) compares it with the serving set: a
    /// widening change from an automatic source (the watcher, a bundle poll) is held back.
    /// A set that fails to build, or is held, leaves the old set serving, and is reported.
    /// `source` is how the gate treats it; `digest` names a bundle, shown with a held change.
    ///
    /// For a directory, whose digest is known only once its set is built: with `expect`, an
    /// explicit reload applies a widening only when the set built has that digest ([`super::reload_gate::set_digest`]). Another set is gated as the
    /// watcher would gate it: applied if it does not widen, else held as the new `pending`,
    /// answered with [`ReloadError::Changed`].
    async fn install<F>(
        self: Arc<Self>,
        trigger: &str,
        source: Source,
        digest: Option<String>,
        expect: Option<String>,
        build: F,
    ) -> Result<u64, ReloadError>
    where
        F: FnOnce(u64) -> Result<PolicySet, LoadError> + Send + 'static,
    {
        let mut generation = self.reload_lock.lock().await;
        let next = *generation + 1;
        let serving = self.decider.policies.snapshot();
        let widening = self.gate.widening;
        let result = off_thread(move || {
            let set = build(next)?;
            let built = match digest {
                Some(d) => d,
                None => super::reload_gate::set_digest(&set),
            };
            let changed = expect.filter(|want| *want != built);
            let source = if changed.is_some() {
                Source::Automatic
            } else {
                source
            };
            let outcome = reload_gate(&serving, &set, source, widening);
            // A held bundle is named by its bytes' digest, a directory by its set's.
            Ok((set, outcome, Some(built), changed))
        })
        .await;
        let report = |ok: bool, error: Option<String>| LoadReport::now(ok, trigger, error);
        match result {
            Ok((set, GateOutcome::Apply { diff }, _, _)) => {
                let serving = super::loader::describe(&set);
                self.decider.policies.swap(set);
                *generation = next;
                self.gate.applied(diff.as_ref(), trigger);
                self.decider
                    .decisions
                    .metrics()
                    .reloads_ok
                    .fetch_add(1, Relaxed);
                self.loads.applied(report(true, None));
                eprintln!("toolgate: loaded generation {next} ({trigger}): {serving}");
                Ok(next)
            }
            Ok((_, GateOutcome::Hold { diff }, digest, changed)) => {
                let r = report(
                    false,
                    Some(
                        "held back: the new policies may widen what is allowed; see `pending`"
                            .into(),
                    ),
                );
                let apply = match &digest {
                    Some(d) => format!("POST /v1/reload?digest={d}"),
                    None => "POST /v1/reload".into(),
                };
                self.gate.hold(&diff, trigger, r.at_ms, *generation, digest);
                self.loads.attempted(r);
                if let Some(want) = changed {
                    let msg = format!(
                        "the policies changed since they were reported: {want} was reviewed, and what is on disk now is held as the new `pending`; nothing applied; review it, then apply it with {apply}"
                    );
                    eprintln!("toolgate: reload ({trigger}) refused: {msg}");
                    return Err(ReloadError::Changed(msg));
                }
                Err(ReloadError::Held(format!(
                    "held back: the new policies may widen what is allowed; review `pending` in GET /v1/policies, then apply it with {apply}"
                )))
            }
            Err(e) => {
                let diagnostics = e.to_string();
                self.decider
                    .decisions
                    .metrics()
                    .reloads_failed
                    .fetch_add(1, Relaxed);
                say_failed(
                    "reload",
                    trigger,
                    *generation,
                    &self.decider.policies.snapshot(),
                    &diagnostics,
                );
                self.loads
                    .attempted(report(false, Some(diagnostics.clone())));
                Err(ReloadError::Failed(diagnostics))
            }
        }
    }
}

/// The server's state as what a bundle reload installs into: the bundle poller names only
/// this (`reload_gate::Installer`), never `AppState`, which holds the bundle.
impl Installer for AppState {
    fn generation(&self) -> u64 {
        self.decider.policies.snapshot().generation()
    }

    fn deny_warnings(&self) -> bool {
        self.deny_warnings
    }

    fn gate(&self) -> &GateState {
        &self.gate
    }

    #[cfg(feature = "bundles")]
    fn install_set<F>(
        self: Arc<Self>,
        trigger: &str,
        source: Source,
        digest: Option<String>,
        build: F,
    ) -> impl std::future::Future<Output = Result<u64, ReloadError>> + Send
    where
        F: FnOnce(u64) -> Result<PolicySet, LoadError> + Send + 'static,
    {
        AppState::install(self, trigger, source, digest, None, build)
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Why a hook event is refused before it is judged ([`AppState::hook_caller`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HookRefused {
    /// `--admin-token` is set and the event carries neither it nor (under `--jwks`) a
    /// token the server verifies.
    #[error("it needs `Authorization: Bearer TOKEN`: the server's --admin-token{}", if *.jwks { ", or a token its --jwks verifies" } else { "" })]
    NoToken {
        /// Whether the server verifies bearer tokens (`--jwks`).
        jwks: bool,
    },
    /// The bearer token is neither the admin token nor one the server verifies.
    #[error("its bearer token is not valid: {0}")]
    InvalidToken(String),
}
