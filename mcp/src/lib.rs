//! The MCP proxy behind `toolgate mcp`, as a library: an MCP server that judges every tool
//! call against a policy before an upstream MCP server sees it.
//!
//! The proxy is an MCP server to its client (the agent host) and an MCP client to the
//! upstream server that holds the real tools; both sides are the official Rust SDK (`rmcp`).
//! It offers only the tools the active stage offers (`tools.rs`), and judges each `tools/call`
//! with [`Policy::decide`](toolgate_engine::Policy::decide) as a one-call batch before it
//! reaches upstream, through the same [`Judge`] as the coding-agent hooks. A denied call never
//! leaves the proxy; an allowed one is forwarded and its result returned as it came
//! ([`Upstream`]).
//!
//! State lives per client connection (`session.rs`): the turn's latches and the calls that ran,
//! for `called_before`, in the one turn model (`toolgate_turns`). MCP has no user turn, so by
//! default the turn is the whole connection: once latched, latched until the client
//! disconnects. A host that knows its turns names them in the request's `_meta` under
//! [`TURN_META_KEY`]; an id the connection has never seen starts a new turn, and one it has
//! seen goes back to that turn's own latches (so interleaved conversations cannot clear each
//! other's latch).
//!
//! Like the hooks, a per-call proxy cannot pre-scan a batch: a write judged before a latch
//! setter of the same model turn was judged unlatched. `docs/agents.md` says so.
//!
//! The API: a [`Config`] shared by every connection, a [`Proxy`] per connection (serve it
//! with `rmcp`, e.g. over stdio), an [`Upstream`], and [`http::serve`] for Streamable HTTP
//! on `toolgate-server`'s accept loop.
#![warn(missing_docs)]

mod ask;
mod continuation;
mod expired;
pub mod http;
mod session;
mod tools;
mod upstream;

pub use upstream::{ConnectError, Upstream};

use continuation::Opened;
use expired::Expired;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, ErrorData, Implementation, InitializeRequestParams, InitializeResult,
    InputRequest, ListToolsResult, MetaObject, PaginatedRequestParams, ProtocolVersion,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Map, Value};
use session::Session;
use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use toolgate_engine::{Facts, Policy};
use toolgate_hooks::{Answer, Event, Judge};
use toolgate_server::{Decisions, Record};

/// The prefix of every `_meta` key toolgate sets or reads; an upstream's result never
/// carries one through.
pub const META_PREFIX: &str = "io.toolgate/";

/// The request `_meta` key a host sets to the id of the current user turn.
pub const TURN_META_KEY: &str = "io.toolgate/turn";

/// The result `_meta` key that marks a refusal made by toolgate (its value is `true`).
pub const DENIED_META_KEY: &str = "io.toolgate/denied";

/// How a denied call is answered (with the `clap` feature, a value of `--deny-as`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum DenyAs {
    /// A normal tool result with `isError: true` whose text is the refusal: the model reads
    /// it and can correct itself (the MCP spec's "tool execution error").
    Result,
    /// A JSON-RPC error (`-32602`) whose message is the refusal (a "protocol error", which
    /// clients tend to show to the user rather than the model).
    RpcError,
}

/// The principal a verified bearer token proved for one HTTP request (`--listen` with
/// `--jwks`), put in the request's extensions by the listener; `None` inside: the request
/// carried no token, so rules that read the principal deny. The principal of a `--facts`
/// file is never used beside it.
#[derive(Debug, Clone)]
pub struct VerifiedPrincipal(pub Option<Value>);

/// What every connection of one proxy shares.
pub struct Config {
    /// The compiled policy.
    pub policy: Arc<Policy>,
    /// The stage every call is judged in.
    pub stage: String,
    /// Facts from `--facts`, merged under the proxy's own (stage, latches, earlier calls).
    pub facts: Facts,
    /// How denials are answered.
    pub deny_as: DenyAs,
    /// How long a call to upstream may take before the client gets an error.
    pub call_timeout: Duration,
    /// Where each judged call is recorded (the decision log, metrics and spans of
    /// `toolgate serve`, [`Decisions`]); `None` records nothing.
    pub decisions: Option<Arc<Decisions>>,
}

/// Why no stage could be chosen for the proxy's calls ([`choose_stage`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StageError {
    /// The stage asked for is not one the policy defines.
    #[error("policy `{module}` defines no stage `{asked}`; {}", listed(.stages))]
    Unknown {
        /// The policy's module.
        module: String,
        /// The stage asked for.
        asked: String,
        /// The stages it defines.
        stages: Vec<String>,
    },
    /// None was asked for, and the policy does not have exactly one.
    #[error("give --stage: policy `{module}` does not have exactly one stage ({})", listed(.stages))]
    NotOne {
        /// The policy's module.
        module: String,
        /// The stages it defines.
        stages: Vec<String>,
    },
}

/// `its stages are `a`, `b`` or `it defines none`.
fn listed(stages: &[String]) -> String {
    if stages.is_empty() {
        return "it defines none".into();
    }
    let names: Vec<String> = stages.iter().map(|n| format!("`{n}`")).collect();
    format!("its stages are {}", names.join(", "))
}

/// The stage the proxy's calls are judged in: `asked` if the policy defines it, else the
/// policy's only stage. Guessing among several would judge calls in a stage nobody chose.
pub fn choose_stage(policy: &Policy, asked: Option<&str>) -> Result<String, StageError> {
    let stages: Vec<String> = policy.stages().map(str::to_string).collect();
    let module = policy.module().to_string();
    match asked {
        Some(name) if stages.iter().any(|s| s == name) => Ok(name.to_string()),
        Some(name) => Err(StageError::Unknown {
            module,
            asked: name.to_string(),
            stages,
        }),
        None => match stages.as_slice() {
            [only] => Ok(only.clone()),
            _ => Err(StageError::NotOne { module, stages }),
        },
    }
}

/// The most rounds of upstream's own input requests the proxy answers for one call of a
/// client before `2026-07-28`.
const MAX_INPUT_ROUNDS: usize = 8;

/// The MCP server side of the proxy: one per client connection.
pub struct Proxy {
    config: Arc<Config>,
    upstream: Upstream,
    session: Session,
    versions: &'static [ProtocolVersion],
    /// Over `--listen`: what ended sessions left, and this session's client identity.
    expired: Option<(Arc<Expired>, Mutex<String>)>,
    /// When the client last sent a request (tells an idle expiry from a close).
    last_request: Mutex<std::time::Instant>,
    /// The tokens that carry a person's approval across upstream's own input requests
    /// (`2026-07-28`).
    continuations: continuation::Continuations,
}

impl Proxy {
    /// A proxy for one client connection (stdio), forwarding to `upstream`. It speaks every
    /// protocol version the SDK knows: the connection is the session, whatever the version.
    pub fn new(config: Arc<Config>, upstream: Upstream) -> Self {
        Proxy {
            config,
            upstream,
            session: Session::default(),
            versions: ProtocolVersion::KNOWN_VERSIONS,
            expired: None,
            last_request: Mutex::new(std::time::Instant::now()),
            continuations: continuation::Continuations::new(),
        }
    }

    /// A proxy for one MCP session over Streamable HTTP: only the versions that have
    /// sessions, so that no request is judged without its session's state (see [`http`]).
    /// It inherits what ended sessions of its client left in `expired`, and leaves its own
    /// latched turns there when it ends.
    pub fn for_http_session(
        config: Arc<Config>,
        upstream: Upstream,
        expired: Arc<Expired>,
    ) -> Self {
        Proxy {
            config,
            upstream,
            session: Session::default(),
            versions: ProtocolVersion::known_up_to(&ProtocolVersion::LATEST_WITH_INITIALIZE),
            expired: Some((expired, Mutex::new(String::new()))),
            last_request: Mutex::new(std::time::Instant::now()),
            continuations: continuation::Continuations::new(),
        }
    }

    /// The turn id the request names in its `_meta`, if any. A value that is not a string is
    /// a malformed request: guessing which turn it meant could drop a latch.
    fn turn_of(context: &RequestContext<RoleServer>) -> Result<Option<String>, ErrorData> {
        match context.meta.0 .0.get(TURN_META_KEY) {
            None => Ok(None),
            Some(Value::String(id)) => Ok(Some(id.clone())),
            Some(other) => Err(ErrorData::invalid_params(
                format!(
                    "`_meta.{TURN_META_KEY}` must be a string (the host's turn id), found {}",
                    json_type(other)
                ),
                None,
            )),
        }
    }

    /// The facts a request is judged with beside the session's own: the configured ones,
    /// with the principal the listener verified for this request in place of any other.
    fn base_facts(&self, context: &RequestContext<RoleServer>) -> Cow<'_, Facts> {
        let verified = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<VerifiedPrincipal>());
        match verified {
            Some(VerifiedPrincipal(principal)) => {
                let mut facts = self.config.facts.clone();
                facts.principal.clone_from(principal);
                Cow::Owned(facts)
            }
            None => Cow::Borrowed(&self.config.facts),
        }
    }

    /// Notes that the client sent a request now.
    fn touch(&self) {
        if let Ok(mut t) = self.last_request.lock() {
            *t = std::time::Instant::now();
        }
    }

    fn judge(&self) -> Judge<'_> {
        Judge {
            policy: &self.config.policy,
            stage: Some(self.config.stage.clone()),
            approve: true,
        }
    }

    /// Upstream's own input requests answered for a client before `2026-07-28`: each
    /// elicitation is put to the client (`elicitation/create`) and the call retried with the
    /// answers and upstream's state, for at most [`MAX_INPUT_ROUNDS`] rounds. A request the
    /// proxy cannot put (sampling, roots, a client without form elicitation) ends the call
    /// with an error: the tool did not run.
    async fn answer_upstream(
        &self,
        context: &RequestContext<RoleServer>,
        name: std::borrow::Cow<'static, str>,
        arguments: Option<Map<String, Value>>,
        mut outcome: Result<CallToolResponse, ErrorData>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut rounds = 0;
        while let Ok(CallToolResponse::InputRequired(input)) = &outcome {
            rounds += 1;
            let cannot = |why: &str| {
                Err(ErrorData::internal_error(
                    format!("tools/call `{name}`: the upstream MCP server asked for input that {why}; the tool did not run"),
                    None,
                ))
            };
            if rounds > MAX_INPUT_ROUNDS {
                return cannot(&format!("took more than {MAX_INPUT_ROUNDS} rounds"));
            }
            let mut responses = std::collections::BTreeMap::new();
            for (key, asked) in input.input_requests.iter().flatten() {
                let InputRequest::Elicitation(elicit) = asked else {
                    return cannot("toolgate mcp does not forward (only forms are)");
                };
                if !ask::can_ask(context) {
                    return cannot("this client cannot give (it declares no form elicitation)");
                }
                let answer = context
                    .peer
                    .create_elicitation_with_timeout(elicit.params.clone(), Some(self.config.call_timeout))
                    .await
                    .map_err(|e| {
                        ErrorData::internal_error(
                            format!("tools/call `{name}`: the client did not answer the upstream MCP server's question: {e}"),
                            None,
                        )
                    })?;
                let answer = serde_json::to_value(answer)
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                responses.insert(key.clone(), answer);
            }
            let mut retry = CallToolRequestParams::new(name.clone());
            retry.arguments.clone_from(&arguments);
            retry.input_responses = (!responses.is_empty()).then_some(responses);
            retry.request_state.clone_from(&input.request_state);
            outcome = self
                .upstream
                .call_tool(retry, self.config.call_timeout)
                .await;
        }
        outcome
    }

    fn refuse(&self, reason: String) -> Result<CallToolResponse, ErrorData> {
        match self.config.deny_as {
            DenyAs::Result => {
                let mut result = CallToolResult::error(vec![ContentBlock::text(reason)]);
                let mut meta = Map::new();
                meta.insert(DENIED_META_KEY.into(), Value::Bool(true));
                result.meta = Some(MetaObject(meta));
                Ok(CallToolResponse::Complete(result))
            }
            DenyAs::RpcError => Err(ErrorData::invalid_params(
                reason,
                Some(serde_json::json!({ DENIED_META_KEY: true })),
            )),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some((expired, identity)) = &self.expired {
            let identity = identity.lock().map(|i| i.clone()).unwrap_or_default();
            let last = self
                .last_request
                .lock()
                .map(|t| *t)
                .unwrap_or_else(|_| std::time::Instant::now());
            expired.bury(&identity, &self.session, last);
        }
    }
}

/// The `Mcp-Session-Id` a request came with over Streamable HTTP; `None` over stdio, where
/// the connection is the session.
fn http_session(context: &RequestContext<RoleServer>) -> Option<&str> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.headers.get("mcp-session-id"))
        .and_then(|id| id.to_str().ok())
}

/// A client's identity across sessions: its `clientInfo` name and version.
/// Kept as a fixed-length fingerprint, so a client's name of any length is remembered (a key
/// over the store's length cap would not be, and its next session would start unlatched).
fn client_identity(request: &InitializeRequestParams) -> String {
    let id = format!(
        "{}\0{}",
        request.client_info.name, request.client_info.version
    );
    format!("client:{:016x}", toolgate_turns::TurnKey::of(&id).as_u64())
}

impl ServerHandler for Proxy {
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        if let Some((expired, identity)) = &self.expired {
            let id = client_identity(&request);
            expired.inherit(&id, &self.session);
            if let Ok(mut held) = identity.lock() {
                *held = id;
            }
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(self.versions)
    }

    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        let mut info = ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolgate", env!("CARGO_PKG_VERSION")));
        if let Some(text) = self.upstream.instructions() {
            info = info.with_instructions(text);
        }
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.touch();
        let turn = Self::turn_of(&context)?;
        let all = self.upstream.list_tools(self.config.call_timeout).await?;
        let base = self.base_facts(&context);
        let facts = self
            .session
            .offer_facts(&self.config, &base, turn.as_deref());
        Ok(tools::offered(&self.config.policy, &facts, all))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.touch();
        let turn = Self::turn_of(&context)?;
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let event = Event::BeforeTool {
            session: String::new(),
            turn: turn.clone(),
            call_id: context.id.to_string(),
            tool: request.name.to_string(),
            args,
        };
        let base = self.base_facts(&context);
        // The state upstream gets in place of the request's (`None` inside: none), and the
        // digest of the person's approval this call runs under, if it does.
        let mut forward_state: Option<Option<String>> = None;
        let mut approved_by: Option<String> = None;
        let started = std::time::Instant::now();
        let (handled, relist) = self.session.with_state(|state| {
            let before = state.current_latched().clone();
            let handled = self.judge().judge(&event, state, &base, session::NEW_IDS);
            (handled, *state.current_latched() != before)
        });
        if let (Some(decisions), Some(response)) = (&self.config.decisions, &handled.response) {
            decisions.record(
                Record::new(started, response)
                    .session(http_session(&context), turn.as_deref())
                    .traced(),
            );
        }
        let asked_for = handled
            .response
            .as_ref()
            .and_then(|r| r.decisions.first())
            .and_then(|d| d.approval.clone());
        let answer = handled.answer;
        if relist {
            // The latches changed, so the listing did (a write now says it is disabled): tell
            // the client to list again. A client that cannot take the notification loses
            // only the hint; the call itself is judged either way.
            let _ = context.peer.notify_tool_list_changed().await;
        }
        match answer {
            Answer::Allow | Answer::Nothing => {}
            Answer::Deny { reason } => return self.refuse(reason),
            Answer::Ask { reason } => {
                let Some(digest) = asked_for else {
                    return self.refuse(reason);
                };
                let args = Value::Object(request.arguments.clone().unwrap_or_default());
                let continued = request
                    .request_state
                    .as_deref()
                    .map(|state| self.continuations.open(state));
                let asked = if let Some(opened) = continued.filter(|o| *o != Opened::NotOurs) {
                    // A retry answering upstream's own input request of a call the person
                    // approved: the token stands for that approval, once, for this call.
                    match opened {
                        Opened::Approved {
                            digest: approved,
                            upstream,
                        } if approved == digest => {
                            forward_state = Some(upstream);
                            ask::Asked::Approved
                        }
                        _ => ask::Asked::Unanswered,
                    }
                } else if ask::asks_by_result(&context) {
                    // 2026-07-28: no server-to-client request; the client asks and retries.
                    match ask::answered(&request, &digest) {
                        ask::Retry::Answered(asked) => asked,
                        ask::Retry::Fresh => {
                            return match ask::input_required(
                                &context,
                                &request.name,
                                &args,
                                &reason,
                                &digest,
                            ) {
                                Some(input) => Ok(CallToolResponse::InputRequired(input)),
                                None => self.refuse(reason),
                            }
                        }
                        ask::Retry::Foreign => ask::Asked::Unanswered,
                    }
                } else {
                    ask::person(
                        &context,
                        &request.name,
                        &args,
                        &reason,
                        self.config.call_timeout,
                    )
                    .await
                };
                match asked {
                    ask::Asked::Approved => {}
                    ask::Asked::Refused(why) => return self.refuse(format!("{reason} {why}")),
                    ask::Asked::Unanswered => return self.refuse(reason),
                }
                // Judged again with the person's approval: the engine turns exactly this
                // call into an allow, or judges it as before if anything changed meanwhile.
                let mut approved = base.into_owned();
                approved.approvals = Some(vec![digest.clone()]);
                let started = std::time::Instant::now();
                let again = self.session.with_state(|state| {
                    self.judge()
                        .judge(&event, state, &approved, session::NEW_IDS)
                });
                if let (Some(decisions), Some(response)) = (&self.config.decisions, &again.response)
                {
                    decisions.record(
                        Record::new(started, response)
                            .session(http_session(&context), turn.as_deref())
                            .traced(),
                    );
                }
                match again.answer {
                    Answer::Allow | Answer::Nothing => approved_by = Some(digest),
                    Answer::Deny { reason } | Answer::Ask { reason } => return self.refuse(reason),
                }
            }
        }
        let tool = request.name.to_string();
        let mut request = request;
        ask::strip(&mut request);
        if forward_state.is_none() {
            // A token of ours on a call that did not need it (allowed without an ask now):
            // upstream gets back only the state the token carries, if it is valid.
            if let Some(state) = request.request_state.as_deref() {
                match self.continuations.open(state) {
                    Opened::NotOurs => {}
                    Opened::Refused => forward_state = Some(None),
                    Opened::Approved { upstream, .. } => forward_state = Some(upstream),
                }
            }
        }
        if let Some(state) = forward_state {
            request.request_state = state;
        }
        // A call the client cancels is dropped here, which cancels it upstream as well.
        let by_result = ask::asks_by_result(&context);
        let outcome = tokio::select! {
            outcome = async {
                let again = (!by_result).then(|| (request.name.clone(), request.arguments.clone()));
                let outcome = self.upstream.call_tool(request, self.config.call_timeout).await;
                match again {
                    // A client before 2026-07-28 takes no input request in a result: the proxy
                    // puts upstream's questions to it as `elicitation/create` and retries.
                    Some((name, arguments)) => {
                        self.answer_upstream(&context, name, arguments, outcome).await
                    }
                    None => outcome,
                }
            } => outcome,
            () = context.ct.cancelled() => Err(ErrorData::internal_error(
                format!("tools/call `{tool}`: cancelled by the client"),
                None,
            )),
        };
        // Upstream asks its own question about a call the person approved: the client gets
        // upstream's requests with a token in place of upstream's state, so that its retry
        // still carries the approval (continuation.rs); none can be made, no retry could run.
        let outcome = match (outcome, approved_by) {
            (Ok(CallToolResponse::InputRequired(mut input)), Some(digest)) => {
                match self.continuations.seal(&digest, input.request_state.take()) {
                    Some(token) => {
                        input.request_state = Some(token);
                        Ok(CallToolResponse::InputRequired(input))
                    }
                    None => {
                        return self.refuse(format!(
                            "The person approved `{tool}`, but its server asked for more input and toolgate could not keep the approval for the retry. It did not run; ask the user to try again."
                        ))
                    }
                }
            }
            (outcome, _) => outcome,
        };
        let ok = match &outcome {
            Ok(CallToolResponse::Complete(result)) => result.is_error != Some(true),
            _ => false,
        };
        // A call that is still waiting for input (MRTR) has not run yet; anything else did,
        // or may have, and `called_before` learns whether it succeeded.
        if !matches!(outcome, Ok(CallToolResponse::InputRequired(_))) {
            // The result, as the client receives it, is this call's output for the turn's
            // later provenance checks; an error answer leaves the outputs incomplete.
            let output = match &outcome {
                Ok(CallToolResponse::Complete(result)) => serde_json::to_value(result).ok(),
                _ => None,
            };
            let call_id = context.id.to_string();
            self.session.with_state(|state| {
                state.record_call(&tool, ok, turn.as_deref());
                if let Some(output) = output {
                    state.record_output(
                        &self.config.policy,
                        &call_id,
                        &tool,
                        output,
                        turn.as_deref(),
                    );
                }
            });
        }
        self.touch();
        outcome
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(unreadable_request(&request.method))
    }
}

/// The answer to a request the SDK could not read as any MCP request. A known method whose
/// params do not fit the schema reaches here too, and gets "invalid params" rather than the
/// SDK's default "method not found", which would mislead whoever reads it.
fn unreadable_request(method: &str) -> ErrorData {
    match method {
        "tools/call" | "tools/list" => ErrorData::invalid_params(
            format!("malformed `{method}` request: its params do not fit the MCP schema"),
            None,
        ),
        _ => ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("method `{method}` is not served by toolgate mcp"),
            None,
        ),
    }
}

/// A JSON value's type in words, for error messages.
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
