//! Hot-swappable policy sets: readers take a snapshot without blocking; a reload swaps a
//! whole, fully compiled set in one atomic store.
//!
//! A decision loads the current snapshot once and uses it to the end, so every response is
//! judged by exactly one revision, and a reload can never be half-applied.

use crate::policy::Policy;
use arc_swap::ArcSwap;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

/// An immutable set of compiled policies, keyed by module name.
#[derive(Debug, Default)]
pub struct PolicySet {
    policies: BTreeMap<Arc<str>, Arc<Policy>>,
    generation: u64,
}

/// Two policies in one set declare the same module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("module `{module}` is declared by both `{first}` and `{second}`")]
pub struct DuplicateModule {
    /// The module name.
    pub module: String,
    /// The file that declared it first.
    pub first: String,
    /// The file that declared it again.
    pub second: String,
}

impl PolicySet {
    /// A set of these policies; `generation` numbers successive sets (0 for the first).
    pub fn new(policies: Vec<Policy>, generation: u64) -> Result<Self, DuplicateModule> {
        PolicySet::with_shared(policies.into_iter().map(Arc::new).collect(), generation)
    }

    /// A set of already shared policies, so a reload can keep the compiled policies of the
    /// files that did not change (and their memory) instead of compiling them again.
    pub fn with_shared(
        policies: Vec<Arc<Policy>>,
        generation: u64,
    ) -> Result<Self, DuplicateModule> {
        let mut map: BTreeMap<Arc<str>, Arc<Policy>> = BTreeMap::new();
        for p in policies {
            if let Some(first) = map.get(p.module()) {
                return Err(DuplicateModule {
                    module: p.module().to_string(),
                    first: first.source().name().to_string(),
                    second: p.source().name().to_string(),
                });
            }
            map.insert(p.module.clone(), p);
        }
        Ok(PolicySet {
            policies: map,
            generation,
        })
    }

    /// The policy for `module`.
    pub fn get(&self, module: &str) -> Option<&Arc<Policy>> {
        self.policies.get(module)
    }

    /// The only policy, when exactly one is loaded.
    pub fn only(&self) -> Option<&Arc<Policy>> {
        if self.policies.len() == 1 {
            self.policies.values().next()
        } else {
            None
        }
    }

    /// Every policy, by module name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Policy>> {
        self.policies.values()
    }

    /// How many policies the set holds.
    pub fn len(&self) -> usize {
        self.policies.len()
    }

    /// True when no policy is loaded.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// The set's generation number.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// The current [`PolicySet`], swappable while readers keep deciding.
///
/// A swap keeps the set it replaces alive until the next swap, and hands the set retired by
/// the previous swap back to the swapping thread. So freeing a policy (thousands of
/// allocations) happens on the thread that reloads, not on a reader that happened to hold
/// the last snapshot of it: a reload does not show up in decision latency.
#[derive(Debug)]
pub struct PolicyStore {
    current: ArcSwap<PolicySet>,
    retired: Mutex<Option<Arc<PolicySet>>>,
}

impl PolicyStore {
    /// A store serving `set`.
    pub fn new(set: PolicySet) -> Self {
        PolicyStore {
            current: ArcSwap::from_pointee(set),
            retired: Mutex::new(None),
        }
    }

    /// The current set. Never blocks, whatever a reload is doing.
    pub fn snapshot(&self) -> Arc<PolicySet> {
        self.current.load_full()
    }

    /// Replaces the set; decisions already holding a snapshot finish on the old one.
    ///
    /// Returns the set the *previous* swap retired (if any), so that the caller, not a
    /// reader, drops it; the set replaced now stays alive inside the store until the next
    /// swap, by which time no decision still uses it.
    pub fn swap(&self, set: PolicySet) -> Option<Arc<PolicySet>> {
        let old = self.current.swap(Arc::new(set));
        let mut retired = self.retired.lock().unwrap_or_else(PoisonError::into_inner);
        retired.replace(old)
    }
}

impl Default for PolicyStore {
    fn default() -> Self {
        PolicyStore::new(PolicySet::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(name: &str, module: &str) -> Policy {
        Policy::compile(
            name,
            &format!("module {module}\nread a\nstage s {{ tools [a] }}\n"),
        )
        .unwrap()
    }

    #[test]
    fn duplicate_modules_are_refused() {
        let err =
            PolicySet::new(vec![policy("a.gate", "m"), policy("b.gate", "m")], 1).unwrap_err();
        assert_eq!(err.module, "m");
        assert_eq!(err.second, "b.gate");
    }

    #[test]
    fn shared_policies_are_not_copied_and_duplicates_are_still_refused() {
        let p = Arc::new(policy("a.gate", "one"));
        let set = PolicySet::with_shared(vec![p.clone()], 3).unwrap();
        assert!(Arc::ptr_eq(set.get("one").unwrap(), &p));
        assert_eq!(set.generation(), 3);
        let err = PolicySet::with_shared(vec![p.clone(), p], 4).unwrap_err();
        assert_eq!(err.module, "one");
    }

    #[test]
    fn swap_keeps_old_snapshots_alive() {
        let store = PolicyStore::new(PolicySet::new(vec![policy("a.gate", "one")], 0).unwrap());
        let before = store.snapshot();
        store.swap(PolicySet::new(vec![policy("b.gate", "two")], 1).unwrap());
        assert!(before.get("one").is_some());
        assert!(store.snapshot().get("two").is_some());
        assert_eq!(store.snapshot().generation(), 1);
    }

    #[test]
    fn a_swap_hands_back_the_set_retired_by_the_swap_before() {
        let store = PolicyStore::new(PolicySet::new(vec![policy("a.gate", "one")], 0).unwrap());
        assert!(store
            .swap(PolicySet::new(vec![policy("b.gate", "two")], 1).unwrap())
            .is_none());
        let back = store
            .swap(PolicySet::new(vec![policy("c.gate", "three")], 2).unwrap())
            .expect("generation 0 comes back");
        assert_eq!(back.generation(), 0);
        // Nobody else holds generation 0 any more: the caller drops the last reference.
        assert_eq!(Arc::strong_count(&back), 1);
    }
}
