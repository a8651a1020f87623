//! What stands in for a part this build was compiled without: the same names as the real
//! module, so the server's code reads the same under every feature set. Each part's
//! constructor refuses with [`ServerError::Unsupported`] (the configuration asked for what
//! the build lacks), and its types are uninhabited, so nothing else here can ever run.
//! The crate root mounts each one under the real module's name when its feature is off.

#[cfg(not(feature = "bundles"))]
pub mod bundle {
    //! `bundles` is off: no bundle poller.

    use crate::config::BundleSource;
    use crate::error::{Feature, ServerError};
    use crate::reload_gate::{Installer, ReloadError};
    use std::sync::Arc;
    use std::time::Duration;

    /// The poller that this build lacks.
    pub enum Bundle {}

    /// What `/v1/policies` and `/health` would show of a bundle.
    #[derive(Debug, Clone, Default, serde::Serialize)]
    pub struct Status {
        /// Why the last bundle was refused.
        pub error: Option<String>,
        /// Whether it was downloaded recently.
        pub fresh: bool,
    }

    impl Bundle {
        /// Refuses: this build has no bundle support.
        pub fn new(_: BundleSource) -> Result<Bundle, ServerError> {
            Err(ServerError::Unsupported(Feature::Bundles))
        }

        /// Never called.
        pub fn poll_every(&self) -> Duration {
            match *self {}
        }

        /// Never called.
        pub fn status(&self) -> Status {
            match *self {}
        }

        /// Never called.
        pub fn render_metrics(&self) -> String {
            match *self {}
        }
    }

    /// Never called: a bundle cannot exist.
    pub async fn reload<H: Installer>(
        b: &Bundle,
        _: Arc<H>,
        _: &str,
        _: Option<String>,
    ) -> Result<u64, ReloadError> {
        match *b {}
    }
}

#[cfg(not(feature = "otel"))]
pub mod tracing_otel {
    //! `otel` is off: no spans, and the decision path attaches nothing.

    use crate::error::{Feature, ServerError};
    use axum::response::Response;
    use std::sync::Arc;

    /// The exporter that this build lacks.
    pub enum Otel {}

    impl Otel {
        /// Refuses: this build has no OpenTelemetry support.
        pub fn start(_: &str) -> Result<Otel, ServerError> {
            Err(ServerError::Unsupported(Feature::Otel))
        }

        /// Never called.
        pub fn shutdown(&self) {
            match *self {}
        }

        /// Never called.
        pub fn export(&self, _: &toolgate_engine::Response, _: &str) {
            match *self {}
        }
    }

    /// Nothing to attach.
    pub fn attach(_: Option<&Otel>, _: &mut Response, _: &toolgate_engine::Response, _: &str) {}

    /// The routes as they are.
    pub fn wrap<S>(routes: axum::Router<S>, _: Option<&Arc<Otel>>) -> axum::Router<S> {
        routes
    }
}

#[cfg(not(feature = "shipper"))]
pub mod log_shipper {
    //! `shipper` is off: the decision log goes to a file or standard output only.

    use crate::config::LogMode;
    use crate::decision_log::DecisionLog;
    use crate::error::{Feature, ServerError};

    /// Refuses: this build has no decision-log shipping.
    pub fn start(
        _: LogMode,
        _: bool,
        _: String,
        _: usize,
        _: u64,
    ) -> Result<(DecisionLog, tokio::task::JoinHandle<()>), ServerError> {
        Err(ServerError::Unsupported(Feature::Shipper))
    }
}

#[cfg(not(feature = "jwt"))]
pub mod bearer {
    //! `jwt` is off: no bearer-token verification.

    use crate::config::JwtConfig;
    use crate::error::{Feature, ServerError};
    use axum::http::HeaderMap;
    use serde_json::Value;

    /// The verifier that this build lacks.
    pub enum Verifier {}

    impl Verifier {
        /// Refuses: this build has no bearer-token support.
        pub async fn new(_: JwtConfig) -> Result<Verifier, ServerError> {
            Err(ServerError::Unsupported(Feature::Jwt))
        }

        /// Never called.
        pub async fn principal(
            &self,
            _: &HeaderMap,
        ) -> Result<Option<Value>, std::convert::Infallible> {
            match *self {}
        }
    }
}
