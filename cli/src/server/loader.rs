//! Loading a policy directory: compile every `*.gate` file, all or nothing.

use std::path::{Path, PathBuf};
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

/// A cheap summary of the directory (names, sizes, modification times) to notice changes.
pub fn fingerprint(dir: &Path) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    let mut out: Vec<_> = gate_files(dir)
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

fn gate_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "gate") && p.is_file())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Compiles every policy in `dir` into a set. Any failure fails the whole load, with the
/// rendered diagnostics of every failing file.
pub fn load_dir(dir: &Path, generation: u64) -> Result<PolicySet, String> {
    let files = gate_files(dir);
    if files.is_empty() {
        return Err(format!("no `.gate` files in `{}`", dir.display()));
    }
    let mut policies = Vec::new();
    let mut errors = Vec::new();
    for f in &files {
        let name = f.display().to_string();
        match std::fs::read_to_string(f) {
            Err(e) => errors.push(format!("{name}: cannot read: {e}")),
            Ok(text) => match crate::command::compile_file(&name, &text) {
                Ok(p) => policies.push(p),
                Err(e) => errors.push(e.render()),
            },
        }
    }
    if !errors.is_empty() {
        return Err(errors.join("\n"));
    }
    PolicySet::new(policies, generation).map_err(|e| e.to_string())
}
