//! `.manifest`: OPA's manifest fields (`revision`, `roots`) with toolgate's own under
//! `metadata.toolgate`: the version that built it, when, and each policy's module name,
//! file and revision.

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

impl Manifest {
    /// The manifest for `files`, whose policies compiled into `set`.
    pub fn new(
        files: &BTreeMap<String, String>,
        set: &PolicySet,
        revision: Option<String>,
        now: SystemTime,
    ) -> Manifest {
        let revision = revision.unwrap_or_else(|| {
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
