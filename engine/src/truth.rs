//! Three-valued truth, the value of every condition: true, false, or unknown with the
//! reason. A leaf: it imports nothing from the crate.
//!
//! Unknown carries why: the facts a condition reads are absent from the request (`ABSENT`,
//! which a rule may let through with `on_missing allow`), or an operand is missing or of the
//! wrong type (`INVALID`, which always denies).

/// The result of evaluating a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Truth {
    True,
    False,
    /// Neither; the flags say why (`ABSENT`, `INVALID`).
    Unknown(u8),
}

/// Unknown because facts the condition reads were not supplied.
pub(crate) const ABSENT: u8 = 1;
/// Unknown because an operand is missing or of the wrong type.
pub(crate) const INVALID: u8 = 2;
/// Unknown because a URL is ambiguous: URL readers could disagree on its host. Always set
/// with `INVALID`, so it always denies; the reason is in `cond::Env::ambiguity`.
pub(crate) const AMBIGUOUS: u8 = 4;

impl Truth {
    /// A one-byte encoding: 0 true, 1 false, `0x80 | flags` unknown.
    pub(crate) fn to_byte(self) -> u8 {
        match self {
            Truth::True => 0,
            Truth::False => 1,
            Truth::Unknown(flags) => 0x80 | flags,
        }
    }

    /// The inverse of [`Truth::to_byte`].
    pub(crate) fn from_byte(b: u8) -> Self {
        match b {
            0 => Truth::True,
            1 => Truth::False,
            _ => Truth::Unknown(b & 0x7f),
        }
    }

    pub(crate) fn from_bool(b: bool) -> Self {
        if b {
            Truth::True
        } else {
            Truth::False
        }
    }

    /// Kleene negation: true and false swap, an unknown stays unknown with its reasons.
    #[allow(clippy::should_implement_trait)]
    pub(crate) fn not(self) -> Self {
        match self {
            Truth::True => Truth::False,
            Truth::False => Truth::True,
            unknown => unknown,
        }
    }

    /// Kleene conjunction: false if either is, else unknown (with both operands' reasons)
    /// if either is, else true.
    pub(crate) fn and(self, other: Self) -> Self {
        match (self, other) {
            (Truth::False, _) | (_, Truth::False) => Truth::False,
            (Truth::True, Truth::True) => Truth::True,
            (a, b) => Truth::Unknown(a.reasons() | b.reasons()),
        }
    }

    /// Kleene disjunction: true if either is, else unknown (with both operands' reasons)
    /// if either is, else false.
    pub(crate) fn or(self, other: Self) -> Self {
        match (self, other) {
            (Truth::True, _) | (_, Truth::True) => Truth::True,
            (Truth::False, Truth::False) => Truth::False,
            (a, b) => Truth::Unknown(a.reasons() | b.reasons()),
        }
    }

    /// The reasons of an unknown; none for true or false.
    fn reasons(self) -> u8 {
        match self {
            Truth::Unknown(flags) => flags,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Truth; 4] = [
        Truth::True,
        Truth::False,
        Truth::Unknown(ABSENT),
        Truth::Unknown(INVALID),
    ];

    /// Kleene's tables, with the reasons of unknown operands joined, and De Morgan's laws.
    #[test]
    fn and_or_not_follow_kleene_and_keep_the_reasons() {
        assert_eq!(Truth::Unknown(ABSENT).and(Truth::False), Truth::False);
        assert_eq!(Truth::Unknown(ABSENT).or(Truth::True), Truth::True);
        assert_eq!(
            Truth::Unknown(ABSENT).and(Truth::Unknown(INVALID)),
            Truth::Unknown(ABSENT | INVALID)
        );
        assert_eq!(Truth::Unknown(INVALID).not(), Truth::Unknown(INVALID));
        for a in ALL {
            assert_eq!(a.not().not(), a);
            for b in ALL {
                assert_eq!(a.and(b), b.and(a));
                assert_eq!(a.and(b).not(), a.not().or(b.not()));
            }
        }
    }
}
