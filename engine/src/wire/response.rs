//! The typed response: one decision per call, in request order.

use crate::CallLabel;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The answer to one [`crate::Request`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "json-schema",
    derive(schemars::JsonSchema),
    schemars(deny_unknown_fields)
)]
pub struct Response {
    /// The policy's module name.
    pub policy: Arc<str>,
    /// The content hash of the policy source that judged the batch.
    pub revision: Arc<str>,
    /// Latch state after the batch; pass it back in on the next batch of the same user turn.
    pub latched: LatchState,
    /// One decision per call, in request order.
    pub decisions: Vec<Decision>,
    /// Per budget that counts across batches: what this batch's allowed calls consumed.
    /// Whoever keeps the counts adds it to its book (and to the next `facts.spent`). Absent
    /// from JSON when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[cfg_attr(
        feature = "json-schema",
        schemars(with = "BTreeMap<String, crate::wire::json_schema::Count>")
    )]
    pub spent: BTreeMap<Arc<str>, f64>,
}

/// Latch state in a response: the same type as the request's `latched` fact ([`Latched`]),
/// so a state read from one batch's response is the next batch's fact as it is.
pub type LatchState = crate::wire::request::Latched;

/// Why a call was denied. Non-exhaustive: a later version may add a kind, and a kind an
/// executor does not know is a denial like any other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum DenyKind {
    /// The policy never classified the tool.
    Unclassified,
    /// The tool does not exist in the active stage, the stage is unknown, or it ran out of turns.
    Stage,
    /// A capability latch is set for this turn and blocks the tool.
    Latch,
    /// A URL argument's host is not on the allowlist.
    Host,
    /// An argument constraint failed.
    Args,
    /// A built-in fact precondition failed.
    Precondition,
    /// A rule mixing arguments and custom facts failed.
    Rule,
    /// The server's shared session state could not be read or written, so a tool that a latch
    /// can block, or that sets one, is denied rather than judged without it. The engine never
    /// gives this kind itself: a server that keeps turn state does (`toolgate serve --state`).
    State,
    /// A budget (`budget NAME for TOOLS { .. }`) has too little left for the call, or the
    /// amount it would consume is not a number of at least 0. The refusal says what is left.
    Budget,
    /// An argument value came from content a third party wrote this turn (`from ingest`,
    /// `mentions ingest`, a latch's `blocks tainted`), or where it came from cannot be
    /// checked. The decision's `provenance` says which argument and where it was seen.
    Provenance,
    /// Not a refusal: the call needs a person's approval first (`ask when`, a latch's
    /// `asks`). The decision's `approval` is the digest an approval must carry. An executor
    /// that does not know asks treats this like any denial, so asking fails closed.
    Ask,
}

impl DenyKind {
    /// The kind as it appears in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            DenyKind::Unclassified => "unclassified",
            DenyKind::Stage => "stage",
            DenyKind::Latch => "latch",
            DenyKind::Host => "host",
            DenyKind::Args => "args",
            DenyKind::Precondition => "precondition",
            DenyKind::Rule => "rule",
            DenyKind::State => "state",
            DenyKind::Ask => "ask",
            DenyKind::Budget => "budget",
            DenyKind::Provenance => "provenance",
        }
    }
}

/// The decision for one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "json-schema",
    derive(schemars::JsonSchema),
    schemars(deny_unknown_fields)
)]
pub struct Decision {
    /// The call's id, echoed.
    pub id: CallLabel,
    /// The call's tool, echoed.
    pub tool: CallLabel,
    /// Whether the executor may dispatch the call.
    pub allow: bool,
    /// Why it was denied; absent when allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<DenyKind>,
    /// The name of the policy element that denied it; absent when allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<Arc<str>>,
    /// The refusal the model reads; absent when allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Arc<str>>,
    /// True when the call was allowed only because a rule's facts were absent and the rule
    /// fails open.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fail_open: bool,
    /// Argument paths carrying vault tokens the executor may unwrap for this call (allowed
    /// calls of policies that declare `detokenise`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub detokenise: Vec<String>,
    /// Argument paths carrying vault tokens that must reach the tool still wrapped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub opaque_tokens: Vec<String>,
    /// True when the tool's output must be re-sanitised before the model sees it (ingest
    /// tools, and tools named by `sanitise_output`). Set on allowed calls only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sanitise_output: bool,
    /// On an ask (kind `ask`): the digest a person's approval must carry (in
    /// `facts.approvals`) to let exactly this call run. On an allow: the approval it used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
    /// The rules marked `shadow` that would have denied this call, had they not been
    /// shadow (listed for calls that are allowed or ask; absent from JSON when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shadow_denials: Vec<Arc<str>>,
    /// On a `provenance` denial: the argument value that came from untrusted output, and
    /// where it was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
}

impl Decision {
    /// Turns this decision into a denial the policy did not make: a keeper's own fail-closed
    /// one (the server's `state` denial when its turn-state store cannot answer). The call's
    /// id and tool stay; everything an allowed call carries (vault paths, the approval used,
    /// shadow denials, provenance) goes, so nothing of the policy's judgement survives it.
    pub fn overrule(&mut self, kind: DenyKind, rule: Arc<str>, reason: Arc<str>) {
        *self = Decision {
            id: std::mem::take(&mut self.id),
            tool: std::mem::take(&mut self.tool),
            allow: false,
            kind: Some(kind),
            rule: Some(rule),
            reason: Some(reason),
            fail_open: false,
            detokenise: Vec::new(),
            opaque_tokens: Vec::new(),
            sanitise_output: false,
            approval: None,
            shadow_denials: Vec::new(),
            provenance: None,
        };
    }
}

/// Where a denied argument's value came from (kind `provenance`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "json-schema",
    derive(schemars::JsonSchema),
    schemars(deny_unknown_fields)
)]
pub struct Provenance {
    /// The argument, as a path: `args.recipient`, `args.participants[2]`.
    pub arg: String,
    /// Why the value counts as untrusted.
    pub why: ProvenanceWhy,
    /// The id of the call whose output it was first seen in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// That call's tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Where in the request it was seen: `facts.outputs[1].output.body`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// Why a value counts as untrusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProvenanceWhy {
    /// It occurs in an untrusted output, and not in the prompt or trusted output.
    Untrusted,
    /// The turn's outputs exceed [`crate::MAX_INDEXED_BYTES`]: every value counts as
    /// untrusted.
    OverCap,
    /// The request carries no `facts.outputs`.
    NoOutputs,
}
