//! `.manifest`: OPA's manifest fields (`revision`, `roots`) with toolgate's own under
//! `metadata.toolgate`: the scope (the fleet or policy set the bundle is for), the serial (a
//! number that only grows from one bundle of a scope to the next), the version that built
//! it, when, and each policy's module name, file and revision. Scope and serial are signed
//! with the rest, so a replica can refuse another fleet's bundle and an older one.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::SystemTime;
use toolgate_engine::PolicySet;

/// The manifest of a bundle.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// The bundle's revision: given at build time, or a hash of its files.
    pub revision: String,
    /// OPA's roots; a toolgate bundle owns everything (`[""]`).
    pub roots: Vec<String>,
    /// What toolgate records.
    pub metadata: Metadata,
}

/// `metadata` of a manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Metadata {
    /// toolgate's own fields.
    pub toolgate: Built,
}

/// How and from what a bundle was built.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Built {
    /// The fleet or policy set this bundle is for (`serve --scope` must name it).
    pub scope: String,
    /// The bundle's place in its scope's sequence: each new bundle's is higher, and a replica
    /// refuses one not above what it serves.
    pub serial: u64,
    /// The toolgate version that built it.
    pub version: String,
    /// When, in RFC 3339.
    pub built_at: String,
    /// Each policy in it.
    pub modules: Vec<Module>,
}

/// One policy of a bundle.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Module {
    /// The module name.
    pub module: String,
    /// Its file in the bundle.
    pub file: String,
    /// Its revision (the content hash every decision reports).
    pub revision: String,
}

/// The longest scope name.
pub const MAX_SCOPE: usize = 128;

/// Why a scope name is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeError {
    /// Empty, or longer than [`MAX_SCOPE`].
    #[error("a scope is 1 to {MAX_SCOPE} characters")]
    Length,
    /// A character other than letters, digits and `- _ . : /`.
    #[error("a scope is letters, digits and `- _ . : /`")]
    Characters,
}

/// What is wrong with a bundle's manifest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// The bundle has no manifest file.
    #[error("no `{0}` file")]
    Missing(&'static str),
    /// The manifest is not the JSON a manifest is (serde's words, escaped for a log line).
    #[error("{0}")]
    Malformed(String),
    /// Its scope is not a scope name (the scope escaped for a log line).
    #[error("scope `{scope}`: {why}")]
    Scope {
        /// The scope, escaped.
        scope: String,
        /// Why it is refused.
        why: ScopeError,
    },
    /// Its serial is 0.
    #[error("serial 0: a serial is at least 1")]
    SerialZero,
    /// It could not be written out (serde's words).
    #[error("{0}")]
    Unwritable(String),
}

/// Checks a scope name: 1 to [`MAX_SCOPE`] letters, digits and `- _ . : /`, so it reads the
/// same in a manifest, a flag, a log line and a metric label.
pub fn check_scope(scope: &str) -> Result<(), ScopeError> {
    if scope.is_empty() || scope.len() > MAX_SCOPE {
        return Err(ScopeError::Length);
    }
    if !scope
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.:/".contains(&b))
    {
        return Err(ScopeError::Characters);
    }
    Ok(())
}

/// A scope from the command line (`--scope` of `bundle build` and `serve`).
pub fn parse_scope(s: &str) -> Result<String, ScopeError> {
    check_scope(s).map(|()| s.to_string())
}

/// What names a bundle in its sequence, given at build time.
#[derive(Debug, Clone)]
pub struct Stamp {
    /// The scope ([`Built::scope`]).
    pub scope: String,
    /// The serial ([`Built::serial`]), at least 1.
    pub serial: u64,
    /// OPA's free-form revision (a commit id); a hash of the files when `None`.
    pub revision: Option<String>,
}

impl Manifest {
    /// The manifest for `files`, whose policies compiled into `set`.
    pub fn new(
        files: &BTreeMap<String, String>,
        set: &PolicySet,
        stamp: Stamp,
        now: SystemTime,
    ) -> Manifest {
        let revision = stamp.revision.unwrap_or_else(|| {
            let listing: String = files
                .iter()
                .map(|(n, t)| format!("{n}\0{}\n", super::signature::sha256_hex(t.as_bytes())))
                .collect();
            super::signature::sha256_hex(listing.as_bytes())
        });
        Manifest {
            revision,
            roots: vec![String::new()],
            metadata: Metadata {
                toolgate: Built {
                    scope: stamp.scope,
                    serial: stamp.serial,
                    version: env!("CARGO_PKG_VERSION").to_string(),
                    built_at: humantime::format_rfc3339_seconds(now).to_string(),
                    modules: set
                        .iter()
                        .map(|p| Module {
                            module: p.module().to_string(),
                            file: p.source().name().to_string(),
                            revision: p.revision().to_string(),
                        })
                        .collect(),
                },
            },
        }
    }
}

impl Manifest {
    /// Checks what a replica relies on: a well-formed scope and a serial of at least 1.
    pub fn check(&self) -> Result<(), ManifestError> {
        let built = &self.metadata.toolgate;
        check_scope(&built.scope).map_err(|why| ManifestError::Scope {
            scope: toolgate_loader::log_text::escape(&built.scope).into_owned(),
            why,
        })?;
        if built.serial == 0 {
            return Err(ManifestError::SerialZero);
        }
        Ok(())
    }
}
