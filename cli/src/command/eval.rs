//! `toolgate eval --policy FILE --input FILE`: judge one request, print the response.

use super::{display_name, read_input};
use std::process::ExitCode;
use toolgate_engine::{Policy, Request};

/// Arguments of `toolgate eval`.
#[derive(clap::Args)]
pub struct Args {
    /// The policy file (`.gate`).
    #[arg(long, short)]
    policy: String,
    /// The request JSON, or `-` for standard input.
    #[arg(long, short, default_value = "-")]
    input: String,
    /// Print the response on one line instead of indented.
    #[arg(long)]
    compact: bool,
    /// Print, for each call, every check that ran in order, what it looked at, and the
    /// decision, instead of the response JSON.
    #[arg(long)]
    explain: bool,
}

/// Exit 0 whatever the decisions; 2 for a bad policy or a malformed request.
pub fn run(args: &Args) -> ExitCode {
    match eval(args) {
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

fn eval(args: &Args) -> Result<String, String> {
    let text = read_input(&args.policy).map_err(|e| format!("error: {e}"))?;
    let policy = super::compile_file(&args.policy, &text).map_err(|e| {
        // One paragraph: the diagnostics back to back, no blank lines between them.
        let rendered: String = e
            .diagnostics
            .iter()
            .map(|d| d.render(&e.source_file))
            .collect();
        format!("error: policy does not compile\n{}", rendered.trim_end())
    })?;
    let input = read_input(&args.input).map_err(|e| format!("error: {e}"))?;
    let request = Request::from_json(&input).map_err(|e| {
        format!(
            "error: {}: malformed request: {e}",
            display_name(&args.input)
        )
    })?;
    policy
        .check_request(&request)
        .map_err(|e| format!("error: {}: {e}", display_name(&args.input)))?;
    if args.explain {
        return Ok(explain_text(&policy, &request));
    }
    let response = policy.decide(&request);
    let json = if args.compact {
        serde_json::to_string(&response)
    } else {
        serde_json::to_string_pretty(&response)
    };
    json.map_err(|e| format!("error: cannot write the response: {e}"))
}

/// The `--explain` report: a block per call, a line per check, then the decision.
fn explain_text(policy: &Policy, request: &Request) -> String {
    let mut out = String::new();
    for (i, call) in policy.explain(request).iter().enumerate() {
        let d = &call.decision;
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("call {} `{}`\n", d.id, d.tool));
        for step in &call.steps {
            let mark = if step.passed { "pass" } else { "FAIL" };
            out.push_str(&format!("  {mark}  {}: {}\n", step.check, step.detail));
        }
        match (&d.kind, &d.rule) {
            (Some(kind), Some(rule)) => {
                out.push_str(&format!("  => denied ({}) by `{rule}`\n", kind.as_str()))
            }
            _ if d.fail_open => {
                out.push_str("  => allowed (a rule failed open: its facts were absent)\n")
            }
            _ => out.push_str("  => allowed\n"),
        }
    }
    out.trim_end().to_string()
}
