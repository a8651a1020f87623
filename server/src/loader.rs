//! Loading a policy directory: compile every `*.gate` file, all or nothing.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;
use toolgate_engine::PolicySet;

/// The outcome of the last load attempt, shown by `GET /v1/policies`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadReport {
    /// Whether it swapped in a new set.
    pub ok: bool,
    /// Unix time of the attempt, in milliseconds.
    pub at_ms: u128,
    /// What triggered it.
    pub trigger: String,
    /// Rendered diagnostics when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl LoadReport {
    /// An attempt made now by `trigger`.
    pub fn now(ok: bool, trigger: &str, error: Option<String>) -> LoadReport {
        LoadReport {
            ok,
            at_ms: crate::clock::now_ms(),
            trigger: trigger.to_string(),
            error,
        }
    }
}

/// What a policy store's loads came to: the last one that swapped a set in, and the last
/// attempt. The live set and the shadow set (`--shadow`) each keep one.
#[derive(Debug, Default)]
pub struct Loads {
    last_ok: Mutex<Option<LoadReport>>,
    last_attempt: Mutex<Option<LoadReport>>,
}

impl Loads {
    /// Records a load that swapped its set in: the last success and the last attempt.
    pub fn applied(&self, report: LoadReport) {
        if let Ok(mut g) = self.last_ok.lock() {
            *g = Some(report.clone());
        }
        self.attempted(report);
    }

    /// Records an attempt that swapped nothing in.
    pub fn attempted(&self, report: LoadReport) {
        if let Ok(mut g) = self.last_attempt.lock() {
            *g = Some(report);
        }
    }

    /// The last load that swapped a set in.
    pub fn last_ok(&self) -> Option<LoadReport> {
        self.last_ok.lock().map(|g| g.clone()).unwrap_or(None)
    }

    /// The last attempt, successful or not.
    pub fn last_attempt(&self) -> Option<LoadReport> {
        self.last_attempt.lock().map(|g| g.clone()).unwrap_or(None)
    }
}

/// Why a policy set was not built. The serving set stays; the error's text (the rendered
/// diagnostics, or the refusal) is what the log, `/health`, `/v1/policies` and a failed
/// `POST /v1/reload` show.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A policy file or the directory did not load: unreadable, or not compiling.
    #[error(transparent)]
    Files(#[from] toolgate_loader::LoadError),
    /// `--deny-warnings`, and a policy has warnings: they are the rendered text.
    #[error("{0}")]
    Warnings(String),
    /// Two policies of the set declare one module.
    #[error(transparent)]
    Set(#[from] toolgate_engine::DuplicateModule),
    /// The directory changed while it was read (a file still being written).
    #[error("`{}` changed while it was being read; it is loaded again once it is stable (deploy with an atomic rename)", .0.display())]
    Changed(PathBuf),
    /// A signed bundle was refused: not verified, another scope, an old serial, or policies
    /// that do not compile.
    #[cfg(feature = "bundles")]
    #[error(transparent)]
    Bundle(#[from] BundleRefused),
    /// The task building the set stopped before it finished (it panicked).
    #[error("the load task stopped")]
    Stopped,
}

/// Why a downloaded bundle was not served. Each message names the bundle's URL; the serving
/// set stays.
#[cfg(feature = "bundles")]
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BundleRefused {
    /// Its signature, digest or archive did not verify (or it is over a bound).
    #[error("bundle {url} refused: {source}")]
    Unverified {
        /// The bundle's URL.
        url: String,
        /// Why.
        #[source]
        source: toolgate_bundle::BundleError,
    },
    /// It was built for another scope than the server's `--scope`.
    #[error("bundle {url} refused: its scope is `{found}`, and this server serves scope `{serving}` (--scope)")]
    Scope {
        /// The bundle's URL.
        url: String,
        /// The bundle's scope.
        found: String,
        /// The server's.
        serving: String,
    },
    /// Its serial is below `--min-serial`.
    #[error("bundle {url} refused: serial {serial} is below --min-serial {min}")]
    BelowMinimum {
        /// The bundle's URL.
        url: String,
        /// The bundle's serial.
        serial: u64,
        /// `--min-serial`.
        min: u64,
    },
    /// Its serial is not above the one serving (a rollback or a replay), and this reload may
    /// not roll back.
    #[error("bundle {url} refused: serial {serial} is not above serial {floor}, which is serving (a rollback or a replay); to apply an older bundle, start the server with --allow-rollback and reload explicitly (POST /v1/reload or SIGHUP)")]
    NotNewer {
        /// The bundle's URL.
        url: String,
        /// The bundle's serial.
        serial: u64,
        /// The serving bundle's serial.
        floor: u64,
    },
    /// Its policies do not compile (or warn, under `--deny-warnings`).
    #[error("bundle {url} refused: its policies do not compile:\n{source}")]
    Compile {
        /// The bundle's URL.
        url: String,
        /// The diagnostics.
        #[source]
        source: toolgate_loader::LoadError,
    },
}

/// Runs `build` (which compiles policies, and may take a while) on tokio's blocking pool, so
/// a load never holds up the async threads that serve decisions.
pub async fn off_thread<T: Send + 'static>(
    build: impl FnOnce() -> Result<T, LoadError> + Send + 'static,
) -> Result<T, LoadError> {
    tokio::task::spawn_blocking(build)
        .await
        .unwrap_or(Err(LoadError::Stopped))
}

/// Says on stderr that a load of `what` (`reload`, `shadow reload`) failed and which
/// generation still serves. Diagnostics quote names and source lines from the files: any
/// control character in them is escaped, so no line of theirs reads as the server's.
pub fn say_failed(what: &str, trigger: &str, generation: u64, set: &PolicySet, diagnostics: &str) {
    eprintln!(
        "toolgate: {what} ({trigger}) failed; still serving generation {generation} ({}):\n{}",
        describe(set),
        toolgate_loader::log_text::escape_keeping_lines(diagnostics)
    );
}

/// A cheap summary of the directory (names, sizes, modification times) to notice changes.
pub fn fingerprint(dir: &Path) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    let mut out: Vec<_> = files(dir)
        .into_iter()
        .map(|p| {
            let meta = std::fs::metadata(&p).ok();
            let len = meta.as_ref().map_or(0, |m| m.len());
            let modified = meta.and_then(|m| m.modified().ok());
            (p, len, modified)
        })
        .collect();
    out.sort();
    out
}

/// Compiles every policy in `dir` into a set, all or nothing, with the rendered diagnostics
/// of every failing file as the error.
///
/// `dir` may be one policy file instead (`toolgate playground FILE`); `serve` refuses a file
/// before it starts.
pub fn load_dir(dir: &Path, generation: u64, deny_warnings: bool) -> Result<PolicySet, LoadError> {
    if dir.is_file() {
        return load_one(dir, generation, deny_warnings);
    }
    Ok(toolgate_loader::load_dir(dir, generation, deny_warnings)?)
}

/// The policy files to watch: those in the directory, or the one file.
fn files(dir: &Path) -> Vec<PathBuf> {
    if dir.is_file() {
        vec![dir.to_path_buf()]
    } else {
        toolgate_loader::policy_files(dir)
    }
}

fn load_one(file: &Path, generation: u64, deny_warnings: bool) -> Result<PolicySet, LoadError> {
    let mut policy = toolgate_loader::load_file(file)?;
    if deny_warnings {
        policy = policy
            .deny_warnings()
            .map_err(|e| LoadError::Warnings(e.render()))?;
    }
    Ok(PolicySet::new(vec![policy], generation)?)
}

/// What a set serves, for the reload log line: each module with its revision and file.
pub fn describe(set: &PolicySet) -> String {
    let parts: Vec<String> = set
        .iter()
        .map(|p| {
            format!(
                "{} rev {} ({})",
                p.module(),
                p.revision(),
                toolgate_loader::log_text::escape(p.source().name())
            )
        })
        .collect();
    if parts.is_empty() {
        "nothing".into()
    } else {
        parts.join(", ")
    }
}

/// [`load_dir`], refused when the directory changed while it was read (a file still being
/// written): the fingerprint is taken before and after, and must agree. The watcher sees the
/// change at its next poll and loads again.
pub fn load_complete(
    dir: &Path,
    generation: u64,
    deny_warnings: bool,
) -> Result<PolicySet, LoadError> {
    let before = fingerprint(dir);
    let set = load_dir(dir, generation, deny_warnings)?;
    if fingerprint(dir) != before {
        return Err(LoadError::Changed(dir.to_path_buf()));
    }
    Ok(set)
}
