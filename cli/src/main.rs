//! `toolgate`: check policies, evaluate tool-call batches and offer tools from the command line.

mod command;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Decides which tool calls an LLM agent may run, from a compiled policy.
#[derive(Parser)]
#[command(name = "toolgate", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and compile policies; print errors and warnings.
    Check(command::check::Args),
    /// Show what a new policy allows that the old one denied (files or directories).
    Diff(command::diff::Args),
    /// Judge one request against a policy and print the response JSON.
    Eval(command::eval::Args),
    /// Show which of the executor's tools the model may see in a turn, with requirement text.
    Offer(command::offer::Args),
    /// Rewrite policies in the canonical layout (`--check`: only report the ones that differ).
    Fmt(command::fmt::Args),
    /// Run the decision server over a directory of policies, or a signed bundle.
    // Boxed: its many flags make it far larger than the other commands' arguments.
    Serve(Box<command::serve::Args>),
    /// Run example tests and check invariants of policies (files or directories).
    Test(command::test::Args),
    /// Answer a coding agent's hook event (Claude Code, Gemini CLI, Cursor) from a policy.
    Hook(command::hook::Args),
    /// Run an MCP proxy that offers and forwards only the tool calls the policy allows.
    // Boxed, as `serve`: its flags (the listener's, the log's) make it large.
    Mcp(Box<command::mcp::Args>),
    /// Open a policy file in the playground page, on a local server (prints its address).
    Playground(command::playground::Args),
    /// Signed policy bundles: make a key, build a bundle, inspect one.
    Bundle(command::bundle::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `ring` as the process's TLS provider, before any client is built: rustls needs one for
    // the MCP proxy's https upstream and the server's own clients (a second install, as the
    // server's, changes nothing).
    let _ = rustls::crypto::ring::default_provider().install_default();
    match cli.command {
        Command::Check(args) => command::check::run(&args),
        Command::Diff(args) => command::diff::run(&args),
        Command::Eval(args) => command::eval::run(&args),
        Command::Offer(args) => command::offer::run(&args),
        Command::Fmt(args) => command::fmt::run(&args),
        Command::Serve(args) => command::serve::run(&args),
        Command::Test(args) => command::test::run(&args),
        Command::Hook(args) => command::hook::run(&args),
        Command::Mcp(args) => command::mcp::run(&args),
        Command::Playground(args) => command::playground::run(&args),
        Command::Bundle(args) => command::bundle::run(&args),
    }
}
