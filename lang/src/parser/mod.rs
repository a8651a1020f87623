//! Turns policy text into an [`ast::Policy`], reporting syntax errors with friendly names.
//!
//! A syntax error does not stop the parse: the parser resumes at the next line that starts a
//! declaration, so one run reports every broken declaration. The tree is only returned when
//! there were no errors.

mod build;
mod conditions;
mod invariants;
mod recovery;
mod rule_names;

use crate::ast::*;
use crate::diagnostic::Diagnostic;
use crate::span::Span;
use build::Builder;
use pest::iterators::Pairs;
use pest::Parser as _;
use recovery::recover;
use std::sync::{Mutex, PoisonError};

#[derive(pest_derive::Parser)]
#[grammar = "grammar.pest"]
pub(crate) struct GateParser;

/// Keywords that start a top-level declaration; recovery resumes at a line starting with one.
pub(super) const ITEM_KEYWORDS: &[&str] = &[
    "module",
    "use",
    "egress",
    "write",
    "ingest",
    "read",
    "stage",
    "latch",
    "hosts",
    "rule",
    "invariant",
    "invariants",
    "detokenise",
    "sanitise_output",
    "approvals",
    "budget",
];

/// pest's error-detail switch is one process-wide flag, read once when a parse starts. It is
/// off except while a detailed parse holds this lock, so the fast parses (every valid policy,
/// and the formatter's) never wait. A fast parse that starts while a detailed one runs reads
/// the flag on: it collects details it does not need and returns the same result.
static DETAIL: Mutex<()> = Mutex::new(());

/// Runs pest for `rule` without error detail, which is most of pest's cost: the parse of
/// every valid text. Takes no lock.
pub(crate) fn run_pest(
    rule: Rule,
    text: &str,
) -> Result<Pairs<'_, Rule>, pest::error::Error<Rule>> {
    GateParser::parse(rule, text)
}

/// Runs pest for `rule` with the bookkeeping behind friendly error messages, for a text
/// already known to fail. One at a time, and the flag is off again afterwards.
pub(crate) fn run_pest_detailed(
    rule: Rule,
    text: &str,
) -> Result<Pairs<'_, Rule>, pest::error::Error<Rule>> {
    let _one_at_a_time = DETAIL.lock().unwrap_or_else(PoisonError::into_inner);
    pest::set_error_detail(true);
    let result = GateParser::parse(rule, text);
    pest::set_error_detail(false);
    result
}

/// The fast parse, then, only on failure, the detailed one whose error explains itself.
fn parse_with_detail_on_error(
    rule: Rule,
    text: &str,
) -> Result<Pairs<'_, Rule>, pest::error::Error<Rule>> {
    run_pest(rule, text).or_else(|_| run_pest_detailed(rule, text))
}

/// Parses a whole policy. Returns every syntax error found when it fails.
pub fn parse(text: &str) -> Result<Policy, Vec<Diagnostic>> {
    parse_at(text, 0)
}

/// Parses a whole policy whose spans start at byte `base` rather than 0: an imported module
/// placed after the importing file in one [`crate::SourceFile`]. Diagnostics are shifted too.
pub fn parse_at(text: &str, base: usize) -> Result<Policy, Vec<Diagnostic>> {
    match parse_with_detail_on_error(Rule::file, text) {
        Ok(mut pairs) => {
            let file = pairs.next().ok_or_else(|| vec![internal(text)])?;
            let mut b = Builder::new(base);
            let policy = b.file(file);
            if b.errors.is_empty() {
                Ok(policy)
            } else {
                Err(b.errors)
            }
        }
        Err(err) => {
            let mut diags = recover(text, err);
            for d in &mut diags {
                d.span = Span::new(d.span.start + base, d.span.end + base);
            }
            Err(diags)
        }
    }
}

/// Parses a separate invariants file (`invariants for MODULE`, then `hosts` and `invariant`
/// declarations). Returns every syntax error found when it fails.
pub fn parse_invariants(text: &str) -> Result<InvariantsFile, Vec<Diagnostic>> {
    match parse_with_detail_on_error(Rule::invariants_file, text) {
        Ok(mut pairs) => {
            let file = pairs.next().ok_or_else(|| vec![internal(text)])?;
            let mut b = Builder::new(0);
            // The same shape as a policy: a header naming the module, then declarations.
            let Policy {
                module: policy,
                items,
            } = b.file(file);
            if b.errors.is_empty() {
                Ok(InvariantsFile { policy, items })
            } else {
                Err(b.errors)
            }
        }
        Err(err) => Err(recover(text, err)),
    }
}

fn internal(text: &str) -> Diagnostic {
    Diagnostic::error(
        Span::new(0, text.len().min(1)),
        "the parser produced no tree",
    )
}
