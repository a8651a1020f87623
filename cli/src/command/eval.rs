//! `toolgate eval --policy FILE --input FILE [--shadow NEW]`: judge one request, print the
//! response; with `--shadow`, judge it with a second policy too and show where they differ,
//! by the same comparison as the server's shadow mode (`toolgate_server::shadow_flip`).

use super::{display_name, read_input};
use serde_json::{json, Value};
use std::process::ExitCode;
use toolgate_engine::{CompileError, Decision, Policy, Request, Response};
use toolgate_server::{decision_word, shadow_flip};

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
    #[arg(long, conflicts_with = "shadow")]
    explain: bool,
    /// Judge the request with this policy too (a stricter one to roll out, say) and show
    /// both: as JSON, the response plus `shadow` (the other policy's response) and `flips`
    /// (the calls they decide differently); in text, each such call marked `FLIP`. The exit
    /// status is as without it.
    #[arg(long, value_name = "FILE")]
    shadow: Option<String>,
    /// `json` (the default): the response as JSON; `text`: one line per call.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    format: Format,
}

/// How `eval` prints its answer.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// The response JSON (with `--shadow`, both and the flips).
    Json,
    /// A line per call.
    Text,
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

/// The policy in `path`, or the error to print: its diagnostics in one paragraph, back to
/// back with no blank lines between them.
fn load(path: &str, what: &str) -> Result<Policy, String> {
    let text = read_input(path).map_err(|e| format!("error: {e}"))?;
    super::compile_file(path, &text).map_err(|e: CompileError| {
        let rendered: String = e
            .diagnostics
            .iter()
            .map(|d| d.render(&e.source_file))
            .collect();
        format!("error: {what} does not compile\n{}", rendered.trim_end())
    })
}

fn eval(args: &Args) -> Result<String, String> {
    let policy = load(&args.policy, "policy")?;
    let shadow = match &args.shadow {
        Some(path) => Some(load(path, "shadow policy")?),
        None => None,
    };
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
    let shadowed = match &shadow {
        Some(shadow) => {
            shadow.check_request(&request).map_err(|e| {
                format!(
                    "error: {}: for the shadow policy: {e}",
                    display_name(&args.input)
                )
            })?;
            Some(shadow.decide(&request))
        }
        None => None,
    };
    if args.format == Format::Text {
        return Ok(text_report(&response, shadowed.as_ref()));
    }
    // With `--shadow`, the response as without it (so `.decisions` is still the live
    // policy's), plus `shadow` (the shadow policy's response) and `flips`.
    let value = serde_json::to_value(&response).map(|mut v| {
        if let Some(s) = &shadowed {
            v["flips"] = Value::Array(flips(&response, s));
            v["shadow"] = json!(s);
        }
        v
    });
    let json = value.and_then(|v| {
        if args.compact {
            serde_json::to_string(&v)
        } else {
            serde_json::to_string_pretty(&v)
        }
    });
    json.map_err(|e| format!("error: cannot write the response: {e}"))
}

/// The calls `shadow` decides otherwise than `live`, as the server's shadow mode counts
/// them: `{id, tool, from, to, rule}`.
fn flips(live: &Response, shadow: &Response) -> Vec<Value> {
    live.decisions
        .iter()
        .zip(&shadow.decisions)
        .filter_map(|(l, s)| {
            let rule = shadow_flip(l, s)?;
            Some(json!({
                "id": l.id,
                "tool": l.tool,
                "from": decision_word(l),
                "to": decision_word(s),
                "rule": rule,
            }))
        })
        .collect()
}

/// `--format text`: a line per call with its decision, and with `--shadow` the shadow's,
/// a flipped call marked `FLIP`, then how many flipped.
fn text_report(live: &Response, shadow: Option<&Response>) -> String {
    let mut out = String::new();
    let mut flipped = 0;
    for (i, l) in live.decisions.iter().enumerate() {
        out.push_str(&format!("{} `{}`: {}", l.id, l.tool, decision_text(l)));
        if let Some(s) = shadow.and_then(|s| s.decisions.get(i)) {
            out.push_str(&format!("; shadow: {}", decision_text(s)));
            if let Some(rule) = shadow_flip(l, s) {
                flipped += 1;
                out.push_str(&format!(
                    "  FLIP {} -> {} (`{rule}`)",
                    decision_word(l),
                    decision_word(s)
                ));
            }
        }
        out.push('\n');
    }
    if let Some(s) = shadow {
        out.push_str(&format!(
            "{flipped} of {} calls flip: `{}` rev {} -> shadow `{}` rev {}",
            live.decisions.len(),
            live.policy,
            live.revision,
            s.policy,
            s.revision
        ));
    }
    out.trim_end().to_string()
}

/// One decision in words: `allow`, or `deny (KIND) by `RULE`` (`ask` likewise).
fn decision_text(d: &Decision) -> String {
    if d.allow {
        return match (d.fail_open, &d.approval) {
            (true, _) => "allow (a rule failed open)".into(),
            (false, Some(_)) => "allow (approved)".into(),
            _ => "allow".into(),
        };
    }
    let mut text = decision_word(d).to_string();
    if let Some(kind) = d.kind {
        text.push_str(&format!(" ({})", kind.as_str()));
    }
    if let Some(rule) = &d.rule {
        text.push_str(&format!(" by `{rule}`"));
    }
    text
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
