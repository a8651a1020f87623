//! One module per subcommand, plus the input helpers they share.

mod against;
pub mod bundle;
pub mod check;
pub mod diff;
pub mod eval;
pub mod fmt;
pub mod hook;
mod http_args;
mod jwt_args;
mod log_args;
pub mod mcp;
pub mod offer;
mod paths;
pub mod playground;
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
        std::fs::read_to_string(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("no such file: `{path}`"),
            _ => format!("cannot read `{path}`: {e}"),
        })
    }
}

pub use toolgate_loader::{compile_file, display_name};
