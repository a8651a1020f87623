//! Every file and directory ARCHITECTURE.md names exists, so the map a newcomer reads first
//! cannot drift from the tree (issue 23). A name is a backticked path with a `/` in it; it
//! is looked up from the repository root, then under the section's own directory (the
//! `### \`DIR/\`` heading it sits under), at any depth there; outside a crate's section,
//! anywhere in the tree.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The backticked paths of `text`, each with the section directory it appears under.
fn named_paths(text: &str) -> Vec<(Option<String>, String)> {
    let mut section = None;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            section = line
                .strip_prefix("### `")
                .and_then(|heading| heading.split('`').next())
                .filter(|d| d.ends_with('/'))
                .map(|d| d.trim_end_matches('/').to_string());
        }
        for (i, piece) in line.split('`').enumerate() {
            if i % 2 == 0 {
                continue;
            }
            let path = piece
                .split(['#', ' '])
                .next()
                .unwrap_or("")
                .split("::")
                .next()
                .unwrap_or("");
            // A file (a dot in its last part) or a directory (a trailing slash), not a protocol
            // method such as `tools/list`.
            let last = path.rsplit('/').next().unwrap_or("");
            let plain = path.contains('/')
                && (path.ends_with('/') || last.contains('.'))
                && !path.starts_with('/')
                && !path.contains(['{', '*', '<', '='])
                && !path.contains("NAME")
                && !path.contains("://")
                && path
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c));
            if plain {
                out.push((section.clone(), path.to_string()));
            }
        }
    }
    out
}

/// Whether `dir` holds `name` at any depth (build output and installed packages aside).
fn found_under(dir: &Path, name: &str) -> bool {
    if dir.join(name).exists() {
        return true;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let skip = ["target", "node_modules", ".git", ".venv"];
        e.file_type().is_ok_and(|t| t.is_dir())
            && !skip.contains(&e.file_name().to_string_lossy().as_ref())
            && found_under(&e.path(), name)
    })
}

#[test]
fn every_path_architecture_md_names_exists() {
    let root = root();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap_or_default();
    let named = named_paths(&text);
    assert!(named.len() > 50, "found only {} paths", named.len());
    let missing: Vec<String> = named
        .iter()
        .filter(|(section, path)| {
            let name = path.trim_end_matches('/');
            let base = section.as_ref().map_or(root.clone(), |s| root.join(s));
            !root.join(name).exists() && !found_under(&base, name)
        })
        .map(|(section, path)| format!("{path} (under {})", section.as_deref().unwrap_or("/")))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:#?}"
    );
}
