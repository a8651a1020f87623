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
                .filter(|p| is_policy_file(p))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// A `*.gate` file that is a policy: `NAME.invariants.gate` files hold invariants for
/// `toolgate test` and are never served.
fn is_policy_file(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    name.ends_with(".gate") && !name.ends_with(".invariants.gate") && p.is_file()
}

/// Compiles every policy in `dir` into a set. Any failure fails the whole load, with the
/// rendered diagnostics of every failing file; with `deny_warnings`, so does any warning.
pub fn load_dir(dir: &Path, generation: u64, deny_warnings: bool) -> Result<PolicySet, String> {
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
            Ok(text) => {
                let compiled = crate::command::compile_file(&name, &text);
                match compiled.and_then(|p| {
                    if deny_warnings {
                        p.deny_warnings()
                    } else {
                        Ok(p)
                    }
                }) {
                    Ok(p) => policies.push(p),
                    Err(e) => errors.push(e.render()),
                }
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors.join("\n"));
    }
    PolicySet::new(policies, generation).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invariants_files_beside_policies_are_not_served() {
        let dir = std::env::temp_dir().join(format!("toolgate-loader-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("a.gate"),
            "module a\nread x\nstage s { tools [x] }\n",
        )
        .unwrap();
        std::fs::write(dir.join("a.invariants.gate"), "invariants for a\n").unwrap();
        std::fs::write(dir.join("a.tests.json"), "[]").unwrap();
        let files = gate_files(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(files, [dir.join("a.gate")]);
    }
}
