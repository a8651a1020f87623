//! [`CallLabel`]: a call's id or tool name as a decision echoes it, kept inline when short.
//!
//! Every decision echoes its call's id and tool. As `String`s that is two heap allocations
//! per call, which were the largest cost of building a response. Call ids from the major
//! providers are 29 to 36 bytes (OpenAI `call_…` 29, Anthropic `toolu_…` 30, a UUID 36) and
//! tool names are shorter, so a label holds up to [`INLINE`] bytes in place and spills to
//! the heap only beyond that.

use arrayvec::ArrayString;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// The longest label stored without a heap allocation, in bytes.
pub const INLINE: usize = 38;

/// A call's id or tool name as echoed in a [`crate::Decision`]: a string that is stored
/// inline up to [`INLINE`] bytes. It dereferences to `str`, compares with strings, and
/// serialises as a JSON string.
#[derive(Clone)]
pub struct CallLabel(Repr);

#[derive(Clone)]
enum Repr {
    Inline(ArrayString<INLINE>),
    Heap(Box<str>),
}

impl CallLabel {
    /// The label as a string slice.
    #[inline]
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline(s) => s.as_str(),
            Repr::Heap(s) => s,
        }
    }

    /// Whether the label is stored without a heap allocation.
    pub fn is_inline(&self) -> bool {
        matches!(self.0, Repr::Inline(_))
    }
}

impl From<&str> for CallLabel {
    #[inline]
    fn from(s: &str) -> Self {
        match ArrayString::from(s) {
            Ok(inline) => Self(Repr::Inline(inline)),
            Err(_) => Self(Repr::Heap(Box::from(s))),
        }
    }
}

impl From<String> for CallLabel {
    fn from(s: String) -> Self {
        if s.len() <= INLINE {
            Self::from(s.as_str())
        } else {
            Self(Repr::Heap(s.into_boxed_str()))
        }
    }
}

impl From<CallLabel> for String {
    fn from(label: CallLabel) -> Self {
        match label.0 {
            Repr::Inline(s) => s.as_str().to_owned(),
            Repr::Heap(s) => s.into_string(),
        }
    }
}

impl Default for CallLabel {
    fn default() -> Self {
        Self(Repr::Inline(ArrayString::new()))
    }
}

impl Deref for CallLabel {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for CallLabel {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for CallLabel {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for CallLabel {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for CallLabel {}

impl Hash for CallLabel {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for CallLabel {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for CallLabel {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialEq<str> for CallLabel {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for CallLabel {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for CallLabel {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<CallLabel> for str {
    fn eq(&self, other: &CallLabel) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<CallLabel> for String {
    fn eq(&self, other: &CallLabel) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<CallLabel> for &str {
    fn eq(&self, other: &CallLabel) -> bool {
        *self == other.as_str()
    }
}

impl fmt::Display for CallLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for CallLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl Serialize for CallLabel {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for CallLabel {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = CallLabel;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<CallLabel, E> {
                Ok(CallLabel::from(s))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<CallLabel, E> {
                Ok(CallLabel::from(s))
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_fit_inline_and_longer_labels_spill_to_the_heap() {
        for id in [
            "call_abc123def456ghi789jkl012",        // OpenAI, 29
            "toolu_01A09q90qw90lq917835lq9a",       // Anthropic, 30
            "123e4567-e89b-12d3-a456-426614174000", // a UUID, 36
            "",
        ] {
            let label = CallLabel::from(id);
            assert!(label.is_inline(), "{id}");
            assert_eq!(label, id);
        }
        let long = "x".repeat(INLINE + 1);
        let label = CallLabel::from(long.as_str());
        assert!(!label.is_inline());
        assert_eq!(label.as_str(), long);
        assert_eq!(String::from(label), long);
        assert!(CallLabel::from("x".repeat(INLINE)).is_inline());
    }

    #[test]
    fn a_multibyte_label_round_trips_at_the_boundary() {
        // 19 two-byte characters are 38 bytes: inline; one more spills.
        let at = "é".repeat(19);
        assert!(CallLabel::from(at.as_str()).is_inline());
        let over = "é".repeat(20);
        let label = CallLabel::from(over.as_str());
        assert!(!label.is_inline());
        assert_eq!(label, over);
    }

    #[test]
    fn it_serialises_as_a_string_and_reads_back() {
        let label = CallLabel::from("c1");
        assert_eq!(serde_json::to_string(&label).unwrap(), "\"c1\"");
        let back: CallLabel = serde_json::from_str("\"c\\u00e9\"").unwrap();
        assert_eq!(back, "cé");
        assert!(serde_json::from_str::<CallLabel>("1").is_err());
    }

    #[test]
    fn equal_text_is_equal_whatever_the_storage() {
        use std::collections::hash_map::DefaultHasher;
        let inline = CallLabel::from("c1");
        let heap = CallLabel(Repr::Heap(Box::from("c1")));
        assert!(inline.is_inline() && !heap.is_inline());
        assert_eq!(inline, heap);
        let hash = |l: &CallLabel| {
            let mut h = DefaultHasher::new();
            l.hash(&mut h);
            h.finish()
        };
        assert_eq!(hash(&inline), hash(&heap));
        assert_ne!(inline, CallLabel::from("c2"));
        assert!(std::mem::size_of::<CallLabel>() <= 48);
    }
}
