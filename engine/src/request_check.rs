//! What a request must agree with in the policy before any call is judged: the module it
//! names, and the latch names its `latched` fact uses. Both are errors, not denials: a request
//! meant for another policy, or carrying state under a name nobody declared, cannot be judged
//! as the executor meant it.

use crate::error::RequestError;
use crate::policy::Policy;
use crate::wire::request::{repeated_id, repeated_id_error, schema, Facts, Request};
use crate::wire::view::LatchedRef;
use toolgate_lang::did_you_mean;

impl Policy {
    /// Errors when `request` names a policy module other than this one, or its `latched`
    /// fact names a latch this policy does not declare (a mis-cased name would otherwise
    /// leave the latch it meant unset). [`Policy::decide_json`] runs this itself.
    /// Two calls with one id are refused too (the JSON readers refuse them already; this
    /// catches a request built in Rust): executors map decisions back by id.
    pub fn check_request(&self, request: &Request) -> Result<(), RequestError> {
        self.check_module(request.policy.as_deref())?;
        let calls = &request.calls;
        if let Some((first, again)) = repeated_id(calls.len(), |i| &calls[i].id) {
            return Err(repeated_id_error(&calls[again].id, first, again));
        }
        self.check_facts(&request.facts)
    }

    /// Errors when the `latched` fact of `facts` names a latch this policy does not declare,
    /// or when a custom fact no rule reads is named like a standard fact (`latch`,
    /// `Latched`, `mesages`): that is a standard fact misspelt, which would be read as absent.
    pub fn check_facts(&self, facts: &Facts) -> Result<(), RequestError> {
        self.check_latch_names(LatchedRef::from(&facts.latched))?;
        self.check_spent_names(crate::wire::view::FactsRef::Owned(facts))?;
        for key in facts.other.keys() {
            if self.custom_facts.iter().any(|k| **k == **key) {
                continue;
            }
            if let Some(meant) = crate::wire::schema::near_standard_fact(key) {
                return Err(misspelt_fact(key, meant));
            }
        }
        Ok(())
    }

    /// Errors when `requested` is a module other than this one.
    pub(crate) fn check_module(&self, requested: Option<&str>) -> Result<(), RequestError> {
        match requested {
            Some(p) if *p != *self.module => Err(RequestError::WrongPolicy {
                requested: p.to_owned(),
                loaded: self.module.to_string(),
            }),
            _ => Ok(()),
        }
    }

    pub(crate) fn check_latch_names(&self, fact: LatchedRef<'_>) -> Result<(), RequestError> {
        let Some((name, _)) = fact
            .entries()
            .find(|(name, _)| self.latch_index(name).is_none())
        else {
            return Ok(());
        };
        let declared: Vec<&str> = self.latches.iter().map(|l| &*l.name).collect();
        let mut message = format!("the policy declares no latch `{name}`");
        if let Some(near) = did_you_mean(name, declared.iter().copied()) {
            message.push_str(&format!("; did you mean `{near}`?"));
        }
        if declared.is_empty() {
            message.push_str("; it declares no latches at all, so leave `latched` out");
        } else {
            message.push_str(&format!(" (declared: {})", declared.join(", ")));
        }
        Err(schema(&format!("facts.latched.{name}"), message))
    }

    /// Errors when `facts.spent` names anything but a budget of this policy that counts
    /// across batches: a count under a misspelt name would leave the budget it meant
    /// without one (and so denying), or look like state the policy never asked for.
    pub(crate) fn check_spent_names(
        &self,
        facts: crate::wire::view::FactsRef<'_>,
    ) -> Result<(), RequestError> {
        let counts = |name: &str| {
            self.budgets
                .iter()
                .any(|b| b.scope != crate::BudgetScope::Batch && *b.name == *name)
        };
        let Some(name) = facts.find_spent_name(|n| !counts(n)) else {
            return Ok(());
        };
        let kept: Vec<&str> = self
            .budgets
            .iter()
            .filter(|b| b.scope != crate::BudgetScope::Batch)
            .map(|b| &*b.name)
            .collect();
        let mut message = format!("the policy has no budget `{name}` that counts across batches");
        if let Some(near) = did_you_mean(name, kept.iter().copied()) {
            message.push_str(&format!("; did you mean `{near}`?"));
        } else if kept.is_empty() {
            message.push_str("; leave `spent` out");
        } else {
            message.push_str(&format!(" (its budgets: {})", kept.join(", ")));
        }
        Err(schema(&format!("facts.spent.{name}"), message))
    }

    /// The index of the latch called `name`.
    pub(crate) fn latch_index(&self, name: &str) -> Option<usize> {
        self.latches.iter().position(|l| *l.name == *name)
    }
}

/// The error for a custom fact no rule reads whose name is a standard fact's, misspelt.
fn misspelt_fact(key: &str, meant: &str) -> RequestError {
    schema(
        &format!("facts.{key}"),
        format!(
            "`{key}` is not a standard fact and no rule of this policy reads it; did you mean `{meant}`? (sent under this name, `{meant}` would be read as absent)"
        ),
    )
}
