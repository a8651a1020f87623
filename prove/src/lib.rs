//! toolgate-prove: checks a toolgate policy before it ships.
//!
//! - [`examples`]: example tests, requests with the decisions they must get
//!   (`NAME.tests.json` beside `NAME.gate`).
//! - [`diff`]: what a new version of a policy allows that the old one denied (`toolgate diff`,
//!   and the server's reload gate).
//! - [`invariants`]: invariants (`invariant NAME { never allow .. }`) checked by exhaustive
//!   enumeration of stages, tools, latch state and batch shapes, which is a proof for that
//!   part, and a seeded, shrinking property search over arguments and facts guided by the
//!   policy's own hosts, numbers, regexes and windows.
//!
//! `toolgate test` is a thin command over this crate; policy authors can call it from their
//! own Rust tests:
//!
//! ```
//! use toolgate_engine::Policy;
//! let source = "module m\nwrite pay\nread look\nstage a { tools [pay, look] }\nstage b { tools [look] }\n\
//!               invariant pay_only_in_a { never allow pay unless stage == a }\n";
//! let policy = Policy::compile("m.gate", source).expect("compiles");
//! let results = toolgate_prove::check_policy(&policy, None, &Default::default()).expect("parses");
//! assert!(results.iter().all(|r| r.passed() && r.proved_everywhere()));
//! ```

pub mod diff;
pub mod examples;
pub mod guide;
pub mod invariants;

pub use diff::{diff, diff_sets, Change, PolicyDiff, SetDiff};
pub use examples::{CaseResult, Coverage, TestFile, TestFileError, TestFileErrors};
pub use guide::Guide;
pub use invariants::{check, Config, Counterexample, InvariantResult};

use toolgate_engine::{CompileError, Invariants, Policy};

/// Checks a policy's inline invariants and, when given, a separate invariants file
/// `(file_name, text)`. Fails only when the invariants file does not compile.
pub fn check_policy(
    policy: &Policy,
    invariants_file: Option<(&str, &str)>,
    config: &Config,
) -> Result<Vec<InvariantResult>, CompileError> {
    let policy_ast = Some(policy.syntax());
    let mut results = Vec::new();
    if let Some(ast) = &policy_ast {
        if !policy.invariants().is_empty() {
            let guide = Guide::new(ast, None);
            results.extend(check(policy, policy.invariants(), &guide, config));
        }
    }
    if let Some((name, text)) = invariants_file {
        let compiled = Invariants::compile(policy, name, text)?;
        let file_ast = toolgate_lang::parse_invariants(text).ok();
        let guide = match &policy_ast {
            Some(ast) => Guide::new(ast, file_ast.as_ref()),
            None => Guide::default(),
        };
        results.extend(check(policy, &compiled, &guide, config));
    }
    Ok(results)
}
