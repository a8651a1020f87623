//! `toolgate check FILE...`: compile each policy and report diagnostics.

use super::{display_name, read_input};
use std::process::ExitCode;
use toolgate_engine::Policy;
use toolgate_lang::render_all;

/// Arguments of `toolgate check`.
#[derive(clap::Args)]
pub struct Args {
    /// Policy files (`.gate`) to check.
    #[arg(required = true)]
    files: Vec<String>,
}

/// Exit 0 when every file compiles (warnings allowed), 1 when any has errors.
pub fn run(args: &Args) -> ExitCode {
    let mut failed = false;
    for path in &args.files {
        let text = match read_input(path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {e}");
                failed = true;
                continue;
            }
        };
        match Policy::compile(display_name(path), &text) {
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
