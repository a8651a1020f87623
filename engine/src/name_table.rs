//! A read-only name → id table for the names a request uses on the hot path (tools, stages).
//!
//! Built once per policy: open addressing over a power-of-two array. A name's key is its
//! length and its first, second and last eight bytes; for names of up to 24 bytes the key
//! *is* the name, so a slot holding the same key holds the same name, and longer names
//! compare only the bytes the key leaves out. The slot index is a seeded multiplicative hash of the key. For a
//! policy's few dozen tools the build tries seeds until every name has a slot of its own, so
//! a lookup is one hash and one key comparison. The longest probe sequence is measured at
//! build time and bounds every lookup, so no name a request sends can make a lookup longer
//! than the worst name the policy itself declared.

use crate::words::{self, read8};
use std::collections::HashSet;

/// A fixed name → `u32` map.
#[derive(Debug, Clone)]
pub(crate) struct NameTable {
    slots: Box<[Slot]>,
    mask: usize,
    /// `64 - log2(slots)`: the hash's top bits pick the slot.
    shift: u32,
    /// Mixed into every hash; chosen at build time to spread this policy's names.
    seed: u64,
    /// The most slots any stored name needed; lookups stop after this many.
    max_probe: usize,
}

/// A name's length and its first, second and last (up to) eight bytes: for names of up to
/// 24 bytes, all of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Key {
    head: u64,
    mid: u64,
    tail: u64,
    len: usize,
}

/// Names longer than this compare the bytes their key does not cover.
const KEY_COVERS: usize = 24;

impl Key {
    #[inline(always)]
    fn of(b: &[u8]) -> Key {
        let len = b.len();
        if len >= 16 {
            Key {
                head: read8(&b[..8]),
                mid: read8(&b[8..16]),
                tail: read8(&b[len - 8..]),
                len,
            }
        } else if len >= 8 {
            Key {
                head: read8(&b[..8]),
                mid: 0,
                tail: read8(&b[len - 8..]),
                len,
            }
        } else {
            let mut padded = [0u8; 8];
            padded[..len].copy_from_slice(b);
            Key {
                head: u64::from_le_bytes(padded),
                mid: 0,
                tail: 0,
                len,
            }
        }
    }

    #[inline(always)]
    fn hash(self, seed: u64) -> u64 {
        (self.head
            ^ self.tail.rotate_left(29)
            ^ (self.len as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ seed)
            .wrapping_mul(0xbf58_476d_1ce4_e5b9)
    }
}

#[derive(Debug, Clone, Default)]
struct Slot {
    key: Key,
    /// `u32::MAX` marks an empty slot.
    value: u32,
    name: Box<str>,
}

impl Slot {
    /// True when the slot holds `name`, whose key is `key`.
    #[inline(always)]
    fn holds(&self, key: Key, name: &[u8]) -> bool {
        self.key == key
            && self.value != EMPTY
            && (key.len <= KEY_COVERS
                || words::eq(
                    &self.name.as_bytes()[16..key.len - 8],
                    &name[16..key.len - 8],
                ))
    }
}

const EMPTY: u32 = u32::MAX;

/// The longest linear-probe sequence of `keys` (distinct names) in a table of `size` slots
/// with `seed`, found by placing them in an occupancy bitmap.
fn longest_probe(keys: &[Key], size: usize, seed: u64) -> usize {
    let mut taken = vec![0u64; size.div_ceil(64)];
    let (mask, shift) = (size - 1, 64 - size.trailing_zeros());
    let mut longest = 0;
    for key in keys {
        let mut i = (key.hash(seed) >> shift) as usize;
        let mut probes = 1;
        while taken[i / 64] & (1 << (i % 64)) != 0 {
            i = (i + 1) & mask;
            probes += 1;
        }
        taken[i / 64] |= 1 << (i % 64);
        longest = longest.max(probes);
    }
    longest
}

/// Tables of up to this many names look for a seed that gives every name its own slot, so
/// a lookup is one hash and one comparison.
const SEED_SEARCH_NAMES: usize = 128;
/// Seeds tried per table size.
const SEEDS: u64 = 64;

impl NameTable {
    /// Builds the table. Later duplicates of a name are ignored (the compiler rejects them).
    ///
    /// A small table tries a few seeds and sizes (up to eight slots per name) for one where no
    /// two names share a slot; failing that, or for a large table, it keeps the layout with
    /// the shortest longest probe. Trials only place hashes in an occupancy bitmap; the
    /// table itself is built once.
    pub(crate) fn new<'a>(given: impl IntoIterator<Item = (&'a str, u32)>) -> Self {
        let mut seen = HashSet::new();
        let entries: Vec<(&str, u32)> = given
            .into_iter()
            .filter(|(name, _)| seen.insert(*name))
            .collect();
        let keys: Vec<Key> = entries.iter().map(|(n, _)| Key::of(n.as_bytes())).collect();
        let base = (entries.len() * 2).next_power_of_two().max(8);
        let mut best = (longest_probe(&keys, base, 0), base, 0);
        if entries.len() <= SEED_SEARCH_NAMES {
            'search: for size in [base, base * 2, base * 4] {
                for n in 0..SEEDS {
                    if best.0 <= 1 {
                        break 'search;
                    }
                    let seed = n.wrapping_mul(0xd6e8_feb8_6659_fd93);
                    let probe = longest_probe(&keys, size, seed);
                    if probe < best.0 {
                        best = (probe, size, seed);
                    }
                }
            }
        }
        NameTable::build(&entries, best.1, best.2)
    }

    fn build(entries: &[(&str, u32)], size: usize, seed: u64) -> Self {
        let mut slots = vec![
            Slot {
                value: EMPTY,
                ..Slot::default()
            };
            size
        ];
        let mask = size - 1;
        let shift = 64 - size.trailing_zeros();
        let mut max_probe = 0;
        for &(name, value) in entries {
            let key = Key::of(name.as_bytes());
            let mut i = (key.hash(seed) >> shift) as usize;
            let mut probes = 1;
            loop {
                let slot = &mut slots[i];
                if slot.value == EMPTY {
                    *slot = Slot {
                        key,
                        value,
                        name: name.into(),
                    };
                    break;
                }
                if slot.holds(key, name.as_bytes()) {
                    break;
                }
                i = (i + 1) & mask;
                probes += 1;
            }
            max_probe = max_probe.max(probes);
        }
        NameTable {
            slots: slots.into_boxed_slice(),
            mask,
            shift,
            seed,
            max_probe,
        }
    }

    /// The value stored for `name`.
    #[inline(always)]
    pub(crate) fn get(&self, name: &str) -> Option<u32> {
        let name = name.as_bytes();
        let key = Key::of(name);
        let mut i = (key.hash(self.seed) >> self.shift) as usize;
        // The first probe, unrolled: with a seed that spread the names it is the only one.
        let slot = &self.slots[i];
        if slot.holds(key, name) {
            return Some(slot.value);
        }
        for _ in 1..self.max_probe {
            if slot.value == EMPTY {
                return None;
            }
            i = (i + 1) & self.mask;
            let slot = &self.slots[i];
            if slot.holds(key, name) {
                return Some(slot.value);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{HashMap, HashSet};

    #[test]
    fn finds_what_it_stores_and_nothing_else() {
        let names = [
            "a",
            "get_claim",
            "get_claims",
            "authorise_bacs_payout",
            "",
            "é",
        ];
        let t = NameTable::new(names.iter().enumerate().map(|(i, n)| (*n, i as u32)));
        for (i, n) in names.iter().enumerate() {
            assert_eq!(t.get(n), Some(i as u32), "{n}");
        }
        for n in [
            "b",
            "get_clai",
            "authorise_bacs_payou",
            "authorise_bacs_payout ",
            "E",
        ] {
            assert_eq!(t.get(n), None, "{n}");
        }
    }

    #[test]
    fn names_equal_at_both_ends_differ_in_the_middle() {
        // Same length, same first and last eight bytes: same hash, so only the key's middle
        // word, or the bytes past it, tell them apart.
        for (a, b) in [
            ("abcdefgh_X_stuvwxyz", "abcdefgh_Y_stuvwxyz"),
            ("abcdefgh12345678_X_stuvwxyz", "abcdefgh12345678_Y_stuvwxyz"),
        ] {
            let t = NameTable::new([(a, 1)]);
            assert_eq!(t.get(a), Some(1));
            assert_eq!(t.get(b), None);
        }
    }

    /// The table answers every name as a `HashMap` built from the same names does.
    fn agrees_with_a_hash_map(
        names: &HashSet<String>,
        probes: &[String],
    ) -> Result<(), TestCaseError> {
        let map: HashMap<&str, u32> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i as u32))
            .collect();
        let t = NameTable::new(map.iter().map(|(n, v)| (*n, *v)));
        for n in names.iter().chain(probes) {
            prop_assert_eq!(t.get(n), map.get(n.as_str()).copied());
        }
        Ok(())
    }

    proptest! {
        /// Names from a two-letter alphabet share their ends often, so keys collide and only
        /// the middle bytes tell names apart.
        #[test]
        fn look_alike_names(
            names in prop::collection::hash_set("[ab]{14,30}", 0..100),
            probes in prop::collection::vec("[ab]{14,30}", 0..100),
        ) {
            agrees_with_a_hash_map(&names, &probes)?;
        }

        #[test]
        fn arbitrary_names(
            names in prop::collection::hash_set("[a-z_]{0,24}", 0..200),
            probes in prop::collection::vec("[a-z_]{0,24}", 0..50),
        ) {
            agrees_with_a_hash_map(&names, &probes)?;
        }
    }
}
