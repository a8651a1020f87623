//! The reload gate: no reload widens what the server allows without someone asking for it.
//!
//! Every source of a new policy set (startup, the directory watcher, `POST /v1/reload`,
//! SIGHUP, and any later one such as fetched bundles) passes the compiled set through
//! [`reload_gate`] before it is swapped in. It diffs the serving set against the new one
//! (`toolgate_prove::diff_sets`, the same analysis as `toolgate diff`) and holds back a
//! change that widens unless the source is an explicit operator action or the server runs
//! with `--reload widening=allow`. A held change leaves the old set serving; it is shown in
//! the log, in `/v1/policies` (`pending`, with the diff) and in `/metrics`.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use toolgate_engine::PolicySet;
use toolgate_prove::diff::DEFAULT_DIFF_CASES;
use toolgate_prove::invariants::DEFAULT_SEED;
use toolgate_prove::{Config, SetDiff};

/// What `--reload widening=...` says about a widening change from an automatic source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Widening {
    /// Hold it back until an explicit reload (the default).
    #[default]
    Hold,
    /// Apply it like any other change (the behaviour before the gate).
    Allow,
}

impl std::str::FromStr for Widening {
    type Err = String;

    /// Parses the value of `serve --reload`: `widening=hold` or `widening=allow`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "widening=hold" => Ok(Widening::Hold),
            "widening=allow" => Ok(Widening::Allow),
            _ => Err(format!(
                "expected `widening=hold` or `widening=allow`, found `{s}`"
            )),
        }
    }
}

/// Where a new policy set comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The first load: nothing is serving yet, so there is nothing to widen.
    Startup,
    /// A change noticed without an operator asking for it (the directory watcher).
    Automatic,
    /// An operator's explicit request (`POST /v1/reload`, SIGHUP): applies a widening.
    Explicit,
}

impl Source {
    /// The source of a reload by its trigger name: `startup`; `api` and `sighup` are
    /// explicit; anything else (`watch`, a source added later) is automatic, so a new
    /// source is gated unless it says otherwise.
    pub fn from_trigger(trigger: &str) -> Source {
        match trigger {
            "startup" => Source::Startup,
            "api" | "sighup" => Source::Explicit,
            _ => Source::Automatic,
        }
    }
}

/// What the gate decided.
#[derive(Debug)]
pub enum GateOutcome {
    /// Swap the new set in. `diff` is what changed (`None` when nothing was serving).
    Apply {
        /// The diff against the serving set.
        diff: Option<SetDiff>,
    },
    /// Keep the old set serving: the new one widens and nobody asked for that.
    Hold {
        /// The diff against the serving set.
        diff: SetDiff,
    },
}

/// The search budget of the gate's diff: the `toolgate diff` default, small enough for every
/// reload (the exact part does not depend on it).
pub fn gate_config() -> Config {
    Config {
        cases: DEFAULT_DIFF_CASES,
        seed: DEFAULT_SEED,
    }
}

/// The one gate every reload source calls: diffs `old` (serving) against `new` and decides
/// whether `new` may be swapped in.
pub fn reload_gate(
    old: &PolicySet,
    new: &PolicySet,
    source: Source,
    widening: Widening,
) -> GateOutcome {
    // Nothing serving (the first load, or every load so far failed): every decision is a 503
    // and clients fail closed, so the first set that compiles is what the operator meant.
    if source == Source::Startup || old.is_empty() {
        return GateOutcome::Apply { diff: None };
    }
    let diff = toolgate_prove::diff_sets(old, new, &gate_config());
    if diff.widens() && source == Source::Automatic && widening == Widening::Hold {
        GateOutcome::Hold { diff }
    } else {
        GateOutcome::Apply { diff: Some(diff) }
    }
}

/// The digest of a directory's policy set: SHA-256 over each module's name and revision (the
/// hash of its source), in name order. Two loads with the same digest serve the same rules.
pub fn set_digest(set: &PolicySet) -> String {
    let mut lines: Vec<String> = set
        .iter()
        .map(|p| format!("{}\0{}\n", p.module(), p.revision()))
        .collect();
    lines.sort();
    format!("{:x}", Sha256::digest(lines.concat().as_bytes()))
}

/// How an operator applies a held change: by its digest (a bare explicit reload or SIGHUP
/// applies the digest pending at the time, and nothing else).
fn apply_with(digest: Option<&str>) -> String {
    match digest {
        Some(d) => {
            format!("POST /v1/reload?digest={d} (or SIGHUP, which applies only this one)")
        }
        None => "POST /v1/reload or SIGHUP".into(),
    }
}

/// A held-back change.
#[derive(Debug, Clone)]
struct Pending {
    at_ms: u128,
    trigger: String,
    diff: Value,
    summary: Vec<String>,
    /// What is held: the SHA-256 (hex) of a bundle, or a directory's [`set_digest`].
    digest: Option<String>,
    /// What the held bundle's manifest says (`scope`, `serial`, `revision`), for the review.
    manifest: Value,
}

/// The gate's state in the server: the mode, the held change and its counters.
#[derive(Debug, Default)]
pub struct GateState {
    /// What to do with a widening change from the watcher.
    pub widening: Widening,
    pending: Mutex<Option<Pending>>,
    held: AtomicU64,
    applied_widening: AtomicU64,
}

impl GateState {
    /// A state with this mode and nothing pending.
    pub fn new(widening: Widening) -> Self {
        GateState {
            widening,
            ..GateState::default()
        }
    }

    /// Records a held change (replacing any earlier one) and logs it. `digest` names the held
    /// bundle: an explicit reload applies that bundle and no other.
    pub fn hold(
        &self,
        diff: &SetDiff,
        trigger: &str,
        at_ms: u128,
        serving: u64,
        digest: Option<String>,
    ) {
        self.held.fetch_add(1, Relaxed);
        let summary = diff.widening_lines();
        let what = match &digest {
            Some(d) => format!("the new policies ({d})"),
            None => "the new policies".into(),
        };
        eprintln!(
            "toolgate: reload ({trigger}) held back: {what} may allow calls the serving ones deny (a widening, or one not proved absent); still serving generation {serving}; apply with {}",
            apply_with(digest.as_deref())
        );
        for line in &summary {
            eprintln!(
                "toolgate:   widening: {}",
                toolgate_loader::log_text::escape(line)
            );
        }
        if let Ok(mut p) = self.pending.lock() {
            *p = Some(Pending {
                at_ms,
                trigger: trigger.to_string(),
                diff: diff.to_json(),
                summary,
                digest,
                manifest: Value::Null,
            });
        }
    }

    /// Records an applied change: clears what was pending and logs a widening that an
    /// operator applied (or that `widening=allow` let through).
    pub fn applied(&self, diff: Option<&SetDiff>, trigger: &str) {
        if let Ok(mut p) = self.pending.lock() {
            *p = None;
        }
        if let Some(diff) = diff.filter(|d| d.widens()) {
            self.applied_widening.fetch_add(1, Relaxed);
            eprintln!("toolgate: reload ({trigger}) applied a widening change:");
            for line in diff.widening_lines() {
                eprintln!(
                    "toolgate:   widening: {}",
                    toolgate_loader::log_text::escape(&line)
                );
            }
        }
    }

    /// Adds what the held bundle's manifest says to the pending change, if the bundle held is
    /// still the one with `digest`.
    #[cfg(feature = "bundles")]
    pub fn describe_pending(&self, digest: &str, manifest: Value) {
        if let Ok(mut p) = self.pending.lock() {
            if let Some(p) = p.as_mut().filter(|p| p.digest.as_deref() == Some(digest)) {
                p.manifest = manifest;
            }
        }
    }

    /// The digest of what is held, if anything is.
    pub fn pending_digest(&self) -> Option<String> {
        self.pending
            .lock()
            .ok()
            .and_then(|p| p.as_ref().and_then(|p| p.digest.clone()))
    }

    /// The held change for `GET /v1/policies`, or `null`.
    pub fn pending_json(&self) -> Value {
        let pending = self.pending.lock().map(|p| p.clone()).unwrap_or(None);
        match pending {
            None => Value::Null,
            Some(p) => json!({
                "at_ms": p.at_ms,
                "trigger": p.trigger,
                "summary": p.summary,
                "diff": p.diff,
                "digest": p.digest,
                "bundle": p.manifest,
                "apply_with": apply_with(p.digest.as_deref()),
            }),
        }
    }

    /// The gate's lines of `/metrics`.
    pub fn render_metrics(&self) -> String {
        let pending = self.pending.lock().map(|p| p.is_some()).unwrap_or(false);
        let mut out = String::new();
        for (name, help, kind, v) in [
            (
                "toolgate_reloads_held_total",
                "Reloads held back because the new policies widen what is allowed.",
                "counter",
                self.held.load(Relaxed),
            ),
            (
                "toolgate_reloads_widening_applied_total",
                "Widening reloads applied (explicit reload, SIGHUP or widening=allow).",
                "counter",
                self.applied_widening.load(Relaxed),
            ),
            (
                "toolgate_reload_pending",
                "1 while a widening change is held back and the old policies keep serving.",
                "gauge",
                u64::from(pending),
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
            );
        }
        out
    }
}

/// Why a reload swapped nothing in; the serving set stays.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The new set could not be loaded or was refused; the diagnostics say why.
    #[error("{0}")]
    Failed(String),
    /// The reload gate held the change back: it widens, and nobody asked for it.
    #[error("{0}")]
    Held(String),
    /// An explicit reload found another bundle or directory set than the one reported under
    /// `pending` (or named by `digest`), and applied nothing.
    #[error("{0}")]
    Changed(String),
}

/// What installing a new policy set needs of the server: implemented by its state, so a
/// component that brings sets (the bundle poller) reaches the one install path without
/// naming the state that holds it.
#[cfg_attr(not(feature = "bundles"), allow(dead_code))]
pub trait Installer: Send + Sync + 'static {
    /// The serving set's generation.
    fn generation(&self) -> u64;
    /// Whether a set with warnings is refused (`--deny-warnings`).
    fn deny_warnings(&self) -> bool;
    /// The reload gate's mode and held change.
    fn gate(&self) -> &GateState;
    /// Swaps in the set `build` makes through the server's one install path (the reload
    /// gate, then the store): `source` is how the gate treats it; `digest` names a bundle,
    /// shown with a held change.
    #[cfg(feature = "bundles")]
    fn install_set<F>(
        self: std::sync::Arc<Self>,
        trigger: &str,
        source: Source,
        digest: Option<String>,
        build: F,
    ) -> impl std::future::Future<Output = Result<u64, ReloadError>> + Send
    where
        F: FnOnce(u64) -> Result<PolicySet, crate::loader::LoadError> + Send + 'static;
}
