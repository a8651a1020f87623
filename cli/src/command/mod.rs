//! One module per subcommand, plus the input helpers they share.

pub mod check;
pub mod eval;
pub mod fmt;
pub mod hook;
pub mod mcp;
pub mod offer;
pub mod serve;
pub mod test;
mod tool_coverage;
mod tools_file;

use std::io::Read;

/// Reads a file, or standard input for `-`.
pub fn read_input(path: &str) -> Result<String, String> {
    if path == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        Ok(s)
    } else {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read `{path}`: {e}"))
    }
}

/// The name a path is shown under in diagnostics.
pub fn display_name(path: &str) -> &str {
    if path == "-" {
        "<stdin>"
    } else {
        path
    }
}

/// Compiles a policy read from `path`, resolving `use stdlib::NAME` from the embedded
/// standard library and `use "FILE"` relative to the importing file (for standard input,
/// relative to the working directory).
pub fn compile_file(
    path: &str,
    text: &str,
) -> Result<toolgate_engine::Policy, toolgate_engine::CompileError> {
    toolgate_engine::Policy::compile_with(display_name(path), text, &resolve_import)
}

/// The CLI's import resolver: the embedded standard library, and files on disk.
pub fn resolve_import(
    target: &toolgate_engine::ImportTarget<'_>,
) -> Result<toolgate_engine::ModuleText, String> {
    use toolgate_engine::ImportTarget;
    match target {
        ImportTarget::Stdlib(_) => toolgate_engine::resolve_stdlib(target),
        ImportTarget::File { path, importer } => {
            if importer.starts_with("stdlib::") {
                return Err("a standard-library module cannot import files".into());
            }
            let base = match std::path::Path::new(importer).parent() {
                Some(dir) if *importer != "<stdin>" => dir.to_path_buf(),
                _ => std::path::PathBuf::new(),
            };
            let full = base.join(path);
            let text = std::fs::read_to_string(&full)
                .map_err(|e| format!("cannot read `{}`: {e}", full.display()))?;
            Ok(toolgate_engine::ModuleText {
                name: full.display().to_string(),
                text,
            })
        }
    }
}
