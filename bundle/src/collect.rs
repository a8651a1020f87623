//! What goes into a bundle: a directory's policies, test and invariant files, and every file
//! the policies import, found by compiling them with a resolver that records what it reads.

use super::BundleError;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use toolgate_engine::{ImportError, ImportTarget, ModuleText, Policy};
use toolgate_loader::memory::join_import;
use toolgate_loader::LoadError;

/// The files of `dir` that belong in its bundle, by bundle path.
pub fn collect(dir: &Path) -> Result<BTreeMap<String, String>, BundleError> {
    let mut files = BTreeMap::new();
    let entries = std::fs::read_dir(dir).map_err(|source| BundleError::Io {
        action: "read",
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if path.is_file() && (name.ends_with(".gate") || name.ends_with(".tests.json")) {
            files.insert(name.to_string(), read(&path)?);
        }
    }
    if !files.keys().any(|n| toolgate_loader::is_policy_name(n)) {
        return Err(LoadError::NoPolicies {
            dir: dir.to_path_buf(),
        }
        .into());
    }
    let imported = RefCell::new(BTreeMap::new());
    let failure = RefCell::new(None);
    let resolve = |t: &ImportTarget<'_>| -> Result<ModuleText, ImportError> {
        let ImportTarget::File { path, importer } = t else {
            return toolgate_engine::resolve_stdlib(t);
        };
        let name = join_import(importer, path).inspect_err(|e| {
            failure.borrow_mut().get_or_insert_with(|| e.clone());
        })?;
        let text = match files.get(&name) {
            Some(text) => text.clone(),
            None => read(&dir.join(&name)).map_err(|e| ImportError::Unreadable {
                path: name.clone(),
                reason: e.to_string(),
            })?,
        };
        imported.borrow_mut().insert(name.clone(), text.clone());
        Ok(ModuleText { name, text })
    };
    let mut failures = Vec::new();
    for name in files.keys().filter(|n| toolgate_loader::is_policy_name(n)) {
        if let Err(e) = Policy::compile_with(name, &files[name], &resolve) {
            failures.push(e);
        }
    }
    if let Some(escape) = failure.into_inner() {
        return Err(BundleError::Import(escape));
    }
    if !failures.is_empty() {
        return Err(LoadError::Compile(failures).into());
    }
    files.extend(imported.into_inner());
    Ok(files)
}

/// Reads one file of the bundle, within the engine's bound on a policy's source.
fn read(path: &Path) -> Result<String, BundleError> {
    let bytes = super::read_bounded(path, toolgate_engine::MAX_SOURCE_BYTES as u64)?;
    String::from_utf8(bytes).map_err(|_| BundleError::NotText(path.display().to_string()))
}
