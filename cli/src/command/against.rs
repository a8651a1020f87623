//! `toolgate test --against OLD`: in CI, a change that widens what the policies allow must be
//! acknowledged.
//!
//! The policies under test are diffed against OLD (`toolgate diff`). Every widening is a
//! failure unless its line (`MODULE: SUMMARY`, exactly as printed) is in the file given by
//! `--accept-widenings`, which is committed with the change so a reviewer sees each widening
//! in the pull request. Narrowings are printed and never fail.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use toolgate_engine::PolicySet;
use toolgate_prove::diff::DEFAULT_DIFF_CASES;
use toolgate_prove::Config;

/// Reads an acknowledgement file: one widening line each; blank lines and `#` comments
/// ignored.
fn accepted(path: &Path) -> Result<BTreeSet<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect())
}

/// Diffs `policies` (the files under test) against `old`; prints each change and returns
/// (passed, failed) counts: one per widening, passed only when acknowledged.
pub fn check(old: &Path, policies: &[PathBuf], accept: Option<&Path>, seed: u64) -> (usize, usize) {
    println!();
    println!("against {}", old.display());
    let fail = |why: String| {
        println!("against {} ... FAILED", old.display());
        println!("    {why}");
        (0, 1)
    };
    let old_set = match super::diff::load_set(old) {
        Ok(s) => s,
        Err(e) => return fail(format!("the baseline does not load: {e}")),
    };
    // A policy that does not compile already failed above; it is left out here.
    let new: Vec<_> = policies
        .iter()
        .filter_map(|p| toolgate_loader::load_file(p).ok())
        .collect();
    let new_set = match PolicySet::new(new, 0) {
        Ok(s) => s,
        Err(e) => return fail(e.to_string()),
    };
    let accepted = match accept.map(accepted).transpose() {
        Ok(a) => a.unwrap_or_default(),
        Err(e) => return fail(e),
    };
    let config = Config {
        cases: DEFAULT_DIFF_CASES,
        seed,
    };
    let diff = toolgate_prove::diff_sets(&old_set, &new_set, &config);
    for m in &diff.modules {
        for c in &m.narrowings {
            println!("narrowing {}: {}", m.module, c.summary());
        }
    }
    let (mut passed, mut failed) = (0, 0);
    let mut missing = Vec::new();
    for line in diff.widening_lines() {
        if accepted.contains(&line) {
            println!("widening {line} ... acknowledged");
            passed += 1;
        } else {
            println!("widening {line} ... FAILED");
            failed += 1;
            missing.push(line);
        }
    }
    if !missing.is_empty() {
        println!("    the policies allow calls the baseline denied, or are not proved not to (`undecided`); `toolgate diff` shows a request for each widening and the reason for each undecided point.");
        match accept {
            Some(p) => println!("    to accept them, add these lines to {}:", p.display()),
            None => println!("    to accept them, list these lines in a file and pass it as --accept-widenings FILE:"),
        }
        for line in &missing {
            println!("    {line}");
        }
    }
    if diff.widening_lines().is_empty() {
        println!("against {}: proved to allow nothing more", old.display());
    }
    (passed, failed)
}
