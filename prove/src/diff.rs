//! `toolgate diff`: what a new policy allows that the old one denied, and whether that is
//! proved.
//!
//! The finite part of the domain is enumerated exactly, as for invariants: every tool either
//! policy classifies plus one neither does; every stage either declares (at and past each
//! `max_turns` of either), one neither declares, and none; the latch fact false, true, and
//! each latch both declare set alone; and each call alone or with a companion from each group
//! of tools that set the same latches (the latch pre-scan is the only way one call of a batch
//! changes another's decision, so one companion per group covers every batch). The stage,
//! class and latch checks read nothing else, so where both policies deny there, no argument
//! or fact can change that, and where one of them allows there with no rule to run, the
//! change is exact.
//!
//! Where a call reaches NEW's rules, the compiled rules are compared
//! ([`toolgate_engine::unstable::entail`]): a proof that NEW's rules for the tool allow nothing OLD's
//! deny settles it. Otherwise the invariant checker's guided search ([`crate::invariants`])
//! looks for arguments and facts that NEW allows and OLD denies, seeded by both policies'
//! constants and by the values the proof found. A call found is a widening; none found
//! leaves the point *undecided*, which the gate treats like a widening: when unsure, hold.
//!
//! What a tool may do with data is compared as well: vault tokens NEW lets the executor
//! unwrap at a new path or of a new kind, and output no longer re-sanitised, are widenings.

use crate::guide::{Guide, Seg};
use crate::invariants::{guided_search, structural, unique, Config};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use toolgate_engine::unstable::entail::{self, Entailment, Seed, SeedStep};
use toolgate_engine::{Call, Decision, DenyKind, Facts, Latched, Policy, PolicySet, Request};
use toolgate_lang::ast::{Item, ToolClass};

/// The case budget of each search when none is given: small enough to diff on every reload.
pub const DEFAULT_DIFF_CASES: u32 = 512;

/// One behaviour that changed: a call one policy allows and the other denies.
#[derive(Debug, Clone)]
pub struct Change {
    /// The tool called.
    pub tool: String,
    /// Where: stage, latch state and batch, in words.
    pub situation: String,
    /// What the old policy decided, in words (`latch \`documentation_read\``, `allowed`).
    pub old: String,
    /// What the new policy decided.
    pub new: String,
    /// A request showing it, ready for `toolgate eval --input`; the call is [`Change::call`].
    pub request: Request,
    /// The index of the changed call in [`Change::request`].
    pub call: usize,
    /// True when found by the search over arguments and facts, false when by enumeration.
    pub searched: bool,
    /// Enumerated points with this same change (1 for a searched one).
    pub points: usize,
}

impl Change {
    /// One line: "`grade_attempt` in stage `coach` after ...: OLD latch `x`, NEW allowed".
    pub fn summary(&self) -> String {
        format!(
            "`{}` {}: OLD {}, NEW {}",
            self.tool, self.situation, self.old, self.new
        )
    }

    fn to_json(&self) -> Value {
        json!({
            "tool": self.tool,
            "situation": self.situation,
            "old": self.old,
            "new": self.new,
            "summary": self.summary(),
            "request": self.request.to_value(),
            "call": self.call,
            "searched": self.searched,
            "points": self.points,
        })
    }
}

/// A call point where NEW's rules decide and nothing settled whether they allow more than
/// OLD: the proof did not hold and the search found no call that shows a change. The gate
/// holds it like a widening.
#[derive(Debug, Clone)]
pub struct Undecided {
    /// The tool called (the first, when several share these rules).
    pub tool: String,
    /// Where, in words, as for a [`Change`].
    pub situation: String,
    /// The OLD rule NEW's are not proved to imply, when OLD's rules ran there.
    pub rule: Option<String>,
    /// Why it is not proved.
    pub reason: String,
    /// Enumerated points with these same rules left undecided.
    pub points: usize,
    /// Cases the search ran without finding a change.
    pub cases: u64,
}

impl Undecided {
    /// One line: "`pay` in stage `s`: rule `limit` (requirement 2 of 3): REASON". It names
    /// no case count, so an acknowledgement of it (`toolgate test --accept-widenings`) does
    /// not depend on the search budget.
    pub fn summary(&self) -> String {
        let rule = self
            .rule
            .as_deref()
            .map_or(String::new(), |r| format!(" rule {r}:"));
        format!("`{}` {}:{rule} {}", self.tool, self.situation, self.reason)
    }

    fn to_json(&self) -> Value {
        json!({
            "tool": self.tool,
            "situation": self.situation,
            "rule": self.rule,
            "reason": self.reason,
            "summary": self.summary(),
            "points": self.points,
            "cases": self.cases,
        })
    }
}

/// How two versions of one module differ.
#[derive(Debug, Clone, Default)]
pub struct PolicyDiff {
    /// The module name.
    pub module: String,
    /// The old revision hash.
    pub old_revision: String,
    /// The new revision hash.
    pub new_revision: String,
    /// Calls the new policy allows and the old one denied.
    pub widenings: Vec<Change>,
    /// Calls the old policy allowed and the new one denies.
    pub narrowings: Vec<Change>,
    /// Points where NEW's rules are neither proved to allow nothing more nor shown to.
    pub undecided: Vec<Undecided>,
    /// What NEW lets the executor do with a tool's data that OLD did not (vault tokens it
    /// may unwrap, output no longer re-sanitised), one line each.
    pub data_widenings: Vec<String>,
    /// Requests enumerated (each judged by both policies).
    pub requests: usize,
    /// Groups of call points whose rules differ, searched over arguments and facts.
    pub searched: usize,
    /// Generated cases run by those searches.
    pub cases: u64,
}

impl PolicyDiff {
    /// True unless NEW is proved to allow nothing OLD denied: a widening or data widening
    /// found, or a point left undecided. What the gate holds.
    pub fn widens(&self) -> bool {
        !self.widenings.is_empty() || !self.data_widenings.is_empty() || !self.undecided.is_empty()
    }
}

/// How two policy sets differ, module by module.
#[derive(Debug, Clone, Default)]
pub struct SetDiff {
    /// Modules only the new set has: every call naming one was refused before.
    pub added: Vec<String>,
    /// Modules only the old set has.
    pub removed: Vec<String>,
    /// Modules both sets have, in name order.
    pub modules: Vec<PolicyDiff>,
}

impl SetDiff {
    /// True unless the new set is proved to allow nothing the old one denied: a widening
    /// found, or a point left undecided. What the gate holds.
    pub fn widens(&self) -> bool {
        !self.added.is_empty() || self.modules.iter().any(PolicyDiff::widens)
    }

    /// True when the new set is shown to allow more: an added module, a call it allows and
    /// the old one denied, or a data widening.
    pub fn found_widening(&self) -> bool {
        !self.added.is_empty()
            || self
                .modules
                .iter()
                .any(|m| !m.widenings.is_empty() || !m.data_widenings.is_empty())
    }

    /// True when nothing changed in either direction.
    pub fn is_empty(&self) -> bool {
        !self.widens()
            && self.removed.is_empty()
            && self.modules.iter().all(|m| m.narrowings.is_empty())
    }

    /// One line per widening, data widening and undecided point, `MODULE: SUMMARY` (`module
    /// \`x\` added` for a new module): what the server logs for a held reload and what
    /// `toolgate test --against` asks to be acknowledged, line for line.
    pub fn widening_lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .added
            .iter()
            .map(|m| format!("module `{m}` added"))
            .collect();
        for m in &self.modules {
            for c in &m.widenings {
                out.push(format!("{}: {}", m.module, c.summary()));
            }
            for d in &m.data_widenings {
                out.push(format!("{}: {d}", m.module));
            }
            for u in &m.undecided {
                out.push(format!("{}: undecided: {}", m.module, u.summary()));
            }
        }
        out
    }

    /// The diff as JSON (`toolgate diff --json`, the server's pending reload).
    pub fn to_json(&self) -> Value {
        let modules: Vec<Value> = self
            .modules
            .iter()
            .map(|m| {
                json!({
                    "module": m.module,
                    "old_revision": m.old_revision,
                    "new_revision": m.new_revision,
                    "widenings": m.widenings.iter().map(Change::to_json).collect::<Vec<_>>(),
                    "narrowings": m.narrowings.iter().map(Change::to_json).collect::<Vec<_>>(),
                    "undecided": m.undecided.iter().map(Undecided::to_json).collect::<Vec<_>>(),
                    "data_widenings": m.data_widenings,
                    "requests": m.requests,
                    "searched": m.searched,
                    "cases": m.cases,
                })
            })
            .collect();
        json!({
            "widens": self.widens(),
            "found_widening": self.found_widening(),
            "added": self.added,
            "removed": self.removed,
            "modules": modules,
        })
    }

    /// The diff for people: a line per change, each widening with its request.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        for m in &self.added {
            let _ = writeln!(
                s,
                "widening: module `{m}` added: every request naming it was refused before"
            );
        }
        for m in &self.removed {
            let _ = writeln!(s, "narrowing: module `{m}` removed");
        }
        for m in &self.modules {
            let _ = writeln!(
                s,
                "module `{}` ({} -> {}): {} widening{}, {} undecided, {} narrowing{}",
                m.module,
                short(&m.old_revision),
                short(&m.new_revision),
                m.widenings.len() + m.data_widenings.len(),
                plural(m.widenings.len() + m.data_widenings.len()),
                m.undecided.len(),
                m.narrowings.len(),
                plural(m.narrowings.len()),
            );
            for c in &m.widenings {
                let _ = writeln!(s, "  widening: {}{}", c.summary(), how(c));
                let _ = writeln!(
                    s,
                    "    allowed by NEW, denied by OLD (call {}):",
                    c.request.calls.get(c.call).map_or("", |c| c.id.as_str())
                );
                let _ = writeln!(s, "    {}", c.request.to_value());
            }
            for d in &m.data_widenings {
                let _ = writeln!(s, "  widening: {d}");
            }
            for u in &m.undecided {
                let _ = writeln!(
                    s,
                    "  undecided: {} (not proved; the search found no call showing a change in {} cases)",
                    u.summary(),
                    u.cases
                );
            }
            for c in &m.narrowings {
                let _ = writeln!(s, "  narrowing: {}{}", c.summary(), how(c));
            }
            let _ = writeln!(
                s,
                "  {} requests enumerated; {} group{} of differing rules searched with {} cases",
                m.requests,
                m.searched,
                plural(m.searched),
                m.cases
            );
        }
        s
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn short(revision: &str) -> &str {
    revision.get(..12).unwrap_or(revision)
}

fn how(c: &Change) -> String {
    if c.searched {
        " (found by the search)".into()
    } else if c.points > 1 {
        format!(" (exact, {} points)", c.points)
    } else {
        " (exact)".into()
    }
}

/// Diffs two policy sets, module by module.
pub fn diff_sets(old: &PolicySet, new: &PolicySet, config: &Config) -> SetDiff {
    let mut out = SetDiff::default();
    for p in new.iter() {
        match old.get(p.module()) {
            None => out.added.push(p.module().to_string()),
            Some(o) => out.modules.push(diff(o, p, config)),
        }
    }
    for p in old.iter() {
        if new.get(p.module()).is_none() {
            out.removed.push(p.module().to_string());
        }
    }
    out
}

/// What one policy made of one call.
#[derive(Debug, Clone)]
enum Verdict {
    /// The request was refused as a whole (a latch name it does not declare, ...).
    Refused(String),
    /// Denied before any rule ran: class, stage or latch.
    Structural(Decision),
    /// Denied by a rule.
    Rule(Decision),
    /// Past every check, it asks a person (`ask when`, a latch's `asks`).
    Asked(Decision),
    /// Allowed.
    Allowed,
}

impl Verdict {
    fn of(policy: &Policy, request: &Request, call: usize) -> Verdict {
        if let Err(e) = policy.check_request(request) {
            return Verdict::Refused(e.to_string());
        }
        match policy.decide(request).decisions.into_iter().nth(call) {
            None => Verdict::Refused("no decision".into()),
            Some(d) if d.allow => Verdict::Allowed,
            Some(d) if d.kind == Some(DenyKind::Ask) => Verdict::Asked(d),
            Some(d) if structural(policy, request, call, &d) => Verdict::Structural(d),
            Some(d) => Verdict::Rule(d),
        }
    }

    /// How much the verdict lets through: a denial 0, an ask 1 (the call runs once a person
    /// approves), an allow 2. A change to a higher rank is a widening: deny → ask and ask →
    /// allow widen, allow → ask narrows.
    fn rank(&self) -> u8 {
        match self {
            Verdict::Allowed => 2,
            Verdict::Asked(_) => 1,
            _ => 0,
        }
    }

    /// Whether rules ran (allowed, asked, or denied by one).
    fn reached_rules(&self) -> bool {
        matches!(
            self,
            Verdict::Allowed | Verdict::Rule(_) | Verdict::Asked(_)
        )
    }

    fn words(&self) -> String {
        match self {
            Verdict::Allowed => "allowed".into(),
            Verdict::Refused(e) => format!("refuses the request ({e})"),
            Verdict::Asked(d) => format!("asks (`{}`)", d.rule.as_deref().unwrap_or("?")),
            Verdict::Structural(d) | Verdict::Rule(d) => {
                let name = d.rule.as_deref().unwrap_or("?");
                match d.kind {
                    Some(DenyKind::Unclassified) => "unclassified".into(),
                    Some(DenyKind::Stage) => format!("stage `{name}`"),
                    Some(DenyKind::Latch) => format!("latch `{name}`"),
                    _ => format!("rule `{name}`"),
                }
            }
        }
    }
}

/// One enumerated situation for one call.
#[derive(Clone)]
struct Point {
    request: Request,
    situation: String,
    /// The stage part of the situation, which groups changes.
    stage: String,
}

/// The rules that judge a call of `tool` once the stage and latch checks pass, by name:
/// rules do not read the tool's name, so tools with the same rules share one proof and one
/// search.
fn tool_rules(policy: &Policy, tool: &str) -> Vec<String> {
    policy.rules_for(tool).map(String::from).collect()
}

fn max_turns(policy: &Policy, into: &mut BTreeMap<String, BTreeSet<u64>>) {
    for item in &policy.syntax().items {
        if let Item::Stage(s) = item {
            if let Some(m) = &s.max_turns {
                into.entry(s.name.name.clone()).or_default().insert(m.node);
            }
        }
    }
}

/// A group of changes: (tool, stage, old words, new words).
type GroupKey = (String, String, String, String);

#[derive(Default)]
struct Collected {
    changes: Vec<Change>,
    index: HashMap<GroupKey, usize>,
}

impl Collected {
    fn add(&mut self, tool: &str, point: &Point, old: &Verdict, new: &Verdict, searched: bool) {
        self.add_request(tool, point, point.request.clone(), old, new, searched);
    }

    fn add_request(
        &mut self,
        tool: &str,
        point: &Point,
        request: Request,
        old: &Verdict,
        new: &Verdict,
        searched: bool,
    ) {
        let key = (
            tool.to_string(),
            point.stage.clone(),
            old.words(),
            new.words(),
        );
        if let Some(&i) = self.index.get(&key) {
            self.changes[i].points += 1;
            return;
        }
        self.index.insert(key, self.changes.len());
        self.changes.push(Change {
            tool: tool.to_string(),
            situation: point.situation.clone(),
            old: old.words(),
            new: new.words(),
            request,
            call: 0,
            searched,
            points: 1,
        });
    }
}

/// Points left to the search, by (OLD's rules, NEW's rules) where each ran: the points, and
/// what the proof said.
type Open = BTreeMap<(Option<Vec<String>>, Option<Vec<String>>), OpenGroup>;

#[derive(Default)]
struct OpenGroup {
    points: Vec<(String, Point)>,
    /// Why the group is not proved (the first point's proof, or the stage that denied).
    unproven: Option<(Option<String>, String)>,
}

/// The proofs made so far, by (whether NEW is the policy gaining, its tool rules, those of
/// the policy losing).
type Proofs = HashMap<(bool, Vec<String>, Vec<String>), Entailment>;

/// Diffs two versions of one module.
pub fn diff(old: &Policy, new: &Policy, config: &Config) -> PolicyDiff {
    let mut result = PolicyDiff {
        module: new.module().to_string(),
        old_revision: old.revision().to_string(),
        new_revision: new.revision().to_string(),
        ..PolicyDiff::default()
    };
    let mut classified: BTreeSet<String> = old.tools().map(|(t, _)| t.to_string()).collect();
    classified.extend(new.tools().map(|(t, _)| t.to_string()));
    let taken: Vec<String> = classified.iter().cloned().collect();
    let mut tools = taken.clone();
    tools.push(unique("unclassified_tool", &taken));
    let class_of = |t: &str| new.class_of(t).or_else(|| old.class_of(t));

    for tool in &classified {
        result
            .data_widenings
            .extend(entail::data_widenings(new, old, tool));
    }
    // A longer approval window lets one approval run its call later: a widening, for a
    // policy that can ask at all.
    let (was, now) = (old.approval_window(), new.approval_window());
    if now > was && new.may_ask() {
        result.data_widenings.push(format!(
            "an approval stays valid for {}s (was {}s): `approvals {{ valid_for .. }}`",
            now.as_secs(),
            was.as_secs()
        ));
    }

    // Stage points: (stage fact, stage_turns, declared in old, declared in new, words).
    let declared: BTreeSet<String> = old.stages().chain(new.stages()).map(String::from).collect();
    let mut turns: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    max_turns(old, &mut turns);
    max_turns(new, &mut turns);
    let mut stages: Vec<(Option<String>, Option<u64>, String)> = Vec::new();
    for s in &declared {
        stages.push((Some(s.clone()), None, format!("in stage `{s}`")));
        for m in turns.get(s).into_iter().flatten() {
            for t in [*m, m.saturating_add(1)] {
                stages.push((
                    Some(s.clone()),
                    Some(t),
                    format!("in stage `{s}` at turn {t}"),
                ));
            }
        }
    }
    let undeclared: Vec<String> = declared.iter().cloned().collect();
    stages.push((
        Some(unique("undefined_stage", &undeclared)),
        None,
        "in a stage neither policy declares".into(),
    ));
    stages.push((None, None, "with no stage".into()));

    // Latch states: none, all, and each latch both policies declare alone.
    let old_latches: BTreeSet<&str> = old.latches().collect();
    let new_latches: BTreeSet<&str> = new.latches().collect();
    let mut latch_states: Vec<(Latched, String)> = vec![
        (Latched::Flag(false), String::new()),
        (Latched::Flag(true), " with every latch set".into()),
    ];
    if old_latches.len().max(new_latches.len()) > 1 {
        for l in old_latches.intersection(&new_latches) {
            let map = BTreeMap::from([(std::sync::Arc::<str>::from(*l), true)]);
            latch_states.push((Latched::ByName(map), format!(" with latch `{l}` set")));
        }
    }

    // Companions: one tool per distinct (latches it sets in old, in new).
    let mut companions: Vec<Option<String>> = vec![None];
    let mut seen: BTreeSet<(Vec<&str>, Vec<&str>)> = BTreeSet::new();
    for t in &classified {
        let sig = (
            old.latches_set_by(t).collect::<Vec<_>>(),
            new.latches_set_by(t).collect::<Vec<_>>(),
        );
        if (!sig.0.is_empty() || !sig.1.is_empty()) && seen.insert(sig) {
            companions.push(Some(t.clone()));
        }
    }

    let pre_denied = |p: &Policy, stage: &Option<String>, tool: &str| {
        p.class_of(tool).is_none()
            || matches!(stage, Some(s) if p.stages().any(|d| d == s) && !p.stage_allows(s, tool))
    };

    let mut widenings = Collected::default();
    let mut narrowings = Collected::default();
    let mut widen_open: Open = BTreeMap::new();
    let mut narrow_open: Open = BTreeMap::new();
    let mut proofs: Proofs = HashMap::new();
    let mut seeds: Vec<Seed> = Vec::new();
    // Whether `gain`'s rules for `tool` are proved to allow nothing `lose`'s deny; the
    // reason when not.
    let mut prove = |gain: &Policy,
                     lose: &Policy,
                     tool: &str,
                     stage: &Option<String>,
                     seeds: &mut Vec<Seed>| {
        // A stage's `require` runs before the rules: GAIN must keep every line of LOSE's,
        // or it may admit a principal LOSE refused, whatever the rules say.
        if let Some(s) = stage {
            let (gained, lost) = (gain.stage_require_lines(s), lose.stage_require_lines(s));
            if lost.iter().any(|l| !gained.contains(l)) {
                return Some((
                    None,
                    format!("stage `{s}`'s `require` changed, and NEW is not proved to admit only what OLD admits"),
                ));
            }
        }
        let key = (
            std::ptr::eq(gain, new),
            tool_rules(gain, tool),
            tool_rules(lose, tool),
        );
        let proof = proofs
            .entry(key)
            .or_insert_with(|| {
                let e = entail::entails(gain, lose, tool);
                if let Entailment::Unproven(u) = &e {
                    seeds.extend(u.seeds.iter().cloned());
                }
                e
            })
            .clone();
        // The proof covers `require`s; an ask OLD has that NEW lacks (or changed) could let
        // a call run that OLD held for a person, and is left to the search.
        let (gained, lost) = (gain.ask_lines(tool), lose.ask_lines(tool));
        if let Some(gone) = lost.iter().find(|l| !gained.contains(l)) {
            return Some((
                None,
                format!(
                    "an ask is gone or changed ({}), and NEW is not proved to ask as often",
                    gone.split(':').next().unwrap_or(gone)
                ),
            ));
        }
        match proof {
            Entailment::Proved => None,
            Entailment::Unproven(u) => {
                let which = if u.requirements > 1 {
                    format!(" (requirement {} of {})", u.requirement, u.requirements)
                } else {
                    String::new()
                };
                Some((Some(format!("`{}`{which}", u.rule)), u.reason))
            }
        }
    };
    for tool in &tools {
        for (stage, stage_turns, stage_words) in &stages {
            if pre_denied(old, stage, tool) && pre_denied(new, stage, tool) {
                continue;
            }
            for (latched, latch_words) in &latch_states {
                for companion in &companions {
                    let mut calls = vec![Call::new("c1", tool.as_str(), Value::Object(Map::new()))];
                    let mut situation = format!("{stage_words}{latch_words}");
                    if let Some(c) = companion {
                        calls.push(Call::new("c2", c.as_str(), Value::Object(Map::new())));
                        let class = class_of(c).map_or("", ToolClass::as_str);
                        situation.push_str(&format!(" after `{c}` ({class}) in the same batch"));
                    }
                    let facts = Facts {
                        stage: stage.clone(),
                        stage_turns: *stage_turns,
                        latched: latched.clone(),
                        ..Facts::default()
                    };
                    let mut request = Request::new(facts, calls);
                    request.policy = Some(new.module().to_string());
                    result.requests += 1;
                    let o = Verdict::of(old, &request, 0);
                    let n = Verdict::of(new, &request, 0);
                    if !o.reached_rules() && !n.reached_rules() {
                        // The stage, class and latch checks decide alike for every argument
                        // and fact: exact.
                        continue;
                    }
                    let point = Point {
                        request,
                        situation,
                        stage: stage_words.clone(),
                    };
                    let group = (
                        o.reached_rules().then(|| tool_rules(old, tool)),
                        n.reached_rules().then(|| tool_rules(new, tool)),
                    );
                    if n.rank() > o.rank() {
                        widenings.add(tool, &point, &o, &n, false);
                    } else if n.reached_rules() {
                        // NEW's rules decide; OLD's too, or OLD denies before any rule.
                        let unproven = if o.reached_rules() {
                            prove(new, old, tool, stage, &mut seeds)
                        } else {
                            Some((
                                None,
                                format!(
                                    "OLD denies it ({}) before any rule, and NEW's rules are not proved to deny every call",
                                    o.words()
                                ),
                            ))
                        };
                        if let Some(why) = unproven {
                            let g = widen_open.entry(group.clone()).or_default();
                            g.unproven.get_or_insert(why);
                            g.points.push((tool.clone(), point.clone()));
                        }
                    }
                    if o.rank() > n.rank() {
                        narrowings.add(tool, &point, &o, &n, false);
                    } else if o.reached_rules() {
                        let unproven = if n.reached_rules() {
                            prove(old, new, tool, stage, &mut seeds)
                        } else {
                            Some((None, String::new()))
                        };
                        if let Some(why) = unproven {
                            let g = narrow_open.entry(group).or_default();
                            g.unproven.get_or_insert(why);
                            g.points.push((tool.clone(), point));
                        }
                    }
                }
            }
        }
    }

    let mut guide_ast = old.syntax().clone();
    guide_ast.items.extend(new.syntax().items.iter().cloned());
    let mut guide = Guide::new(&guide_ast, None);
    add_seeds(&mut guide, &seeds);
    for (open, widen) in [(&widen_open, true), (&narrow_open, false)] {
        for group in open.values() {
            result.searched += 1;
            let refs: Vec<(&Request, usize)> =
                group.points.iter().map(|(_, p)| (&p.request, 0)).collect();
            let (gain, lose) = if widen { (new, old) } else { (old, new) };
            let found = guided_search(&guide, &refs, config, |request, call| {
                Verdict::of(gain, request, call).rank() > Verdict::of(lose, request, call).rank()
            });
            result.cases += u64::from(found.cases);
            let hit = found
                .hit
                .and_then(|(request, call, index)| Some((request, call, group.points.get(index)?)));
            let Some((request, call, (tool, point))) = hit else {
                if let (true, Some((tool, point)), Some((rule, reason))) =
                    (widen, group.points.first(), &group.unproven)
                {
                    result.undecided.push(Undecided {
                        tool: tool.clone(),
                        situation: point.situation.clone(),
                        rule: rule.clone(),
                        reason: reason.clone(),
                        points: group.points.len(),
                        cases: u64::from(found.cases),
                    });
                }
                continue;
            };
            let o = Verdict::of(old, &request, call);
            let n = Verdict::of(new, &request, call);
            let into = if widen {
                &mut widenings
            } else {
                &mut narrowings
            };
            into.add_request(tool, point, request, &o, &n, true);
        }
    }
    result.widenings = widenings.changes;
    result.narrowings = narrowings.changes;
    result
}

/// Adds the values the proof found to the search's candidates at their paths.
fn add_seeds(guide: &mut Guide, seeds: &[Seed]) {
    for seed in seeds {
        let path: Vec<Seg> = seed
            .path
            .iter()
            .map(|s| match s {
                SeedStep::Key(k) => Seg::Key(k.clone()),
                SeedStep::Index(i) => Seg::Index(*i),
            })
            .collect();
        let into = if seed.in_facts {
            &mut guide.facts
        } else {
            &mut guide.args
        };
        let values = into.entry(path).or_default();
        if !values.contains(&seed.value) {
            values.push(seed.value.clone());
        }
    }
}
