//! The common currency of the equivalence check: `allow`, or the id of the first failing rule.

use std::fmt;

/// One call's outcome, as every engine's answer is mapped for comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verdict {
    /// Every rule holds.
    Allow,
    /// The tool is unclassified, the stage unknown or absent, or the tool not whitelisted.
    R1StageWhitelist,
    /// A write while the capability latch is set.
    R2CapabilityLatch,
    /// `web_fetch` of a URL whose host is not allowed.
    R3HostAllowlist,
    /// No image/document among the client's last 10 messages.
    R4aClientMedia,
    /// `fields.phone` is not a non-empty string.
    R4bPhone,
    /// `verify_identity` was not called successfully before.
    R4cVerifyIdentity,
    /// `args.amount` is not a number at most 250.
    R4dAmount,
}

impl Verdict {
    /// Every verdict, in rule order (the order "first failing rule" ranks them).
    pub const ALL: [Verdict; 8] = [
        Verdict::Allow,
        Verdict::R1StageWhitelist,
        Verdict::R2CapabilityLatch,
        Verdict::R3HostAllowlist,
        Verdict::R4aClientMedia,
        Verdict::R4bPhone,
        Verdict::R4cVerifyIdentity,
        Verdict::R4dAmount,
    ];

    /// `allow` or the workload's rule id.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::R1StageWhitelist => "R1_stage_whitelist",
            Verdict::R2CapabilityLatch => "R2_capability_latch",
            Verdict::R3HostAllowlist => "R3_host_allowlist",
            Verdict::R4aClientMedia => "R4a_client_media",
            Verdict::R4bPhone => "R4b_phone",
            Verdict::R4cVerifyIdentity => "R4c_verify_identity",
            Verdict::R4dAmount => "R4d_amount",
        }
    }

    /// The verdict named `name` (`allow` or a rule id), if any.
    pub fn from_name(name: &str) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.as_str() == name)
    }

    /// Position in rule order; a lower rank is reported first.
    pub fn rank(self) -> u8 {
        self as u8
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for v in Verdict::ALL {
            assert_eq!(Verdict::from_name(v.as_str()), Some(v));
        }
        assert_eq!(Verdict::from_name("R5"), None);
    }
}
