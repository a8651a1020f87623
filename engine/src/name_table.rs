//! A read-only name → id table for the names a request uses on the hot path (tools, stages).
//!
//! Built once per policy: open addressing over a power-of-two array, a hash of the name's
//! length and its first and last eight bytes (cheap, and names in one policy rarely share
//! both ends), and one byte comparison on a hash hit. The longest probe sequence is measured
//! at build time and bounds every lookup, so no name a request sends can make a lookup
//! longer than the worst name the policy itself declared.

/// A fixed name → `u32` map.
#[derive(Debug, Clone)]
pub(crate) struct NameTable {
    slots: Box<[Slot]>,
    mask: usize,
    /// The most slots any stored name needed; lookups stop after this many.
    max_probe: usize,
}

#[derive(Debug, Clone, Default)]
struct Slot {
    hash: u64,
    /// `u32::MAX` marks an empty slot.
    value: u32,
    name: Box<str>,
}

const EMPTY: u32 = u32::MAX;

impl NameTable {
    /// Builds the table. Later duplicates of a name are ignored (the compiler rejects them).
    pub(crate) fn new<'a>(entries: impl IntoIterator<Item = (&'a str, u32)>) -> Self {
        let entries: Vec<(&str, u32)> = entries.into_iter().collect();
        let size = (entries.len() * 2).next_power_of_two().max(8);
        let mut slots = vec![
            Slot {
                value: EMPTY,
                ..Slot::default()
            };
            size
        ];
        let mask = size - 1;
        let mut max_probe = 0;
        for (name, value) in entries {
            let hash = hash(name.as_bytes());
            let mut i = hash as usize & mask;
            let mut probes = 1;
            loop {
                let slot = &mut slots[i];
                if slot.value == EMPTY {
                    *slot = Slot {
                        hash,
                        value,
                        name: name.into(),
                    };
                    break;
                }
                if slot.hash == hash && &*slot.name == name {
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
            max_probe,
        }
    }

    /// The value stored for `name`.
    #[inline]
    pub(crate) fn get(&self, name: &str) -> Option<u32> {
        let hash = hash(name.as_bytes());
        let mut i = hash as usize & self.mask;
        for _ in 0..self.max_probe {
            let slot = &self.slots[i];
            if slot.value == EMPTY {
                return None;
            }
            if slot.hash == hash && *slot.name == *name {
                return Some(slot.value);
            }
            i = (i + 1) & self.mask;
        }
        None
    }
}

/// Mixes the length with the first and last (up to) eight bytes.
#[inline]
fn hash(b: &[u8]) -> u64 {
    let n = b.len();
    let (head, tail) = if n >= 8 {
        (read8(&b[..8]), read8(&b[n - 8..]))
    } else {
        let mut padded = [0u8; 8];
        padded[..n].copy_from_slice(b);
        (u64::from_le_bytes(padded), 0)
    };
    let x = (head ^ tail.rotate_left(29) ^ (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^ (x >> 31)
}

#[inline]
fn read8(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

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

    proptest! {
        /// Agrees with a `HashMap` on stored names and on arbitrary probes.
        #[test]
        fn agrees_with_a_hash_map(
            names in prop::collection::hash_set("[a-z_]{0,24}", 0..200),
            probes in prop::collection::vec("[a-z_]{0,24}", 0..50),
        ) {
            let map: HashMap<&str, u32> =
                names.iter().enumerate().map(|(i, n)| (n.as_str(), i as u32)).collect();
            let t = NameTable::new(map.iter().map(|(n, v)| (*n, *v)));
            for n in names.iter().chain(&probes) {
                prop_assert_eq!(t.get(n), map.get(n.as_str()).copied());
            }
        }
    }
}
