//! Bundle keys: Ed25519, stored as PEM (`bundle.key`: PKCS#8, `bundle.pub`:
//! SubjectPublicKeyInfo), the formats `openssl` and every JOSE library read.

use super::BundleError;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{SigningKey, VerifyingKey};
use std::path::{Path, PathBuf};

/// The private key's file name in `keygen`'s output folder.
pub const PRIVATE: &str = "bundle.key";
/// The public key's file name.
pub const PUBLIC: &str = "bundle.pub";

/// Makes a new key pair from the operating system's random source and writes both files
/// into `dir`; never overwrites a key. Returns their paths.
pub fn generate(dir: &Path) -> Result<(PathBuf, PathBuf), BundleError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| BundleError::Key {
        path: dir.to_path_buf(),
        reason: format!("no randomness from the operating system: {e}"),
    })?;
    let key = SigningKey::from_bytes(&seed);
    let bad = |path: &Path, e: &dyn std::fmt::Display| BundleError::Key {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let (private, public) = (dir.join(PRIVATE), dir.join(PUBLIC));
    let private_pem = key
        .to_pkcs8_pem(LineEnding::LF)
        .map_err(|e| bad(&private, &e))?;
    let public_pem = key
        .verifying_key()
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| bad(&public, &e))?;
    std::fs::create_dir_all(dir).map_err(|source| io("create", dir, source))?;
    write_new(&private, private_pem.as_bytes(), 0o600)?;
    write_new(&public, public_pem.as_bytes(), 0o644)?;
    Ok((private, public))
}

fn io(action: &'static str, path: &Path, source: std::io::Error) -> BundleError {
    BundleError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

fn write_new(path: &Path, data: &[u8], mode: u32) -> Result<(), BundleError> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(path).map_err(|e| io("create", path, e))?;
    file.write_all(data).map_err(|e| io("write", path, e))
}

/// Reads a private key (`bundle.key`).
pub fn read_private(path: &Path) -> Result<SigningKey, BundleError> {
    let text = std::fs::read_to_string(path).map_err(|e| io("read", path, e))?;
    SigningKey::from_pkcs8_pem(&text).map_err(|e| BundleError::Key {
        path: path.to_path_buf(),
        reason: format!("not an Ed25519 PKCS#8 PEM private key ({e})"),
    })
}

/// Reads a public key (`bundle.pub`).
pub fn read_public(path: &Path) -> Result<VerifyingKey, BundleError> {
    let text = std::fs::read_to_string(path).map_err(|e| io("read", path, e))?;
    VerifyingKey::from_public_key_pem(&text).map_err(|e| BundleError::Key {
        path: path.to_path_buf(),
        reason: format!("not an Ed25519 PEM public key ({e})"),
    })
}
