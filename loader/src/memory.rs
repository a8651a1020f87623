//! Policies held in memory (a verified bundle): the same rules as on disk, with every
//! `use "FILE"` resolved inside the given files and never on the machine's disk.
//!
//! File names are bundle paths: `/`-separated, relative, without `.` or `..` components.
//! An import is joined to its importer's folder and normalised; one that climbs above the
//! bundle's root, or names a file the bundle does not hold, fails to compile.

use crate::{compile_all, is_policy_name, LoadError};
use std::collections::BTreeMap;
use toolgate_engine::{ImportError, ImportTarget, ModuleText, PolicySet};

/// Joins `path`, as written in a `use` of the file `importer`, to the importer's folder and
/// normalises it to a bundle path. An absolute path, or one that climbs above the root, is an
/// error.
pub fn join_import(importer: &str, path: &str) -> Result<String, ImportError> {
    if path.starts_with('/') || path.contains('\\') {
        return Err(ImportError::NotRelative { path: path.into() });
    }
    let mut parts: Vec<&str> = importer.split('/').collect();
    parts.pop();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(ImportError::OutsideRoot {
                        path: path.into(),
                        importer: importer.into(),
                    });
                }
            }
            name => parts.push(name),
        }
    }
    Ok(parts.join("/"))
}

/// Resolves an import against `files` only: the embedded standard library, and bundle
/// paths relative to the importing file.
pub fn resolve_in(
    files: &BTreeMap<String, String>,
    target: &ImportTarget<'_>,
) -> Result<ModuleText, ImportError> {
    match target {
        ImportTarget::Stdlib(_) => toolgate_engine::resolve_stdlib(target),
        ImportTarget::File { path, importer } => {
            if importer.starts_with("stdlib::") {
                return Err(ImportError::FileFromStdlib);
            }
            let name = join_import(importer, path)?;
            match files.get(&name) {
                Some(text) => Ok(ModuleText {
                    name,
                    text: text.clone(),
                }),
                None => Err(ImportError::NotInBundle { name }),
            }
        }
    }
}

/// The policies among `files`: every `*.gate` file at the root except `*.invariants.gate`,
/// the same choice [`crate::policy_files`] makes in a directory.
pub fn policy_names(files: &BTreeMap<String, String>) -> impl Iterator<Item = &str> {
    files
        .keys()
        .map(String::as_str)
        .filter(|n| !n.contains('/') && is_policy_name(n))
}

/// Compiles the policies among `files` into one set, all or nothing, resolving imports
/// inside `files` only.
pub fn load_files(
    files: &BTreeMap<String, String>,
    generation: u64,
    deny_warnings: bool,
) -> Result<PolicySet, LoadError> {
    let sources = policy_names(files).map(|n| (n.to_string(), files[n].clone()));
    let resolve = |t: &ImportTarget<'_>| resolve_in(files, t);
    let policies = compile_all(sources, &resolve, deny_warnings)?;
    if policies.is_empty() {
        return Err(LoadError::NoPolicies {
            dir: "<bundle>".into(),
        });
    }
    Ok(PolicySet::new(policies, generation)?)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn files(list: &[(&str, &str)]) -> BTreeMap<String, String> {
        list.iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn imports_join_the_importers_folder_and_may_not_climb_out() {
        assert_eq!(join_import("a.gate", "sub/x.gate").unwrap(), "sub/x.gate");
        assert_eq!(join_import("sub/x.gate", "../y.gate").unwrap(), "y.gate");
        assert_eq!(
            join_import("sub/x.gate", "./z/../w.gate").unwrap(),
            "sub/w.gate"
        );
        assert!(join_import("a.gate", "../etc/passwd").is_err());
        assert!(join_import("sub/x.gate", "../../y.gate").is_err());
        assert!(join_import("a.gate", "/etc/passwd").is_err());
    }

    #[test]
    fn a_bundle_resolves_imports_inside_itself_only() {
        let ok = files(&[
            (
                "main.gate",
                "module main\nuse \"sub/shared.gate\"\nread fetch\nstage s { tools [fetch] }\n",
            ),
            (
                "sub/shared.gate",
                "module shared\nhosts docs { allow [\"docs.example.com\"] }\n",
            ),
        ]);
        let set = load_files(&ok, 1, false).unwrap();
        assert_eq!(set.len(), 1, "the imported file is not a policy of its own");
        // The same import with the file missing from the bundle fails, whatever is on disk.
        let missing = files(&[(
            "main.gate",
            "module main\nuse \"../../../../../../etc/hostname\"\nread fetch\nstage s { tools [fetch] }\n",
        )]);
        let err = load_files(&missing, 1, false).unwrap_err().to_string();
        assert!(err.contains("outside the policy directory"), "{err}");
    }
}
