//! A fixed-size bit set of tool ids, used for stage whitelists.

use crate::ids::ToolId;

/// A set of tools, one bit per classified tool.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolSet {
    words: Box<[u64]>,
}

impl ToolSet {
    /// An empty set able to hold `n` tools.
    pub(crate) fn with_capacity(n: usize) -> Self {
        ToolSet {
            words: vec![0; n.div_ceil(64)].into_boxed_slice(),
        }
    }

    /// Adds a tool; ids beyond the capacity are ignored.
    pub(crate) fn insert(&mut self, id: ToolId) {
        if let Some(w) = self.words.get_mut(id.index() / 64) {
            *w |= 1 << (id.index() % 64);
        }
    }

    /// True when the tool is in the set.
    #[inline]
    pub(crate) fn contains(&self, id: ToolId) -> bool {
        self.words
            .get(id.index() / 64)
            .is_some_and(|w| w & (1 << (id.index() % 64)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_and_contains_across_words() {
        let mut s = ToolSet::with_capacity(130);
        s.insert(ToolId(0));
        s.insert(ToolId(129));
        assert!(s.contains(ToolId(0)));
        assert!(s.contains(ToolId(129)));
        assert!(!s.contains(ToolId(64)));
        assert!(!s.contains(ToolId(500)));
    }
}
