//! Bundle keys: Ed25519, stored as PEM (`bundle.key`: PKCS#8 v1, RFC 8410's
//! `OneAsymmetricKey` without the optional public key; `bundle.pub`: SubjectPublicKeyInfo),
//! the forms `openssl pkey` and Python's `cryptography` read. Key files are read within a
//! bound, and a private key that others may read is reported.

use super::BundleError;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{
    DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, KeypairBytes,
};
use ed25519_dalek::{SigningKey, VerifyingKey};
use std::path::{Path, PathBuf};

/// The private key's file name in `keygen`'s output folder.
pub const PRIVATE: &str = "bundle.key";
/// The public key's file name.
pub const PUBLIC: &str = "bundle.pub";
/// The largest key file read: an Ed25519 PEM key is about 120 bytes; anything past this is
/// not a key (`/dev/zero`, a bundle passed by mistake) and is refused before it fills memory.
pub const MAX_KEY_FILE: u64 = 16 << 10;

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
    // PKCS#8 v1: without the public key, which ed25519-dalek would add as a v2 document
    // that OpenSSL 3.0 and `cryptography` refuse.
    let private_pem = KeypairBytes {
        secret_key: key.to_bytes(),
        public_key: None,
    }
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

/// Reads a key file as text, at most [`MAX_KEY_FILE`] bytes.
fn read_key_text(path: &Path) -> Result<String, BundleError> {
    let bytes = super::read_bounded(path, MAX_KEY_FILE).map_err(|e| match e {
        BundleError::TooLarge { limit, .. } => BundleError::Key {
            path: path.to_path_buf(),
            reason: format!("over {limit} bytes, so not a PEM key file (read no further)"),
        },
        other => other,
    })?;
    String::from_utf8(bytes).map_err(|_| BundleError::Key {
        path: path.to_path_buf(),
        reason: "not a PEM file (not text)".into(),
    })
}

/// Reads a private key (`bundle.key`).
pub fn read_private(path: &Path) -> Result<SigningKey, BundleError> {
    let text = read_key_text(path)?;
    SigningKey::from_pkcs8_pem(&text).map_err(|e| BundleError::Key {
        path: path.to_path_buf(),
        reason: format!("not an Ed25519 PKCS#8 PEM private key ({e})"),
    })
}

/// A warning when the private key at `path` may be read by the file's group or by others
/// (any of mode `0o077`): a signing key should be the owner's alone (`chmod 600`).
pub fn loose_permissions(path: &Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
        (mode & 0o077 != 0).then(|| {
            format!(
                "the private key `{}` is open to its group or others (mode {mode:04o}); `chmod 600` it",
                path.display()
            )
        })
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// Reads a public key (`bundle.pub`).
pub fn read_public(path: &Path) -> Result<VerifyingKey, BundleError> {
    let text = read_key_text(path)?;
    VerifyingKey::from_public_key_pem(&text).map_err(|e| BundleError::Key {
        path: path.to_path_buf(),
        reason: format!("not an Ed25519 PEM public key ({e})"),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_generated_key_is_pkcs8_v1_and_reads_back() {
        let dir = std::env::temp_dir().join(format!("toolgate-keys-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (private, public) = generate(&dir).unwrap();
        let pem = std::fs::read_to_string(&private).unwrap();
        let der = ed25519_dalek::pkcs8::SecretDocument::from_pem(&pem)
            .unwrap()
            .1;
        // SEQUENCE, length 46, INTEGER 0 (v1): no [1] public key after the private one.
        assert_eq!(&der.as_bytes()[..5], &[0x30, 0x2e, 0x02, 0x01, 0x00]);
        let key = read_private(&private).unwrap();
        assert_eq!(read_public(&public).unwrap(), key.verifying_key());
        assert_eq!(loose_permissions(&private), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
