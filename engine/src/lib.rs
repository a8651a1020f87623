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

pub mod builtins;
mod call_label;
mod compile;
mod cond;
mod decide;
pub mod entail;
mod error;
mod explain;
mod fast_json;
mod filled;
mod hosts;
mod hot_swap;
mod ids;
mod imports;
mod invariant;
mod limits;
mod lint;
mod name_table;
mod offer;
mod pipeline;
mod policy;
mod refusal;
mod request;
mod request_check;
mod response;
pub mod schema;
mod strict_json;
mod strict_url;
mod text;
mod tool_set;
mod truth;
mod vault;
mod view;
mod words;

pub use builtins::{clamp_window, DEFAULT_WINDOW, MAX_WINDOW};
pub use call_label::CallLabel;
pub use decide::{ReadRequest, Verdict};
pub use error::{CompileError, RequestError};
pub use explain::{CallExplanation, Step};
pub use hot_swap::{DuplicateModule, PolicySet, PolicyStore};
pub use ids::MAX_LATCHES;
pub use imports::{resolve_stdlib, stdlib_module, ImportTarget, ModuleText, STDLIB};
pub use invariant::{Applies, Invariants, Violation};
pub use limits::{MAX_IMPORT_DEPTH, MAX_SOURCE_BYTES};
pub use offer::{DisabledTool, Offer, OfferRequest, ToolDef, WithheldReason, WithheldTool};
pub use policy::Policy;
pub use request::{Call, CalledTool, Facts, Latched, Message, Request};
pub use response::{Decision, DenyKind, LatchState, Response};
pub use strict_json::parse as parse_json;
pub use toolgate_lang::ast::ToolClass;
pub use toolgate_lang::{Diagnostic, Severity, SourceFile};
pub use vault::TOKEN_PREFIX;

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
