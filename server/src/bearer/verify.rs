//! One token checked against the key ring and the configured issuer and audience.

use super::keys::{KeyRing, ALGORITHMS};
use crate::config::JwtConfig;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{decode, decode_header, Validation};
use serde_json::{Map, Value};

/// The registered claims that are the token's own business, not the principal's.
const REGISTERED: [&str; 7] = ["iss", "aud", "exp", "nbf", "iat", "jti", "sub"];

/// Why a bearer token is refused (401). Each message says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BearerError {
    /// The `Authorization` header is not `Bearer TOKEN`.
    #[error("the Authorization header must be `Bearer TOKEN`")]
    Scheme,
    /// The header is over [`super::MAX_TOKEN_BYTES`].
    #[error("the bearer token is over {} bytes", super::MAX_TOKEN_BYTES)]
    TooLong,
    /// Not three base64url parts with a JSON header and payload.
    #[error("the bearer token is not a well-formed JWT")]
    Malformed,
    /// Signed with an algorithm other than RS256, ES256 and EdDSA.
    #[error("the token's algorithm `{0}` is not accepted; RS256, ES256 and EdDSA are")]
    UnsupportedAlgorithm(String),
    /// No key of the JWKS has the token's key id, even after a refresh.
    #[error("no key of the issuer's key set has the token's key id {}", .0.as_deref().map_or("(none)".to_string(), |k| format!("`{k}`")))]
    UnknownKey(Option<String>),
    /// The key with the token's id is for another algorithm.
    #[error("the token's algorithm is not the one its key is for")]
    AlgorithmMismatch,
    /// The signature does not verify.
    #[error("the token's signature does not verify")]
    BadSignature,
    /// `exp` is past.
    #[error("the token has expired")]
    Expired,
    /// `nbf` is still ahead.
    #[error("the token is not valid yet")]
    NotYetValid,
    /// `iss` is not the configured issuer.
    #[error("the token's issuer is not the one this server trusts")]
    WrongIssuer,
    /// `aud` does not name the configured audience.
    #[error("the token is not meant for this audience")]
    WrongAudience,
    /// A claim is missing or has the wrong type.
    #[error("the token's claim `{0}` is missing or malformed")]
    BadClaim(String),
}

/// Seconds since the epoch.
pub(super) fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The principal `token` proves and its `exp`, or why it is refused.
pub(super) async fn check(
    token: &str,
    ring: &KeyRing,
    config: &JwtConfig,
) -> Result<(Value, u64), BearerError> {
    if token.len() > super::MAX_TOKEN_BYTES {
        return Err(BearerError::TooLong);
    }
    let header = decode_header(token).map_err(|e| refused(e.kind()))?;
    if !ALGORITHMS.contains(&header.alg) {
        return Err(BearerError::UnsupportedAlgorithm(format!(
            "{:?}",
            header.alg
        )));
    }
    let kid = header.kid.as_deref();
    let found = match ring.find(kid) {
        Some(found) => found,
        None => {
            ring.refresh().await;
            ring.find(kid)
                .ok_or_else(|| BearerError::UnknownKey(header.kid.clone()))?
        }
    };
    let (alg, key) = found;
    if alg != header.alg {
        return Err(BearerError::AlgorithmMismatch);
    }
    let mut validation = Validation::new(alg);
    validation.leeway = super::LEEWAY_S;
    validation.validate_nbf = true;
    validation.set_issuer(&[config.issuer.as_str()]);
    validation.set_audience(&config.audience);
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    let data =
        decode::<Map<String, Value>>(token, &key, &validation).map_err(|e| refused(e.kind()))?;
    let claims = data.claims;
    let exp = claims
        .get("exp")
        .and_then(Value::as_u64)
        .ok_or_else(|| BearerError::BadClaim("exp".into()))?;
    Ok((principal(claims, &config.tenant_claim)?, exp))
}

/// The principal of verified `claims`: `sub`, the tenant claim, and the rest as claims.
fn principal(mut claims: Map<String, Value>, tenant_claim: &str) -> Result<Value, BearerError> {
    let text = |v: Option<Value>, name: &str| match v {
        None => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s)),
        Some(_) => Err(BearerError::BadClaim(name.to_string())),
    };
    let sub = text(claims.get("sub").cloned(), "sub")?;
    let tenant = text(claims.remove(tenant_claim), tenant_claim)?;
    for r in REGISTERED {
        claims.remove(r);
    }
    Ok(toolgate_engine::principal_value(
        sub.as_deref(),
        tenant.as_deref(),
        Some(claims),
    ))
}

fn refused(kind: &ErrorKind) -> BearerError {
    match kind {
        ErrorKind::InvalidSignature => BearerError::BadSignature,
        ErrorKind::ExpiredSignature => BearerError::Expired,
        ErrorKind::ImmatureSignature => BearerError::NotYetValid,
        ErrorKind::InvalidIssuer => BearerError::WrongIssuer,
        ErrorKind::InvalidAudience => BearerError::WrongAudience,
        ErrorKind::InvalidAlgorithm => BearerError::AlgorithmMismatch,
        ErrorKind::MissingRequiredClaim(c) | ErrorKind::InvalidClaimFormat(c) => {
            BearerError::BadClaim(c.clone())
        }
        ErrorKind::UnsupportedAlgorithm | ErrorKind::InvalidAlgorithmName => {
            BearerError::UnsupportedAlgorithm("unknown".into())
        }
        _ => BearerError::Malformed,
    }
}
