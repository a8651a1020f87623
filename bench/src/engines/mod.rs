//! The engines compared, each behind a few functions that load it and map its answer to
//! [`crate::verdict::Verdict`]s.

pub mod cedar;
pub mod floor;
pub mod rego;
pub mod toolgate;
