//! `toolgate`: check policies and evaluate tool-call batches from the command line.

mod command;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => command::check::run(&args),
        Command::Eval(args) => command::eval::run(&args),
    }
}
