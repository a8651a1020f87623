//! A call the policy asks a person about (`ask when`, a latch's `asks`), put to the person at
//! the client, in the client's own terms:
//!
//! - up to protocol `2025-11-25`, as an `elicitation/create` request the proxy sends and
//!   waits for ([`person`]);
//! - from `2026-07-28`, which forbids server-to-client requests, as an `InputRequiredResult`
//!   holding the same form ([`input_required`]); the client asks the person and calls the
//!   tool again with the answer in `inputResponses` and the proxy's `requestState` echoed,
//!   which [`answered`] reads.
//!
//! The form has one required boolean, `approve`, and names the tool, its arguments and the
//! policy's reason. Only an accepted form with `approve: true` is a yes; the call is then
//! judged again with the ask's approval digest in `facts.approvals`, so the engine, not the
//! proxy, turns exactly that call into an allow. A declined or cancelled form, `approve:
//! false`, an answer that does not parse, a client that does not declare form elicitation, an
//! answer to another call's ask, or no answer within the call timeout all leave the call
//! refused with the ask's reason: asking fails closed.

use rmcp::model::{
    CallToolRequestParams, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, InputRequest, InputRequiredResult, ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// The most characters of a call's arguments shown in the form.
const MAX_SHOWN_ARGS: usize = 2_000;

/// The key of the proxy's own input request in an `InputRequiredResult` and its answer.
pub(crate) const INPUT_KEY: &str = "io.toolgate/approve";

/// How the proxy's own `requestState` begins; the ask's digest follows.
const STATE_PREFIX: &str = "io.toolgate/ask:";

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

/// How a call under `2026-07-28` stands towards the proxy's ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Retry {
    /// The call answers the proxy's ask for exactly this call.
    Answered(Asked),
    /// A first call, or a retry of the proxy's ask for another call: ask now.
    Fresh,
    /// A retry of the upstream server's own input request: the person cannot be asked in
    /// the same round, so the ask stays a refusal.
    Foreign,
}

/// Whether the request's session forbids server-to-client requests (`2026-07-28` on).
pub(crate) fn asks_by_result(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

/// Whether the client takes form elicitation (declared at initialisation, or in the
/// request's own metadata under `2026-07-28`).
pub(crate) fn can_ask(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// Asks the person at the client whether `tool` may run with `args`, for `reason`, by
/// `elicitation/create`; waits at most `timeout`.
pub(crate) async fn person(
    context: &RequestContext<RoleServer>,
    tool: &str,
    args: &Value,
    reason: &str,
    timeout: Duration,
) -> Asked {
    let Some(params) = form(tool, args, reason).filter(|_| can_ask(context)) else {
        return Asked::Unanswered;
    };
    match context
        .peer
        .create_elicitation_with_timeout(params, Some(timeout))
        .await
    {
        Ok(result) => read(&result),
        Err(_) => Asked::Unanswered,
    }
}

/// The `InputRequiredResult` that asks the person about the call whose ask has `digest`;
/// `None` when the client takes no form elicitation.
pub(crate) fn input_required(
    context: &RequestContext<RoleServer>,
    tool: &str,
    args: &Value,
    reason: &str,
    digest: &str,
) -> Option<InputRequiredResult> {
    let params = form(tool, args, reason).filter(|_| can_ask(context))?;
    let requests = BTreeMap::from([(
        INPUT_KEY.to_string(),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    )]);
    Some(InputRequiredResult::new(
        Some(requests),
        Some(format!("{STATE_PREFIX}{digest}")),
    ))
}

/// How `request` stands towards the ask with `digest` (see [`Retry`]).
pub(crate) fn answered(request: &CallToolRequestParams, digest: &str) -> Retry {
    let Some(state) = request.request_state.as_deref() else {
        return Retry::Fresh;
    };
    let Some(asked) = state.strip_prefix(STATE_PREFIX) else {
        return Retry::Foreign;
    };
    if asked != digest {
        return Retry::Fresh;
    }
    let answer = request
        .input_responses
        .as_ref()
        .and_then(|r| r.get(INPUT_KEY))
        .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
    Retry::Answered(answer.as_ref().map_or(Asked::Unanswered, read))
}

/// `request` without the proxy's own `requestState` and answer, as upstream should see it:
/// they answer toolgate's ask, not anything upstream asked.
pub(crate) fn strip(request: &mut CallToolRequestParams) {
    if request
        .request_state
        .as_deref()
        .is_some_and(|s| s.starts_with(STATE_PREFIX))
    {
        request.request_state = None;
    }
    if let Some(responses) = request.input_responses.as_mut() {
        responses.remove(INPUT_KEY);
        if responses.is_empty() {
            request.input_responses = None;
        }
    }
}

/// What an elicitation result says.
fn read(result: &ElicitResult) -> Asked {
    match result.action {
        ElicitationAction::Accept => match result.content.as_ref().and_then(|c| c.get("approve")) {
            Some(Value::Bool(true)) => Asked::Approved,
            Some(Value::Bool(false)) => Asked::Refused("The person did not approve it."),
            _ => Asked::Unanswered,
        },
        ElicitationAction::Decline => Asked::Refused("The person declined it."),
        ElicitationAction::Cancel => Asked::Refused("The person cancelled the request."),
        _ => Asked::Unanswered,
    }
}

/// The form: one required boolean, `approve`, and a message naming the call.
fn form(tool: &str, args: &Value, reason: &str) -> Option<ElicitRequestParams> {
    let schema = ElicitationSchema::builder()
        .required_bool_property("approve", |b| {
            b.title("Approve")
                .description("Let exactly this call run once")
        })
        .build()
        .ok()?;
    Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message(tool, args, reason),
        requested_schema: schema,
    })
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
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn the_form_names_the_tool_and_cuts_long_arguments() {
        let long = json!({"text": "x".repeat(5_000)});
        let m = message("refund", &long, "Refunds above 50 need a person.");
        assert!(m.starts_with("toolgate asks: may the agent call `refund` with {"));
        assert!(m.ends_with("…?\nRefunds above 50 need a person."));
        assert!(m.chars().count() < MAX_SHOWN_ARGS + 200);
    }

    fn retry(state: Option<&str>, answer: Option<Value>) -> CallToolRequestParams {
        let mut r = CallToolRequestParams::new("refund");
        r.request_state = state.map(str::to_string);
        r.input_responses = answer.map(|a| BTreeMap::from([(INPUT_KEY.to_string(), a)]));
        r
    }

    #[test]
    fn only_this_calls_yes_is_an_approval_and_upstreams_state_is_not_ours() {
        let yes = json!({"action": "accept", "content": {"approve": true}});
        let ours = format!("{STATE_PREFIX}ap1:abc");
        assert_eq!(
            answered(&retry(Some(&ours), Some(yes.clone())), "ap1:abc"),
            Retry::Answered(Asked::Approved)
        );
        // The answer to another call's ask (other arguments) asks again.
        assert_eq!(
            answered(&retry(Some(&ours), Some(yes.clone())), "ap1:def"),
            Retry::Fresh
        );
        // An answer with no state of ours is not taken; upstream's state is upstream's.
        assert_eq!(
            answered(&retry(None, Some(yes.clone())), "ap1:abc"),
            Retry::Fresh
        );
        assert_eq!(
            answered(&retry(Some("upstream-state"), Some(yes)), "ap1:abc"),
            Retry::Foreign
        );
        let no = json!({"action": "accept", "content": {"approve": false}});
        assert_eq!(
            answered(&retry(Some(&ours), Some(no)), "ap1:abc"),
            Retry::Answered(Asked::Refused("The person did not approve it."))
        );
        let odd = json!({"action": "accept", "content": {"approve": "yes"}});
        assert_eq!(
            answered(&retry(Some(&ours), Some(odd)), "ap1:abc"),
            Retry::Answered(Asked::Unanswered)
        );
        assert_eq!(
            answered(&retry(Some(&ours), None), "ap1:abc"),
            Retry::Answered(Asked::Unanswered)
        );
    }

    #[test]
    fn upstream_never_sees_the_proxys_own_state_or_answer() {
        let mut r = retry(Some(&format!("{STATE_PREFIX}ap1:abc")), Some(json!({})));
        r.input_responses
            .as_mut()
            .unwrap()
            .insert("upstream/key".into(), json!(1));
        strip(&mut r);
        assert_eq!(r.request_state, None);
        assert_eq!(
            r.input_responses,
            Some(BTreeMap::from([("upstream/key".to_string(), json!(1))]))
        );
        let mut foreign = retry(Some("upstream-state"), None);
        strip(&mut foreign);
        assert_eq!(foreign.request_state.as_deref(), Some("upstream-state"));
    }
}
