//! Reading policies from disk, the one place that does it.
//!
//! The engine never does I/O; this crate is the file-system edge in front of it. The CLI,
//! the decision server, the language packages and the bundle builder all compile files
//! through here, so `use "FILE"` resolves the same way everywhere:
//!
//! - `use stdlib::NAME` comes from the standard library embedded in the engine;
//! - `use "FILE"` is read relative to the importing file (for standard input, relative to
//!   the working directory); a standard-library module cannot import files.
//!
//! A directory load ([`load_dir`]) is all or nothing: one failing file fails the load, and
//! the caller keeps whatever it served before.
//!
//! [`log_text`] escapes names that come from outside (file and archive entry names,
//! manifest fields, header values) on their way into a log line.

pub mod log_text;
pub mod memory;

use std::path::{Path, PathBuf};
use toolgate_engine::{
    CompileError, ImportError, ImportTarget, ModuleText, Policy, PolicySet, Resolver,
};

/// The name standard input is shown under in diagnostics.
pub const STDIN_NAME: &str = "<stdin>";

/// Why a policy or a directory of policies could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file could not be read.
    #[error("cannot read `{}`: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The directory holds no policy file.
    #[error("no `.gate` policy files in `{}`", dir.display())]
    NoPolicies {
        /// The directory.
        dir: PathBuf,
    },
    /// One or more files do not compile (or, with `deny_warnings`, warn).
    #[error("{}", render_failures(.0))]
    Compile(Vec<CompileError>),
    /// Two files declare the same module.
    #[error(transparent)]
    DuplicateModule(#[from] toolgate_engine::DuplicateModule),
}

fn render_failures(errors: &[CompileError]) -> String {
    errors
        .iter()
        .map(CompileError::render)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Compiles policy `text` read from `path`, resolving imports with [`resolve_import`].
/// `path` `-` stands for standard input.
pub fn compile_file(path: &str, text: &str) -> Result<Policy, CompileError> {
    Policy::compile_with(display_name(path), text, &resolve_import)
}

/// Reads and compiles the policy at `path`, with its imports.
pub fn load_file(path: &Path) -> Result<Policy, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    compile_file(&path.display().to_string(), &text).map_err(|e| LoadError::Compile(vec![e]))
}

/// The name a path is shown under in diagnostics: `-` is standard input.
pub fn display_name(path: &str) -> &str {
    if path == "-" {
        STDIN_NAME
    } else {
        path
    }
}

/// The import resolver for policies on disk: the embedded standard library, and files
/// relative to the importing file.
pub fn resolve_import(target: &ImportTarget<'_>) -> Result<ModuleText, ImportError> {
    match target {
        ImportTarget::Stdlib(_) => toolgate_engine::resolve_stdlib(target),
        ImportTarget::File { path, importer } => {
            if importer.starts_with("stdlib::") {
                return Err(ImportError::FileFromStdlib);
            }
            let base = match Path::new(importer).parent() {
                Some(dir) if *importer != STDIN_NAME => dir.to_path_buf(),
                _ => PathBuf::new(),
            };
            let full = base.join(path);
            let text = std::fs::read_to_string(&full).map_err(|e| ImportError::Unreadable {
                path: full.display().to_string(),
                reason: e.to_string(),
            })?;
            Ok(ModuleText {
                name: full.display().to_string(),
                text,
            })
        }
    }
}

/// The policy files directly in `dir`, sorted: every `*.gate` file except
/// `NAME.invariants.gate`, which holds invariants for `toolgate test` and is never served.
/// An unreadable directory has none.
pub fn policy_files(dir: &Path) -> Vec<PathBuf> {
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

/// Whether `p` is a policy file: a `*.gate` file that is not `*.invariants.gate`.
pub fn is_policy_file(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    is_policy_name(name) && p.is_file()
}

/// Whether a file name is a policy's: `*.gate` but not `*.invariants.gate`.
pub fn is_policy_name(name: &str) -> bool {
    name.ends_with(".gate") && !name.ends_with(".invariants.gate")
}

/// Compiles each `(name, text)` with `resolve`, all or nothing: every failing file is
/// reported; with `deny_warnings`, a warning fails its file too.
pub fn compile_all(
    sources: impl IntoIterator<Item = (String, String)>,
    resolve: &Resolver<'_>,
    deny_warnings: bool,
) -> Result<Vec<Policy>, LoadError> {
    let mut policies = Vec::new();
    let mut failures = Vec::new();
    for (name, text) in sources {
        let compiled = Policy::compile_with(&name, &text, resolve).and_then(|p| {
            if deny_warnings {
                p.deny_warnings()
            } else {
                Ok(p)
            }
        });
        match compiled {
            Ok(p) => policies.push(p),
            Err(e) => failures.push(e),
        }
    }
    if failures.is_empty() {
        Ok(policies)
    } else {
        Err(LoadError::Compile(failures))
    }
}

/// Compiles every policy in `dir` into one set, all or nothing. Every failing file is
/// reported; with `deny_warnings`, a warning fails its file too.
pub fn load_dir(dir: &Path, generation: u64, deny_warnings: bool) -> Result<PolicySet, LoadError> {
    let files = policy_files(dir);
    if files.is_empty() {
        return Err(LoadError::NoPolicies {
            dir: dir.to_path_buf(),
        });
    }
    let mut sources = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).map_err(|source| LoadError::Io {
            path: f.clone(),
            source,
        })?;
        sources.push((f.display().to_string(), text));
    }
    let policies = compile_all(sources, &resolve_import, deny_warnings)?;
    Ok(PolicySet::new(policies, generation)?)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("toolgate-loader-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn invariants_files_beside_policies_are_not_served() {
        let dir = scratch("inv");
        std::fs::write(
            dir.join("a.gate"),
            "module a\nread x\nstage s { tools [x] }\n",
        )
        .unwrap();
        std::fs::write(dir.join("a.invariants.gate"), "invariants for a\n").unwrap();
        std::fs::write(dir.join("a.tests.json"), "[]").unwrap();
        let files = policy_files(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(files, [dir.join("a.gate")]);
    }

    #[test]
    fn file_imports_resolve_relative_to_the_importer() {
        let dir = scratch("imp");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(
            dir.join("sub/shared.gate"),
            "module shared\nhosts docs { allow [\"docs.example.com\"] }\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("main.gate"),
            "module main\nuse \"sub/shared.gate\"\nread fetch\nstage s { tools [fetch] }\n",
        )
        .unwrap();
        let policy = load_file(&dir.join("main.gate"));
        std::fs::remove_dir_all(&dir).unwrap();
        let policy = policy.unwrap();
        assert_eq!(policy.module(), "main");
    }

    #[test]
    fn one_bad_file_fails_the_whole_directory_and_names_it() {
        let dir = scratch("bad");
        std::fs::write(
            dir.join("a.gate"),
            "module a\nread x\nstage s { tools [x] }\n",
        )
        .unwrap();
        std::fs::write(dir.join("b.gate"), "module b\nstage s { tools [nope] }\n").unwrap();
        let err = load_dir(&dir, 1, false).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        match &err {
            LoadError::Compile(failures) => assert_eq!(failures.len(), 1),
            other => panic!("expected a compile failure, got {other:?}"),
        }
        assert!(err.to_string().contains("b.gate"), "{err}");
    }

    #[test]
    fn an_empty_directory_is_an_error_not_an_empty_set() {
        let dir = scratch("empty");
        let err = load_dir(&dir, 1, false).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(err, LoadError::NoPolicies { .. }), "{err:?}");
    }
}
