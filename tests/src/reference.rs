//! A reference evaluator: the decision procedure of `docs/language.md`, written directly over
//! the `toolgate_lang` syntax tree and the request JSON.
//!
//! It is deliberately naive: no compilation, no interning, no bitsets; names are compared as
//! strings and everything is recomputed for every call. Its only job is to be obviously
//! right, so that `tests/differential.rs` can compare the compiled engine against it. Each
//! step cites the section of the documentation it implements.
//!
//! It assumes a well-formed request (the engine's reader is tested elsewhere) and a policy
//! that compiles.

use serde_json::{Map, Value};
use toolgate_lang::ast::*;

/// One call's decision, in the terms the differential test compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefDecision {
    /// The call id.
    pub id: String,
    /// Whether the call may run.
    pub allow: bool,
    /// The denial kind as in the JSON (`"stage"`, ...); `None` when allowed.
    pub kind: Option<String>,
    /// What denied it; `None` when allowed.
    pub rule: Option<String>,
    /// Allowed only because a rule failed open.
    pub fail_open: bool,
}

/// The whole answer: the latch state after the batch (as JSON) and one decision per call.
#[derive(Debug, Clone, PartialEq)]
pub struct RefResponse {
    /// `latched` as the response JSON would have it.
    pub latched: Value,
    /// One per call, in request order.
    pub decisions: Vec<RefDecision>,
}

/// Three-valued truth. Unknown records why ("Three-valued logic").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Truth {
    True,
    False,
    Unknown { absent: bool, invalid: bool },
}

const ABSENT: Truth = Truth::Unknown {
    absent: true,
    invalid: false,
};
const INVALID: Truth = Truth::Unknown {
    absent: false,
    invalid: true,
};

fn truth(b: bool) -> Truth {
    if b {
        Truth::True
    } else {
        Truth::False
    }
}

fn unknown_union(a: Truth, b: Truth) -> Truth {
    let parts = |t: Truth| match t {
        Truth::Unknown { absent, invalid } => (absent, invalid),
        _ => (false, false),
    };
    let (a1, i1) = parts(a);
    let (a2, i2) = parts(b);
    Truth::Unknown {
        absent: a1 || a2,
        invalid: i1 || i2,
    }
}

fn and(a: Truth, b: Truth) -> Truth {
    match (a, b) {
        (Truth::False, _) | (_, Truth::False) => Truth::False,
        (Truth::True, Truth::True) => Truth::True,
        _ => unknown_union(a, b),
    }
}

fn or(a: Truth, b: Truth) -> Truth {
    match (a, b) {
        (Truth::True, _) | (_, Truth::True) => Truth::True,
        (Truth::False, Truth::False) => Truth::False,
        _ => unknown_union(a, b),
    }
}

/// Judges `request` (JSON) against the policy tree `policy`.
pub fn decide(policy: &Policy, request: &Value) -> RefResponse {
    let facts: Option<&Map<String, Value>> = request.get("facts").and_then(Value::as_object);
    let fact = |k: &str| facts.and_then(|f| f.get(k)).filter(|v| !v.is_null());
    let calls: Vec<&Value> = request
        .get("calls")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();

    let class_of = |tool: &str| -> Option<ToolClass> {
        policy.items.iter().find_map(|i| match i {
            Item::Class(c) => c
                .tools
                .iter()
                .any(|t| t.name == tool)
                .then_some(c.class.node),
            _ => None,
        })
    };
    let selects = |sels: &[Selector], tool: &str| -> bool {
        let class = class_of(tool);
        sels.iter().any(|s| match s {
            Selector::Class(c) => class.is_some_and(|k| k.selected_by(c.node)),
            Selector::Tool(t) => t.name == tool,
        })
    };
    let latches: Vec<&LatchDecl> = policy
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Latch(l) => Some(l),
            _ => None,
        })
        .collect();

    // "Latches": the pre-scan. Incoming state, OR every classified setter in the batch.
    // A set flag under a name no latch has sets every latch (unsure which was meant).
    let incoming = fact("latched");
    let undeclared_set = match incoming {
        Some(Value::Object(m)) => m.iter().any(|(name, v)| {
            v == &Value::Bool(true) && !latches.iter().any(|l| l.name.name == *name)
        }),
        _ => false,
    };
    let latch_set: Vec<bool> = latches
        .iter()
        .map(|l| {
            let given = undeclared_set
                || match incoming {
                    Some(Value::Bool(b)) => *b,
                    Some(Value::Object(m)) => m.get(&l.name.name) == Some(&Value::Bool(true)),
                    _ => false,
                };
            let by_batch = calls.iter().any(|c| {
                let tool = c.get("tool").and_then(Value::as_str).unwrap_or("");
                class_of(tool).is_some() && selects(&l.set_by, tool)
            });
            given || by_batch
        })
        .collect();
    let latched = match latches.len() {
        0 => Value::Bool(match incoming {
            Some(Value::Bool(b)) => *b,
            Some(Value::Object(m)) => m.values().any(|v| v == &Value::Bool(true)),
            _ => false,
        }),
        1 => Value::Bool(latch_set[0]),
        _ => Value::Object(
            latches
                .iter()
                .zip(&latch_set)
                .map(|(l, s)| (l.name.name.clone(), Value::Bool(*s)))
                .collect(),
        ),
    };

    let decisions = calls
        .iter()
        .map(|call| {
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let tool = call.get("tool").and_then(Value::as_str).unwrap_or("");
            let empty = Value::Object(Map::new());
            let args = match call.get("args") {
                Some(Value::Null) | None => &empty,
                Some(a) => a,
            };
            let deny = |kind: &str, rule: &str| RefDecision {
                id: id.clone(),
                allow: false,
                kind: Some(kind.to_string()),
                rule: Some(rule.to_string()),
                fail_open: false,
            };
            // "Decision order" 1: unclassified.
            if class_of(tool).is_none() {
                return deny("unclassified", "unclassified");
            }
            // 2: stage.
            let Some(stage_name) = fact("stage").and_then(Value::as_str) else {
                return deny("stage", "stage");
            };
            let stage = policy.items.iter().find_map(|i| match i {
                Item::Stage(s) if s.name.name == stage_name => Some(s),
                _ => None,
            });
            let Some(stage) = stage else {
                return deny("stage", stage_name);
            };
            if !stage.tools.iter().any(|t| t.name == tool) {
                return deny("stage", stage_name);
            }
            let turns = fact("stage_turns").and_then(Value::as_u64).unwrap_or(0);
            if stage.max_turns.as_ref().is_some_and(|m| turns > m.node) {
                return deny("stage", stage_name);
            }
            // "Stages": every `require` of the stage must be true; unknown denies too.
            let stage_ctx = Ctx {
                args: &Value::Null,
                facts,
                policy,
            };
            let holds = stage
                .requires
                .iter()
                .fold(Truth::True, |acc, e| and(acc, stage_ctx.eval(e)));
            if holds != Truth::True {
                return deny("stage", stage_name);
            }
            // 3: latch, first declared.
            for (l, set) in latches.iter().zip(&latch_set) {
                if *set && selects(&l.blocks, tool) {
                    return deny("latch", &l.name.name);
                }
            }
            // 4: the tool's rules in source order.
            let mut fail_open = false;
            for item in &policy.items {
                let Item::Rule(r) = item else { continue };
                if !selects(&r.targets, tool) {
                    continue;
                }
                let ctx = Ctx {
                    args,
                    facts,
                    policy,
                };
                let t = r
                    .requires
                    .iter()
                    .fold(Truth::True, |acc, e| and(acc, ctx.eval(e)));
                let kind = rule_kind(r);
                match t {
                    Truth::True => {}
                    Truth::False => return deny(kind, &r.name.name),
                    Truth::Unknown { invalid: true, .. } => return deny(kind, &r.name.name),
                    Truth::Unknown { .. } => {
                        let default_allow = kind == "precondition";
                        let allow = r
                            .on_missing
                            .as_ref()
                            .map_or(default_allow, |m| m.node == OnMissing::Allow);
                        if allow {
                            fail_open = true;
                        } else {
                            return deny(kind, &r.name.name);
                        }
                    }
                }
            }
            RefDecision {
                id,
                allow: true,
                kind: None,
                rule: None,
                fail_open,
            }
        })
        .collect();
    RefResponse { latched, decisions }
}

#[derive(Default)]
struct Seen {
    hosts: bool,
    args: bool,
    boolean: bool,
    builtin: bool,
    facts: bool,
}

fn seen(r: &RuleDecl) -> Seen {
    fn walk(e: &Expr, s: &mut Seen) {
        match &e.kind {
            ExprKind::Bool(_) => s.boolean = true,
            ExprKind::And(xs) | ExprKind::Or(xs) => xs.iter().for_each(|x| walk(x, s)),
            ExprKind::Not(x) => walk(x, s),
            ExprKind::Call(_) => s.builtin = true,
            ExprKind::Predicate(p, pred) => match (p.root, pred) {
                (PathRoot::Facts | PathRoot::Principal, _) => s.facts = true,
                (PathRoot::Args, Predicate::InHosts(_)) => s.hosts = true,
                (PathRoot::Args, _) => s.args = true,
            },
        }
    }
    let mut s = Seen::default();
    r.requires.iter().for_each(|e| walk(e, &mut s));
    s
}

/// "Denial kinds": from what the rule's leaves test.
fn rule_kind(r: &RuleDecl) -> &'static str {
    let s = seen(r);
    if s.facts {
        "rule"
    } else if s.hosts && !s.args && !s.boolean && !s.builtin {
        "host"
    } else if !s.hosts && !s.builtin {
        "args"
    } else if s.builtin && !s.hosts && !s.args && !s.boolean {
        "precondition"
    } else {
        "rule"
    }
}

struct Ctx<'a> {
    args: &'a Value,
    facts: Option<&'a Map<String, Value>>,
    policy: &'a Policy,
}

/// What a path leads to.
enum Lookup<'a> {
    Value(&'a Value),
    /// An argument that is not there: unknown-invalid.
    MissingArg,
    /// A fact that is not there: unknown-absent.
    MissingFact,
}

impl Ctx<'_> {
    fn standard_fact(&self, k: &str) -> Option<&Value> {
        self.facts.and_then(|f| f.get(k)).filter(|v| !v.is_null())
    }

    fn lookup(&self, p: &Path) -> Lookup<'_> {
        let (mut cur, missing) = match p.root {
            PathRoot::Args => (Some(self.args), Lookup::MissingArg),
            // `principal.X` is `facts.principal.X`, a standard fact (null is absent).
            PathRoot::Principal => {
                return match walk(self.standard_fact("principal"), &p.segments) {
                    Some(v) => Lookup::Value(v),
                    None => Lookup::MissingFact,
                };
            }
            PathRoot::Facts => {
                let Some(PathSegment::Key(first)) = p.segments.first() else {
                    return Lookup::MissingFact;
                };
                // Standard facts set to null count as absent; custom facts are plain JSON.
                let root = if ["stage", "stage_turns", "fields"].contains(&first.as_str()) {
                    self.standard_fact(first)
                } else {
                    self.facts.and_then(|f| f.get(first))
                };
                let rest = Path {
                    root: p.root,
                    segments: p.segments[1..].to_vec(),
                    span: p.span,
                };
                return match walk(root, &rest.segments) {
                    Some(v) => Lookup::Value(v),
                    None => Lookup::MissingFact,
                };
            }
        };
        cur = walk(cur, &p.segments);
        match cur {
            Some(v) => Lookup::Value(v),
            None => missing,
        }
    }

    fn eval(&self, e: &Expr) -> Truth {
        match &e.kind {
            ExprKind::Bool(b) => truth(*b),
            ExprKind::And(xs) => xs.iter().fold(Truth::True, |a, x| and(a, self.eval(x))),
            ExprKind::Or(xs) => xs.iter().fold(Truth::False, |a, x| or(a, self.eval(x))),
            ExprKind::Not(x) => match self.eval(x) {
                Truth::True => Truth::False,
                Truth::False => Truth::True,
                u => u,
            },
            ExprKind::Call(c) => self.builtin(c),
            ExprKind::Predicate(path, pred) => self.predicate(path, pred),
        }
    }

    fn predicate(&self, path: &Path, pred: &Predicate) -> Truth {
        let v = match self.lookup(path) {
            Lookup::Value(v) => v,
            // "`exists` and `is` are never unknown: on a missing argument or fact they are false".
            Lookup::MissingArg | Lookup::MissingFact
                if matches!(pred, Predicate::Exists | Predicate::Is(_)) =>
            {
                return Truth::False
            }
            Lookup::MissingArg => return INVALID,
            Lookup::MissingFact => return ABSENT,
        };
        // A value the test cannot apply to: unknown. Which kind: the section says "invalid: an
        // argument is missing or of the wrong type"; a fact of the wrong type is read the same.
        let wrong = INVALID;
        match pred {
            Predicate::Exists => Truth::True,
            Predicate::Is(t) => truth(match t.node {
                TypeName::String => v.is_string(),
                TypeName::Number => v.is_number(),
                TypeName::Integer => v.as_f64().is_some_and(|n| n.fract() == 0.0),
                TypeName::Bool => v.is_boolean(),
                TypeName::Array => v.is_array(),
                TypeName::Object => v.is_object(),
                TypeName::Null => v.is_null(),
            }),
            Predicate::Compare(op, lit) => match (&lit.node, v) {
                (Literal::Null, _) => match op {
                    CmpOp::Eq => truth(v.is_null()),
                    _ => truth(!v.is_null()),
                },
                (Literal::Number(n), Value::Number(x)) => {
                    let x = x.as_f64().unwrap_or(f64::NAN);
                    truth(match op {
                        CmpOp::Lt => x < *n,
                        CmpOp::Le => x <= *n,
                        CmpOp::Eq => x == *n,
                        CmpOp::Ne => x != *n,
                        CmpOp::Ge => x >= *n,
                        CmpOp::Gt => x > *n,
                    })
                }
                (Literal::String(s), Value::String(x)) => eq_op(*op, x == s),
                (Literal::Bool(b), Value::Bool(x)) => eq_op(*op, x == b),
                _ => wrong,
            },
            Predicate::InList(lits) => {
                if v.is_array() || v.is_object() {
                    return wrong;
                }
                truth(lits.iter().any(|l| literal_eq(&l.node, v)))
            }
            Predicate::Matches(re) => match v.as_str() {
                Some(s) => match regex::Regex::new(&re.node) {
                    Ok(r) => truth(r.is_match(s)),
                    Err(_) => wrong,
                },
                None => wrong,
            },
            Predicate::InHosts(name) => match v.as_str() {
                Some(s) => self.host_allowed(&name.name, s).map_or(wrong, truth),
                None => wrong,
            },
            // The reference models the language `tests/differential.rs` generates, which has
            // no provenance forms (`tests/provenance.rs` checks those against both readers):
            // they are refused here as the evaluator's own limit, never guessed.
            Predicate::InFact(_) | Predicate::From(_) | Predicate::Mentions(_) => {
                panic!("the reference evaluator does not model `in facts`, `from` or `mentions`")
            }
        }
    }

    /// "Host allowlists": whether the URL's host is on the list, or `None` when the URL is
    /// ambiguous (the test is then unknown, so the rule denies).
    fn host_allowed(&self, list: &str, raw: &str) -> Option<bool> {
        let Some(h) = self.policy.items.iter().find_map(|i| match i {
            Item::Hosts(h) if h.name.name == list => Some(h),
            _ => None,
        }) else {
            return Some(false);
        };
        let option = |o: &Option<Spanned<bool>>| o.as_ref().is_some_and(|o| o.node);
        // "a backslash, whitespace or a control character anywhere"
        if raw
            .chars()
            .any(|c| c == '\\' || c == ' ' || c.is_ascii_control())
        {
            return None;
        }
        // "the URL starts with a scheme"; "a URL of a scheme the list does not take is not on it"
        let scheme_re = regex::Regex::new(r"^([A-Za-z][A-Za-z0-9+.-]*):(.*)$").ok()?;
        let caps = scheme_re.captures(raw)?;
        let schemes: Vec<String> = if h.schemes_given {
            h.schemes
                .iter()
                .map(|s| s.node.to_ascii_lowercase())
                .collect()
        } else {
            vec!["https".to_string()]
        };
        if !schemes.contains(&caps[1].to_ascii_lowercase()) {
            return Some(false);
        }
        // "exactly two slashes"
        let after = caps[2].strip_prefix("//")?;
        if after.starts_with('/') {
            return None;
        }
        // "at most one `@`; none before the first `/` together with `?`, `#` or `;`"
        if after.matches('@').count() > 1 {
            return None;
        }
        let before_path = after.split('/').next().unwrap_or("");
        if before_path.contains('@') && before_path.contains(['?', '#', ';']) {
            return None;
        }
        let authority = after.split(['/', '?', '#']).next().unwrap_or("");
        // "no percent-encoding in the authority"
        if authority.contains('%') {
            return None;
        }
        // "userinfo only with `userinfo allow`, and then plain"
        let host_port = match authority.split_once('@') {
            Some((info, rest)) => {
                let plain = regex::Regex::new(r"^[A-Za-z0-9._~-]*(:[A-Za-z0-9._~-]*)?$").ok()?;
                if !option(&h.userinfo) || !plain.is_match(info) {
                    return None;
                }
                rest
            }
            None => authority,
        };
        let hp = regex::Regex::new(r"^(\[[^\]]*\]|[^:\[\]]*)(?::(.*))?$").ok()?;
        let caps = hp.captures(host_port)?;
        // "a port from 1 to 65535"
        if let Some(port) = caps.get(2) {
            let p = port.as_str();
            let n: u32 = p.parse().ok()?;
            if p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) || !(1..=65535).contains(&n) {
                return None;
            }
        }
        let host = caps.get(1)?.as_str();
        let ip_listed = |ip: String| {
            h.entries
                .iter()
                .any(|e| entry_ip(&e.node) == Some(ip.clone()))
        };
        if let Some(inner) = host.strip_prefix('[') {
            let ip: std::net::Ipv6Addr = inner.strip_suffix(']')?.parse().ok()?;
            return Some(ip_listed(format!("[{ip}]")));
        }
        if host.is_empty() {
            return None;
        }
        let idn = option(&h.idn);
        let mut name = host.to_string();
        let punycode = |n: &str| {
            n.split('.')
                .any(|l| l.to_ascii_lowercase().starts_with("xn--"))
        };
        if !host.is_ascii() || punycode(host) {
            if !idn
                || !host
                    .chars()
                    .all(|c| !c.is_ascii() || c.is_ascii_alphanumeric() || c == '-' || c == '.')
            {
                return None;
            }
            // "already in the normal form every IDNA version agrees on"
            let ascii = url::quirks::domain_to_ascii(host);
            let back = url::quirks::domain_to_unicode(&ascii);
            let lower = host.to_ascii_lowercase();
            let normal = if host.is_ascii() {
                ascii == lower
            } else {
                back == lower
            };
            if ascii.is_empty()
                || !normal
                || back.contains(['\u{DF}', '\u{3C2}', '\u{200C}', '\u{200D}'])
            {
                return None;
            }
            name = ascii;
        }
        // "letters, digits, `-` and `.`; no empty label; at most 253 characters"
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        {
            return None;
        }
        let trimmed = name.strip_suffix('.').unwrap_or(&name).to_ascii_lowercase();
        if trimmed.is_empty() || trimmed.split('.').any(str::is_empty) || trimmed.len() > 253 {
            return None;
        }
        // "a host ending in a number is an IP address only as four plain decimal parts"
        let last = trimmed.rsplit('.').next().unwrap_or("");
        if last.starts_with(|c: char| c.is_ascii_digit()) {
            let quad = regex::Regex::new(r"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$").ok()?;
            if !quad.is_match(&name) {
                return None;
            }
            return Some(ip_listed(name));
        }
        Some(h.entries.iter().any(|e| match e.node.strip_prefix('.') {
            Some(suffix) => normalise(suffix).is_some_and(|s| trimmed.ends_with(&format!(".{s}"))),
            None => normalise(&e.node).is_some_and(|s| trimmed == s),
        }))
    }

    /// "Built-in preconditions".
    fn builtin(&self, c: &Call) -> Truth {
        let arg = |label: &str, pos: usize| -> Option<&CallValue> {
            c.args
                .iter()
                .find(|a| a.label.as_ref().is_some_and(|l| l.name == label))
                .or_else(|| c.args.get(pos).filter(|a| a.label.is_none()))
                .map(|a| &a.value.node)
        };
        let name_of = |v: Option<&CallValue>| -> String {
            match v {
                Some(CallValue::Name(n)) | Some(CallValue::String(n)) => n.clone(),
                _ => String::new(),
            }
        };
        let messages = self.standard_fact("messages").and_then(Value::as_array);
        let from_client = |m: &&Value| m.get("from").and_then(Value::as_str) == Some("client");
        match c.name.name.as_str() {
            "client_sent_media" => {
                let Some(messages) = messages else {
                    return ABSENT;
                };
                let within = match arg("within", 0) {
                    Some(CallValue::Number(n)) => (*n as usize).min(50),
                    _ => 10,
                };
                let kinds: Option<Vec<String>> = match arg("kinds", 1) {
                    Some(CallValue::List(ks)) => {
                        Some(ks.iter().map(|k| name_of(Some(&k.node))).collect())
                    }
                    _ => None,
                };
                truth(
                    messages
                        .iter()
                        .rev()
                        .filter(from_client)
                        .take(within)
                        .any(|m| {
                            let media: Vec<&str> = m
                                .get("media")
                                .and_then(Value::as_array)
                                .map(|a| a.iter().filter_map(Value::as_str).collect())
                                .unwrap_or_default();
                            match &kinds {
                                Some(ks) => media.iter().any(|k| ks.iter().any(|w| w == k)),
                                None => !media.is_empty(),
                            }
                        }),
                )
            }
            "min_client_messages" => {
                let Some(messages) = messages else {
                    return ABSENT;
                };
                let n = match arg("n", 0) {
                    Some(CallValue::Number(n)) => *n as usize,
                    _ => 0,
                };
                truth(messages.iter().filter(from_client).count() >= n)
            }
            "field_filled" => {
                let Some(fields) = self.standard_fact("fields").and_then(Value::as_object) else {
                    return ABSENT;
                };
                let field =
                    name_of(arg("field", 0).or_else(|| c.args.first().map(|a| &a.value.node)));
                truth(match fields.get(&field) {
                    Some(Value::String(s)) => s.chars().any(|c| !invisible(c)),
                    Some(Value::Number(_)) => true,
                    Some(Value::Bool(b)) => *b,
                    _ => false,
                })
            }
            "called_before" => {
                let Some(called) = self.standard_fact("called").and_then(Value::as_array) else {
                    return ABSENT;
                };
                let tool =
                    name_of(arg("tool", 0).or_else(|| c.args.first().map(|a| &a.value.node)));
                truth(called.iter().any(|e| {
                    e.get("tool").and_then(Value::as_str) == Some(tool.as_str())
                        && e.get("ok") == Some(&Value::Bool(true))
                }))
            }
            "called_within" => {
                let Some(called) = self.standard_fact("called").and_then(Value::as_array) else {
                    return ABSENT;
                };
                let tool =
                    name_of(arg("tool", 0).or_else(|| c.args.first().map(|a| &a.value.node)));
                let turns = match arg("turns", 1).or_else(|| c.args.get(1).map(|a| &a.value.node)) {
                    Some(CallValue::Number(n)) => *n as u64,
                    _ => return INVALID,
                };
                // Successful calls of the tool; recent if one is dated under the bound,
                // invalid if none is but one is undated (docs/language.md).
                let ok: Vec<&Value> = called
                    .iter()
                    .filter(|e| {
                        e.get("tool").and_then(Value::as_str) == Some(tool.as_str())
                            && e.get("ok") == Some(&Value::Bool(true))
                    })
                    .collect();
                if ok.iter().any(|e| {
                    e.get("turns_ago")
                        .and_then(Value::as_u64)
                        .is_some_and(|a| a < turns)
                }) {
                    truth(true)
                } else if ok
                    .iter()
                    .any(|e| e.get("turns_ago").is_none_or(Value::is_null))
                {
                    INVALID
                } else {
                    truth(false)
                }
            }
            _ => INVALID,
        }
    }
}

/// A character `field_filled` does not count, written out from docs/language.md: Unicode
/// White_Space, control characters, Default_Ignorable_Code_Point, and U+2800.
fn invisible(c: char) -> bool {
    const WHITE_SPACE: &[(u32, u32)] = &[
        (0x09, 0x0D),
        (0x20, 0x20),
        (0x85, 0x85),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
    ];
    const CONTROL: &[(u32, u32)] = &[(0x00, 0x1F), (0x7F, 0x9F)];
    const DEFAULT_IGNORABLE: &[(u32, u32)] = &[
        (0xAD, 0xAD),
        (0x34F, 0x34F),
        (0x61C, 0x61C),
        (0x115F, 0x1160),
        (0x17B4, 0x17B5),
        (0x180B, 0x180F),
        (0x200B, 0x200F),
        (0x202A, 0x202E),
        (0x2060, 0x206F),
        (0x3164, 0x3164),
        (0xFE00, 0xFE0F),
        (0xFEFF, 0xFEFF),
        (0xFFA0, 0xFFA0),
        (0xFFF0, 0xFFF8),
        (0x1BCA0, 0x1BCA3),
        (0x1D173, 0x1D17A),
        (0xE0000, 0xE0FFF),
    ];
    let c = c as u32;
    c == 0x2800
        || [WHITE_SPACE, CONTROL, DEFAULT_IGNORABLE]
            .iter()
            .any(|set| set.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)))
}

fn walk<'a>(mut cur: Option<&'a Value>, segments: &[PathSegment]) -> Option<&'a Value> {
    for seg in segments {
        cur = match (cur?, seg) {
            (Value::Object(m), PathSegment::Key(k)) => m.get(k),
            (Value::Array(a), PathSegment::Index(i)) => a.get(*i),
            _ => None,
        };
    }
    cur
}

fn eq_op(op: CmpOp, equal: bool) -> Truth {
    match op {
        CmpOp::Eq => truth(equal),
        CmpOp::Ne => truth(!equal),
        _ => INVALID,
    }
}

fn literal_eq(l: &Literal, v: &Value) -> bool {
    match (l, v) {
        (Literal::Null, Value::Null) => true,
        (Literal::Bool(b), Value::Bool(x)) => b == x,
        (Literal::String(s), Value::String(x)) => s == x,
        (Literal::Number(n), Value::Number(x)) => x.as_f64() == Some(*n),
        _ => false,
    }
}

/// A host entry the way a URL host is read: IDNA-mapped, lowercase, no trailing dot.
fn normalise(entry: &str) -> Option<String> {
    let u = url::Url::parse(&format!("https://{entry}/")).ok()?;
    match u.host()? {
        url::Host::Domain(d) => Some(d.to_ascii_lowercase().trim_end_matches('.').to_string()),
        _ => None,
    }
}

/// The IP an entry names, written the way `url` prints it, or `None` for a domain entry.
fn entry_ip(entry: &str) -> Option<String> {
    let u = url::Url::parse(&format!("https://{entry}/")).ok()?;
    match u.host()? {
        url::Host::Ipv4(ip) => Some(ip.to_string()),
        url::Host::Ipv6(ip) => Some(format!("[{ip}]")),
        url::Host::Domain(_) => None,
    }
}
