//! Byte-string comparisons eight bytes at a time, for the short names the hot path compares
//! (tool and stage names, host names). Inline word compares beat a call into `memcmp` at
//! these lengths.

/// The eight bytes of `b` (exactly eight long) as one word.
#[inline(always)]
pub(crate) fn read8(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    u64::from_le_bytes(a)
}

/// Sets bit 5 of every byte: ASCII letters become lowercase, and digits, `+`, `-` and `.`,
/// which already have the bit, are unchanged.
const FOLD: u64 = 0x2020_2020_2020_2020;

/// `a == b`.
#[inline(always)]
pub(crate) fn eq(a: &[u8], b: &[u8]) -> bool {
    eq_masked(a, b, 0)
}

/// `a` equals `lower` once `a` is lowercased, where `a` holds only ASCII letters, digits,
/// `+`, `-` and `.` (a URL scheme or a plain host name) and `lower` is any byte string.
/// A byte of `lower` without bit 5 set never matches, which is right: no lowercased byte of
/// such an `a` lacks it.
#[inline(always)]
pub(crate) fn eq_folded(a: &[u8], lower: &[u8]) -> bool {
    eq_masked(a, lower, FOLD)
}

#[inline(always)]
fn eq_masked(a: &[u8], b: &[u8], mask: u64) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        let mask = mask as u8;
        return a.iter().zip(b).all(|(x, y)| x | mask == *y);
    }
    let mut i = 0;
    while i + 8 <= n {
        if read8(&a[i..i + 8]) | mask != read8(&b[i..i + 8]) {
            return false;
        }
        i += 8;
    }
    // The last word overlaps the previous one when `n` is not a multiple of eight.
    i == n || read8(&a[n - 8..]) | mask == read8(&b[n - 8..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn eq_is_byte_equality(a in "[ab]{0,40}", b in "[ab]{0,40}") {
            prop_assert_eq!(eq(a.as_bytes(), b.as_bytes()), a == b);
            prop_assert!(eq(a.as_bytes(), a.as_bytes()));
        }

        #[test]
        fn eq_folded_is_case_folded_equality(
            a in "[aAbB0.+-]{0,40}",
            b in "[ab0.\\-_A\\x0e\\x10]{0,40}",
        ) {
            prop_assert_eq!(
                eq_folded(a.as_bytes(), b.as_bytes()),
                a.to_ascii_lowercase() == b
            );
            let lower = a.to_ascii_lowercase();
            prop_assert!(eq_folded(a.as_bytes(), lower.as_bytes()));
        }
    }
}
