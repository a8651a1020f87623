//! Command-line paths to policy files: a directory stands for every `.gate` file under it.

use std::path::Path;

/// `paths` with each directory replaced by the `.gate` files under it (recursively, sorted;
/// `*.invariants.gate` included only when `invariants` is set). Files and `-` are kept as
/// given, so a file named explicitly is never skipped.
pub fn gate_files(paths: &[String], invariants: bool) -> Vec<String> {
    let mut out = Vec::new();
    for p in paths {
        let path = Path::new(p);
        if p != "-" && path.is_dir() {
            let mut found = Vec::new();
            walk(path, invariants, &mut found);
            found.sort();
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    out
}

fn walk(dir: &Path, invariants: bool, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() {
            walk(&p, invariants, out);
        } else if name.ends_with(".gate") && (invariants || !name.ends_with(".invariants.gate")) {
            out.push(p.display().to_string());
        }
    }
}

/// For `NAME.invariants.gate`, the policy file `NAME.gate` beside it.
pub fn policy_of_invariants(path: &str) -> Option<String> {
    path.strip_suffix(".invariants.gate")
        .map(|stem| format!("{stem}.gate"))
}
