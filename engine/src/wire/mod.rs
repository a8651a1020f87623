//! The wire: what a decision request and its response are, and the readers of request text.
//!
//! - `schema`: every key of a request, named once, with each object's key list (public as
//!   [`crate::schema`]); every reader below matches on it.
//! - `request`: the owned [`crate::Request`] and its strict reader, which names the
//!   offending field; `principal` and `outputs`: the shapes of `facts.principal` and
//!   `facts.outputs`, checked by both readers with one function each.
//! - `fast_json` + `view`: the one-pass, zero-copy reader behind
//!   [`crate::Policy::decide_json`] and the read-only views that let one evaluator read an
//!   owned or a borrowed request alike.
//! - `strict_json`: text to JSON, refusing a key given twice, for every reader.
//! - `response`: [`crate::Response`] and [`crate::Decision`], serialised with serde.
//! - `json_schema` (feature `json-schema`): the JSON Schema of a request and a response,
//!   derived from these types; its checked-in copies and the Node and Python declarations
//!   are generated from it (`tests/tests/wire_schema.rs`).
//!
//! What a request must agree with in a policy (its module, latch names) is the policy's
//! check, `request_check.rs`, outside this module.

pub(crate) mod fast_json;
#[cfg(feature = "json-schema")]
pub mod json_schema;
pub(crate) mod outputs;
pub(crate) mod principal;
pub(crate) mod request;
pub(crate) mod response;
pub mod schema;
pub(crate) mod strict_json;
pub(crate) mod view;
