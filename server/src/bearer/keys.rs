//! The issuer's keys: a JWKS read from a file or fetched over https, indexed by key id.

use crate::error::ServerError;
use arc_swap::ArcSwap;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The algorithms a token may be signed with: asymmetric only, so holding the JWKS never
/// lets anyone sign.
pub(super) const ALGORITHMS: [Algorithm; 3] =
    [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];

/// How long a JWKS fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The most bytes of a JWKS read.
const MAX_JWKS_BYTES: usize = 1 << 20;

/// One usable key.
pub(super) struct Key {
    pub(super) kid: Option<String>,
    pub(super) alg: Algorithm,
    pub(super) key: DecodingKey,
}

/// The current key set, swapped whole on a refresh.
pub(super) struct KeyRing {
    source: String,
    keys: ArcSwap<Vec<Key>>,
    /// Bumped on every refresh that changed the set, so cached verifications of older sets
    /// are not used.
    generation: AtomicU64,
    last_refresh: std::sync::Mutex<Instant>,
    refreshing: tokio::sync::Mutex<()>,
    client: Option<reqwest::Client>,
}

impl KeyRing {
    /// Loads `source` (a path, or an `https://` URL; `http://` is refused beyond loopback
    /// hosts, since a key set fetched in the clear could be anyone's).
    pub(super) async fn load(source: &str) -> Result<KeyRing, ServerError> {
        let client = if is_url(source) {
            check_url(source)?;
            Some(crate::http_client::client(FETCH_TIMEOUT)?)
        } else {
            None
        };
        let ring = KeyRing {
            source: source.to_string(),
            keys: ArcSwap::from_pointee(Vec::new()),
            generation: AtomicU64::new(0),
            // The first key id the set lacks may refresh it at once.
            last_refresh: std::sync::Mutex::new(
                Instant::now()
                    .checked_sub(super::REFRESH_EVERY)
                    .unwrap_or_else(Instant::now),
            ),
            refreshing: tokio::sync::Mutex::new(()),
            client,
        };
        let keys = ring.read().await.map_err(|why| ServerError::Jwks {
            jwks: source.to_string(),
            why,
        })?;
        if keys.is_empty() {
            return Err(ServerError::Jwks {
                jwks: source.to_string(),
                why: "it holds no RS256, ES256 or EdDSA signing key".into(),
            });
        }
        ring.keys.store(Arc::new(keys));
        Ok(ring)
    }

    /// The set's generation.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The key for a token's `kid` (a token without one matches a key without one).
    pub(super) fn find(&self, kid: Option<&str>) -> Option<(Algorithm, DecodingKey)> {
        self.keys
            .load()
            .iter()
            .find(|k| k.kid.as_deref() == kid)
            .map(|k| (k.alg, k.key.clone()))
    }

    /// Reads the set again, unless it was read less than [`super::REFRESH_EVERY`] ago; a
    /// set that cannot be read, or holds no key, leaves the old one serving.
    pub(super) async fn refresh(&self) {
        let _one = self.refreshing.lock().await;
        {
            let Ok(last) = self.last_refresh.lock() else {
                return;
            };
            if last.elapsed() < super::REFRESH_EVERY {
                return;
            }
        }
        let read = self.read().await;
        if let Ok(mut last) = self.last_refresh.lock() {
            *last = Instant::now();
        }
        match read {
            Ok(keys) if !keys.is_empty() => {
                self.keys.store(Arc::new(keys));
                self.generation.fetch_add(1, Ordering::AcqRel);
            }
            Ok(_) => eprintln!(
                "toolgate: --jwks {}: the refreshed key set holds no usable key; the old keys stay",
                self.source
            ),
            Err(why) => eprintln!(
                "toolgate: --jwks {}: cannot refresh ({why}); the old keys stay",
                self.source
            ),
        }
    }

    /// The set's usable keys.
    async fn read(&self) -> Result<Vec<Key>, String> {
        let bytes = match &self.client {
            Some(client) => {
                let response = client
                    .get(&self.source)
                    .send()
                    .await
                    .and_then(|r| r.error_for_status())
                    .map_err(|e| crate::http_client::error_chain(&e))?;
                let bytes = response
                    .bytes()
                    .await
                    .map_err(|e| crate::http_client::error_chain(&e))?;
                bytes.to_vec()
            }
            None => tokio::fs::read(&self.source)
                .await
                .map_err(|e| format!("cannot read it: {e}"))?,
        };
        if bytes.len() > MAX_JWKS_BYTES {
            return Err(format!("it is over {MAX_JWKS_BYTES} bytes"));
        }
        parse(&bytes)
    }
}

/// The usable keys of a JWKS document: each signing key of a supported algorithm, its
/// algorithm from `alg` or else from its type and curve. A key that is not usable is
/// skipped, so one odd key does not take the issuer's others with it.
pub(super) fn parse(bytes: &[u8]) -> Result<Vec<Key>, String> {
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| format!("it is not JSON: {e}"))?;
    let Some(list) = doc.get("keys").and_then(Value::as_array) else {
        return Err("it has no `keys` array".into());
    };
    let mut keys = Vec::new();
    for entry in list {
        let Ok(jwk) = serde_json::from_value::<Jwk>(entry.clone()) else {
            continue;
        };
        if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
            continue;
        }
        let Some(alg) = algorithm(&jwk) else {
            continue;
        };
        let Ok(key) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        keys.push(Key {
            kid: jwk.common.key_id.clone(),
            alg,
            key,
        });
    }
    Ok(keys)
}

/// The key's algorithm, when it is one of [`ALGORITHMS`] and fits the key's type.
fn algorithm(jwk: &Jwk) -> Option<Algorithm> {
    let by_type = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => Algorithm::ES256,
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        _ => return None,
    };
    match jwk.common.key_algorithm {
        None => Some(by_type),
        // The JWK names its algorithm as the token header does (`RS256`, `EdDSA`).
        Some(named) => format!("{named:?}")
            .parse::<Algorithm>()
            .ok()
            .filter(|a| *a == by_type),
    }
}

fn is_url(source: &str) -> bool {
    source.starts_with("https://") || source.starts_with("http://")
}

/// An `https` URL, or `http` to a loopback host (a test's or a sidecar's own JWKS).
fn check_url(source: &str) -> Result<(), ServerError> {
    let Some(rest) = source.strip_prefix("http://") else {
        return Ok(());
    };
    let host = if rest.starts_with("[::1]") {
        "[::1]"
    } else {
        rest.split(['/', ':']).next().unwrap_or("")
    };
    if matches!(host, "127.0.0.1" | "localhost" | "[::1]") {
        Ok(())
    } else {
        Err(ServerError::Jwks {
            jwks: source.to_string(),
            why: "a key set is fetched over https (http only from a loopback host)".into(),
        })
    }
}
