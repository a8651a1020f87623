//! The origins a browser request may come from: the server's own and those the operator
//! lists (`--allow-origin`). A leaf the state holds and the guard reads.

use std::net::SocketAddr;

/// The origins a request may come from: the server's own and those the operator lists.
#[derive(Debug, Clone, Default)]
pub struct Origins {
    allowed: Vec<String>,
}

impl Origins {
    /// The server's own origins for the address it listens on, plus `extra` (`--allow-origin`).
    /// A wildcard address has no origin of its own: only listed origins are allowed then.
    pub fn new(local: SocketAddr, extra: &[String]) -> Self {
        let mut allowed: Vec<String> = extra.iter().map(|o| normalise(o)).collect();
        if !local.ip().is_unspecified() {
            allowed.push(format!("http://{local}"));
            if local.ip().is_loopback() {
                allowed.push(format!("http://localhost:{}", local.port()));
            }
        }
        Origins { allowed }
    }

    /// True when `origin` is one of them (ASCII case-insensitive, as origins compare).
    pub(crate) fn allows(&self, origin: &[u8]) -> bool {
        self.allowed
            .iter()
            .any(|a| a.as_bytes().eq_ignore_ascii_case(origin))
    }
}

/// `https://Example.com/` → `https://example.com`: the form a browser sends.
fn normalise(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}
