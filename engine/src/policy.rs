//! The compiled policy: read-only tables built once, shared by every decision.

use crate::cond::Cond;
use crate::hosts::HostList;
use crate::ids::{RuleId, StageId, ToolId};
use crate::name_table::NameTable;
use crate::tool_set::ToolSet;
use crate::wire::response::DenyKind;
use std::sync::Arc;
use toolgate_lang::ast::ToolClass;
use toolgate_lang::{Diagnostic, SourceFile};

/// A compiled policy, ready to judge requests.
///
/// Built once by [`Policy::compile`]; immutable afterwards, `Send + Sync`, and cheap to share
/// behind an `Arc`. Judging a batch never does I/O, never reads a clock and never panics.
#[derive(Debug)]
pub struct Policy {
    pub(crate) module: Arc<str>,
    pub(crate) revision: Arc<str>,
    /// Tool name to id. A fixed table with bounded probes: request-chosen names cannot
    /// lengthen a lookup, so SipHash's flooding defence would buy nothing here.
    pub(crate) tool_index: NameTable,
    pub(crate) tools: Vec<ToolInfo>,
    pub(crate) stage_index: NameTable,
    pub(crate) stages: Vec<StageInfo>,
    pub(crate) latches: Vec<LatchInfo>,
    pub(crate) rules: Vec<RuleInfo>,
    /// The budgets, in source order.
    pub(crate) budgets: Box<[BudgetInfo]>,
    pub(crate) host_lists: Vec<HostList>,
    /// True when some tool has `detokenise` permissions: only then are arguments scanned for
    /// vault tokens while the response is built.
    pub(crate) vault_aware: bool,
    /// Top-level keys of the custom facts some rule reads; the JSON reader skips the rest.
    pub(crate) custom_facts: Box<[Box<str>]>,
    pub(crate) fixed: FixedRefusals,
    /// What judging never reads, behind one pointer so the tables above stay together.
    pub(crate) cold: Box<Cold>,
}

/// The parts of a compiled policy that judging never reads: for tooling (`toolgate test`,
/// `fmt`, the prover, diagnostics), kept off the hot tables.
#[derive(Debug)]
pub(crate) struct Cold {
    pub(crate) warnings: Vec<Diagnostic>,
    pub(crate) source: SourceFile,
    /// The syntax tree compiled, with every `use` replaced by what it imports.
    pub(crate) syntax: toolgate_lang::ast::Policy,
    /// The invariants written in the policy itself.
    pub(crate) invariants: crate::invariant::Invariants,
    /// How long an approval may be used once given (`approvals { valid_for .. }`).
    pub(crate) approval_window: std::time::Duration,
}

/// What the engine knows about one classified tool.
#[derive(Debug)]
pub(crate) struct ToolInfo {
    pub(crate) name: Arc<str>,
    pub(crate) class: ToolClass,
    /// The tool's own rules, in source order.
    pub(crate) rules: Box<[RuleId]>,
    /// Latches (bit per latch) that a call of this tool sets.
    pub(crate) sets: u64,
    /// Latches (bit per latch) that deny this tool while set.
    pub(crate) blocked_by: u64,
    /// Latches (bit per latch) that deny this tool while set only when a value of its
    /// arguments comes from untrusted output (`blocks tainted`).
    pub(crate) blocked_tainted: u64,
    /// `blocked_by | blocked_tainted`: the judge's one test of whether any set latch may
    /// block the tool.
    pub(crate) latch_mask: u64,
    /// The keys of this tool's output that are metadata (`provenance for .. { metadata }`);
    /// `None`: the default list.
    pub(crate) metadata: Option<Box<[Box<str>]>>,
    /// Latches (bit per latch) that make a call of this tool ask a person while set.
    pub(crate) asked_by: u64,
    /// Whether anything can make a call of this tool ask (a latch in `asked_by`, a rule with
    /// `ask when`): the judge skips every ask check for a tool that cannot.
    pub(crate) may_ask: bool,
    /// Argument paths whose vault tokens the executor may unwrap (each covers its subtree),
    /// each with the token kinds it accepts.
    pub(crate) detokenise: Box<[crate::vault::Permit]>,
    /// Whether the tool's output must be re-sanitised before the model sees it.
    pub(crate) sanitise_output: bool,
    /// The budgets (indexes into `Policy::budgets`) a call of this tool consumes from.
    pub(crate) budgets: Box<[u16]>,
    /// Its rules marked `shadow`: judged only for the response's `shadow_denials`.
    pub(crate) shadow_rules: Box<[RuleId]>,
}

/// One budget (`budget NAME for TOOLS { .. per batch }`): what an allowed call of its
/// tools consumes, and the most a batch may consume.
#[derive(Debug)]
pub(crate) struct BudgetInfo {
    pub(crate) name: Arc<str>,
    /// `None` for `count` (one per call); else the argument path `sum` adds up.
    pub(crate) sum: Option<crate::cond::ValuePath>,
    pub(crate) max: f64,
    pub(crate) scope: toolgate_lang::ast::BudgetScope,
    /// `within`: the window a count covers (never for `per batch`).
    pub(crate) window: Option<std::time::Duration>,
    /// The author's refusal, else the engine's sentence for the limit; a decision adds
    /// what is left.
    pub(crate) refusal: Arc<str>,
}

impl BudgetInfo {
    /// The argument `sum` reads, as written (empty for `count`).
    pub(crate) fn sum_text(&self) -> String {
        self.sum.as_ref().map(|p| p.text()).unwrap_or_default()
    }
}

/// One stage.
#[derive(Debug)]
pub(crate) struct StageInfo {
    pub(crate) id: StageId,
    pub(crate) name: Arc<str>,
    pub(crate) tools: ToolSet,
    pub(crate) max_turns: Option<u64>,
    pub(crate) whitelist_refusal: Arc<str>,
    pub(crate) turns_refusal: Arc<str>,
    /// The stage's `require`s, and-ed: who may be in it. It reads no call arguments, so it
    /// is evaluated once per batch ([`Policy::judged_stage`]); anything but true denies.
    pub(crate) require: Option<crate::cond::Cond>,
    /// The refusal of a call denied because `require` did not hold.
    pub(crate) require_refusal: Arc<str>,
    /// What `require` asks for, in words (empty without one).
    pub(crate) requirement: Arc<str>,
}

/// One latch.
#[derive(Debug)]
pub(crate) struct LatchInfo {
    pub(crate) name: Arc<str>,
    pub(crate) refusal: Arc<str>,
    /// The refusal of a call it `blocks tainted`: the author's refusal, else the engine's.
    pub(crate) tainted_refusal: Arc<str>,
    /// The reason of an ask for a tool the latch `asks` for.
    pub(crate) ask_reason: Arc<str>,
}

/// One rule.
#[derive(Debug)]
pub(crate) struct RuleInfo {
    pub(crate) name: Arc<str>,
    pub(crate) kind: DenyKind,
    /// Whether `cond` has a `from` or `mentions` test: a denial then looks for the value
    /// that came from untrusted output (kind `provenance`).
    pub(crate) reads_provenance: bool,
    pub(crate) cond: Cond,
    pub(crate) fail_open: bool,
    pub(crate) refusal: Arc<str>,
    /// For a rule that tests a host list: the refusal for each URL ambiguity, indexed by
    /// `Ambiguity as usize` (empty otherwise).
    pub(crate) url_refusals: Box<[Arc<str>]>,
    /// What the rule requires, in words (shown to the model when the tool is offered).
    pub(crate) requirement: Arc<str>,
    /// For a rule of several requirements and no refusal of its own: each requirement's
    /// condition and refusal, so a denial names the one that failed (empty otherwise).
    pub(crate) parts: Box<[RulePart]>,
    /// The rule's slot in the per-batch memo, when its condition reads no call arguments
    /// (so one evaluation serves every call of the batch). `None` for rules that read
    /// arguments, and past the memo's [`crate::limits::MEMO_SLOTS`] slots.
    pub(crate) memo: Option<u8>,
    /// The rule's `ask when` conditions, or-ed: a call that passes the rule and meets this
    /// asks a person (unknown asks too). `None` when the rule has none.
    pub(crate) ask: Option<crate::cond::Cond>,
    /// The reason of such an ask.
    pub(crate) ask_reason: Arc<str>,
    /// Marked `shadow`: on no tool's `rules`, only on `shadow_rules`.
    pub(crate) shadow: bool,
}

/// One requirement of a rule (a `require` line, or one conjunct of it) and its refusal.
#[derive(Debug)]
pub(crate) struct RulePart {
    pub(crate) cond: crate::cond::Cond,
    pub(crate) refusal: Arc<str>,
}

/// Refusals that do not come from a declaration.
#[derive(Debug)]
pub(crate) struct FixedRefusals {
    pub(crate) unclassified: Arc<str>,
    pub(crate) unknown_stage: Arc<str>,
    pub(crate) no_stage: Arc<str>,
    pub(crate) rule_unclassified: Arc<str>,
    pub(crate) rule_no_stage: Arc<str>,
}

impl Policy {
    /// The module name from the policy's `module` line.
    pub fn module(&self) -> &str {
        &self.module
    }

    /// The content hash of the source, reported in every response.
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// How long a person's approval of one of this policy's asks may be used once given:
    /// the policy's `approvals { valid_for .. }`, ten minutes when it sets none. The engine
    /// reads no clock: whoever keeps approvals (the server, the adapters' `Turn`) drops an
    /// approval older than this before it reaches `facts.approvals`.
    pub fn approval_window(&self) -> std::time::Duration {
        self.cold.approval_window
    }

    /// Whether some latch or rule of this policy can ask a person (`asks`, `ask when`).
    pub fn may_ask(&self) -> bool {
        self.tools.iter().any(|t| t.may_ask)
    }

    /// Warnings found while compiling (the policy compiled regardless).
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.cold.warnings
    }

    /// The invariants written inside the policy (`invariant NAME { never allow .. }`).
    /// Decisions never read them; `toolgate test` and `toolgate-prove` check them.
    pub fn invariants(&self) -> &crate::invariant::Invariants {
        &self.cold.invariants
    }

    /// The source the policy was compiled from: the policy's own text, then the text of each
    /// module it imports ([`SourceFile::own_text`] is the policy alone).
    pub fn source(&self) -> &SourceFile {
        &self.cold.source
    }

    /// The syntax tree the policy was compiled from, with every `use` replaced by the
    /// declarations it imports (their spans point into the modules' parts of [`Policy::source`]).
    /// For toolgate's own crates (the prover's search and the change gate); no stability is
    /// promised.
    #[doc(hidden)]
    pub fn syntax(&self) -> &toolgate_lang::ast::Policy {
        &self.cold.syntax
    }

    /// Names of the classified tools with their classes, in id order.
    pub fn tools(&self) -> impl Iterator<Item = (&str, ToolClass)> {
        self.tools.iter().map(|t| (&*t.name, t.class))
    }

    /// Names of the declared stages.
    pub fn stages(&self) -> impl Iterator<Item = &str> {
        self.stages.iter().map(|s| &*s.name)
    }

    /// Names of the declared latches, in declaration order.
    pub fn latches(&self) -> impl Iterator<Item = &str> {
        self.latches.iter().map(|l| &*l.name)
    }

    /// Names of the declared rules, in declaration order.
    pub fn rules(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| &*r.name)
    }

    /// Names of the declared host allowlists.
    pub fn host_lists(&self) -> impl Iterator<Item = &str> {
        self.host_lists.iter().map(|h| &*h.name)
    }

    /// The class of a tool, or `None` when the policy never classified it.
    pub fn class_of(&self, tool: &str) -> Option<ToolClass> {
        self.tool_id(tool).map(|id| self.tools[id.index()].class)
    }

    /// `(sets, blocked)`: whether a call of `tool` sets a latch, and whether a latch can block
    /// it; the calls that turn state decides. Both `false` for a tool the policy never
    /// classified.
    pub fn latch_bound(&self, tool: &str) -> (bool, bool) {
        match self.tool_id(tool) {
            Some(id) => {
                let t = &self.tools[id.index()];
                (t.sets != 0, t.blocked_by != 0)
            }
            None => (false, false),
        }
    }

    /// Whether `tool` exists in `stage` (both must be declared).
    pub fn stage_allows(&self, stage: &str, tool: &str) -> bool {
        match (self.stage_id(stage), self.tool_id(tool)) {
            (Some(s), Some(t)) => self.stages[s.index()].tools.contains(t),
            _ => false,
        }
    }

    /// The latches a call of `tool` sets, by name, in declaration order (none for a tool the
    /// policy never classified). `toolgate diff` groups batch companions by it.
    pub fn latches_set_by<'a>(&'a self, tool: &str) -> impl Iterator<Item = &'a str> + 'a {
        let sets = self
            .tool_id(tool)
            .map_or(0, |id| self.tools[id.index()].sets);
        self.latches
            .iter()
            .enumerate()
            .filter(move |(i, _)| sets & (1 << i) != 0)
            .map(|(_, l)| &*l.name)
    }

    /// What makes a call of `tool` ask a person, one line each, sorted: `latch NAME` for a
    /// latch that `asks` for it (when the tool has rules: without any, the diff's enumeration
    /// of latch states sees every latch ask exactly), `rule NAME: CONDITION` (a disjunct of
    /// the rule's compiled `ask when`s, as debug text) for each of its rules that has them.
    /// Two policies with the same lines ask alike; the change gate (`toolgate-prove`'s diff)
    /// treats any line OLD has and NEW lacks as a possible widening, so a renamed latch that
    /// asks for a tool with rules is held for review.
    #[doc(hidden)]
    pub fn ask_lines(&self, tool: &str) -> Vec<String> {
        let Some(id) = self.tool_id(tool) else {
            return Vec::new();
        };
        let info = &self.tools[id.index()];
        let mut out: Vec<String> = self
            .latches
            .iter()
            .enumerate()
            // A tool without rules asks through a latch exactly where the diff's enumeration
            // of latch states shows it; only behind rules can a latch's ask hide from it.
            .filter(|(i, _)| !info.rules.is_empty() && info.asked_by & (1 << i) != 0)
            .map(|(_, l)| format!("latch {}", l.name))
            .collect();
        // A rule asks when any disjunct of its `ask when`s holds, so each disjunct is a line:
        // NEW with every line of OLD asks at least whenever OLD did.
        fn disjuncts<'c>(c: &'c crate::cond::Cond, out: &mut Vec<&'c crate::cond::Cond>) {
            match c {
                crate::cond::Cond::Or(parts) => parts.iter().for_each(|p| disjuncts(p, out)),
                other => out.push(other),
            }
        }
        for r in info.rules.iter() {
            let rule = &self.rules[r.index()];
            let mut parts = Vec::new();
            if let Some(cond) = &rule.ask {
                disjuncts(cond, &mut parts);
            }
            out.extend(parts.iter().map(|c| format!("rule {}: {c:?}", rule.name)));
        }
        out.sort();
        out
    }

    /// The conjuncts of `stage`'s `require`, each as canonical text, sorted (none for a stage
    /// without one, or not declared). A stage whose lines include every line of another's
    /// admits no request the other refuses; `toolgate diff` holds any other change for review.
    #[doc(hidden)]
    pub fn stage_require_lines(&self, stage: &str) -> Vec<String> {
        let Some(cond) = self
            .stage_id(stage)
            .and_then(|s| self.stages[s.index()].require.as_ref())
        else {
            return Vec::new();
        };
        let mut out: Vec<String> = match cond {
            crate::cond::Cond::And(parts) => parts.iter().map(|c| format!("{c:?}")).collect(),
            other => vec![format!("{other:?}")],
        };
        out.sort();
        out
    }

    /// The names of the rules that judge `tool`, in the order they run (none for a tool the
    /// policy never classified).
    pub fn rules_for<'a>(&'a self, tool: &str) -> impl Iterator<Item = &'a str> + 'a {
        let ids: &[RuleId] = match self.tool_id(tool) {
            Some(id) => &self.tools[id.index()].rules,
            None => &[],
        };
        ids.iter().map(|r| &*self.rules[r.index()].name)
    }

    /// The id of a classified tool.
    #[inline(always)]
    pub(crate) fn tool_id(&self, name: &str) -> Option<ToolId> {
        self.tool_index.get(name).map(ToolId)
    }

    /// How the provenance index reads an output of `tool`: `read` output is trusted, that
    /// of `write` and `egress` tools is not indexed, and everything else (`ingest`, a tool
    /// the policy does not classify) is untrusted, except its metadata keys.
    pub(crate) fn output_label(
        &self,
        tool: &str,
    ) -> (crate::provenance::Trust, Option<&[Box<str>]>) {
        use crate::provenance::Trust;
        match self.tool_id(tool).map(|id| &self.tools[id.index()]) {
            None => (Trust::Untrusted, None),
            Some(info) => {
                let trust = match info.class {
                    ToolClass::Read => Trust::Trusted,
                    ToolClass::Write | ToolClass::Egress => Trust::Skip,
                    ToolClass::Ingest => Trust::Untrusted,
                };
                (trust, info.metadata.as_deref())
            }
        }
    }

    /// Whether the provenance index reads `tool`'s output as untrusted content (an
    /// `ingest` tool, or one the policy does not classify). A surface that keeps a turn's
    /// outputs must have recorded each such call's output before it may send them.
    pub fn indexes_as_untrusted(&self, tool: &str) -> bool {
        use crate::provenance::Labels;
        self.label(tool).0 == crate::provenance::Trust::Untrusted
    }

    /// The id of a declared stage.
    #[inline]
    pub(crate) fn stage_id(&self, name: &str) -> Option<StageId> {
        self.stage_index.get(name).map(StageId)
    }
}

impl Policy {
    /// The policy's budgets, in source order.
    pub fn budgets(&self) -> impl Iterator<Item = crate::budget::Budget<'_>> + '_ {
        self.budgets.iter().map(|b| crate::budget::Budget {
            name: &b.name,
            scope: b.scope,
            window: b.window,
            max: b.max,
        })
    }

    /// Whether budget `name` counts calls of `tool` (its `for` names the tool, or a class or
    /// set holding it): false for a tool the policy never classified, or a budget it does not
    /// declare. A keeper of counts needs only the counts a batch's calls can consume from.
    pub fn budget_counts(&self, name: &str, tool: &str) -> bool {
        self.tool_id(tool).is_some_and(|id| {
            self.tools[id.index()].budgets.iter().any(|&b| {
                self.budgets
                    .get(usize::from(b))
                    .is_some_and(|info| &*info.name == name)
            })
        })
    }

    /// Whether any budget counts across batches, so judging needs `facts.spent` from a keeper.
    pub fn keeps_counts(&self) -> bool {
        self.budgets
            .iter()
            .any(|b| b.scope != crate::BudgetScope::Batch)
    }
}

impl crate::provenance::Labels for Policy {
    fn label(&self, tool: &str) -> (crate::provenance::Trust, Option<&[Box<str>]>) {
        self.output_label(tool)
    }
}
