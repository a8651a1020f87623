//! Property tests: latch order independence, write-once latches, no panics on arbitrary
//! requests, the shape of every decision, batch order independence and default deny for every
//! policy. Case counts keep the suite well under a minute in debug; set
//! `TOOLGATE_PROPTEST_CASES` to run every property with that many cases instead.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;
use toolgate_engine::{DenyKind, LatchState, Policy, Request, Response, ToolClass};
use toolgate_tests::{compile, example_policy, proptest_config};

const CASES: u32 = 256;

const WRITES: [&str; 3] = ["update_memory", "grade_attempt", "schedule_review"];
const INGESTS: [&str; 3] = [
    "search_aws_docs",
    "search_cloudflare_docs",
    "fetch_vendor_doc",
];
const READS: [&str; 2] = ["get_learner_state", "lookup_lesson"];

fn coach() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(|| example_policy("coach"))
}

/// A feature-rich policy, so arbitrary requests reach every kind of condition.
fn rich() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(|| {
        compile(
            r#"
module rich
write pay, note, book
ingest fetch, browse
read look
stage main { tools [pay, note, book, fetch, browse, look] max_turns 5 }
stage side { tools [look, fetch] }
latch web { set_by browse blocks [note, pay] }
latch any_ingest { set_by ingest blocks write }
hosts docs { schemes [https, http] allow ["example.com", ".example.org", "10.0.0.1", "[::1]"] }
rule host for fetch { require args.url in hosts docs }
rule amount for pay {
  require args.amount is number and args.amount > 0 and args.amount <= 250
  require args.ref matches "^R-[0-9]+$" or args.ref in ["cash", "card"]
  require not args.memo == "x"
}
rule facts_mix for pay {
  require facts.tier == "gold" or facts.account.limits[0] > 5 or args.amount < 1
  on_missing allow
}
rule nested for note { require args.a.b[2].c exists and not (args.t is string) }
rule fields for note { require facts.fields.country in ["GB", "IE"] or facts.stage_turns < 2 }
rule media for book { require client_sent_media(within: 60, kinds: [image]) and min_client_messages(2) }
rule prior for book { require called_before(look) or field_filled(phone) }
"#,
        )
    })
}

fn coach_tool() -> impl Strategy<Value = &'static str> {
    prop::sample::select(
        WRITES
            .iter()
            .chain(INGESTS.iter())
            .chain(READS.iter())
            .copied()
            .collect::<Vec<_>>(),
    )
}

fn vendor_url() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("https://docs.aws.amazon.com/lambda/")),
        Just(json!("https://evil.tld/")),
        Just(json!("http://aws.amazon.com/")),
        Just(json!(7)),
        Just(Value::Null),
    ]
}

/// A coach batch: tools with per-call args, in the order given.
fn coach_batch() -> impl Strategy<Value = Vec<(&'static str, Value)>> {
    prop::collection::vec((coach_tool(), vendor_url()), 0..12).prop_map(|v| {
        v.into_iter()
            .map(|(t, u)| (t, json!({ "url": u })))
            .collect()
    })
}

fn coach_request(batch: &[(usize, &'static str, Value)], latched: bool) -> Value {
    let calls: Vec<Value> = batch
        .iter()
        .map(|(i, t, a)| json!({"id": format!("c{i}"), "tool": t, "args": a}))
        .collect();
    json!({"facts": {"stage": "coach", "latched": latched}, "calls": calls})
}

fn judge(policy: &Policy, request: &Value) -> Response {
    policy.decide(&Request::from_json(&request.to_string()).unwrap())
}

proptest! {
    #![proptest_config(proptest_config(CASES))]

    /// A write is denied by the latch iff the batch holds an ingest call or the turn was
    /// already latched, wherever the calls sit in the batch; every decision is the same
    /// under any permutation.
    #[test]
    fn latch_is_order_independent(
        (batch, shuffled) in coach_batch().prop_flat_map(|b| {
            let indexed: Vec<(usize, &'static str, Value)> =
                b.into_iter().enumerate().map(|(i, (t, a))| (i, t, a)).collect();
            (Just(indexed.clone()), Just(indexed).prop_shuffle())
        }),
        latched in any::<bool>(),
    ) {
        let has_ingest = batch.iter().any(|(_, t, _)| INGESTS.contains(t));
        let expect_latched = latched || has_ingest;
        let a = judge(coach(), &coach_request(&batch, latched));
        let b = judge(coach(), &coach_request(&shuffled, latched));

        prop_assert_eq!(a.latched.any(), expect_latched);
        prop_assert_eq!(b.latched.any(), expect_latched);

        for r in [&a, &b] {
            for d in &r.decisions {
                if WRITES.contains(&d.tool.as_str()) {
                    if expect_latched {
                        prop_assert!(!d.allow);
                        prop_assert_eq!(d.kind, Some(DenyKind::Latch));
                        prop_assert_eq!(d.rule.as_deref(), Some("documentation_read"));
                    } else {
                        prop_assert!(d.allow, "{:?}", d);
                    }
                } else if READS.contains(&d.tool.as_str()) {
                    prop_assert!(d.allow, "{:?}", d);
                }
            }
        }
        // Same decision per call id, whatever the order.
        let by_id: HashMap<&str, _> = a.decisions.iter().map(|d| (d.id.as_str(), d)).collect();
        prop_assert_eq!(a.decisions.len(), b.decisions.len());
        for d in &b.decisions {
            prop_assert_eq!(Some(&d), by_id.get(d.id.as_str()));
        }
        // Decisions come back in request order.
        for (d, (i, t, _)) in b.decisions.iter().zip(&shuffled) {
            prop_assert_eq!(&d.id, &format!("c{i}"));
            prop_assert_eq!(d.tool.as_str(), *t);
        }
    }

    /// Splitting a user turn into several batches, carrying `latched` forward, never lets a
    /// write through after an ingest call, and the latch never clears.
    #[test]
    fn latch_is_write_once_across_batches(
        batches in prop::collection::vec(coach_batch(), 1..5),
        start in any::<bool>(),
    ) {
        let mut latched = start;
        for b in batches {
            let indexed: Vec<_> = b.into_iter().enumerate().map(|(i, (t, a))| (i, t, a)).collect();
            let r = judge(coach(), &coach_request(&indexed, latched));
            let out = r.latched.any();
            if latched {
                prop_assert!(out, "latched=true came back false");
            }
            let has_ingest = indexed.iter().any(|(_, t, _)| INGESTS.contains(t));
            prop_assert_eq!(out, latched || has_ingest);
            latched = out;
        }
    }

    /// The same for a policy with two named latches and the map form of `latched`.
    #[test]
    fn named_latches_are_write_once_and_order_independent(
        (batch, shuffled) in prop::collection::vec(
            prop::sample::select(vec!["pay", "note", "book", "fetch", "browse", "look"]), 0..10
        ).prop_flat_map(|b| (Just(b.clone()), Just(b).prop_shuffle())),
        web in any::<bool>(),
        any_ingest in any::<bool>(),
    ) {
        let req = |tools: &[&str]| {
            let calls: Vec<Value> = tools.iter().enumerate()
                .map(|(i, t)| json!({"id": format!("c{i}"), "tool": t, "args": {}}))
                .collect();
            json!({"facts": {"stage": "main", "latched": {"web": web, "any_ingest": any_ingest}},
                   "calls": calls})
        };
        let a = judge(rich(), &req(&batch));
        let b = judge(rich(), &req(&shuffled));
        let la = serde_json::to_value(&a.latched).unwrap();
        let lb = serde_json::to_value(&b.latched).unwrap();
        prop_assert_eq!(&la, &lb);
        let want_web = web || batch.contains(&"browse");
        let want_ingest = any_ingest || batch.contains(&"browse") || batch.contains(&"fetch");
        prop_assert_eq!(la, json!({"web": want_web, "any_ingest": want_ingest}));
        for r in [&a, &b] {
            for d in &r.decisions {
                let blocked = match d.tool.as_str() {
                    "pay" | "note" => want_web || want_ingest,
                    "book" => want_ingest,
                    _ => false,
                };
                prop_assert_eq!(d.kind == Some(DenyKind::Latch), blocked, "{:?}", d);
            }
        }
    }
}

// ---- arbitrary requests ------------------------------------------------------------------

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[a-zA-Z0-9 ._:/@%-]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("https://example.com/"),
            Just("https://a.example.org:8080/x"),
            Just("http://10.0.0.1/"),
            Just("https://[::1]/"),
            Just("https://ex\u{0430}mple.com/"),
            Just("R-12"),
            Just("GB"),
            Just("image"),
            Just("client"),
            Just("gold"),
        ]
        .prop_map(|s| Value::String(s.to_string())),
        ".{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Keys that the rich policy reads, plus random ones.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "url",
            "amount",
            "ref",
            "memo",
            "a",
            "b",
            "c",
            "t",
            "tier",
            "account",
            "limits",
            "country",
            "phone",
            "from",
            "media",
            "tool",
            "ok",
            "stage",
            "stage_turns",
            "latched",
            "messages",
            "fields",
            "called",
            "web",
            "any_ingest",
        ])
        .prop_map(String::from),
        "[a-z_]{1,6}",
    ]
}

fn tool_name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "pay",
            "note",
            "book",
            "fetch",
            "browse",
            "look",
            "update_memory",
            "grade_attempt",
            "search_aws_docs",
            "fetch_vendor_doc",
            "get_learner_state",
            "authorise_bacs_payout",
            "query_policy_handbook_rag",
            "confirm_payment",
            "issue_invoice",
            "modify_booking",
            "book_slot",
            "notify_owner",
            "verify_identity",
        ])
        .prop_map(String::from),
        ".{0,10}",
    ]
}

/// Facts: mostly well-typed standard facts (so requests get judged), sometimes anything.
fn facts() -> impl Strategy<Value = Value> {
    let message = (
        prop::sample::select(vec!["client", "assistant", "owner"]),
        prop::collection::vec(
            prop::sample::select(vec!["image", "document", "Image", "video"]),
            0..3,
        ),
    )
        .prop_map(|(f, m)| json!({"from": f, "media": m}));
    let called = (tool_name(), any::<bool>()).prop_map(|(t, ok)| json!({"tool": t, "ok": ok}));
    let typed = (
        prop::option::of(prop::sample::select(vec![
            "main",
            "side",
            "coach",
            "chat",
            "tier_auto_payout",
            "ncd_policy_faq",
            "nowhere",
        ])),
        prop::option::of(0u64..10),
        prop_oneof![
            any::<bool>().prop_map(Value::Bool),
            (any::<bool>(), any::<bool>()).prop_map(|(a, b)| json!({"web": a, "any_ingest": b})),
        ],
        prop::option::of(prop::collection::vec(message, 0..70)),
        prop::option::of(prop::collection::btree_map(key(), arb_json(), 0..4)),
        prop::option::of(prop::collection::vec(called, 0..4)),
        prop::collection::btree_map(key(), arb_json(), 0..4),
    )
        .prop_map(|(stage, turns, latched, messages, fields, called, other)| {
            let mut f = Map::new();
            // Arbitrary extra keys first, so the standard ones below win when they collide.
            for (k, v) in other {
                f.insert(k, v);
            }
            let mut set = |k: &str, v: Option<Value>| match v {
                Some(v) => {
                    f.insert(k.to_string(), v);
                }
                None => {
                    f.remove(k);
                }
            };
            set("stage", stage.map(Value::from));
            set("stage_turns", turns.map(Value::from));
            set("latched", Some(latched));
            set("messages", messages.map(Value::Array));
            set(
                "fields",
                fields.map(|m| Value::Object(m.into_iter().collect())),
            );
            set("called", called.map(Value::Array));
            Value::Object(f)
        });
    prop_oneof![4 => typed, 1 => arb_json()]
}

fn calls() -> impl Strategy<Value = Value> {
    calls_vec().prop_map(Value::Array)
}

fn calls_vec() -> impl Strategy<Value = Vec<Value>> {
    let args = prop_oneof![
        8 => prop::collection::btree_map(key(), arb_json(), 0..6)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        1 => arb_json(),
    ];
    prop::collection::vec(
        ("[a-z0-9]{1,4}", tool_name(), args)
            .prop_map(|(id, t, a)| json!({"id": id, "tool": t, "args": a})),
        0..8,
    )
}

fn all_policies() -> Vec<&'static Policy> {
    static EX: OnceLock<Vec<Policy>> = OnceLock::new();
    let ex = EX.get_or_init(|| {
        ["motor_claims", "messenger_payments"]
            .iter()
            .map(|n| example_policy(n))
            .collect()
    });
    let mut v: Vec<&'static Policy> = ex.iter().collect();
    v.push(coach());
    v.push(rich());
    v
}

fn check_decisions(request: &Request, r: &Response) -> Result<(), TestCaseError> {
    prop_assert_eq!(r.decisions.len(), request.calls.len());
    for (d, c) in r.decisions.iter().zip(&request.calls) {
        prop_assert_eq!(&d.id, &c.id);
        prop_assert_eq!(&d.tool, &c.tool);
        let denied = !d.allow;
        prop_assert_eq!(d.kind.is_some(), denied, "{:?}", d);
        prop_assert_eq!(d.rule.is_some(), denied, "{:?}", d);
        prop_assert_eq!(d.reason.is_some(), denied, "{:?}", d);
        if d.fail_open {
            prop_assert!(d.allow, "fail_open on a denial: {:?}", d);
        }
        if let Some(reason) = &d.reason {
            prop_assert!(!reason.trim().is_empty());
        }
        // The JSON form agrees: kind/rule/reason absent exactly when allowed.
        let v = serde_json::to_value(d).unwrap();
        for key in ["kind", "rule", "reason"] {
            prop_assert_eq!(v.get(key).is_some(), denied, "{}", v);
        }
        prop_assert_eq!(v.get("fail_open").is_some(), d.fail_open, "{}", v);
    }
    Ok(())
}

proptest! {
    #![proptest_config(proptest_config(CASES))]

    /// Deciding never panics, whatever the request holds, and every decision has
    /// kind/rule/reason iff it denies.
    #[test]
    fn decide_never_panics_and_decisions_are_well_formed(facts in facts(), calls in calls()) {
        let text = json!({"facts": facts, "calls": calls}).to_string();
        // Parsing may reject the request (a malformed standard fact); it must not panic.
        let Ok(request) = Request::from_json(&text) else { return Ok(()); };
        for policy in all_policies() {
            let r = policy.decide(&request);
            check_decisions(&request, &r)?;
            prop_assert_eq!(&*r.policy, policy.module());
            // Pure: the same request gives the same response.
            prop_assert_eq!(&r, &policy.decide(&request));
            // The response always serialises.
            prop_assert!(serde_json::to_string(&r).is_ok());
        }
    }

    /// Any JSON at all: parsing never panics, and a rejected request gets an error message.
    #[test]
    fn request_parsing_never_panics(v in arb_json()) {
        match Request::from_value(v.clone()) {
            Ok(req) => {
                for policy in all_policies() {
                    let r = policy.decide(&req);
                    check_decisions(&req, &r)?;
                }
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
        let _ = Request::from_json(&v.to_string());
    }

    /// Arbitrary bytes as request text never panic the JSON entry point.
    #[test]
    fn decide_json_never_panics_on_arbitrary_text(text in ".{0,200}") {
        let _ = coach().decide_json(&text);
    }

    /// The latch in the response is write-once-true: `latched: true` in gives true out.
    #[test]
    fn response_latched_is_write_once_true(calls in calls()) {
        let text = json!({"facts": {"stage": "coach", "latched": true}, "calls": calls}).to_string();
        let Ok(request) = Request::from_json(&text) else { return Ok(()); };
        for policy in all_policies() {
            let r = policy.decide(&request);
            prop_assert!(r.latched.any(), "{}: {:?}", policy.module(), r.latched);
        }
    }
}

// ---- arbitrary policy sources ------------------------------------------------------------

const TOKENS: &[&str] = &[
    "module",
    "m",
    "write",
    "ingest",
    "read",
    "stage",
    "latch",
    "hosts",
    "rule",
    "for",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    ",",
    ":",
    "tools",
    "max_turns",
    "refusal",
    "set_by",
    "blocks",
    "schemes",
    "allow",
    "require",
    "on_missing",
    "deny",
    "and",
    "or",
    "not",
    "in",
    "matches",
    "is",
    "exists",
    "string",
    "integer",
    "null",
    "true",
    "false",
    "args.x",
    "args.a[0].b",
    "facts.tier",
    "facts.fields.phone",
    "facts.messages",
    "facts.stage_turns",
    "facts",
    "<",
    "<=",
    "==",
    "!=",
    ">=",
    ">",
    "=",
    "0",
    "2",
    "-1",
    "1.5",
    "99",
    "\"gold\"",
    "\"(\"",
    "\"https://x\"",
    "\".example.com\"",
    "\"example.com\"",
    "\"\"",
    "\"\\q\"",
    "r\"raw\"",
    "client_sent_media",
    "field_filled",
    "called_before",
    "min_client_messages",
    "within",
    "kinds",
    "image",
    "a",
    "b",
    "https",
    "\n",
    "//c\n",
    "#c\n",
    "é",
    "\"",
    "'",
    "&&",
];

proptest! {
    #![proptest_config(proptest_config(CASES))]

    /// Compiling any token soup never panics, and a failure always renders.
    #[test]
    fn compile_never_panics_on_token_soup(
        tokens in prop::collection::vec(prop::sample::select(TOKENS), 0..60),
        with_module in any::<bool>(),
    ) {
        let mut text = if with_module { "module m\n".to_string() } else { String::new() };
        text.push_str(&tokens.join(" "));
        match Policy::compile("soup.gate", &text) {
            Ok(p) => {
                for w in p.warnings() {
                    prop_assert!(!w.render(p.source()).is_empty());
                }
            }
            Err(e) => {
                prop_assert!(e.errors().count() > 0, "an error with no errors");
                prop_assert!(e.render().contains("soup.gate:"));
            }
        }
    }

    /// Mutating an example policy (deleting, duplicating or inserting text) never panics.
    #[test]
    fn compile_never_panics_on_mutated_examples(
        which in 0usize..3,
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, prop::sample::select(TOKENS)), 1..6),
    ) {
        let name = ["motor_claims", "coach", "messenger_payments"][which];
        let mut text = std::fs::read_to_string(toolgate_tests::example_path(name)).unwrap();
        for (at, op, tok) in edits {
            let mut i = at.index(text.len() + 1);
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            match op {
                0 => {
                    let mut j = (i + 8).min(text.len());
                    while !text.is_char_boundary(j) {
                        j -= 1;
                    }
                    text.replace_range(i..j, "");
                }
                1 => text.insert_str(i, tok),
                _ => {
                    let mut j = (i + 20).min(text.len());
                    while !text.is_char_boundary(j) {
                        j -= 1;
                    }
                    let dup = text[i..j].to_string();
                    text.insert_str(j, &dup);
                }
            }
        }
        if let Err(e) = Policy::compile("mutant.gate", &text) {
            prop_assert!(e.errors().count() > 0);
            let _ = e.render();
            let _ = e.to_string();
        }
    }
}

// ---- batch order, latches and default deny, for every policy ------------------------------

/// What the source says about one latch, read from the AST (not from the compiled tables), so
/// the latch properties check the compiler's reading against an independent one.
#[derive(Debug)]
struct LatchModel {
    name: String,
    setters: Vec<String>,
    blocked: Vec<String>,
}

fn latch_models(policy: &Policy) -> Vec<LatchModel> {
    use toolgate_lang::ast::{Item, Selector};
    let ast = toolgate_lang::parse(policy.source().text()).unwrap();
    let classes: Vec<(String, ToolClass)> = ast
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Class(c) => Some(c),
            _ => None,
        })
        .flat_map(|c| c.tools.iter().map(|t| (t.name.clone(), c.class.node)))
        .collect();
    let select = |sels: &[Selector]| -> Vec<String> {
        classes
            .iter()
            .filter(|(tool, class)| {
                sels.iter().any(|s| match s {
                    Selector::Class(c) => c.node == *class,
                    Selector::Tool(t) => t.name == *tool,
                })
            })
            .map(|(tool, _)| tool.clone())
            .collect()
    };
    ast.items
        .iter()
        .filter_map(|i| match i {
            Item::Latch(l) => Some(LatchModel {
                name: l.name.name.clone(),
                setters: select(&l.set_by),
                blocked: select(&l.blocks),
            }),
            _ => None,
        })
        .collect()
}

/// The response's latch state as one flag per latch name.
fn latch_bits(models: &[LatchModel], state: &LatchState) -> BTreeMap<String, bool> {
    match state {
        LatchState::Flag(b) => models.iter().map(|m| (m.name.clone(), *b)).collect(),
        LatchState::ByName(map) => map.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    }
}

/// A policy's classified tools plus one it never classified.
fn tools_of(policy: &Policy) -> Vec<String> {
    let mut tools: Vec<String> = policy.tools().map(|(t, _)| t.to_string()).collect();
    tools.push("never_classified".to_string());
    tools
}

fn request_with(facts: &Value, calls: &[Value]) -> Option<Request> {
    Request::from_json(&json!({"facts": facts, "calls": calls}).to_string()).ok()
}

proptest! {
    #![proptest_config(proptest_config(CASES))]

    /// Permuting a batch permutes the decisions and changes nothing else: not the policy, the
    /// revision, the latch state, nor any single decision.
    #[test]
    fn permuting_a_batch_permutes_the_decisions_and_nothing_else(
        facts in facts(),
        (calls, perm) in calls_vec().prop_flat_map(|c| {
            let n = c.len();
            (Just(c), Just((0..n).collect::<Vec<usize>>()).prop_shuffle())
        }),
    ) {
        let permuted: Vec<Value> = perm.iter().map(|&i| calls[i].clone()).collect();
        let (Some(req), Some(req_p)) = (request_with(&facts, &calls), request_with(&facts, &permuted))
        else {
            return Ok(());
        };
        for policy in all_policies() {
            let a = policy.decide(&req);
            let b = policy.decide(&req_p);
            prop_assert_eq!(&a.policy, &b.policy);
            prop_assert_eq!(&a.revision, &b.revision);
            prop_assert_eq!(&a.latched, &b.latched, "{}", policy.module());
            prop_assert_eq!(b.decisions.len(), a.decisions.len());
            for (i, &from) in perm.iter().enumerate() {
                prop_assert_eq!(&b.decisions[i], &a.decisions[from], "{}", policy.module());
            }
        }
    }

    /// For every policy and latch: a batch holding a setter anywhere leaves the latch set, and
    /// then no call the latch blocks is allowed; a call that gets past the stage check is
    /// denied with kind `latch`. Latches the batch does not set keep their incoming value.
    #[test]
    fn a_setter_anywhere_in_the_batch_blocks_every_blocked_call(
        which in 0usize..4,
        picks in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        stage in any::<prop::sample::Index>(),
        incoming in prop::collection::vec(any::<bool>(), 2),
        flag_form in any::<bool>(),
    ) {
        let policy = all_policies()[which];
        let models = latch_models(policy);
        let tools = tools_of(policy);
        let stages: Vec<&str> = policy.stages().collect();
        let stage = stages[stage.index(stages.len())];
        let batch: Vec<&str> = picks.iter().map(|i| tools[i.index(tools.len())].as_str()).collect();
        let latched = if flag_form {
            json!(incoming[0])
        } else {
            Value::Object(models.iter().enumerate()
                .map(|(i, m)| (m.name.clone(), json!(incoming[i % 2]))).collect())
        };
        let incoming_bit = |i: usize| if flag_form { incoming[0] } else { incoming[i % 2] };
        let calls: Vec<Value> = batch.iter().enumerate()
            .map(|(i, t)| json!({"id": format!("c{i}"), "tool": t, "args": {}})).collect();
        let r = judge(policy, &json!({"facts": {"stage": stage, "latched": latched}, "calls": calls}));
        let out = latch_bits(&models, &r.latched);
        let mut set = Vec::new();
        for (i, m) in models.iter().enumerate() {
            let has_setter = batch.iter().any(|t| m.setters.iter().any(|s| s == t));
            let want = incoming_bit(i) || has_setter;
            if models.len() > 1 {
                prop_assert_eq!(out.get(&m.name).copied(), Some(want), "{}: {}", policy.module(), m.name);
            }
            if want {
                set.push(m);
            }
        }
        if models.len() == 1 {
            prop_assert_eq!(r.latched.clone(), LatchState::Flag(!set.is_empty()));
        }
        for d in &r.decisions {
            let blocked = set.iter().any(|m| m.blocked.iter().any(|t| *t == d.tool));
            if blocked {
                prop_assert!(!d.allow, "{}: {:?} allowed under {:?}", policy.module(), d, set);
                if policy.stage_allows(stage, &d.tool) {
                    prop_assert_eq!(d.kind, Some(DenyKind::Latch), "{:?}", d);
                    let by = d.rule.as_deref().unwrap_or_default();
                    prop_assert!(set.iter().any(|m| m.name == by && m.blocked.iter().any(|t| *t == d.tool)), "{:?}", d);
                }
            } else {
                prop_assert_ne!(d.kind, Some(DenyKind::Latch), "{}: {:?}", policy.module(), d);
            }
        }
    }

    /// Within a turn, feeding each response's `latched` into the next batch, every latch only
    /// ever goes from false to true, and is true exactly once a setter has appeared.
    #[test]
    fn latches_are_monotone_across_the_batches_of_a_turn(
        which in 0usize..4,
        batches in prop::collection::vec(prop::collection::vec(any::<prop::sample::Index>(), 0..5), 1..6),
    ) {
        let policy = all_policies()[which];
        let models = latch_models(policy);
        let tools = tools_of(policy);
        let stage = policy.stages().next().unwrap().to_string();
        let mut carried = json!(false);
        let mut seen: Vec<&str> = Vec::new();
        let mut before: BTreeMap<String, bool> = models.iter().map(|m| (m.name.clone(), false)).collect();
        for picks in batches {
            let batch: Vec<&str> = picks.iter().map(|i| tools[i.index(tools.len())].as_str()).collect();
            seen.extend(&batch);
            let calls: Vec<Value> = batch.iter().enumerate()
                .map(|(i, t)| json!({"id": format!("c{i}"), "tool": t, "args": {}})).collect();
            let r = judge(policy, &json!({"facts": {"stage": stage, "latched": carried}, "calls": calls}));
            let now = latch_bits(&models, &r.latched);
            for m in &models {
                let was = before.get(&m.name).copied().unwrap_or(false);
                let is = now.get(&m.name).copied().unwrap_or(false);
                prop_assert!(!was || is, "{}: latch {} cleared within a turn", policy.module(), m.name);
                let want = seen.iter().any(|t| m.setters.iter().any(|s| s == t));
                prop_assert_eq!(is, want, "{}: latch {}", policy.module(), m.name);
            }
            before = now;
            carried = serde_json::to_value(&r.latched).unwrap();
        }
    }

    /// Default deny: a tool the policy never classified is denied `unclassified` in any stage
    /// under any facts; a classified tool with no stage, an undefined stage, or a stage whose
    /// whitelist lacks it is denied `stage`, naming that stage.
    #[test]
    fn unclassified_tools_and_undefined_or_missing_stages_always_deny(
        facts in facts(),
        unknown in "[a-z_]{1,12}|.{0,6}",
        stage in prop_oneof![
            Just(None),
            "[a-z_]{1,12}".prop_map(Some),
            prop::sample::select(vec!["main", "side", "coach", "chat", "intake_claim", "tier_auto_payout"])
                .prop_map(|s| Some(s.to_string())),
        ],
    ) {
        let Value::Object(mut facts) = facts else { return Ok(()); };
        match &stage {
            Some(s) => facts.insert("stage".into(), json!(s)),
            None => facts.remove("stage"),
        };
        let facts = Value::Object(facts);
        for policy in all_policies() {
            let mut tools = tools_of(policy);
            tools.push(unknown.clone());
            let calls: Vec<Value> = tools.iter().enumerate()
                .map(|(i, t)| json!({"id": format!("c{i}"), "tool": t, "args": {}})).collect();
            let Some(req) = request_with(&facts, &calls) else { return Ok(()); };
            let r = policy.decide(&req);
            for d in &r.decisions {
                if policy.class_of(&d.tool).is_none() {
                    prop_assert!(!d.allow);
                    prop_assert_eq!(d.kind, Some(DenyKind::Unclassified), "{:?}", d);
                    prop_assert_eq!(d.rule.as_deref(), Some("unclassified"));
                    continue;
                }
                match &stage {
                    None => {
                        prop_assert_eq!(d.kind, Some(DenyKind::Stage), "{:?}", d);
                        prop_assert_eq!(d.rule.as_deref(), Some("stage"));
                    }
                    Some(s) if !policy.stages().any(|p| p == s) => {
                        prop_assert_eq!(d.kind, Some(DenyKind::Stage), "{:?}", d);
                        prop_assert_eq!(d.rule.as_deref(), Some(s.as_str()));
                    }
                    Some(s) if !policy.stage_allows(s, &d.tool) => {
                        prop_assert_eq!(d.kind, Some(DenyKind::Stage), "{:?}", d);
                        prop_assert_eq!(d.rule.as_deref(), Some(s.as_str()));
                    }
                    Some(_) => prop_assert_ne!(d.kind, Some(DenyKind::Unclassified)),
                }
            }
        }
    }
}
