//! The toolgate policy language: grammar, parser, syntax tree and diagnostics.
//!
//! ```
//! let policy = toolgate_lang::parse("module demo\nread lookup\nstage main { tools [lookup] }\n")
//!     .expect("parses");
//! assert_eq!(policy.module.name, "demo");
//! ```

pub mod ast;
mod diagnostic;
mod fmt;
mod parser;
mod span;
mod suggest;

pub use diagnostic::{render_all, Diagnostic, Severity};
pub use fmt::{format_source, MAX_WIDTH};
pub use parser::{parse, parse_at, parse_invariants};
pub use span::{LineCol, SourceFile, Span};
pub use suggest::{did_you_mean, edit_distance_within};
