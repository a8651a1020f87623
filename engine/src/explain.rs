//! `Policy::explain`: every check that ran for each call, in order, with what it looked at.
//!
//! It decides nothing and knows no check order: it runs [`Policy::decide`]'s own judge with a
//! recording trace sink, so each explanation's decision is the one `decide` returns for the
//! same request, and its steps are the checks that judge ran, in its order, stopping where it
//! stopped. The sink only puts each check into words. It allocates freely; it is for people,
//! not for the hot path (which judges with a sink that records nothing).

use crate::cond::{
    eval_test, lookup, Cond, Env, Found, Lit, Lookup, Root, Seg, Test, Truth, ValuePath, ABSENT,
    AMBIGUOUS,
};
use crate::decide::{Check, StageGate, Trace};
use crate::ids::RuleId;
use crate::policy::Policy;
use crate::wire::request::{Call, Request};
use crate::wire::response::Decision;
use crate::wire::view::FactsRef;
use serde::Serialize;
use serde_json::Value;
use toolgate_lang::ast::TypeName;

/// The explanation of one call's decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallExplanation {
    /// The decision, exactly as [`Policy::decide`] makes it.
    pub decision: Decision,
    /// The checks that ran, in the engine's order; the last failing one decided.
    pub steps: Vec<Step>,
}

/// One check and its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    /// What was checked: `class`, `stage`, `max_turns`, `latch NAME`, `rule NAME`, or
    /// `ask latch NAME` / `ask rule NAME` for a call that asks a person.
    pub check: String,
    /// Whether the check let the call through.
    pub passed: bool,
    /// What the check looked at, in words (`host "a.evil.tld" not in vendor_docs`).
    pub detail: String,
}

impl Policy {
    /// Explains the decision for every call of `request`, in request order: the decision
    /// [`Policy::decide`] makes, and the checks its judge ran to make it.
    pub fn explain(&self, request: &Request) -> Vec<CallExplanation> {
        let mut recorder = Recorder {
            policy: self,
            calls: &request.calls,
            facts: FactsRef::Owned(&request.facts),
            carried: self.initial_latches(FactsRef::Owned(&request.facts).latched()),
            steps: Vec::with_capacity(request.calls.len()),
        };
        let response = self.decide_traced(request, &mut recorder);
        response
            .decisions
            .into_iter()
            .zip(recorder.steps)
            .map(|(decision, steps)| CallExplanation { decision, steps })
            .collect()
    }
}

/// The trace sink behind [`Policy::explain`]: each check the judge reports becomes a
/// [`Step`] in words. It narrates; the judge decides.
struct Recorder<'p> {
    policy: &'p Policy,
    calls: &'p [Call],
    facts: FactsRef<'p>,
    /// The latches the request's `latched` fact carries in (the rest were set in the batch).
    carried: u64,
    /// One list of steps per call judged so far.
    steps: Vec<Vec<Step>>,
}

impl Recorder<'_> {
    fn push(&mut self, check: String, passed: bool, detail: String) {
        if let Some(steps) = self.steps.last_mut() {
            steps.push(Step {
                check,
                passed,
                detail,
            });
        }
    }

    /// The call being judged.
    fn call(&self) -> Option<&Call> {
        self.calls.get(self.steps.len().checked_sub(1)?)
    }

    fn stage(&mut self, gate: StageGate<'_>, turns: u64) {
        let tool = self.call().map(|c| c.tool.clone()).unwrap_or_default();
        let name = self.facts.stage().unwrap_or_default();
        let listed = |verb: &str| format!("stage `{name}` {verb} `{tool}`");
        let (max_turns, used_up) = match gate {
            StageGate::Missing => {
                return self.push("stage".into(), false, "the request names no stage".into())
            }
            StageGate::Unknown => {
                let detail = format!("stage `{name}` is not declared by the policy");
                return self.push("stage".into(), false, detail);
            }
            StageGate::NotListed(_) => {
                return self.push("stage".into(), false, listed("does not list"));
            }
            StageGate::TurnsUsedUp(_, max) => (Some(max), true),
            StageGate::Refused(s) | StageGate::Open(s) => (s.max_turns, false),
        };
        self.push("stage".into(), true, listed("lists"));
        if let Some(max) = max_turns {
            let rel = if used_up { ">" } else { "<=" };
            let detail = format!("stage_turns {turns} {rel} max_turns {max}");
            self.push("max_turns".into(), !used_up, detail);
        }
        let (StageGate::Refused(s) | StageGate::Open(s)) = gate else {
            return;
        };
        if s.require.is_some() {
            let met = matches!(gate, StageGate::Open(_));
            let verdict = if met { "met" } else { "not met" };
            let detail = format!("stage `{name}` requires {}: {verdict}", s.requirement);
            self.push("stage require".into(), met, detail);
        }
    }

    fn latch(&mut self, index: usize, set: bool) {
        let policy = self.policy;
        let bit = 1u64 << index;
        let by_call = self.calls.iter().find(|c| {
            policy
                .tool_id(&c.tool)
                .is_some_and(|id| policy.tools[id.index()].sets & bit != 0)
        });
        let detail = match (self.carried & bit != 0, by_call) {
            (true, _) => "set by the request's `latched` fact".to_string(),
            (false, Some(c)) => format!("set by `{}` (call {}) in this batch", c.tool, c.id),
            (false, None) => "not set".to_string(),
        };
        let name = policy.latches.get(index).map(|l| &*l.name).unwrap_or("?");
        self.push(format!("latch {name}"), !set, detail);
    }

    fn rule(&mut self, rule: RuleId, truth: Truth, passed: bool, env: &Env<'_>) {
        let info = &self.policy.rules[rule.index()];
        let outcome = match truth {
            Truth::True => "holds",
            Truth::False => "fails",
            Truth::Unknown(ABSENT) if passed => "unknown: facts absent, the rule fails open",
            Truth::Unknown(ABSENT) => "unknown: facts absent, the rule fails closed",
            Truth::Unknown(f) if f & AMBIGUOUS != 0 => {
                "unknown: a URL is ambiguous, the rule fails closed"
            }
            Truth::Unknown(_) => "unknown: an operand is missing or of the wrong type",
        };
        let mut looked = Vec::new();
        self.policy.describe(&info.cond, env, &mut looked);
        let detail = format!("{outcome}; {}", looked.join("; "));
        self.push(format!("rule {}", info.name), passed, detail);
    }
}

impl Trace for Recorder<'_> {
    const ON: bool = true;

    fn next_call(&mut self) {
        self.steps.push(Vec::new());
    }

    fn record(&mut self, check: Check<'_>) {
        match check {
            Check::Class(None) => {
                let tool = self.call().map(|c| c.tool.clone()).unwrap_or_default();
                let detail = format!("`{tool}` is not classified by the policy");
                self.push("class".into(), false, detail);
            }
            Check::Class(Some(id)) => {
                let tool = self.call().map(|c| c.tool.clone()).unwrap_or_default();
                let class = self.policy.tools[id.index()].class.as_str();
                let detail = format!("`{tool}` is classified as {class}");
                self.push("class".into(), true, detail);
            }
            Check::Stage(gate, turns) => self.stage(gate, turns),
            Check::Latch { index, set } => self.latch(index, set),
            Check::Tainted { index, tainted } => {
                let name = self
                    .policy
                    .latches
                    .get(index)
                    .map(|l| &*l.name)
                    .unwrap_or("?");
                let detail = if tainted {
                    "set, and an argument value came from untrusted output this turn (or the request carries no `facts.outputs`)"
                } else {
                    "set, and no argument value came from untrusted output this turn"
                };
                self.push(
                    format!("latch {name} (blocks tainted)"),
                    !tainted,
                    detail.to_string(),
                );
            }
            Check::Rule {
                rule,
                truth,
                passed,
                env,
            } => self.rule(rule, truth, passed, env),
            Check::Budget {
                budget,
                amount,
                left,
            } => {
                let b = &self.policy.budgets[budget];
                let (passed, detail) = match (amount, left) {
                    (_, None) => (false, crate::budget::unknown_count(&b.name)),
                    (None, _) => (false, crate::budget::bad_amount(&b.sum_text())),
                    (Some(a), Some(left)) => (
                        a <= left,
                        format!(
                            "the call takes {}; {} of {} is left {}",
                            crate::text::number(a),
                            crate::text::number(left.max(0.0)),
                            crate::text::number(b.max),
                            crate::budget::per_text(b.scope, None)
                        ),
                    ),
                };
                self.push(format!("budget {}", b.name), passed, detail);
            }
            Check::Ask {
                latch,
                rule,
                approved,
            } => {
                let (check, why) = match (latch, rule) {
                    (Some(l), _) => (
                        format!("ask latch {}", self.policy.latches[l].name),
                        "the latch is set and asks for this tool",
                    ),
                    (None, Some(r)) => (
                        format!("ask rule {}", self.policy.rules[r.index()].name),
                        "an `ask when` of the rule holds (or cannot be told)",
                    ),
                    (None, None) => ("ask".into(), "asked"),
                };
                let detail = if approved {
                    format!("{why}; `facts.approvals` holds this call's approval")
                } else {
                    format!("{why}; no approval for this call, so it asks a person")
                };
                self.push(check, approved, detail);
            }
        }
    }
}

impl Policy {
    /// Adds a sentence per leaf of `cond`: the value it read and the test's outcome.
    fn describe(&self, cond: &Cond, env: &Env<'_>, out: &mut Vec<String>) {
        match cond {
            Cond::Const(b) => out.push(format!("constant {b}")),
            Cond::And(parts) | Cond::Or(parts) => {
                parts.iter().for_each(|p| self.describe(p, env, out))
            }
            Cond::Not(inner) => self.describe(inner, env, out),
            Cond::Test(path, test) => out.push(self.describe_test(path, test, env)),
            Cond::SamePath(path, tests) => {
                out.extend(tests.iter().map(|t| self.describe_test(path, t, env)))
            }
            Cond::ArgNumber { key, op, bound } => {
                let path = ValuePath {
                    root: Root::Args,
                    segs: Box::new([Seg::Key(key.clone())]),
                };
                for t in [Test::Is(TypeName::Number), Test::Cmp(*op, Lit::Num(*bound))] {
                    out.push(self.describe_test(&path, &t, env));
                }
            }
            Cond::Builtin(pre) => out.push(pre.explain(env.facts)),
        }
    }

    fn describe_test(&self, path: &ValuePath, test: &Test, env: &Env<'_>) -> String {
        let name = path.text();
        let found = match lookup(path, env) {
            Lookup::Found(f) => f,
            Lookup::Absent => return format!("{name} absent"),
            Lookup::Missing => return format!("{name} missing"),
        };
        let shown = match found {
            Found::Json(v) => crate::text::short(v),
            Found::Str(s) => crate::text::short(&Value::from(s)),
            Found::Num(n) => n.to_string(),
        };
        let holds = eval_test(path, test, env) == Truth::True;
        let test_text = match test {
            Test::InHosts(id) => {
                let list = &self.host_lists[id.index()];
                let host = match found {
                    Found::Json(Value::String(s)) => list.describe_url(s),
                    _ => "not a string".into(),
                };
                let list = &list.name;
                let rel = if holds { "in" } else { "not in" };
                return format!("{name} = {shown}: {host} {rel} {list}");
            }
            Test::Cmp(op, lit) => format!("{} {}", op.as_str(), lit_text(lit)),
            Test::InList(items) => {
                let items: Vec<String> = items.iter().map(lit_text).collect();
                format!("in [{}]", items.join(", "))
            }
            Test::Matches(re) => format!("matches {:?}", re.as_str()),
            Test::Is(t) => format!("is {}", t.as_str()),
            Test::Exists => "exists".into(),
            Test::InFact(fact) => format!("in {}", fact.text()),
            Test::From(source) => format!("from {}", source.as_str()),
            Test::Mentions(source) => format!("mentions {}", source.as_str()),
        };
        let verdict = if holds { "true" } else { "not true" };
        format!("{name} = {shown}: `{test_text}` is {verdict}")
    }
}

fn lit_text(lit: &Lit) -> String {
    match lit {
        Lit::Num(n) => crate::text::number(*n),
        Lit::Str(s) => Value::from(&**s).to_string(),
        Lit::Bool(b) => b.to_string(),
        Lit::Null => "null".into(),
    }
}
