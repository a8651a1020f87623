//! toolgate's engine: compiles a policy into read-only tables and judges tool-call batches.
//!
//! ```
//! use toolgate_engine::{Call, Facts, Policy, Request};
//! use serde_json::json;
//!
//! let policy = Policy::compile("demo.gate", r#"
//!     module demo
//!     write send_email
//!     read  lookup
//!     stage main { tools [lookup] }
//! "#).expect("compiles");
//!
//! let request = Request::new(
//!     Facts::in_stage("main"),
//!     vec![Call::new("c1", "lookup", json!({})), Call::new("c2", "send_email", json!({}))],
//! );
//! let response = policy.decide(&request);
//! assert!(response.decisions[0].allow);
//! assert!(!response.decisions[1].allow); // not in this stage's whitelist
//! ```
//!
//! The engine never does I/O, never reads a clock, and never panics on any request.

#[doc(hidden)]
mod approval;
mod budget;
pub mod builtins;
mod call_label;
mod compile;
mod cond;
mod decide;
#[doc(hidden)]
pub mod entail;
mod error;
mod explain;
mod filled;
mod hosts;
mod hot_swap;
mod ids;
mod imports;
mod invariant;
mod invariant_check;
mod limits;
mod lint;
mod name_table;
mod offer;
mod pipeline;
mod policy;
mod provenance;
mod provenance_words;
mod refusal;
mod request_check;
mod strict_url;
mod text;
mod tool_set;
mod truth;
mod vault;
mod wire;
mod words;

// Compiling: a policy from text, its errors and warnings, the standard library and imports.
pub use error::CompileError;
pub use imports::{
    resolve_stdlib, stdlib_module, ImportError, ImportTarget, ModuleText, Resolver, STDLIB,
};
pub use limits::{MAX_IMPORT_DEPTH, MAX_INDEXED_BYTES, MAX_SOURCE_BYTES};
pub use policy::Policy;
pub use toolgate_lang::ast::ToolClass;
pub use toolgate_lang::{Diagnostic, Severity, SourceFile};

// The wire: requests, responses and their strict readers.
pub use approval::{well_formed as is_approval_digest, PREFIX as APPROVAL_PREFIX};
pub use budget::{Budget, BudgetScope};
pub use decide::{ReadRequest, Verdict};
pub use error::RequestError;
pub use text::type_name as json_type_name;
pub use vault::TOKEN_PREFIX;
/// The JSON Schema of a request and a response (feature `json-schema`).
#[cfg(feature = "json-schema")]
pub use wire::json_schema;
pub use wire::outputs::validate_outputs;
pub use wire::principal::principal_value;
pub use wire::request::{Call, CalledTool, Facts, Latched, Message, Request};
pub use wire::response::{Decision, DenyKind, LatchState, Provenance, ProvenanceWhy, Response};
/// Every key of the wire format, named once (see the module's docs).
pub use wire::schema;
pub use wire::strict_json::parse as parse_json;

// Judging beside `decide`: explanations, the offered tool list, built-in windows, latches.
pub use builtins::{clamp_window, DEFAULT_WINDOW, MAX_WINDOW};
pub use call_label::CallLabel;
pub use explain::{CallExplanation, Step};
pub use ids::MAX_LATCHES;
pub use offer::{DisabledTool, Offer, OfferRequest, ToolDef, WithheldReason, WithheldTool};

// Serving: a set of policies swapped whole.
pub use hot_swap::{DuplicateModule, PolicySet, PolicyStore};

// Proving: invariants, checked by `toolgate-prove` and `toolgate test`.
pub use invariant::{Applies, Invariants, Violation};

/// What toolgate's own crates (`toolgate-prove`'s search and change gate) read of the
/// engine's internals: the built-in registry and the entailment proof. No stability is
/// promised here; an embedding executor needs none of it.
#[doc(hidden)]
pub mod unstable {
    pub use crate::builtins;
    pub use crate::entail;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn policy_is_send_and_sync() {
        assert_send_sync::<Policy>();
        assert_send_sync::<std::sync::Arc<Policy>>();
    }
}
