//! Signed policy bundles: one `tar.gz` file holding a policy directory (its policies, the
//! files they import, their tests and invariants), a manifest and an Ed25519 signature over
//! every file's hash.
//!
//! The layout follows OPA's bundles where it fits: the manifest is `.manifest`, the
//! signature is `.signatures.json` holding one compact JWS whose payload lists every other
//! file with its SHA-256 hash. Reading a bundle ([`open`]) checks the archive's shape
//! (sizes, entry kinds, paths, duplicates) and then the signature, before any policy text is
//! compiled: a file that is not signed, a signed file that is missing, a changed hash, a
//! missing signature or another key's signature refuses the whole bundle.

mod archive;
mod collect;
pub mod keys;
pub mod manifest;
mod signature;

use ed25519_dalek::{SigningKey, VerifyingKey};
pub use manifest::Stamp;
use manifest::{Manifest, ManifestError};
pub use signature::sha256_hex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;
use toolgate_engine::PolicySet;
use toolgate_loader::LoadError;

pub use archive::Limits;

/// The manifest's name in the archive.
pub const MANIFEST: &str = ".manifest";
/// The signature file's name in the archive.
pub const SIGNATURES: &str = ".signatures.json";

/// Why a bundle could not be built, read or verified.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// A file could not be read or written.
    #[error("cannot {action} `{}`: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The archive is not gzip-compressed tar, or is cut short.
    #[error("not a readable tar.gz bundle: {0}")]
    Archive(String),
    /// Something in the archive is over a bound.
    #[error("{what} is over the limit of {limit} bytes")]
    TooLarge {
        /// What is too large.
        what: String,
        /// The bound.
        limit: u64,
    },
    /// Too many entries.
    #[error("the bundle has more than {0} entries")]
    TooManyEntries(usize),
    /// An entry that is not a plain file with a plain relative path.
    #[error("entry `{path}` refused: {reason}")]
    UnsafeEntry {
        /// The entry's path as stored.
        path: String,
        /// Why.
        reason: &'static str,
    },
    /// Two entries with one path.
    #[error("entry `{0}` appears twice")]
    Duplicate(String),
    /// A file that is not UTF-8 text.
    #[error("`{0}` is not UTF-8 text")]
    NotText(String),
    /// No `.signatures.json` while a key is configured.
    #[error(
        "the bundle is not signed (no `.signatures.json`), and a verification key is configured"
    )]
    Unsigned,
    /// The signature file is malformed or does not verify.
    #[error("bad signature: {0}")]
    Signature(String),
    /// A file in the archive that the signature does not list.
    #[error("`{0}` is in the bundle but not signed")]
    NotSigned(String),
    /// A file the signature lists that the archive does not hold.
    #[error("`{0}` is signed but missing from the bundle")]
    Missing(String),
    /// A file whose content is not what was signed.
    #[error("`{0}` does not match its signed hash (the bundle was changed after signing)")]
    Tampered(String),
    /// The manifest is missing or malformed.
    #[error("bad manifest: {0}")]
    Manifest(#[from] manifest::ManifestError),
    /// A key file is malformed.
    #[error("bad key `{}`: {reason}", path.display())]
    Key {
        /// The key file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The policies do not compile, or the directory has none.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// An import outside the directory being bundled.
    #[error(transparent)]
    Import(toolgate_engine::ImportError),
}

/// Reads the file at `path`, refusing it once it holds more than `limit` bytes: a device
/// (`/dev/zero`), a pipe or a wrong file is read no further than the bound.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, BundleError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|source| BundleError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    })?;
    let mut data = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut data)
        .map_err(|source| BundleError::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        })?;
    if data.len() as u64 > limit {
        return Err(BundleError::TooLarge {
            what: format!("`{}`", path.display()),
            limit,
        });
    }
    Ok(data)
}

/// A bundle whose archive and signature were checked.
#[derive(Debug)]
pub struct Verified {
    /// The manifest.
    pub manifest: Manifest,
    /// Every file but the manifest and the signature, by bundle path.
    pub files: BTreeMap<String, String>,
    /// The id of the key whose signature was verified; `None` when read without a key.
    pub key_id: Option<String>,
}

impl Verified {
    /// Compiles the bundle's policies into one set, all or nothing, resolving imports inside
    /// the bundle only.
    pub fn compile(&self, generation: u64, deny_warnings: bool) -> Result<PolicySet, LoadError> {
        toolgate_loader::memory::load_files(&self.files, generation, deny_warnings)
    }
}

/// Reads a bundle within `limits` and checks it. With `key`, the signature must be present,
/// made by that key, and list exactly the archive's files with their hashes; without one,
/// the signature is not checked (the caller decides whether unsigned bundles are allowed).
pub fn open(
    bytes: &[u8],
    key: Option<&VerifyingKey>,
    limits: &Limits,
) -> Result<Verified, BundleError> {
    let mut raw = archive::read(bytes, limits)?;
    let signatures = raw.remove(SIGNATURES);
    let key_id = match (key, signatures) {
        (Some(key), Some(sig)) => Some(signature::verify(&sig, key, &raw)?),
        (Some(_), None) => return Err(BundleError::Unsigned),
        (None, _) => None,
    };
    let manifest_bytes = raw
        .remove(MANIFEST)
        .ok_or(ManifestError::Missing(MANIFEST))?;
    let manifest: Manifest = serde_json::from_slice(&manifest_bytes).map_err(|e| {
        ManifestError::Malformed(toolgate_loader::log_text::escape(&e.to_string()).into_owned())
    })?;
    manifest.check()?;
    let files = raw
        .into_iter()
        .map(|(name, bytes)| match String::from_utf8(bytes) {
            Ok(text) => Ok((name, text)),
            Err(_) => Err(BundleError::NotText(name)),
        })
        .collect::<Result<_, _>>()?;
    Ok(Verified {
        manifest,
        files,
        key_id,
    })
}

/// Packs `dir` into a signed bundle: its policies compiled (so a bundle never holds a
/// policy that does not compile), the files they import (which must lie inside `dir`), and
/// every `*.invariants.gate` and `*.tests.json` beside them. `stamp` names the bundle's scope
/// and serial; its revision defaults to a hash of the files' contents.
pub fn build(
    dir: &Path,
    key: &SigningKey,
    stamp: Stamp,
    now: SystemTime,
) -> Result<Vec<u8>, BundleError> {
    manifest::check_scope(&stamp.scope).map_err(|why| ManifestError::Scope {
        scope: toolgate_loader::log_text::escape(&stamp.scope).into_owned(),
        why,
    })?;
    if stamp.serial == 0 {
        return Err(ManifestError::SerialZero.into());
    }
    let files = collect::collect(dir)?;
    let set = toolgate_loader::memory::load_files(&files, 0, false)?;
    let manifest = Manifest::new(&files, &set, stamp, now);
    let mut raw: BTreeMap<String, Vec<u8>> = files
        .into_iter()
        .map(|(n, t)| (n, t.into_bytes()))
        .collect();
    let manifest_json = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| ManifestError::Unwritable(e.to_string()))?;
    raw.insert(MANIFEST.to_string(), manifest_json);
    let sig = signature::sign(key, &raw);
    raw.insert(SIGNATURES.to_string(), sig);
    archive::write(&raw)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn key() -> SigningKey {
        SigningKey::from_bytes(&[7; 32])
    }

    /// A signed archive of `files` plus a `.manifest` holding `manifest`.
    fn signed(manifest: &serde_json::Value) -> Vec<u8> {
        let mut raw = BTreeMap::from([
            ("gate.gate".to_string(), b"module gate\n".to_vec()),
            (MANIFEST.to_string(), manifest.to_string().into_bytes()),
        ]);
        let sig = signature::sign(&key(), &raw);
        raw.insert(SIGNATURES.to_string(), sig);
        archive::write(&raw).unwrap()
    }

    fn manifest(toolgate: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"revision": "r", "roots": [""], "metadata": {"toolgate": toolgate}})
    }

    #[test]
    fn a_manifest_without_a_scope_or_serial_or_with_a_bad_one_is_refused() {
        let vk = key().verifying_key();
        let base = serde_json::json!({"version": "0", "built_at": "x", "modules": []});
        let mut good = base.clone();
        good["scope"] = "fleet-a".into();
        good["serial"] = 3.into();
        let opened = open(
            &signed(&manifest(good.clone())),
            Some(&vk),
            &Limits::default(),
        );
        assert_eq!(opened.unwrap().manifest.metadata.toolgate.serial, 3);

        let err = open(&signed(&manifest(base)), Some(&vk), &Limits::default()).unwrap_err();
        assert!(err.to_string().contains("missing field `scope`"), "{err}");
        for (field, value, expect) in [
            ("serial", serde_json::json!(0), "serial 0"),
            ("scope", serde_json::json!(""), "a scope is 1 to"),
            (
                "scope",
                serde_json::json!("a\nb\u{1b}"),
                "scope `a\\u{a}b\\u{1b}`",
            ),
        ] {
            let mut bad = good.clone();
            bad[field] = value;
            let err = open(&signed(&manifest(bad)), Some(&vk), &Limits::default()).unwrap_err();
            assert!(err.to_string().contains(expect), "{field}: {err}");
        }
    }
}
