//! The one HTTP client setup for outgoing requests (bundle downloads, decision-log
//! shipping, the MCP proxy's upstream): reqwest with rustls over `ring`.

use std::time::Duration;

/// Installs `ring` as the process's TLS crypto provider; reqwest's rustls needs one before
/// any client is built. Called once at start; a second call changes nothing.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A client whose requests give up after `timeout` (connecting within at most five
/// seconds of it), following no redirects to other schemes.
pub fn client(timeout: Duration) -> Result<reqwest::Client, String> {
    install_crypto();
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .user_agent(concat!("toolgate/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot set up the HTTP client: {e}"))
}
