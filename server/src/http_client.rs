//! The one HTTP client setup for outgoing requests (bundle downloads, decision-log
//! shipping): reqwest with rustls over `ring`; and the process's TLS provider, which the
//! turn-state store's TLS and the OTLP exporter need too.
//!
//! The client exists with the `bundles` or `shipper` feature, the provider with any feature
//! that speaks TLS.

#[cfg(any(feature = "bundles", feature = "shipper"))]
use std::time::Duration;

/// Installs `ring` as the process's TLS crypto provider; reqwest's rustls needs one before
/// any client is built. Called once at start; a second call changes nothing.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The most redirects one request follows.
#[cfg(any(feature = "bundles", feature = "shipper"))]
const MAX_REDIRECTS: usize = 10;

/// The redirect rule: up to [`MAX_REDIRECTS`] hops, and never from `https` to anything else.
/// A request that started over TLS stays on TLS: a `302` to `http://` (a misconfigured
/// bucket, or whoever sits on the path) would otherwise fetch a bundle, or send a decision
/// log, in the clear.
#[cfg(any(feature = "bundles", feature = "shipper"))]
fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let downgrade = attempt.url().scheme() != "https"
            && attempt.previous().iter().any(|u| u.scheme() == "https");
        if downgrade {
            let to = toolgate_loader::log_text::escape(attempt.url().as_str()).into_owned();
            attempt.error(format!(
                "refused a redirect from https to `{to}`: a request that starts on TLS stays on it"
            ))
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    })
}

/// A client whose requests give up after `timeout` (connecting within at most five
/// seconds of it), following at most ten redirects and none from https to http.
#[cfg(any(feature = "bundles", feature = "shipper"))]
pub fn client(timeout: Duration) -> Result<reqwest::Client, crate::ServerError> {
    install_crypto();
    reqwest::Client::builder()
        .timeout(timeout)
        .redirect(redirect_policy())
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .user_agent(concat!("toolgate/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(crate::ServerError::HttpClient)
}

/// An error with its causes, which reqwest keeps apart (`error sending request: connection
/// refused`).
#[cfg(any(feature = "bundles", feature = "shipper"))]
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
