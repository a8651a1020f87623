//! The client side of the proxy: the connection to the upstream MCP server.
//!
//! Every request to upstream has a deadline (`--call-timeout`): a server that hangs costs the
//! client one error, not a hung agent. When the deadline passes, or the client cancels the
//! call, the SDK's request is dropped, which sends upstream a `notifications/cancelled`. A server that crashed answers every
//! request after with an error at once (its transport is closed).

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorData, ProtocolVersion, ResultType, Tool,
};
use rmcp::service::{ClientInitializeError, RunningService, ServiceError};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::RoleClient;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The prefix of the protocol's own `_meta` keys, which belong to one hop.
const PROTOCOL_META: &str = "io.modelcontextprotocol/";

/// A connected upstream server. Cloning shares the one connection.
#[derive(Clone)]
pub struct Upstream {
    service: Arc<RunningService<RoleClient, ()>>,
}

/// Why the upstream server could not be reached at start-up.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The command could not be started.
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        /// The command as given.
        command: String,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The server did not complete the MCP handshake.
    #[error("the upstream MCP server did not complete the MCP handshake: {0}")]
    Handshake(String),
    /// The upstream URL is not `http://`.
    #[error("the upstream URL must start with `http://` (this build has no TLS client; put a local TLS proxy in front of an https server)")]
    Scheme,
    /// The server did not complete the handshake in time.
    #[error("the upstream MCP server did not complete the MCP handshake within {0:?} (toolgate mcp --connect-timeout)")]
    Timeout(Duration),
}

impl Upstream {
    /// Starts `command` with `args` as a child process and connects to it over stdio. The
    /// child's standard error is the proxy's; the child is killed when the proxy exits.
    pub async fn spawn(
        command: &str,
        args: &[String],
        timeout: Duration,
    ) -> Result<Upstream, ConnectError> {
        let mut cmd = tokio::process::Command::new(command);
        cmd.args(args).kill_on_drop(true);
        let transport = TokioChildProcess::new(cmd).map_err(|source| ConnectError::Spawn {
            command: command.to_string(),
            source,
        })?;
        handshake(transport, timeout).await
    }

    /// Connects to an upstream server over Streamable HTTP at `url` (`http://` only: this
    /// build has no TLS client; reach an `https` server through a local TLS proxy).
    pub async fn http(url: &str, timeout: Duration) -> Result<Upstream, ConnectError> {
        if !url.starts_with("http://") {
            return Err(ConnectError::Scheme);
        }
        let transport = StreamableHttpClientTransport::from_uri(url.to_string());
        handshake(transport, timeout).await
    }

    /// The instructions the upstream server gave in its handshake, passed on to the client.
    pub fn instructions(&self) -> Option<String> {
        self.service.peer_info()?.instructions.clone()
    }

    /// Every tool upstream has (all pages).
    pub async fn list_tools(&self, timeout: Duration) -> Result<Vec<Tool>, ErrorData> {
        deadline("tools/list", timeout, self.service.peer().list_all_tools()).await
    }

    /// Forwards one call. The result comes back as upstream sent it, made valid for the
    /// client's protocol (a `resultType` where upstream spoke an older version; the SDK
    /// removes it again for a client on one) and without any `io.toolgate/*` key in its
    /// `_meta`, which only toolgate sets; upstream's own JSON-RPC errors pass through
    /// unchanged.
    pub async fn call_tool(
        &self,
        request: CallToolRequestParams,
        timeout: Duration,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut forwarded = CallToolRequestParams::new(request.name.clone());
        forwarded.arguments = request.arguments;
        forwarded.input_responses = request.input_responses;
        forwarded.request_state = request.request_state;
        let what = format!("tools/call `{}`", request.name);
        match deadline(
            &what,
            timeout,
            self.service.peer().call_tool_once(forwarded),
        )
        .await?
        {
            // A task would be polled with `tasks/get`, which the proxy does not forward.
            CallToolResponse::Task(_) => Err(ErrorData::internal_error(
                "the upstream MCP server answered with a task; toolgate mcp does not proxy tasks",
                None,
            )),
            CallToolResponse::Complete(mut result) => {
                if result.result_type.is_none() {
                    result.result_type = Some(ResultType::COMPLETE);
                }
                if let Some(meta) = result.meta.as_mut() {
                    // Toolgate's own keys are toolgate's to set; the protocol's reserved keys
                    // (`io.modelcontextprotocol/serverInfo`, ...) describe upstream's hop to
                    // the proxy, not the client's to the proxy.
                    meta.0.retain(|key, _| {
                        !key.starts_with(super::META_PREFIX) && !key.starts_with(PROTOCOL_META)
                    });
                }
                if result.meta.as_ref().is_some_and(|m| m.0.is_empty()) {
                    result.meta = None;
                }
                Ok(CallToolResponse::Complete(result))
            }
            other => Ok(other),
        }
    }
}

/// A failed handshake in words. A transport failure is told by its innermost cause, which
/// names what actually failed ("Connection refused") rather than the SDK's layers around it.
/// Runs the MCP handshake over `transport`, bounded by `timeout`.
async fn handshake<T, E, A>(transport: T, timeout: Duration) -> Result<Upstream, ConnectError>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    // The newest protocol the upstream server speaks: `server/discover` first (2026-07-28,
    // where a tool may answer with its own input request), the `initialize` handshake for a
    // server that does not know it.
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    };
    let service = tokio::time::timeout(timeout, ().serve_with_lifecycle(transport, lifecycle))
        .await
        .map_err(|_| ConnectError::Timeout(timeout))?
        .map_err(handshake_error)?;
    Ok(Upstream {
        service: Arc::new(service),
    })
}

fn handshake_error(error: ClientInitializeError) -> ConnectError {
    ConnectError::Handshake(match &error {
        ClientInitializeError::TransportError { error, .. } => {
            let mut cause: &dyn std::error::Error = &*error.error;
            while let Some(next) = cause.source() {
                cause = next;
            }
            cause.to_string()
        }
        other => other.to_string(),
    })
}

/// Awaits `request` for at most `timeout`, and turns the SDK's errors into the JSON-RPC error
/// the client gets.
async fn deadline<T>(
    what: &str,
    timeout: Duration,
    request: impl Future<Output = Result<T, ServiceError>>,
) -> Result<T, ErrorData> {
    match tokio::time::timeout(timeout, request).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(ServiceError::McpError(error))) => Err(error),
        Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
            Err(ErrorData::internal_error(
                format!("{what}: the upstream MCP server closed the connection (it exited or crashed)"),
                None,
            ))
        }
        Ok(Err(other)) => Err(ErrorData::internal_error(
            format!("{what}: the upstream MCP server failed: {other}"),
            None,
        )),
        Err(_) => Err(ErrorData::internal_error(
            format!(
                "{what}: the upstream MCP server did not answer within {} (toolgate mcp --call-timeout)",
                human(timeout)
            ),
            None,
        )),
    }
}

/// A duration in words: `2s`, `1.5s`, `250ms`.
fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else if d.as_secs() == 0 {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}
