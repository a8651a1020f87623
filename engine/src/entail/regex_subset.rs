//! Whether every string one regex matches, another matches too: decided exactly on the two
//! patterns' DFAs, by a breadth-first walk of their product.
//!
//! `matches` is a search (a match anywhere in the value), so a string is in a pattern's
//! language once its DFA has passed through a match state at any point of the walk. The walk
//! looks for a string that reaches a match of NEW while OLD never matches; finding none
//! proves NEW's language a subset of OLD's. Patterns whose DFA cannot be built within the
//! size limits (or that need a Unicode word boundary, which a DFA cannot decide) and walks
//! past [`MAX_PAIRS`] state pairs are undecided, never proved.

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};

/// The most state pairs one walk visits before it gives up.
const MAX_PAIRS: usize = 20_000;
/// The size limit of each DFA and of its construction, in bytes.
const DFA_LIMIT: usize = 4 << 20;

/// What the walk found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Inclusion {
    /// Every string NEW matches, OLD matches.
    Subset,
    /// A string NEW matches and OLD does not, when that string is valid UTF-8 (a value a
    /// request can carry); `None` when the walk's shortest such input is not.
    NotSubset(Option<String>),
    /// Not decided within the limits.
    Unknown,
}

/// Where one side of the walk is: still scanning, or past a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Side {
    Live(StateID),
    Matched,
}

fn build(pattern: &str) -> Option<dense::DFA<Vec<u32>>> {
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(StartKind::Unanchored)
                .dfa_size_limit(Some(DFA_LIMIT))
                .determinize_size_limit(Some(DFA_LIMIT)),
        )
        .build(pattern)
        .ok()
}

/// Whether the language of `new` (searched for anywhere in a string) is a subset of `old`'s.
pub(crate) fn subset(new: &str, old: &str) -> Inclusion {
    if new == old {
        return Inclusion::Subset;
    }
    let (Some(a), Some(b)) = (build(new), build(old)) else {
        return Inclusion::Unknown;
    };
    let config = start::Config::new().anchored(Anchored::No);
    let (Ok(start_a), Ok(start_b)) = (a.start_state(&config), b.start_state(&config)) else {
        return Inclusion::Unknown;
    };
    // Each visited pair with how it was reached: (parent index, byte).
    let mut seen: HashMap<(Side, StateID), usize> = HashMap::new();
    let mut trail: Vec<(usize, u8)> = Vec::new();
    let mut queue: VecDeque<(Side, StateID, usize)> = VecDeque::new();
    seen.insert((Side::Live(start_a), start_b), 0);
    trail.push((usize::MAX, 0));
    queue.push_back((Side::Live(start_a), start_b, 0));
    while let Some((side_a, sb, at)) = queue.pop_front() {
        let a_matches = match side_a {
            Side::Matched => true,
            Side::Live(sa) => a.is_match_state(a.next_eoi_state(sa)),
        };
        if a_matches && !b.is_match_state(b.next_eoi_state(sb)) {
            return Inclusion::NotSubset(witness(&trail, at));
        }
        for byte in 0..=255u8 {
            let nb = b.next_state(sb, byte);
            if b.is_match_state(nb) || b.is_quit_state(nb) {
                // OLD matches every extension of this input: nothing to find here.
                continue;
            }
            let na = match side_a {
                Side::Matched => Side::Matched,
                Side::Live(sa) => {
                    let s = a.next_state(sa, byte);
                    if a.is_match_state(s) {
                        Side::Matched
                    } else if a.is_dead_state(s) || a.is_quit_state(s) {
                        continue;
                    } else {
                        Side::Live(s)
                    }
                }
            };
            if let Entry::Vacant(v) = seen.entry((na, nb)) {
                if trail.len() >= MAX_PAIRS {
                    return Inclusion::Unknown;
                }
                v.insert(trail.len());
                trail.push((at, byte));
                queue.push_back((na, nb, trail.len() - 1));
            }
        }
    }
    Inclusion::Subset
}

/// The input that reached pair `at`, as a string when it is valid UTF-8.
fn witness(trail: &[(usize, u8)], mut at: usize) -> Option<String> {
    let mut bytes = Vec::new();
    while let Some(&(parent, byte)) = trail.get(at) {
        if parent == usize::MAX {
            break;
        }
        bytes.push(byte);
        at = parent;
    }
    bytes.reverse();
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn witness_of(new: &str, old: &str) -> String {
        match subset(new, old) {
            Inclusion::NotSubset(Some(w)) => {
                let (n, o) = (
                    regex::Regex::new(new).unwrap(),
                    regex::Regex::new(old).unwrap(),
                );
                assert!(n.is_match(&w) && !o.is_match(&w), "{w:?}");
                w
            }
            other => panic!("{new} vs {old}: {other:?}"),
        }
    }

    #[test]
    fn narrower_patterns_are_subsets() {
        for (new, old) in [
            ("^POL-[0-9]{6}$", "^POL-[0-9]+$"),
            ("^POL-[0-9]{6}$", "POL-"),
            ("@ours[.]com$", "@"),
            ("^(a|b)$", "^[a-c]$"),
            ("(?i)^abc$", "(?i)^a"),
            ("^x$", "(?m)^x$"),
        ] {
            assert_eq!(subset(new, old), Inclusion::Subset, "{new} vs {old}");
        }
    }

    #[test]
    fn wider_patterns_give_a_string_only_the_new_one_matches() {
        assert!(witness_of("(?m)^POL-[0-9]{6}$", "^POL-[0-9]{6}$").contains('\n'));
        witness_of("@", "@ours[.]com$");
        witness_of("^[a-d]$", "^[a-c]$");
        witness_of("(?i)^abc$", "^abc$");
        witness_of("^POL-[0-9]{5,6}$", "^POL-[0-9]{6}$");
    }

    #[test]
    fn a_unicode_word_boundary_is_undecided() {
        assert_eq!(subset(r"\bx\b", r"x"), Inclusion::Unknown);
    }
}
