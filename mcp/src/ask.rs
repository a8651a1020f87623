//! A call the policy asks a person about (`ask when`, a latch's `asks`), put to the person at
//! the client through MCP elicitation.
//!
//! The proxy sends a form with one required boolean, `approve`, naming the tool, its
//! arguments and the policy's reason. Only an accepted form with `approve: true` is a yes;
//! the call is then judged again with the ask's approval digest in `facts.approvals`, so the
//! engine, not the proxy, turns exactly that call into an allow. A declined or cancelled form,
//! `approve: false`, an answer that does not parse, a client that does not declare form
//! elicitation, a protocol that forbids server-to-client requests (`2026-07-28`), or no answer
//! within the call timeout all leave the call refused with the ask's reason: asking fails
//! closed.

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, Peer};
use rmcp::RoleServer;
use serde_json::Value;
use std::time::Duration;

/// The most characters of a call's arguments shown in the form.
const MAX_SHOWN_ARGS: usize = 2_000;

/// What the person said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Asked {
    /// The form was accepted with `approve: true`.
    Approved,
    /// The person said no (declined, cancelled, or `approve: false`); why, for the refusal.
    Refused(&'static str),
    /// Nobody could be asked, or no usable answer came: the ask stays a refusal.
    Unanswered,
}

/// Whether the client takes form elicitation from this proxy.
pub(crate) fn can_ask(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
}

/// Asks the person at the client whether `tool` may run with `args`, for `reason`; waits at
/// most `timeout`.
pub(crate) async fn person(
    peer: &Peer<RoleServer>,
    tool: &str,
    args: &Value,
    reason: &str,
    timeout: Duration,
) -> Asked {
    if !can_ask(peer) {
        return Asked::Unanswered;
    }
    let Ok(schema) = ElicitationSchema::builder()
        .required_bool_property("approve", |b| {
            b.title("Approve")
                .description("Let exactly this call run once")
        })
        .build()
    else {
        return Asked::Unanswered;
    };
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message(tool, args, reason),
        requested_schema: schema,
    };
    match peer
        .create_elicitation_with_timeout(params, Some(timeout))
        .await
    {
        Ok(result) => match result.action {
            ElicitationAction::Accept => {
                match result.content.as_ref().and_then(|c| c.get("approve")) {
                    Some(Value::Bool(true)) => Asked::Approved,
                    Some(Value::Bool(false)) => Asked::Refused("The person did not approve it."),
                    _ => Asked::Unanswered,
                }
            }
            ElicitationAction::Decline => Asked::Refused("The person declined it."),
            ElicitationAction::Cancel => Asked::Refused("The person cancelled the request."),
            _ => Asked::Unanswered,
        },
        Err(_) => Asked::Unanswered,
    }
}

/// The form's text: the tool, its arguments (cut to [`MAX_SHOWN_ARGS`] characters) and the
/// policy's reason.
fn message(tool: &str, args: &Value, reason: &str) -> String {
    let mut shown = args.to_string();
    if shown.chars().count() > MAX_SHOWN_ARGS {
        shown = shown.chars().take(MAX_SHOWN_ARGS).collect::<String>() + "…";
    }
    format!("toolgate asks: may the agent call `{tool}` with {shown}?\n{reason}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_names_the_tool_and_cuts_long_arguments() {
        let long = serde_json::json!({"text": "x".repeat(5_000)});
        let m = message("refund", &long, "Refunds above 50 need a person.");
        assert!(m.starts_with("toolgate asks: may the agent call `refund` with {"));
        assert!(m.ends_with("…?\nRefunds above 50 need a person."));
        assert!(m.chars().count() < MAX_SHOWN_ARGS + 200);
    }
}
