//! `Policy::explain`: every check that ran for each call, in order, with what it looked at.
//!
//! This is the slow, talkative twin of `decide`. It never decides anything itself: the
//! decision in each explanation is the one [`Policy::decide`] returns for the same request,
//! and the steps narrate the checks of that decision in the engine's order, stopping where
//! the engine stopped. It allocates freely; it is for people, not for the hot path.

use crate::cond::{
    eval_test, lookup, Cond, Env, Found, Lit, Lookup, Root, Seg, Test, Truth, ValuePath, ABSENT,
    AMBIGUOUS,
};
use crate::policy::Policy;
use crate::request::{Call, Request};
use crate::response::Decision;
use crate::view::FactsRef;
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
    /// What was checked: `class`, `stage`, `max_turns`, `latch NAME` or `rule NAME`.
    pub check: String,
    /// Whether the check let the call through.
    pub passed: bool,
    /// What the check looked at, in words (`host "a.evil.tld" not in vendor_docs`).
    pub detail: String,
}

impl Policy {
    /// Explains the decision for every call of `request`, in request order.
    pub fn explain(&self, request: &Request) -> Vec<CallExplanation> {
        let response = self.decide(request);
        let facts = FactsRef::Owned(&request.facts);
        let setters: Vec<(&Call, u64)> = request
            .calls
            .iter()
            .filter_map(|c| {
                self.tool_id(&c.tool)
                    .map(|id| (c, self.tools[id.index()].sets))
            })
            .collect();
        request
            .calls
            .iter()
            .zip(response.decisions)
            .map(|(call, decision)| CallExplanation {
                steps: self.steps(call, facts, &setters),
                decision,
            })
            .collect()
    }

    fn steps(&self, call: &Call, facts: FactsRef<'_>, setters: &[(&Call, u64)]) -> Vec<Step> {
        let mut steps = Vec::new();
        let mut step = |check: String, passed: bool, detail: String| {
            steps.push(Step {
                check,
                passed,
                detail,
            });
            passed
        };
        let Some(id) = self.tool_id(&call.tool) else {
            step(
                "class".into(),
                false,
                format!("`{}` is not classified by the policy", call.tool),
            );
            return steps;
        };
        let tool = &self.tools[id.index()];
        step(
            "class".into(),
            true,
            format!("`{}` is classified as {}", call.tool, tool.class.as_str()),
        );
        let Some(stage_name) = facts.stage() else {
            step("stage".into(), false, "the request names no stage".into());
            return steps;
        };
        let Some(stage) = self.stage_id(stage_name).map(|s| &self.stages[s.index()]) else {
            step(
                "stage".into(),
                false,
                format!("stage `{stage_name}` is not declared by the policy"),
            );
            return steps;
        };
        let listed = stage.tools.contains(id);
        let verb = if listed { "lists" } else { "does not list" };
        if !step(
            "stage".into(),
            listed,
            format!("stage `{stage_name}` {verb} `{}`", call.tool),
        ) {
            return steps;
        }
        if let Some(max) = stage.max_turns {
            let turns = facts.stage_turns().unwrap_or(0);
            let ok = turns <= max;
            let rel = if ok { "<=" } else { ">" };
            if !step(
                "max_turns".into(),
                ok,
                format!("stage_turns {turns} {rel} max_turns {max}"),
            ) {
                return steps;
            }
        }
        let carried = self.initial_latches(facts.latched());
        for (i, latch) in self.latches.iter().enumerate() {
            let bit = 1u64 << i;
            if tool.blocked_by & bit == 0 {
                continue;
            }
            let from_fact = carried & bit != 0;
            let by_call = setters.iter().find(|(_, sets)| sets & bit != 0);
            let detail = match (from_fact, by_call) {
                (true, _) => "set by the request's `latched` fact".to_string(),
                (false, Some((c, _))) => {
                    format!("set by `{}` (call {}) in this batch", c.tool, c.id)
                }
                (false, None) => "not set".to_string(),
            };
            let set = from_fact || by_call.is_some();
            if !step(format!("latch {}", latch.name), !set, detail) {
                return steps;
            }
        }
        let env = Env::new(&call.args, facts, &self.host_lists);
        for rule_id in tool.rules.iter() {
            let rule = &self.rules[rule_id.index()];
            let truth = rule.cond.eval(&env);
            let mut looked = Vec::new();
            self.describe(&rule.cond, &env, &mut looked);
            let (passed, outcome) = match truth {
                Truth::True => (true, "holds"),
                Truth::False => (false, "fails"),
                Truth::Unknown(ABSENT) if rule.fail_open => {
                    (true, "unknown: facts absent, the rule fails open")
                }
                Truth::Unknown(ABSENT) => (false, "unknown: facts absent, the rule fails closed"),
                Truth::Unknown(f) if f & AMBIGUOUS != 0 => {
                    (false, "unknown: a URL is ambiguous, the rule fails closed")
                }
                Truth::Unknown(_) => (false, "unknown: an operand is missing or of the wrong type"),
            };
            let detail = format!("{outcome}; {}", looked.join("; "));
            if !step(format!("rule {}", rule.name), passed, detail) {
                return steps;
            }
        }
        steps
    }

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
            Cond::ClientSentMedia { within, kinds } => out.push(match env.facts.messages() {
                None => "messages absent".into(),
                Some(ms) => {
                    let found = ms.client_sent_media(*within, kinds);
                    let wanted = if kinds.is_empty() {
                        "any".to_string()
                    } else {
                        kinds.join(" or ")
                    };
                    let verb = if found { "has" } else { "has no" };
                    format!("the last {within} client messages: {verb} media of kind {wanted}")
                }
            }),
            Cond::FieldFilled(name) => out.push(match env.facts.fields() {
                None => "fields absent".into(),
                Some(f) => match f.get(&**name) {
                    None => format!("field `{name}` missing"),
                    Some(v) => format!("field `{name}` = {}", short(v)),
                },
            }),
            Cond::CalledBefore(tool) => out.push(match env.facts.called() {
                None => "called absent".into(),
                Some(c) if c.succeeded(tool) => format!("`{tool}` succeeded earlier"),
                Some(_) => format!("no earlier successful `{tool}`"),
            }),
            Cond::MinClientMessages(n) => out.push(match env.facts.messages() {
                None => "messages absent".into(),
                Some(ms) => {
                    let verb = if ms.client_count_at_least(*n) {
                        "at least"
                    } else {
                        "fewer than"
                    };
                    format!("{verb} {n} client messages")
                }
            }),
        }
    }

    fn describe_test(&self, path: &ValuePath, test: &Test, env: &Env<'_>) -> String {
        let name = path_text(path);
        let found = match lookup(path, env) {
            Lookup::Found(f) => f,
            Lookup::Absent => return format!("{name} absent"),
            Lookup::Missing => return format!("{name} missing"),
        };
        let shown = match found {
            Found::Json(v) => short(v),
            Found::Str(s) => short(&Value::from(s)),
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
        };
        let verdict = if holds { "true" } else { "not true" };
        format!("{name} = {shown}: `{test_text}` is {verdict}")
    }
}

fn path_text(path: &ValuePath) -> String {
    let mut s = match &path.root {
        Root::Args => "args".to_string(),
        Root::Stage => "facts.stage".to_string(),
        Root::StageTurns => "facts.stage_turns".to_string(),
        Root::Fields => "facts.fields".to_string(),
        Root::Other(k) => format!("facts.{k}"),
    };
    for seg in path.segs.iter() {
        match seg {
            Seg::Key(k) => {
                s.push('.');
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// A JSON value for a sentence, cut at 80 characters.
fn short(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

fn lit_text(lit: &Lit) -> String {
    match lit {
        // Whole numbers as written in policies (`250`, not `250.0`).
        Lit::Num(n) if n.fract() == 0.0 && n.abs() < 1e15 => format!("{n:.0}"),
        Lit::Num(n) => n.to_string(),
        Lit::Str(s) => Value::from(&**s).to_string(),
        Lit::Bool(b) => b.to_string(),
        Lit::Null => "null".into(),
    }
}
