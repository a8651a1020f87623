//! `.signatures.json`, as OPA writes it: `{"signatures": ["JWS"]}` with one compact JWS
//! (`header.payload.signature`, base64url). The header is `{"alg":"EdDSA"}`; the payload
//! lists every other file of the bundle with its SHA-256 hash (hex) and names the key.
//! Verification accepts only `EdDSA` (no `none`, no algorithm picked by the bundle), only the
//! configured key, and only a file list equal to the archive's.

use super::BundleError;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use toolgate_loader::log_text::escape;

/// The hash algorithm named in each file entry.
const ALGORITHM: &str = "SHA-256";

#[derive(Serialize, Deserialize)]
struct SignaturesFile {
    signatures: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct Header {
    alg: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    typ: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Payload {
    files: Vec<FileHash>,
    keyid: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHash {
    name: String,
    hash: String,
    algorithm: String,
}

/// The hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A key's id: the first 16 hex digits of the SHA-256 of its public key.
pub fn key_id(key: &VerifyingKey) -> String {
    sha256_hex(key.as_bytes())[..16].to_string()
}

/// Signs the hashes of `files`; returns the contents of `.signatures.json`.
pub fn sign(key: &SigningKey, files: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let header = Header {
        alg: "EdDSA".into(),
        typ: Some("JWT".into()),
    };
    let payload = Payload {
        files: files
            .iter()
            .map(|(name, data)| FileHash {
                name: name.clone(),
                hash: sha256_hex(data),
                algorithm: ALGORITHM.into(),
            })
            .collect(),
        keyid: key_id(&key.verifying_key()),
    };
    let signing_input = format!("{}.{}", b64_json(&header), b64_json(&payload));
    let sig = key.sign(signing_input.as_bytes());
    let jws = format!("{signing_input}.{}", B64.encode(sig.to_bytes()));
    serde_json::to_vec_pretty(&SignaturesFile {
        signatures: vec![jws],
    })
    .unwrap_or_default()
}

fn b64_json<T: Serialize>(value: &T) -> String {
    B64.encode(serde_json::to_vec(value).unwrap_or_default())
}

/// Checks `.signatures.json` against `key` and the archive's other `files`; returns the
/// signer's key id.
pub fn verify(
    signatures: &[u8],
    key: &VerifyingKey,
    files: &BTreeMap<String, Vec<u8>>,
) -> Result<String, BundleError> {
    let bad = |m: String| BundleError::Signature(m);
    let parsed: SignaturesFile =
        serde_json::from_slice(signatures).map_err(|e| bad(format!("`.signatures.json`: {e}")))?;
    let [jws] = parsed.signatures.as_slice() else {
        return Err(bad(format!(
            "expected exactly one signature, found {}",
            parsed.signatures.len()
        )));
    };
    let mut parts = jws.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("not a compact JWS (`header.payload.signature`)".into()));
    };
    let decode = |part: &str, what: &str| {
        B64.decode(part)
            .map_err(|e| bad(format!("{what} is not base64url: {e}")))
    };
    let header: Header = serde_json::from_slice(&decode(h, "the header")?)
        .map_err(|e| bad(format!("header: {e}")))?;
    if header.alg != "EdDSA" {
        return Err(bad(format!(
            "algorithm `{}` is not accepted; bundles are signed with `EdDSA`",
            escape(&header.alg)
        )));
    }
    let sig_bytes: [u8; 64] = decode(s, "the signature")?
        .try_into()
        .map_err(|_| bad("an Ed25519 signature is 64 bytes".into()))?;
    let signing_input = &jws[..h.len() + 1 + p.len()];
    let payload_bytes = decode(p, "the payload")?;
    let payload: Option<Payload> = serde_json::from_slice(&payload_bytes).ok();
    key.verify_strict(signing_input.as_bytes(), &Signature::from_bytes(&sig_bytes))
        .map_err(|_| {
            // Unverified text from the bundle: escaped before it reaches a log line.
            let signer = payload.as_ref().map_or("?".into(), |p| escape(&p.keyid));
            bad(format!(
                "the signature does not verify with the configured key (key id {}; the bundle names key id {signer})",
                key_id(key)
            ))
        })?;
    let payload = payload.ok_or_else(|| bad("the signed payload is malformed".into()))?;
    let mut signed: BTreeMap<&str, &FileHash> = BTreeMap::new();
    for f in &payload.files {
        if f.algorithm != ALGORITHM {
            return Err(bad(format!(
                "`{}`: hash algorithm `{}` is not accepted",
                escape(&f.name),
                escape(&f.algorithm)
            )));
        }
        if signed.insert(&f.name, f).is_some() {
            return Err(bad(format!("`{}` is listed twice", escape(&f.name))));
        }
    }
    for (name, data) in files {
        match signed.remove(name.as_str()) {
            None => return Err(BundleError::NotSigned(name.clone())),
            Some(f) if f.hash != sha256_hex(data) => {
                return Err(BundleError::Tampered(name.clone()))
            }
            Some(_) => {}
        }
    }
    if let Some(name) = signed.keys().next() {
        return Err(BundleError::Missing(escape(name).into_owned()));
    }
    Ok(payload.keyid)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    fn files() -> BTreeMap<String, Vec<u8>> {
        BTreeMap::from([("a.gate".to_string(), b"module a\n".to_vec())])
    }

    fn jws_of(signatures: &[u8]) -> String {
        let parsed: SignaturesFile = serde_json::from_slice(signatures).unwrap();
        parsed.signatures[0].clone()
    }

    fn wrap(jws: &[&str]) -> Vec<u8> {
        serde_json::to_vec(&SignaturesFile {
            signatures: jws.iter().map(|s| s.to_string()).collect(),
        })
        .unwrap()
    }

    #[test]
    fn a_signature_verifies_with_its_key_only() {
        let sig = sign(&key(1), &files());
        let id = verify(&sig, &key(1).verifying_key(), &files()).unwrap();
        assert_eq!(id, key_id(&key(1).verifying_key()));
        let err = verify(&sig, &key(2).verifying_key(), &files()).unwrap_err();
        assert!(err.to_string().contains("does not verify"), "{err}");
    }

    #[test]
    fn alg_none_and_other_algorithms_are_refused_whatever_the_payload() {
        let jws = jws_of(&sign(&key(1), &files()));
        let payload = jws.split('.').nth(1).unwrap();
        for alg in ["none", "HS256", "RS256", "eddsa"] {
            let header = B64.encode(format!("{{\"alg\":\"{alg}\"}}"));
            let forged = wrap(&[&format!("{header}.{payload}.")]);
            let err = verify(&forged, &key(1).verifying_key(), &files()).unwrap_err();
            assert!(err.to_string().contains("is not accepted"), "{alg}: {err}");
        }
    }

    #[test]
    fn a_changed_payload_or_a_second_signature_is_refused() {
        let jws = jws_of(&sign(&key(1), &files()));
        let mut parts: Vec<&str> = jws.split('.').collect();
        let other = jws_of(&sign(&key(1), &BTreeMap::new()));
        parts[1] = other.split('.').nth(1).unwrap();
        let spliced = wrap(&[&parts.join(".")]);
        assert!(verify(&spliced, &key(1).verifying_key(), &files()).is_err());
        let two = wrap(&[&jws, &jws]);
        let err = verify(&two, &key(1).verifying_key(), &files()).unwrap_err();
        assert!(err.to_string().contains("exactly one"), "{err}");
        let none = wrap(&[]);
        assert!(verify(&none, &key(1).verifying_key(), &files()).is_err());
    }
}
