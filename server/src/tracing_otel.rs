//! `--otel-endpoint URL`: one OpenTelemetry span per decision request
//! (`POST /v1/decide`, `POST /v1/data/{module}/decide`, `POST /v1/hooks/{agent}`), and one per
//! call the MCP proxy judges ([`Otel::export`], through [`crate::Decisions`]), exported over
//! OTLP/HTTP (JSON) to `URL/v1/traces` by the SDK's batch processor on a thread of its own.
//!
//! The span continues the caller's trace when the request carries a W3C `traceparent`. It
//! holds the request's outcome (`http.response.status_code`), the decision id, the policy
//! and its revision, and one event per call with the GenAI semantic conventions' tool
//! attributes (`gen_ai.tool.name`, `gen_ai.tool.call.id`) and the decision (`allow` or
//! `deny`, the deny kind and the rule).
//!
//! Without the flag nothing here runs: the middleware is not installed and the handlers
//! attach nothing to their responses.

use super::ServerError;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{Span, SpanKind, Status, Tracer, TracerProvider};
use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use std::sync::Arc;
use std::time::SystemTime;
use toolgate_engine::Response as Decided;

/// The tracer, its provider (flushed at shutdown) and the `traceparent` reader.
pub struct Otel {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    propagator: TraceContextPropagator,
}

impl Otel {
    /// Exports to `endpoint` (the OTLP/HTTP base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT`);
    /// spans go to `endpoint/v1/traces`.
    pub fn start(endpoint: &str) -> Result<Otel, ServerError> {
        // An https endpoint needs rustls' process-wide provider.
        super::http_client::install_crypto();
        let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpJson)
            .with_endpoint(url)
            .build()
            .map_err(ServerError::Otel)?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name("toolgate")
                    .build(),
            )
            .build();
        let tracer = provider.tracer("toolgate");
        Ok(Otel {
            provider,
            tracer,
            propagator: TraceContextPropagator::new(),
        })
    }

    /// Exports one span for a batch judged outside an HTTP request (the MCP proxy's
    /// `tools/call`), with the attributes and call events the middleware's span carries.
    pub fn export(&self, judged: &Decided, decision_id: &str) {
        let mut span = self
            .tracer
            .span_builder("toolgate.decide")
            .with_kind(SpanKind::Server)
            .with_start_time(SystemTime::now())
            .start(&self.tracer);
        Traced::new(judged, decision_id).fill(&mut span);
        span.end();
    }

    /// Exports what is still buffered and stops the exporter.
    pub fn shutdown(&self) {
        let _ = self.provider.shutdown();
    }
}

/// What a decide handler hands the middleware, in the response's extensions (only when
/// tracing is on).
#[derive(Clone)]
pub struct Traced {
    decision_id: String,
    policy: String,
    revision: String,
    calls: Vec<[KeyValue; 5]>,
    denied: i64,
}

impl Traced {
    /// Sets the batch's attributes and one event per call on `span`.
    fn fill(&self, span: &mut impl Span) {
        span.set_attribute(KeyValue::new(
            "toolgate.decision_id",
            self.decision_id.clone(),
        ));
        span.set_attribute(KeyValue::new("toolgate.policy", self.policy.clone()));
        span.set_attribute(KeyValue::new(
            "toolgate.policy.revision",
            self.revision.clone(),
        ));
        span.set_attribute(KeyValue::new("toolgate.calls", self.calls.len() as i64));
        span.set_attribute(KeyValue::new("toolgate.denied_calls", self.denied));
        for call in &self.calls {
            span.add_event("toolgate.tool_call", call.to_vec());
        }
    }

    /// The span's data from a judged batch.
    pub fn new(response: &Decided, decision_id: &str) -> Traced {
        let calls = response
            .decisions
            .iter()
            .map(|d| {
                [
                    KeyValue::new("gen_ai.tool.name", d.tool.to_string()),
                    KeyValue::new("gen_ai.tool.call.id", d.id.to_string()),
                    KeyValue::new("toolgate.decision", if d.allow { "allow" } else { "deny" }),
                    KeyValue::new("toolgate.deny.kind", d.kind.map_or("", |k| k.as_str())),
                    KeyValue::new("toolgate.rule", d.rule.as_deref().unwrap_or("").to_string()),
                ]
            })
            .collect();
        Traced {
            decision_id: decision_id.to_string(),
            policy: response.policy.to_string(),
            revision: response.revision.to_string(),
            calls,
            denied: response.decisions.iter().filter(|d| !d.allow).count() as i64,
        }
    }
}

/// Attaches `Traced` to a decide handler's response when tracing is on.
pub fn attach(otel: Option<&Otel>, response: &mut Response, judged: &Decided, decision_id: &str) {
    if otel.is_some() {
        response
            .extensions_mut()
            .insert(Traced::new(judged, decision_id));
    }
}

/// Wraps `routes` (the decision routes) in the tracing middleware when `--otel-endpoint` is
/// set: one server span per request.
pub fn wrap<S: Clone + Send + Sync + 'static>(
    routes: axum::Router<S>,
    otel: Option<&Arc<Otel>>,
) -> axum::Router<S> {
    match otel {
        Some(otel) => routes.layer(axum::middleware::from_fn_with_state(otel.clone(), trace)),
        None => routes,
    }
}

struct Headers<'a>(&'a axum::http::HeaderMap);

impl opentelemetry::propagation::Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// The middleware: one server span around each decision request.
async fn trace(State(otel): State<Arc<Otel>>, request: Request, next: Next) -> Response {
    let parent = otel.propagator.extract(&Headers(request.headers()));
    let path = request.uri().path().to_string();
    let mut span = otel
        .tracer
        .span_builder("toolgate.decide")
        .with_kind(SpanKind::Server)
        .with_start_time(SystemTime::now())
        .start_with_context(&otel.tracer, &parent);
    let response = next.run(request).await;
    let status = response.status();
    span.set_attribute(KeyValue::new("http.request.method", "POST"));
    span.set_attribute(KeyValue::new("url.path", path));
    span.set_attribute(KeyValue::new(
        "http.response.status_code",
        i64::from(status.as_u16()),
    ));
    if let Some(t) = response.extensions().get::<Traced>() {
        t.fill(&mut span);
    }
    if status.is_server_error() || status.is_client_error() {
        span.set_status(Status::error(status.to_string()));
    }
    span.end();
    response
}
