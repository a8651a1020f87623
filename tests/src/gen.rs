//! Proptest strategies for policies and requests, for the formatter and differential tests.
//!
//! A policy is generated as a [`Spec`] (plain data), then rendered to source text by
//! [`Spec::render`], either plainly or with a random layout: any whitespace, blank lines and
//! `//`/`#` comments between any two tokens. Every construct of the grammar appears: classes
//! (tools written as names and as strings), stages with `tools`, `max_turns`, `require` and `refusal`,
//! latches, host lists with and without `schemes`, `detokenise` with token kinds (one, a
//! list, `any`, a quoted kind), and rules with nested `and`/`or`/`not`,
//! every test, every built-in (labelled and positional arguments), paths with keys and
//! indexes, strings with escapes, raw strings, and numbers in several notations.
//!
//! Names are drawn from small fixed pools, so that generated requests (see [`request`]) hit the
//! policy's tools, stages and latches, miss them by a little, and carry numbers, strings and
//! URLs near the policy's literals and host entries. References are valid by construction
//! (a rule only tests `in hosts` lists that exist), so generated policies usually compile.

use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{json, Map, Value};

/// Tool names; `"crm.update"` and `"write"` must be written as strings.
pub const TOOLS: [&str; 7] = ["t0", "t1", "t2", "t3", "tier-2", "crm.update", "write"];
/// Tools requests call that no policy classifies: a stranger and look-alikes.
pub const STRANGERS: [&str; 3] = ["unknown_tool", "T0", "t0 "];
/// Stage names; `s9` is never declared.
pub const STAGES: [&str; 4] = ["s0", "s1", "s2", "s9"];
/// Latch names.
pub const LATCHES: [&str; 3] = ["l0", "l1", "l2"];
/// Host list names.
pub const HOST_LISTS: [&str; 2] = ["h0", "h1"];
/// Host entries a list may allow.
pub const HOST_ENTRIES: [&str; 7] = [
    "example.com",
    ".example.com",
    "a.test",
    ".sub.a.test",
    "10.0.0.1",
    "xn--bcher-kva.de",
    "[::1]",
];
/// Number literals as written in policies (several notations of a few values).
pub const NUMBERS: [&str; 9] = ["0", "1", "2", "2.5", "-1", "250", "1e3", "1.0E1", "3"];
/// String literals as written in policies, escapes and raw strings included.
pub const STRINGS: [&str; 7] = [
    r#""a""#,
    r#""GBP""#,
    r##""q\"#//""##,
    r#""""#,
    r#""tab\there""#,
    r#"r"x#y""#,
    r#""back\\slash""#,
];
/// Regexes as written: quoted with escapes, and raw.
pub const REGEXES: [&str; 5] = [
    r#""^a""#,
    r#"r"^\d+$""#,
    r#""G.P""#,
    r##"r"#|//""##,
    r#""^[a-z]{1,3}\\.x$""#,
];
/// Argument paths rules test.
pub const ARG_PATHS: [&str; 7] = [
    "args.n",
    "args.s",
    "args.url",
    "args.items[0].sku",
    "args.a-b",
    "args.o.0",
    "args",
];
/// Fact paths rules test (every readable kind: custom, nested, fields, stage, turns).
pub const FACT_PATHS: [&str; 5] = [
    "facts.tier",
    "facts.account.plan",
    "facts.fields.phone",
    "facts.stage",
    "facts.stage_turns",
];
const TYPES: [&str; 7] = [
    "string", "number", "integer", "bool", "array", "object", "null",
];
const OPS: [&str; 6] = ["<", "<=", "==", "!=", ">=", ">"];
const REFUSALS: [&str; 3] = [
    r#""Blocked: no. This did NOT happen.""#,
    r#""Say \"no\"\n# not a comment // either""#,
    r#"r"Blocked: raw \d text""#,
];

/// A tool class keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// `write`
    Write,
    /// `ingest`
    Ingest,
    /// `read`
    Read,
}

impl Class {
    fn kw(self) -> &'static str {
        match self {
            Class::Write => "write",
            Class::Ingest => "ingest",
            Class::Read => "read",
        }
    }
}

/// What a latch or rule selects: a class or one tool.
#[derive(Debug, Clone)]
pub enum Sel {
    /// Every tool of a class.
    Class(Class),
    /// One tool, by index into [`TOOLS`].
    Tool(usize),
}

/// A selector list and whether it is written in brackets.
#[derive(Debug, Clone)]
pub struct Sels {
    /// The selectors.
    pub items: Vec<Sel>,
    /// `[a]` rather than `a` (always true unless there is exactly one).
    pub bracketed: bool,
}

/// A generated condition.
#[derive(Debug, Clone)]
pub enum Cond {
    /// `true` / `false`.
    Bool(bool),
    /// `a and b ..`.
    And(Vec<Cond>),
    /// `a or b ..`.
    Or(Vec<Cond>),
    /// `not a`.
    Not(Box<Cond>),
    /// A test, as source text (path and test).
    Test(String),
    /// A built-in call, as source text.
    Call(String),
    /// `(a)`: parentheses the tree does not need.
    Paren(Box<Cond>),
}

/// A generated declaration.
#[derive(Debug, Clone)]
pub enum Decl {
    /// `write a, b`.
    Class(Class, Vec<usize>),
    /// `stage NAME { .. }`.
    Stage {
        /// Index into [`STAGES`].
        name: usize,
        /// Whitelisted tools (indexes into [`TOOLS`]); `None`: no `tools` line.
        tools: Option<Vec<usize>>,
        /// `max_turns`.
        max_turns: Option<u64>,
        /// `require`: facts only, as a stage's must be.
        require: Option<Cond>,
        /// Index into the refusal pool.
        refusal: Option<usize>,
    },
    /// `latch NAME { .. }`.
    Latch {
        /// Index into [`LATCHES`].
        name: usize,
        /// `set_by`.
        set_by: Option<Sels>,
        /// `blocks`.
        blocks: Option<Sels>,
        /// Index into the refusal pool.
        refusal: Option<usize>,
    },
    /// `hosts NAME { .. }`.
    Hosts {
        /// Index into [`HOST_LISTS`].
        name: usize,
        /// `schemes`: `None` for no line.
        schemes: Option<Vec<&'static str>>,
        /// Entries (indexes into [`HOST_ENTRIES`]).
        allow: Vec<usize>,
        /// `userinfo allow`.
        userinfo: bool,
        /// `idn allow` (always when an entry is internationalised, which needs it).
        idn: bool,
    },
    /// `detokenise TOOL { args [PATH: KINDS, ..] }`.
    Detokenise {
        /// Index into [`TOOLS`] (a classified one).
        tool: usize,
        /// Paths (indexes into [`DETOKENISE_PATHS`]) with their kinds (into [`TOKEN_KINDS`]).
        paths: Vec<(usize, Vec<usize>)>,
    },
    /// `rule NAME for SELS { .. }`.
    Rule {
        /// Rule number (`r0`, `r1`, ..).
        name: usize,
        /// `for`.
        targets: Sels,
        /// `require` lines.
        requires: Vec<Cond>,
        /// Index into the refusal pool.
        refusal: Option<usize>,
        /// `on_missing`: `Some(true)` allow, `Some(false)` deny.
        on_missing: Option<bool>,
    },
}

/// Argument paths a `detokenise` declaration may name.
pub const DETOKENISE_PATHS: [&str; 4] = ["args.n", "args.items[0].sku", "args.a-b", "args.o.0"];
/// Token kinds as written in `detokenise` (names, `any`, a quoted odd kind).
pub const TOKEN_KINDS: [&str; 4] = ["SORT_CODE", "any", "\"nhs:number\"", "email"];

/// A generated policy.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Declarations in source order.
    pub decls: Vec<Decl>,
}

fn tool_text(i: usize) -> String {
    let t = TOOLS[i % TOOLS.len()];
    if t.contains('.') || t == "write" {
        format!("\"{t}\"")
    } else {
        t.to_string()
    }
}

fn sel_text(s: &Sel) -> String {
    match s {
        Sel::Class(c) => c.kw().to_string(),
        Sel::Tool(t) => tool_text(*t),
    }
}

fn push_sels(out: &mut Vec<String>, s: &Sels) {
    if s.bracketed || s.items.len() != 1 {
        out.push("[".into());
        for (i, x) in s.items.iter().enumerate() {
            if i > 0 {
                out.push(",".into());
            }
            out.push(sel_text(x));
        }
        out.push("]".into());
    } else {
        out.push(sel_text(&s.items[0]));
    }
}

fn push_list(out: &mut Vec<String>, items: impl IntoIterator<Item = String>, trailing_comma: bool) {
    out.push("[".into());
    let mut n = 0;
    for (i, x) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(",".into());
        }
        out.push(x);
        n += 1;
    }
    if trailing_comma && n > 0 {
        out.push(",".into());
    }
    out.push("]".into());
}

/// Which conditions need parentheses as children of a parent of the given kind.
fn push_cond(out: &mut Vec<String>, c: &Cond) {
    match c {
        Cond::Bool(b) => out.push(b.to_string()),
        Cond::Test(t) | Cond::Call(t) => out.push(t.clone()),
        Cond::Paren(x) => {
            out.push("(".into());
            push_cond(out, x);
            out.push(")".into());
        }
        Cond::Not(x) => {
            out.push("not".into());
            push_child(out, x, true);
        }
        Cond::And(xs) | Cond::Or(xs) => {
            let and = matches!(c, Cond::And(_));
            for (i, x) in xs.iter().enumerate() {
                if i > 0 {
                    out.push(if and { "and" } else { "or" }.into());
                }
                let needs = match x {
                    Cond::And(_) => and,
                    Cond::Or(_) => true,
                    _ => false,
                };
                push_child(out, x, needs);
            }
        }
    }
}

fn push_child(out: &mut Vec<String>, c: &Cond, needs_parens: bool) {
    let compound = matches!(c, Cond::And(_) | Cond::Or(_));
    if needs_parens || compound {
        out.push("(".into());
        push_cond(out, c);
        out.push(")".into());
    } else {
        push_cond(out, c);
    }
}

impl Spec {
    /// The policy's source tokens: each is a token or a run that must stay unbroken.
    pub fn tokens(&self) -> Vec<String> {
        let mut t: Vec<String> = vec!["module".into(), "gen".into()];
        for d in &self.decls {
            match d {
                Decl::Class(c, tools) => {
                    t.push(c.kw().into());
                    for (i, x) in tools.iter().enumerate() {
                        if i > 0 {
                            t.push(",".into());
                        }
                        t.push(tool_text(*x));
                    }
                }
                Decl::Stage {
                    name,
                    tools,
                    max_turns,
                    require,
                    refusal,
                } => {
                    t.extend(["stage".into(), STAGES[*name].into(), "{".into()]);
                    if let Some(tools) = tools {
                        t.push("tools".into());
                        push_list(
                            &mut t,
                            tools.iter().map(|x| tool_text(*x)),
                            tools.len() % 2 == 1,
                        );
                    }
                    if let Some(m) = max_turns {
                        t.extend(["max_turns".into(), m.to_string()]);
                    }
                    if let Some(c) = require {
                        t.push("require".into());
                        push_cond(&mut t, c);
                    }
                    if let Some(r) = refusal {
                        t.extend(["refusal".into(), REFUSALS[*r].into()]);
                    }
                    t.push("}".into());
                }
                Decl::Latch {
                    name,
                    set_by,
                    blocks,
                    refusal,
                } => {
                    t.extend(["latch".into(), LATCHES[*name].into(), "{".into()]);
                    if let Some(s) = set_by {
                        t.push("set_by".into());
                        push_sels(&mut t, s);
                    }
                    if let Some(b) = blocks {
                        t.push("blocks".into());
                        push_sels(&mut t, b);
                    }
                    if let Some(r) = refusal {
                        t.extend(["refusal".into(), REFUSALS[*r].into()]);
                    }
                    t.push("}".into());
                }
                Decl::Hosts {
                    name,
                    schemes,
                    allow,
                    userinfo,
                    idn,
                } => {
                    t.extend(["hosts".into(), HOST_LISTS[*name].into(), "{".into()]);
                    if let Some(s) = schemes {
                        t.push("schemes".into());
                        push_list(&mut t, s.iter().map(|x| x.to_string()), false);
                    }
                    if *userinfo {
                        t.extend(["userinfo".into(), "allow".into()]);
                    }
                    if *idn {
                        t.extend(["idn".into(), "allow".into()]);
                    }
                    t.push("allow".into());
                    push_list(
                        &mut t,
                        allow.iter().map(|e| format!("\"{}\"", HOST_ENTRIES[*e])),
                        allow.len() > 2,
                    );
                    t.push("}".into());
                }
                Decl::Rule {
                    name,
                    targets,
                    requires,
                    refusal,
                    on_missing,
                } => {
                    t.extend(["rule".into(), format!("r{name}"), "for".into()]);
                    push_sels(&mut t, targets);
                    t.push("{".into());
                    for c in requires {
                        t.push("require".into());
                        push_cond(&mut t, c);
                    }
                    if let Some(r) = refusal {
                        t.extend(["refusal".into(), REFUSALS[*r].into()]);
                    }
                    if let Some(m) = on_missing {
                        t.extend([
                            "on_missing".into(),
                            if *m { "allow" } else { "deny" }.into(),
                        ]);
                    }
                    t.push("}".into());
                }
                Decl::Detokenise { tool, paths } => {
                    t.extend([
                        "detokenise".into(),
                        tool_text(*tool),
                        "{".into(),
                        "args".into(),
                    ]);
                    push_list(
                        &mut t,
                        paths.iter().map(|(path, kinds)| {
                            let kinds: Vec<&str> = kinds.iter().map(|k| TOKEN_KINDS[*k]).collect();
                            let kinds = match kinds.as_slice() {
                                [one] => one.to_string(),
                                many => format!("[{}]", many.join(", ")),
                            };
                            format!("{}: {kinds}", DETOKENISE_PATHS[*path])
                        }),
                        paths.len() > 1,
                    );
                    t.push("}".into());
                }
            }
        }
        t
    }

    /// The source text: tokens separated by one space, a newline before each declaration.
    pub fn render(&self) -> String {
        self.render_with(&[])
    }

    /// The source text with a layout chosen by `seps` (cycled): each byte picks the
    /// separator before a token: a space, several spaces, a newline, a blank line, a tab, or a
    /// comment (`// cN` or `# cN`, numbered in order so each is unique). An empty `seps` gives
    /// the plain layout.
    pub fn render_with(&self, seps: &[u8]) -> String {
        let mut out = String::new();
        let mut comment = 0;
        for (i, tok) in self.tokens().into_iter().enumerate() {
            if i > 0 {
                let starts_decl = matches!(
                    tok.as_str(),
                    "write" | "ingest" | "read" | "stage" | "latch" | "hosts" | "rule"
                ) && !out.ends_with("set_by")
                    && !out.ends_with("blocks")
                    && !out.ends_with("for")
                    && !out.ends_with('[')
                    && !out.ends_with(',');
                let sep = if seps.is_empty() {
                    if starts_decl {
                        100
                    } else {
                        0
                    }
                } else {
                    seps[i % seps.len()]
                };
                match sep % 12 {
                    0..=4 => out.push(' '),
                    5 => out.push_str("   "),
                    6 => out.push('\n'),
                    7 => out.push_str("\n\n"),
                    8 => out.push_str("\t\n  "),
                    9 => {
                        out.push_str(&format!(" // c{comment}\n"));
                        comment += 1;
                    }
                    10 => {
                        out.push_str(&format!("\n# c{comment}\n"));
                        comment += 1;
                    }
                    _ => out.push('\n'),
                }
            }
            out.push_str(&tok);
        }
        out.push('\n');
        out
    }

    /// How many comments `render_with(seps)` writes.
    pub fn comment_count(&self, seps: &[u8]) -> usize {
        let n = self.tokens().len();
        if seps.is_empty() {
            return 0;
        }
        (1..n)
            .filter(|i| matches!(seps[i % seps.len()] % 12, 9 | 10))
            .count()
    }
}

fn class() -> impl Strategy<Value = Class> {
    prop_oneof![Just(Class::Write), Just(Class::Ingest), Just(Class::Read)]
}

fn sels() -> impl Strategy<Value = Sels> {
    let sel = prop_oneof![
        class().prop_map(Sel::Class),
        (0..TOOLS.len()).prop_map(Sel::Tool)
    ];
    (prop::collection::vec(sel, 0..4), any::<bool>()).prop_map(|(items, b)| Sels {
        bracketed: b || items.len() != 1,
        items,
    })
}

fn nonempty_sels() -> impl Strategy<Value = Sels> {
    sels().prop_filter("a rule needs a target", |s| !s.items.is_empty())
}

/// What a rule's conditions are made of, so that every denial kind is generated often.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// Only `args.` tests (kind `args`).
    Args,
    /// Only `in hosts` tests (kind `host`).
    Hosts,
    /// Only built-ins (kind `precondition`, fails open by default).
    Builtins,
    /// Anything, facts included (kind `rule`, or any when it happens to be pure).
    Mixed,
}

/// A leaf test; `hosts` says which host lists exist.
fn test(hosts: Vec<usize>, facts: bool) -> BoxedStrategy<Cond> {
    let path = if facts {
        prop_oneof![4 => select(&ARG_PATHS[..]), 2 => select(&FACT_PATHS[..])].boxed()
    } else {
        select(&ARG_PATHS[..]).boxed()
    };
    test_of(path, hosts)
}

/// A stage's `require`: tests of facts only (a stage never reads arguments), a level or two
/// deep.
fn stage_cond() -> BoxedStrategy<Cond> {
    test_of(select(&FACT_PATHS[..]).boxed(), Vec::new())
        .prop_recursive(2, 6, 2, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 2..3).prop_map(Cond::And),
                prop::collection::vec(inner.clone(), 2..3).prop_map(Cond::Or),
                inner.prop_map(|c| Cond::Not(Box::new(c))),
            ]
        })
        .boxed()
}

/// A leaf test of a path `path` picks.
fn test_of(path: BoxedStrategy<&'static str>, hosts: Vec<usize>) -> BoxedStrategy<Cond> {
    let num = select(&NUMBERS[..]);
    let limit_num = num.clone();
    let scalar = prop_oneof![
        select(&NUMBERS[..]).prop_map(str::to_string),
        select(&STRINGS[..]).prop_map(str::to_string),
        Just("true".to_string()),
        Just("false".to_string()),
        Just("null".to_string()),
    ];
    let ordering =
        (path.clone(), select(&OPS[..]), num).prop_map(|(p, op, n)| format!("{p} {op} {n}"));
    let equality = (
        path.clone(),
        prop_oneof![Just("=="), Just("!=")],
        scalar.clone(),
    )
        .prop_map(|(p, op, v)| format!("{p} {op} {v}"));
    let in_list = (path.clone(), prop::collection::vec(scalar, 0..4))
        .prop_map(|(p, vs)| format!("{p} in [{}]", vs.join(", ")));
    let matches =
        (path.clone(), select(&REGEXES[..])).prop_map(|(p, r)| format!("{p} matches {r}"));
    let is = (path.clone(), select(&TYPES[..])).prop_map(|(p, t)| format!("{p} is {t}"));
    // The usual argument limit, which the compiler fuses into one check.
    let limit = (path.clone(), select(&OPS[..]), limit_num)
        .prop_map(|(p, op, n)| format!("({p} is number and {p} {op} {n})"));
    let exists = path.clone().prop_map(|p| format!("{p} exists"));
    let mut options: Vec<(u32, BoxedStrategy<String>)> = vec![
        (3, ordering.boxed()),
        (3, equality.boxed()),
        (2, in_list.boxed()),
        (1, matches.boxed()),
        (1, is.boxed()),
        (1, limit.boxed()),
        (1, exists.boxed()),
    ];
    if !hosts.is_empty() {
        let in_hosts = (
            prop_oneof![3 => Just("args.url"), 1 => select(&ARG_PATHS[..])],
            select(hosts),
        )
            .prop_map(|(p, h)| format!("{p} in hosts {}", HOST_LISTS[h]));
        options.push((3, in_hosts.boxed()));
    }
    proptest::strategy::Union::new_weighted(options)
        .prop_map(Cond::Test)
        .boxed()
}

fn builtin() -> impl Strategy<Value = Cond> {
    let kinds = prop::collection::vec(
        prop_oneof![Just("image"), Just("\"document\""), Just("audio")],
        1..3,
    )
    .prop_map(|k| format!("[{}]", k.join(", ")));
    let media = (
        prop::option::of(1u32..60),
        prop::option::of(kinds),
        any::<bool>(),
    )
        .prop_map(|(within, kinds, labelled)| {
            let mut args = Vec::new();
            match (labelled, within, kinds) {
                (false, Some(w), k) => {
                    args.push(w.to_string());
                    if let Some(k) = k {
                        args.push(k);
                    }
                }
                (_, w, k) => {
                    if let Some(w) = w {
                        args.push(format!("within: {w}"));
                    }
                    if let Some(k) = k {
                        args.push(format!("kinds: {k}"));
                    }
                }
            }
            format!("client_sent_media({})", args.join(", "))
        });
    prop_oneof![
        media,
        prop_oneof![Just("phone"), Just("\"email\"")].prop_map(|f| format!("field_filled({f})")),
        (0..TOOLS.len()).prop_map(|t| format!("called_before({})", tool_text(t))),
        (0u32..4).prop_map(|n| format!("min_client_messages(n: {n})").replace("n: ", "")),
        (0..TOOLS.len(), 1u32..4, any::<bool>()).prop_map(|(t, n, labelled)| {
            let turns = if labelled {
                format!("turns: {n}")
            } else {
                n.to_string()
            };
            format!("called_within({}, {turns})", tool_text(t))
        }),
    ]
    .prop_map(Cond::Call)
}

fn in_hosts(hosts: Vec<usize>) -> BoxedStrategy<Cond> {
    (
        prop_oneof![5 => Just("args.url"), 1 => select(&ARG_PATHS[..])],
        select(hosts),
    )
        .prop_map(|(p, h)| Cond::Test(format!("{p} in hosts {}", HOST_LISTS[h])))
        .boxed()
}

/// A condition of the given flavour, up to a few levels deep.
pub fn cond(hosts: Vec<usize>, flavour: Flavour) -> BoxedStrategy<Cond> {
    let leaf = match flavour {
        Flavour::Args => {
            prop_oneof![6 => test(Vec::new(), false), 1 => any::<bool>().prop_map(Cond::Bool)]
                .boxed()
        }
        Flavour::Hosts if !hosts.is_empty() => in_hosts(hosts),
        Flavour::Builtins | Flavour::Hosts => builtin().boxed(),
        Flavour::Mixed => prop_oneof![
            6 => test(hosts, true),
            2 => builtin(),
            1 => any::<bool>().prop_map(Cond::Bool),
        ]
        .boxed(),
    };
    let depth = if flavour == Flavour::Mixed { 3 } else { 1 };
    leaf.prop_recursive(depth, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 2..4).prop_map(Cond::And),
            prop::collection::vec(inner.clone(), 2..4).prop_map(Cond::Or),
            inner.clone().prop_map(|c| Cond::Not(Box::new(c))),
            inner.prop_map(|c| Cond::Paren(Box::new(c))),
        ]
    })
    .boxed()
}

/// A policy: classes, then stages, latches, host lists and rules, shuffled a little.
pub fn spec() -> impl Strategy<Value = Spec> {
    // Each tool gets a class or none; tools are split over one or two declarations per class.
    let classes = prop::collection::vec(prop::option::weighted(0.85, class()), TOOLS.len());
    let hosts = prop::collection::vec(
        (
            prop::option::of(prop_oneof![
                Just(vec!["https"]),
                Just(vec!["https", "http"]),
                Just(vec!["\"http\""]),
                Just(vec![]),
            ]),
            prop::collection::vec(0..HOST_ENTRIES.len(), 0..4),
            any::<(bool, bool)>(),
        ),
        0..3,
    );
    let detokenise = prop::option::weighted(
        0.3,
        (
            0..TOOLS.len(),
            prop::collection::vec(
                (
                    0..DETOKENISE_PATHS.len(),
                    prop::collection::vec(0..TOKEN_KINDS.len(), 1..3),
                ),
                1..3,
            ),
        ),
    );
    (classes, hosts, any::<u64>(), detokenise)
        .prop_flat_map(|(classes, hosts, seed, detokenise)| {
            let host_names: Vec<usize> = (0..hosts.len()).collect();
            let stages = prop::collection::vec(
                (
                    prop::option::weighted(0.9, prop::collection::vec(0..TOOLS.len(), 0..7)),
                    prop::option::of(0u64..3),
                    prop::option::weighted(0.25, stage_cond()),
                    prop::option::of(0..REFUSALS.len()),
                ),
                0..4,
            );
            let latches = prop::collection::vec(
                (
                    prop::option::of(sels()),
                    prop::option::of(sels()),
                    prop::option::of(0..REFUSALS.len()),
                ),
                0..4,
            );
            let rules = prop::collection::vec(
                (
                    nonempty_sels(),
                    prop_oneof![
                        Just(Flavour::Args),
                        Just(Flavour::Hosts),
                        Just(Flavour::Builtins),
                        Just(Flavour::Mixed)
                    ]
                    .prop_flat_map({
                        let host_names = host_names.clone();
                        move |f| prop::collection::vec(cond(host_names.clone(), f), 1..3)
                    }),
                    prop::option::of(0..REFUSALS.len()),
                    prop::option::of(any::<bool>()),
                ),
                0..5,
            );
            (
                Just(classes),
                Just(hosts),
                stages,
                latches,
                rules,
                Just((seed, detokenise)),
            )
        })
        .prop_map(|(classes, hosts, stages, latches, rules, more)| {
            let (seed, detokenise) = more;
            let (classes, stages, latches, rules) =
                only_classified(classes, stages, latches, rules);
            let mut decls = Vec::new();
            for c in [Class::Write, Class::Ingest, Class::Read] {
                let tools: Vec<usize> = (0..TOOLS.len())
                    .filter(|&i| classes[i] == Some(c))
                    .collect();
                if tools.is_empty() {
                    continue;
                }
                // Split in two declarations of the same class now and then.
                let cut = if seed % 3 == 0 { tools.len() / 2 } else { 0 };
                if cut > 0 {
                    decls.push(Decl::Class(c, tools[..cut].to_vec()));
                }
                decls.push(Decl::Class(c, tools[cut..].to_vec()));
            }
            let mut blocks = Vec::new();
            for (i, (schemes, allow, (userinfo, idn))) in hosts.into_iter().enumerate() {
                let mut allow = allow;
                allow.dedup();
                let idn = idn || allow.iter().any(|&e| HOST_ENTRIES[e].contains("xn--"));
                blocks.push(Decl::Hosts {
                    name: i,
                    schemes,
                    allow,
                    userinfo,
                    idn,
                });
            }
            for (i, (tools, max_turns, require, refusal)) in stages.into_iter().enumerate() {
                blocks.push(Decl::Stage {
                    name: i,
                    tools,
                    max_turns,
                    require,
                    refusal,
                });
            }
            for (i, (set_by, blocks_sel, refusal)) in latches.into_iter().enumerate() {
                blocks.push(Decl::Latch {
                    name: i,
                    set_by,
                    blocks: blocks_sel,
                    refusal,
                });
            }
            if let Some((tool, paths)) = detokenise {
                if classes[tool].is_some() {
                    blocks.push(Decl::Detokenise { tool, paths });
                }
            }
            for (i, (targets, requires, refusal, on_missing)) in rules.into_iter().enumerate() {
                blocks.push(Decl::Rule {
                    name: i,
                    targets,
                    requires,
                    refusal,
                    on_missing,
                });
            }
            // Rotate the blocks so that kinds interleave with classes in some cases: a host list
            // may come after the rule using it, a stage before the classes it lists.
            if !blocks.is_empty() {
                let k = (seed as usize / 7) % blocks.len();
                blocks.rotate_left(k);
            }
            if seed % 5 == 1 {
                let classes: Vec<Decl> = std::mem::take(&mut decls);
                decls = blocks;
                decls.extend(classes);
            } else {
                decls.extend(blocks);
            }
            Spec { decls }
        })
}

type StageGen = (Option<Vec<usize>>, Option<u64>, Option<Cond>, Option<usize>);
type LatchGen = (Option<Sels>, Option<Sels>, Option<usize>);
type RuleGen = (Sels, Vec<Cond>, Option<usize>, Option<bool>);

/// A policy may name only tools it classifies (anything else is a compile error): a tool
/// that `called_before` names gets a class, and stage lists and selectors drop the others.
/// Requests still call unclassified tools (see [`STRANGERS`]).
fn only_classified(
    mut classes: Vec<Option<Class>>,
    stages: Vec<StageGen>,
    latches: Vec<LatchGen>,
    rules: Vec<RuleGen>,
) -> (
    Vec<Option<Class>>,
    Vec<StageGen>,
    Vec<LatchGen>,
    Vec<RuleGen>,
) {
    let mut called = Vec::new();
    for (_, requires, _, _) in &rules {
        requires
            .iter()
            .for_each(|c| called_before_tools(c, &mut called));
    }
    for i in called {
        classes[i].get_or_insert(Class::Read);
    }
    let known = |i: &usize| classes[*i].is_some();
    let keep = |sels: Sels| Sels {
        items: sels
            .items
            .into_iter()
            .filter(|s| !matches!(s, Sel::Tool(t) if !known(t)))
            .collect(),
        bracketed: sels.bracketed,
    };
    let stages = stages
        .into_iter()
        .map(|(tools, m, c, r)| {
            (
                tools.map(|t| t.into_iter().filter(known).collect()),
                m,
                c,
                r,
            )
        })
        .collect();
    let latches = latches
        .into_iter()
        .map(|(set_by, blocks, r)| (set_by.map(keep), blocks.map(keep), r))
        .collect();
    let rules = rules
        .into_iter()
        .map(|(targets, requires, r, m)| (keep(targets), requires, r, m))
        .collect();
    (classes, stages, latches, rules)
}

/// The tools (indexes into [`TOOLS`]) that `called_before` and `called_within` calls in `c`
/// name.
fn called_before_tools(c: &Cond, out: &mut Vec<usize>) {
    match c {
        Cond::Call(text) => {
            let arg = text
                .strip_prefix("called_before(")
                .and_then(|t| t.strip_suffix(')'))
                .or_else(|| {
                    text.strip_prefix("called_within(")
                        .and_then(|t| t.split(',').next())
                });
            if let Some(arg) = arg {
                out.extend((0..TOOLS.len()).filter(|&i| tool_text(i) == arg));
            }
        }
        Cond::And(parts) | Cond::Or(parts) => {
            parts.iter().for_each(|p| called_before_tools(p, out));
        }
        Cond::Not(inner) | Cond::Paren(inner) => called_before_tools(inner, out),
        Cond::Bool(_) | Cond::Test(_) => {}
    }
}

/// A JSON value an argument may hold: near the policy's literals, of every JSON type.
fn arg_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => prop_oneof![
            Just(json!(0)), Just(json!(1)), Just(json!(2)), Just(json!(2.0)), Just(json!(2.5)),
            Just(json!(-1)), Just(json!(249.5)), Just(json!(250)), Just(json!(251)),
            Just(json!(1000)), Just(json!(10)), Just(json!(3)), Just(json!(1.5)),
        ],
        4 => prop_oneof![
            Just(json!("a")), Just(json!("GBP")), Just(json!("q\"#//")), Just(json!("")),
            Just(json!("tab\there")), Just(json!("x#y")), Just(json!("back\\slash")),
            Just(json!("123")), Just(json!("G-P")), Just(json!("ab.x")), Just(json!("#")),
        ],
        4 => url(),
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => Just(json!([1, "a"])),
        1 => Just(json!({"k": 1})),
    ]
}

/// URLs on, near and off the generated host entries.
pub fn url() -> impl Strategy<Value = Value> {
    select(
        &[
            "https://example.com/",
            "https://EXAMPLE.com./x",
            "https://a.example.com/x",
            "https://example.com.evil.io/",
            "https://evilexample.com/",
            "http://example.com/",
            "HTTPS://example.com:8443/",
            "https://a.test",
            "https://sub.a.test/",
            "https://x.sub.a.test/",
            "https://a.test..",
            "https://10.0.0.1/",
            "https://0x0a.0.0.1/",
            "https://10.0.0.1.example.com/",
            "https://[::1]/",
            "https://xn--bcher-kva.de/",
            "https://Bücher.de/",
            "https://example.com@evil.io/",
            "https://user:pw@a.example.com/",
            "https://b\u{fc}cher.de/",
            "https://example.com\\@evil.io/",
            "https://example.com?@evil.io/",
            "https://example%2Ecom/",
            "https://0x0a.0.0.1/x",
            "https:example.com",
            "mailto:a@example.com",
            "/docs/x",
            "example.com",
            "ftp://example.com/",
            "",
        ][..],
    )
    .prop_map(|s| json!(s))
}

fn args() -> impl Strategy<Value = Value> {
    const KEYS: [&str; 6] = ["n", "s", "url", "items", "a-b", "o"];
    prop::collection::vec((select(&KEYS[..]), arg_value(), any::<bool>()), 0..5).prop_map(|kv| {
        let mut m = Map::new();
        for (k, v, nest) in kv {
            let v = match (k, nest) {
                ("items", true) => json!([{"sku": v}]),
                ("o", true) => json!({"0": v}),
                _ => v,
            };
            m.insert(k.to_string(), v);
        }
        Value::Object(m)
    })
}

fn facts() -> impl Strategy<Value = Value> {
    let message = (
        prop_oneof![Just("client"), Just("assistant"), Just("owner")],
        prop::option::of(prop::collection::vec(
            prop_oneof![
                Just("image"),
                Just("document"),
                Just("Image"),
                Just("audio")
            ],
            0..2,
        )),
    )
        .prop_map(|(from, media)| match media {
            Some(m) => json!({"from": from, "media": m}),
            None => json!({"from": from}),
        });
    let latched = prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        prop::collection::vec((select(&LATCHES[..]), any::<bool>()), 0..3).prop_map(|kv| {
            Value::Object(
                kv.into_iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect(),
            )
        }),
    ];
    let fields = prop::collection::vec(
        (
            prop_oneof![Just("phone"), Just("email")],
            prop_oneof![
                Just(json!("+44 1")),
                Just(json!("  ")),
                Just(json!("")),
                Just(Value::Null),
                Just(json!(5)),
                Just(json!(0)),
                Just(json!(true)),
                Just(json!(false)),
                Just(json!([])),
                Just(json!({})),
                Just(json!(["+44"])),
                Just(json!("\u{200B}")),
                Just(json!("\u{FEFF}\u{2060} \u{200D}")),
                Just(json!("\u{3164}\u{00A0}\u{2800}")),
                Just(json!("\u{200B}7\u{200C}")),
            ],
        ),
        0..3,
    )
    .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()));
    let called = prop::collection::vec(
        (
            (0..TOOLS.len()).prop_map(|t| TOOLS[t]),
            prop::option::of(any::<bool>()),
            prop::option::of(0u64..5),
        ),
        0..3,
    )
    .prop_map(|cs| {
        Value::Array(
            cs.into_iter()
                .map(|(t, ok, ago)| {
                    let mut entry = json!({"tool": t});
                    if let Some(ok) = ok {
                        entry["ok"] = json!(ok);
                    }
                    if let Some(ago) = ago {
                        entry["turns_ago"] = json!(ago);
                    }
                    entry
                })
                .collect(),
        )
    });
    let custom = prop_oneof![
        Just(json!("gold")),
        Just(json!(3)),
        Just(json!(2.5)),
        Just(json!(true)),
        Just(Value::Null),
        Just(json!({"plan": "GBP"})),
        Just(json!("a")),
    ];
    (
        prop::option::of(select(&STAGES[..])),
        prop::option::of(0u64..5),
        prop::option::of(latched),
        prop::option::of(prop::collection::vec(message, 0..5)),
        prop::option::of(fields),
        prop::option::of(called),
        prop::option::of(custom.clone()),
        prop::option::of(custom),
    )
        .prop_map(
            |(stage, turns, latched, messages, fields, called, tier, account)| {
                let mut m = Map::new();
                let mut put = |k: &str, v: Option<Value>| {
                    if let Some(v) = v {
                        m.insert(k.to_string(), v);
                    }
                };
                put("stage", stage.map(|s| json!(s)));
                put("stage_turns", turns.map(|t| json!(t)));
                put("latched", latched);
                put("messages", messages.map(Value::Array));
                put("fields", fields);
                put("called", called);
                put("tier", tier);
                put("account", account);
                Value::Object(m)
            },
        )
}

/// A request: facts (each standard fact present or absent) and one to five calls to the
/// pool's tools, strangers and look-alikes, with arguments near the policies' literals.
pub fn request() -> impl Strategy<Value = Value> {
    let tool = prop_oneof![6 => select(&TOOLS[..]), 1 => select(&STRANGERS[..])];
    let call = (tool, args());
    (prop::option::of(facts()), prop::collection::vec(call, 1..6)).prop_map(|(facts, calls)| {
        let calls: Vec<Value> = calls
            .into_iter()
            .enumerate()
            .map(|(i, (tool, args))| json!({"id": format!("c{i}"), "tool": tool, "args": args}))
            .collect();
        match facts {
            Some(f) => json!({"facts": f, "calls": calls}),
            None => json!({"calls": calls}),
        }
    })
}

/// A request aimed at `spec`: usually in one of its stages and calling that stage's tools, so
/// that calls get past the fixed checks to the latches and rules; sometimes anything at all.
pub fn request_for(spec: &Spec) -> impl Strategy<Value = Value> {
    let stages: Vec<(&'static str, Vec<&'static str>)> = spec
        .decls
        .iter()
        .filter_map(|d| match d {
            Decl::Stage { name, tools, .. } => Some((
                STAGES[*name],
                tools.iter().flatten().map(|t| TOOLS[*t]).collect(),
            )),
            _ => None,
        })
        .collect();
    (request(), prop::collection::vec(any::<u8>(), 8)).prop_map(move |(mut req, dice)| {
        if stages.is_empty() || dice[0] % 5 == 0 {
            return req;
        }
        let (stage, tools) = &stages[dice[1] as usize % stages.len()];
        if let Some(facts) = req.get_mut("facts").and_then(Value::as_object_mut) {
            facts.insert("stage".into(), json!(stage));
        } else {
            req["facts"] = json!({ "stage": stage });
        }
        if let Some(calls) = req.get_mut("calls").and_then(Value::as_array_mut) {
            for (i, call) in calls.iter_mut().enumerate() {
                if !tools.is_empty() && dice[2 + i % 6] % 4 != 0 {
                    call["tool"] = json!(tools[dice[2 + i % 6] as usize % tools.len()]);
                }
            }
        }
        req
    })
}
