//! A turn's latches as the shared store keeps them: `""` (none), `"*"` (every latch, whatever
//! the policy declares; written by the script for a turn it may have lost) or the set latches' names, sorted and joined by `,` (latch names are
//! identifiers, so a comma cannot occur in one). Stored by name, like the in-memory store, so
//! replicas serving different revisions during a rollout, or a reload that renames a latch,
//! never read one latch's bit as another's.

use toolgate_engine::{LatchState, Latched, Policy};

/// Every latch.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub const ALL: &str = "*";

/// The latches a response reports as set, in the store's form.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub fn encode(policy: &Policy, state: &LatchState) -> String {
    let mut names: Vec<&str> = match state {
        LatchState::Flag(false) => return String::new(),
        LatchState::Flag(true) => policy.latches().collect(),
        LatchState::ByName(m) => m
            .iter()
            .filter(|(_, set)| **set)
            .map(|(n, _)| &**n)
            .collect(),
    };
    // A policy that declares no latch has nothing to latch: its `Flag(true)` (an executor's
    // `"latched": true`) is stored as nothing, so "every latch" (`*`) is only ever written
    // for a turn that latched under a policy that declares one.
    names.sort_unstable();
    names.dedup();
    names.join(",")
}

/// The stored latches in `policy`'s names; the first stored name not declared there (a
/// reload renamed or removed it) as the error: the turn cannot be judged by that policy.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub fn decode(policy: &Policy, stored: &str) -> Result<Latched, Box<str>> {
    match stored {
        "" => Ok(Latched::Flag(false)),
        ALL => Ok(Latched::Flag(true)),
        names => {
            let mut map = std::collections::BTreeMap::new();
            for name in names.split(',') {
                if !policy.latches().any(|l| l == name) {
                    return Err(name.into());
                }
                map.insert(name.into(), true);
            }
            Ok(Latched::ByName(map))
        }
    }
}

/// Whether `state` (a batch's latches, judged without the stored state) already holds every
/// latch `carried` sets, so judging again with `carried` would change nothing. `false` when
/// unsure: judging again is always correct.
pub fn covers(state: &LatchState, carried: &Latched) -> bool {
    let all_set = match state {
        LatchState::Flag(b) => *b,
        LatchState::ByName(m) => m.values().all(|b| *b),
    };
    match carried {
        Latched::Flag(false) => true,
        _ if all_set => true,
        Latched::Flag(true) => false,
        Latched::ByName(c) => match state {
            LatchState::Flag(_) => !c.values().any(|b| *b),
            LatchState::ByName(m) => c
                .iter()
                .filter(|(_, set)| **set)
                .all(|(n, _)| m.get(&**n).copied().unwrap_or(false)),
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const TWO: &str = "module two\nwrite x, y\ningest a, b\nstage main { tools [a, b, x, y] }\nlatch l1 { set_by [a] blocks [x] }\nlatch l2 { set_by [b] blocks [y] }\n";
    const ONE: &str =
        "module one\nwrite x\ningest a\nstage main { tools [a, x] }\nlatch l { set_by [a] blocks [x] }\n";

    fn by_name(pairs: &[(&str, bool)]) -> LatchState {
        LatchState::ByName(pairs.iter().map(|(n, b)| (Into::into(*n), *b)).collect())
    }

    #[test]
    fn names_round_trip_and_an_undeclared_name_is_named() {
        let p = Policy::compile("two.gate", TWO).unwrap();
        assert_eq!(encode(&p, &by_name(&[("l2", true), ("l1", true)])), "l1,l2");
        assert_eq!(encode(&p, &by_name(&[("l1", false), ("l2", true)])), "l2");
        assert_eq!(encode(&p, &LatchState::Flag(false)), "");
        assert_eq!(
            decode(&p, "l2"),
            Ok(Latched::ByName([("l2".into(), true)].into()))
        );
        assert_eq!(decode(&p, ""), Ok(Latched::Flag(false)));
        assert_eq!(decode(&p, "*"), Ok(Latched::Flag(true)));
        assert_eq!(decode(&p, "l2,gone"), Err("gone".into()));
        let one = Policy::compile("one.gate", ONE).unwrap();
        assert_eq!(encode(&one, &LatchState::Flag(true)), "l");
    }

    #[test]
    fn covers_only_when_nothing_carried_is_missing() {
        let l1 = Latched::ByName([("l1".into(), true)].into());
        assert!(covers(&LatchState::Flag(false), &Latched::Flag(false)));
        assert!(!covers(&LatchState::Flag(false), &Latched::Flag(true)));
        assert!(covers(&LatchState::Flag(true), &Latched::Flag(true)));
        assert!(!covers(&LatchState::Flag(false), &l1));
        assert!(covers(&by_name(&[("l1", true), ("l2", false)]), &l1));
        assert!(!covers(&by_name(&[("l1", false), ("l2", true)]), &l1));
        assert!(!covers(
            &by_name(&[("l1", true), ("l2", false)]),
            &Latched::Flag(true)
        ));
        assert!(covers(
            &by_name(&[("l1", true), ("l2", true)]),
            &Latched::Flag(true)
        ));
    }
}
