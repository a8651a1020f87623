//! Who is asking, from a verified bearer token (`serve --jwks`, `docs/server.md`,
//! "Principals from bearer tokens").
//!
//! [`Verifier::principal`] reads `Authorization: Bearer JWT` and gives the principal the
//! token proves (`sub`, the tenant claim, the other claims), in the shape
//! [`toolgate_engine::principal_value`] builds, or why the token is refused. No header means
//! no principal, so rules that read one deny; a present but invalid token is refused (401),
//! never judged as if it were absent.
//!
//! - `keys.rs`: the JWKS (a file or an https URL), refreshed when a token names a key id it
//!   does not hold, at most once per [`REFRESH_EVERY`]; a failed refresh keeps the old keys.
//! - `verify.rs`: one token checked: RS256, ES256 or EdDSA only, the key's algorithm must be
//!   the header's (no algorithm confusion), `exp` required, `nbf`, `iss` and `aud` checked
//!   with [`LEEWAY_S`] of clock skew.
//! - `cache.rs`: verified tokens by SHA-256, until their `exp`, so a repeated token skips the
//!   signature check.

mod cache;
mod keys;
mod verify;

use crate::config::JwtConfig;
use crate::error::ServerError;
use axum::http::HeaderMap;
use serde_json::Value;
use std::time::Duration;

pub use verify::BearerError;

/// The most bytes of an `Authorization` header read as a token.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// The clock skew allowed on `exp` and `nbf`, in seconds.
pub const LEEWAY_S: u64 = 30;
/// The shortest time between two JWKS refreshes that an unknown key id triggers.
pub const REFRESH_EVERY: Duration = Duration::from_secs(30);

/// Verifies bearer tokens against one issuer's keys.
pub struct Verifier {
    config: JwtConfig,
    keys: keys::KeyRing,
    cache: cache::Cache,
}

impl Verifier {
    /// A verifier for `config`, with the JWKS loaded now: one that cannot be read or holds
    /// no usable key stops the server.
    pub async fn new(config: JwtConfig) -> Result<Verifier, ServerError> {
        let keys = keys::KeyRing::load(&config.jwks).await?;
        Ok(Verifier {
            config,
            keys,
            cache: cache::Cache::default(),
        })
    }

    /// The principal the request's bearer token proves: `Ok(None)` without an
    /// `Authorization` header, an error for any header that is not a valid token.
    pub async fn principal(&self, headers: &HeaderMap) -> Result<Option<Value>, BearerError> {
        let Some(value) = headers.get(axum::http::header::AUTHORIZATION) else {
            return Ok(None);
        };
        if value.len() > MAX_TOKEN_BYTES + 7 {
            return Err(BearerError::TooLong);
        }
        let text = value.to_str().map_err(|_| BearerError::Malformed)?;
        let token = match text.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
            _ => return Err(BearerError::Scheme),
        };
        self.verify(token).await.map(Some)
    }

    /// The principal `token` proves.
    pub async fn verify(&self, token: &str) -> Result<Value, BearerError> {
        let now = verify::now_s();
        let generation = self.keys.generation();
        if let Some(hit) = self.cache.get(token, now, generation) {
            return Ok(hit);
        }
        let (principal, exp) = verify::check(token, &self.keys, &self.config).await?;
        let generation = self.keys.generation();
        self.cache
            .put(token, principal.clone(), (exp, generation), now);
        Ok(principal)
    }
}
