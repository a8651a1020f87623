//! Invariants: statements about every possible request, such as "the payout tool is never
//! allowed outside its stage". They are compiled against a policy's names but never read by
//! `decide`; the checker (`toolgate-prove`, `toolgate test`) judges requests and then asks
//! here whether any allowed call breaks one.
//!
//! `never allow SUBJECTS [when C] [unless U]` is broken by an allowed call whose tool matches
//! a subject, when `C` holds and `U` does not. Conditions are three-valued like rules, and an
//! unknown counts against the policy: an unknown `when` applies the invariant, an unknown
//! `unless` does not excuse the call.
//!
//! This module holds what a compiled invariant is; judging one against a policy is
//! `invariant_check.rs`, so a `Policy` can hold its inline invariants without this module
//! reading the policy back.

use crate::cond::Cond;
use crate::hosts::HostList;
use crate::ids::ToolId;
use crate::wire::response::Decision;
use std::sync::Arc;
use toolgate_lang::ast::ToolClass;
use toolgate_lang::{Diagnostic, SourceFile, Span};

/// A compiled set of invariants for one policy.
#[derive(Debug, Default)]
pub struct Invariants {
    pub(crate) list: Vec<Invariant>,
    /// The host lists conditions refer to: the policy's, then the invariants file's own.
    pub(crate) hosts: Vec<HostList>,
    pub(crate) source: Option<SourceFile>,
    pub(crate) warnings: Vec<Diagnostic>,
}

/// One compiled invariant.
#[derive(Debug)]
pub(crate) struct Invariant {
    pub(crate) name: Arc<str>,
    pub(crate) subjects: Vec<Subject>,
    pub(crate) when: Option<InvCond>,
    pub(crate) unless: Option<InvCond>,
    pub(crate) span: Span,
}

/// What a subject or `batch has` selector matches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Subject {
    Tool(ToolId),
    Class(ToolClass),
    Unclassified,
    Any,
}

/// A compiled `when` or `unless` condition.
#[derive(Debug)]
pub(crate) enum InvCond {
    And(Vec<InvCond>),
    Or(Vec<InvCond>),
    Not(Box<InvCond>),
    Cond(Cond),
    Stage { names: Vec<Box<str>>, negated: bool },
    BatchHas(Subject),
    Latched,
    FailOpen,
}

/// A call that breaks an invariant.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// The invariant's name.
    pub invariant: Arc<str>,
    /// The index of the offending call in the request.
    pub call: usize,
    /// The decision that allowed it.
    pub decision: Decision,
}

/// Whether an invariant applies to a call whatever its arguments and non-structural facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applies {
    /// Never: the subject does not match, `when` is false or `unless` is true for every
    /// possible argument and fact.
    No,
    /// Always: the subject matches, `when` is true and `unless` false whatever the arguments.
    Yes,
    /// It depends on arguments, facts or whether the decision failed open.
    Maybe,
}

impl Invariants {
    /// How many invariants there are.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The invariants' names, in declaration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.list.iter().map(|i| &*i.name)
    }

    /// Where invariant `index` is declared, as `file:line:col`.
    pub fn location(&self, index: usize) -> String {
        match (self.list.get(index), &self.source) {
            (Some(inv), Some(src)) => src.location(inv.span.start),
            _ => String::new(),
        }
    }

    /// Warnings found while compiling a separate invariants file.
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// The source of the invariants (the policy's own source for inline ones).
    pub fn source(&self) -> Option<&SourceFile> {
        self.source.as_ref()
    }
}
