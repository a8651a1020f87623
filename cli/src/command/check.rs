//! `toolgate check FILE...`: compile each policy and report diagnostics; with `--tools`, also
//! compare each policy with the executor's tool list.

use super::tool_coverage;
use super::tools_file::ToolsFile;
use super::{display_name, read_input};
use std::process::ExitCode;
use toolgate_lang::render_all;

/// Arguments of `toolgate check`.
#[derive(clap::Args)]
pub struct Args {
    /// Policy files (`.gate`) to check.
    #[arg(required = true)]
    files: Vec<String>,
    /// The executor's tool definitions (a JSON array, or an object with `tools`): every tool
    /// the policy never classified is an error, every policy tool missing from it a warning.
    #[arg(long)]
    tools: Option<String>,
    /// Treat every warning as an error (exit 1), including those of `--tools`.
    #[arg(long)]
    deny_warnings: bool,
}

/// Exit 0 when every file compiles (warnings allowed unless `--deny-warnings`) and, with
/// `--tools`, classifies every executor tool; 1 otherwise.
pub fn run(args: &Args) -> ExitCode {
    let mut failed = false;
    if args.tools.as_deref() == Some("-") && args.files.iter().any(|f| f == "-") {
        eprintln!("error: only one of --tools and the policy files can read standard input");
        return ExitCode::from(1);
    }
    let tools = match args.tools.as_deref().map(ToolsFile::read).transpose() {
        Ok(t) => t,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(1);
        }
    };
    for path in &args.files {
        let text = match read_input(path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {e}");
                failed = true;
                continue;
            }
        };
        let compiled = super::compile_file(path, &text);
        let compiled = if args.deny_warnings {
            compiled.and_then(toolgate_engine::Policy::deny_warnings)
        } else {
            compiled
        };
        match compiled {
            Ok(policy) => {
                if !policy.warnings().is_empty() {
                    eprintln!("{}", render_all(policy.warnings(), policy.source()));
                }
                println!(
                    "{}: ok: module `{}`, {} tools, {} stages, {} latches, {} rules, {} warning{}",
                    display_name(path),
                    policy.module(),
                    policy.tools().count(),
                    policy.stages().count(),
                    policy.latches().count(),
                    policy.rules().count(),
                    policy.warnings().len(),
                    if policy.warnings().len() == 1 {
                        ""
                    } else {
                        "s"
                    },
                );
                if let Some(tools) = &tools {
                    failed |= tool_coverage::report(&policy, tools, args.deny_warnings);
                }
            }
            Err(err) => {
                eprintln!("{}", err.render());
                let n = err.errors().count();
                println!(
                    "{}: {n} error{}",
                    display_name(path),
                    if n == 1 { "" } else { "s" }
                );
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
