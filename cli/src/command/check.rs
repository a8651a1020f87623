//! `toolgate check PATH...`: compile each policy and report diagnostics; with `--tools`, also
//! compare each policy with the executor's tool list. A directory stands for every `.gate`
//! file under it; a `NAME.invariants.gate` file is compiled against `NAME.gate` beside it.

use super::tool_coverage;
use super::tools_file::ToolsFile;
use super::{display_name, read_input};
use std::process::ExitCode;
use toolgate_lang::render_all;

/// Arguments of `toolgate check`.
#[derive(clap::Args)]
pub struct Args {
    /// Policy files (`.gate`, `.invariants.gate`) or directories of them to check.
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
    for path in &super::paths::gate_files(&args.files, true) {
        if let Some(policy_path) = super::paths::policy_of_invariants(path) {
            failed |= !check_invariants(path, &policy_path, args.deny_warnings);
            continue;
        }
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
                report_errors(path, &err);
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

/// Compiles an invariants file against the policy beside it; true when it compiles (and,
/// with `deny_warnings`, has no warning).
fn check_invariants(path: &str, policy_path: &str, deny_warnings: bool) -> bool {
    let read = |p: &str| read_input(p).map_err(|e| eprintln!("error: {e}")).ok();
    let Some(text) = read(path) else {
        return false;
    };
    if !std::path::Path::new(policy_path).is_file() {
        eprintln!(
            "error: {}: invariants are checked against their policy, and `{policy_path}` does not exist",
            display_name(path)
        );
        return false;
    }
    let Some(policy_text) = read(policy_path) else {
        return false;
    };
    let policy = match super::compile_file(policy_path, &policy_text) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{}", e.render());
            println!(
                "{}: not checked: its policy `{}` does not compile",
                display_name(path),
                display_name(policy_path)
            );
            return false;
        }
    };
    match toolgate_engine::Invariants::compile(&policy, path, &text) {
        Ok(inv) => {
            let source = toolgate_lang::SourceFile::new(path, text.as_str());
            if !inv.warnings().is_empty() {
                eprintln!("{}", render_all(inv.warnings(), &source));
            }
            let n = inv.len();
            println!(
                "{}: ok: {n} invariant{} of module `{}`, {} warning{}",
                display_name(path),
                if n == 1 { "" } else { "s" },
                policy.module(),
                inv.warnings().len(),
                if inv.warnings().len() == 1 { "" } else { "s" },
            );
            !deny_warnings || inv.warnings().is_empty()
        }
        Err(err) => {
            report_errors(path, &err);
            false
        }
    }
}

/// The diagnostics on stderr and `FILE: N errors` on stdout.
fn report_errors(path: &str, err: &toolgate_engine::CompileError) {
    eprintln!("{}", err.render());
    let n = err.errors().count();
    println!(
        "{}: {n} error{}",
        display_name(path),
        if n == 1 { "" } else { "s" }
    );
}
