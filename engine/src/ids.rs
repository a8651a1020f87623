//! Small typed indices into the compiled policy's tables.

/// Index of a classified tool in [`crate::Policy`]'s tool table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolId(pub(crate) u32);

/// Index of a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StageId(pub(crate) u32);

/// Index of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuleId(pub(crate) u32);

/// Index of a host allowlist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HostListId(pub(crate) u32);

impl ToolId {
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}

impl StageId {
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}

impl RuleId {
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}

impl HostListId {
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}

/// The most latches a policy may declare: latch state is one `u64` bit mask.
pub const MAX_LATCHES: usize = 64;
