//! `toolgate offer --policy FILE --tools FILE --facts FILE`: the tools to show the model.

use super::tools_file::ToolsFile;
use super::{display_name, read_input};
use serde_json::Value;
use std::process::ExitCode;
use toolgate_engine::{Facts, RequestError};

/// Arguments of `toolgate offer`.
#[derive(clap::Args)]
pub struct Args {
    /// The policy file (`.gate`).
    #[arg(long, short)]
    policy: String,
    /// The executor's tool definitions: a JSON array, or an object with `tools`, or an MCP
    /// `tools/list` result; each in OpenAI's, Anthropic's or MCP's shape.
    #[arg(long, short)]
    tools: String,
    /// The facts of the turn as JSON (`{"stage": .., "latched": ..}`), or `-` for standard
    /// input.
    #[arg(long, short)]
    facts: String,
    /// Print only the offered definitions (the array to send to the model API).
    #[arg(long)]
    only_tools: bool,
    /// Print on one line instead of indented.
    #[arg(long)]
    compact: bool,
}

/// Exit 0 with the offer on stdout; 2 for a bad policy, tool list or facts file.
pub fn run(args: &Args) -> ExitCode {
    match offer(args) {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("{message}");
            ExitCode::from(2)
        }
    }
}

fn offer(args: &Args) -> Result<String, String> {
    if args.tools == "-" && args.facts == "-" {
        return Err("error: only one of --tools and --facts can read standard input".into());
    }
    let text = read_input(&args.policy).map_err(|e| format!("error: {e}"))?;
    let policy = super::compile_file(&args.policy, &text)
        .map_err(|e| format!("error: policy does not compile\n{}", e.render().trim_end()))?;
    let tools = ToolsFile::read(&args.tools)?;
    let facts_text = read_input(&args.facts).map_err(|e| format!("error: {e}"))?;
    let name = display_name(&args.facts);
    let facts: Value = toolgate_engine::parse_json(&facts_text).map_err(|e| match e {
        RequestError::Json {
            line,
            column,
            message,
        } => format!("error: {name}:{line}:{column}: the facts are not valid JSON: {message}"),
        other => format!("error: {name}: malformed facts: {other}"),
    })?;
    // The facts go through the decision request's reader, so they are checked the same way.
    let facts =
        Facts::from_value(facts).map_err(|e| format!("error: {name}: malformed facts: {e}"))?;
    policy
        .check_facts(&facts)
        .map_err(|e| format!("error: {name}: malformed facts: {e}"))?;
    let offer = policy.offer(&facts, &tools.tools);
    let json = match (args.only_tools, args.compact) {
        (true, true) => serde_json::to_string(&offer.tools),
        (true, false) => serde_json::to_string_pretty(&offer.tools),
        (false, true) => serde_json::to_string(&offer),
        (false, false) => serde_json::to_string_pretty(&offer),
    };
    json.map_err(|e| format!("error: cannot write the offer: {e}"))
}
