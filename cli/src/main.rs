//! `toolgate`: check policies and evaluate tool-call batches from the command line.

mod command;
mod server;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Decides which tool calls an LLM agent may run, from a compiled policy.
#[derive(Parser)]
#[command(name = "toolgate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and compile policies; print errors and warnings.
    Check(command::check::Args),
    /// Judge one request against a policy and print the response JSON.
    Eval(command::eval::Args),
    /// Rewrite policies in the canonical layout (`--check`: only report the ones that differ).
    Fmt(command::fmt::Args),
    /// Run the decision server over a directory of policies.
    Serve(command::serve::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => command::check::run(&args),
        Command::Eval(args) => command::eval::run(&args),
        Command::Fmt(args) => command::fmt::run(&args),
        Command::Serve(args) => command::serve::run(&args),
    }
}
