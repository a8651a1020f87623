//! An approved call that upstream itself answers with an input request, under `2026-07-28`.
//!
//! The person approved the call through the proxy's own `InputRequiredResult`
//! ([`crate::ask`]); the proxy forwarded it, and upstream answered with an
//! `InputRequiredResult` of its own (a confirmation, a missing field), whose `requestState`
//! the client must echo on its retry. That retry is the same call again, which the policy
//! asks about again, and it carries upstream's state, not the proxy's: without more, the
//! proxy could not tell it from a call nobody approved, and refused it, so the tool could
//! never complete.
//!
//! So the proxy hands the client its own state in place of upstream's: a token that seals
//! the call's approval digest, upstream's state, an expiry and a nonce under a key only this
//! proxy holds (HMAC-SHA256, the key drawn at start). On the retry, a token that verifies,
//! names this call's digest (the same tool, arguments, turn and policy revision), has not
//! expired and was not used before stands for the person's approval of that call, once;
//! upstream then gets its own state back, and the client's answers to its requests. Anything
//! else (a token altered or from another proxy process, another call's, expired, replayed)
//! is not an approval: the call stays refused with the ask's reason, as the MCP
//! specification asks of a server reading echoed state ("attacker-controlled").
//!
//! Each round of upstream's questions gets a fresh token, so a tool that asks several times
//! completes; each token is good for one retry.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How a token begins; the proxy's own first-round state has [`crate::ask`]'s prefix.
pub(crate) const PREFIX: &str = "io.toolgate/continue:v1.";

/// How long a token stands for the approval: as long as a person's approval does by default.
const LIFETIME: Duration = Duration::from_secs(600);

/// The most tokens remembered as used (each until its expiry); past it, with none expired,
/// a retry is refused rather than a used token forgotten.
const MAX_USED: usize = 4_096;

/// The sealed contents.
#[derive(Serialize, Deserialize)]
struct Claims {
    /// The approval digest of the call.
    d: String,
    /// Upstream's own `requestState`.
    u: Option<String>,
    /// Expiry, seconds since the Unix epoch.
    e: u64,
    /// A random nonce, hex: what single use remembers.
    n: String,
}

/// What a retry's `requestState` says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Opened {
    /// Not a token of this kind.
    NotOurs,
    /// A token that does not verify, has expired, or was used.
    Refused,
    /// A valid token for the call with this digest, now used; upstream's state.
    Approved {
        digest: String,
        upstream: Option<String>,
    },
}

/// The proxy's key and the tokens already used.
pub(crate) struct Continuations {
    /// `None` when no key could be drawn: then no token is ever issued (nor accepted).
    key: Option<[u8; 32]>,
    used: Mutex<HashMap<String, u64>>,
}

impl Continuations {
    /// A fresh key from the operating system's random source.
    pub(crate) fn new() -> Self {
        let mut key = [0u8; 32];
        Continuations {
            key: getrandom::fill(&mut key).ok().map(|()| key),
            used: Mutex::new(HashMap::new()),
        }
    }

    /// The token standing for the approved call with `digest`, carrying `upstream`'s state;
    /// `None` when none can be issued (no key or no random nonce): the call is then refused.
    pub(crate) fn seal(&self, digest: &str, upstream: Option<String>) -> Option<String> {
        let key = self.key.as_ref()?;
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).ok()?;
        let claims = Claims {
            d: digest.to_owned(),
            u: upstream,
            e: now_secs().checked_add(LIFETIME.as_secs())?,
            n: nonce.iter().map(|b| format!("{b:02x}")).collect(),
        };
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).ok()?);
        let tag = URL_SAFE_NO_PAD.encode(mac(key, &payload)?.finalize().into_bytes());
        Some(format!("{PREFIX}{payload}.{tag}"))
    }

    /// Reads `state` (a retry's `requestState`), using the token if it is a valid one.
    pub(crate) fn open(&self, state: &str) -> Opened {
        let Some(rest) = state.strip_prefix(PREFIX) else {
            return Opened::NotOurs;
        };
        match self.verify(rest) {
            Some(claims) if self.take(&claims) => Opened::Approved {
                digest: claims.d,
                upstream: claims.u,
            },
            _ => Opened::Refused,
        }
    }

    /// The claims of a token whose tag verifies and which has not expired.
    fn verify(&self, token: &str) -> Option<Claims> {
        let key = self.key.as_ref()?;
        let (payload, tag) = token.split_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        // Constant time, by the `hmac` crate.
        mac(key, payload)?.verify_slice(&tag).ok()?;
        let claims: Claims = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
        (claims.e > now_secs()).then_some(claims)
    }

    /// Marks the token used; false if it was, or if no room is left to remember it.
    fn take(&self, claims: &Claims) -> bool {
        let Ok(mut used) = self.used.lock() else {
            return false;
        };
        if used.contains_key(&claims.n) {
            return false;
        }
        if used.len() >= MAX_USED {
            let now = now_secs();
            used.retain(|_, expiry| *expiry > now);
            if used.len() >= MAX_USED {
                return false;
            }
        }
        used.insert(claims.n.clone(), claims.e);
        true
    }
}

/// The MAC of `payload` under `key`, ready to finalise or verify.
fn mac(key: &[u8; 32], payload: &str) -> Option<Hmac<Sha256>> {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).ok()?;
    m.update(payload.as_bytes());
    Some(m)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_token_stands_for_its_call_once() {
        let c = Continuations::new();
        let token = c.seal("ap1:abc", Some("upstream-1".into())).unwrap();
        assert!(token.starts_with(PREFIX));
        assert_eq!(
            c.open(&token),
            Opened::Approved {
                digest: "ap1:abc".into(),
                upstream: Some("upstream-1".into())
            }
        );
        // Replayed: refused.
        assert_eq!(c.open(&token), Opened::Refused);
        // Upstream's own state, or the proxy's first-round state, is not a token.
        assert_eq!(c.open("upstream-1"), Opened::NotOurs);
    }

    #[test]
    fn an_altered_token_or_another_proxys_is_refused() {
        let c = Continuations::new();
        let token = c.seal("ap1:abc", None).unwrap();
        let (payload, tag) = token[PREFIX.len()..].split_once('.').unwrap();
        // Another digest under the same tag.
        let forged = serde_json::json!({"d": "ap1:def", "u": null, "e": u64::MAX, "n": "00"});
        let forged = URL_SAFE_NO_PAD.encode(forged.to_string());
        assert_eq!(c.open(&format!("{PREFIX}{forged}.{tag}")), Opened::Refused);
        assert_eq!(c.open(&format!("{PREFIX}{payload}.AAAA")), Opened::Refused);
        assert_eq!(c.open(&format!("{PREFIX}{payload}")), Opened::Refused);
        // Another process's key.
        assert_eq!(Continuations::new().open(&token), Opened::Refused);
        // Still good for its own proxy, once.
        assert!(matches!(c.open(&token), Opened::Approved { .. }));
    }

    #[test]
    fn an_expired_token_is_refused() {
        let c = Continuations::new();
        let key = c.key.unwrap();
        let claims = serde_json::json!({"d": "ap1:abc", "u": null, "e": now_secs() - 1, "n": "01"});
        let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
        let tag = URL_SAFE_NO_PAD.encode(mac(&key, &payload).unwrap().finalize().into_bytes());
        assert_eq!(c.open(&format!("{PREFIX}{payload}.{tag}")), Opened::Refused);
    }
}
