//! Equivalence cases: the benchmark documents, hand-written edge cases with the answer the
//! workload defines, and seeded random documents on which the engines must simply agree.
//!
//! Every case stays inside what all four engines define identically (see bench/README.md):
//! well-typed standard facts, and URLs on which the WHATWG parser and the workload's regex
//! agree (ASCII hosts, no IP literals, no percent-encoding, no trailing dot, no backslash).

use crate::documents::{bench_documents, Document, BATCH_SIZES};
use crate::rng::Rng;
use crate::verdict::Verdict;
use crate::workload::all_tools;
use serde_json::{json, Value};

use Verdict::{Allow as A, R1StageWhitelist as R1, R2CapabilityLatch as R2};
use Verdict::{R3HostAllowlist as R3, R4aClientMedia as R4a, R4bPhone as R4b};
use Verdict::{R4cVerifyIdentity as R4c, R4dAmount as R4d};

/// Seed of the random cases.
pub const SEED: u64 = 0x5eed_0004;
/// How many random cases are generated.
pub const RANDOM_CASES: usize = 500;

/// Facts under which `authorise_bacs_payout` passes R4a..R4c.
fn payout_facts() -> Value {
    json!({
        "stage": "tier_auto_payout",
        "latched": false,
        "messages": [
            {"from": "client", "text": "here is the photo", "media": ["image"]},
            {"from": "bot", "text": "thanks"}
        ],
        "fields": {"phone": "+44 7700 900123"},
        "called": [{"tool": "verify_identity", "ok": true}]
    })
}

fn coach_facts() -> Value {
    json!({"stage": "coach", "latched": false, "messages": []})
}

fn calls(list: &[(&str, Value)]) -> Value {
    Value::Array(
        list.iter()
            .enumerate()
            .map(|(i, (tool, args))| json!({"id": format!("c{i}"), "tool": tool, "args": args}))
            .collect(),
    )
}

fn case(name: &str, facts: Value, list: &[(&str, Value)], expected: &[Verdict]) -> Document {
    Document {
        name: name.to_owned(),
        json: json!({"facts": facts, "calls": calls(list)}).to_string(),
        expected: Some(expected.to_vec()),
    }
}

fn with(mut facts: Value, key: &str, value: Value) -> Value {
    facts[key] = value;
    facts
}

fn without(mut facts: Value, key: &str) -> Value {
    if let Some(o) = facts.as_object_mut() {
        o.remove(key);
    }
    facts
}

/// `n` client messages (with bot messages between them, the bot ones carrying media), the
/// oldest client message carrying `kind`.
fn window(n: usize, kind: &str) -> Value {
    let mut ms = Vec::new();
    for i in 0..n {
        let media: Vec<&str> = if i == 0 { vec![kind] } else { vec![] };
        ms.push(json!({"from": "client", "text": "m", "media": media}));
        ms.push(json!({"from": "bot", "text": "b", "media": ["image"]}));
    }
    Value::Array(ms)
}

/// URLs with the answer both URL definitions give.
pub const URLS: [(&str, bool); 24] = [
    ("https://aws.amazon.com", true),
    ("https://aws.amazon.com/", true),
    ("http://aws.amazon.com/x?y#z", true),
    ("HTTPS://AWS.AMAZON.COM/", true),
    ("hTtPs://Docs.Aws.Amazon.Com/lambda", true),
    ("https://a.b.aws.amazon.com:8443/p", true),
    ("https://user:pw@developers.cloudflare.com/workers", true),
    ("https://developers.cloudflare.com?q=1", true),
    ("https://developers.cloudflare.com#top", true),
    ("https://evil.example/@aws.amazon.com", false),
    ("https://aws.amazon.com@evil.example/", false),
    ("https://evil.example#@aws.amazon.com", false),
    ("https://evil.example/?u=https://aws.amazon.com", false),
    ("https://aws.amazon.com.evil.example/", false),
    ("https://evilaws.amazon.com/", false),
    ("https://amazon.com/", false),
    ("https://cloudflare.com/", false),
    ("ftp://aws.amazon.com/", false),
    ("wss://aws.amazon.com/", false),
    ("https://aws.amazon.com:abc/", false),
    ("https://", false),
    ("/docs/lambda", false),
    ("mailto:ops@aws.amazon.com", false),
    ("https://developers.cloudflare.co/", false),
];

/// Hand-written cases, each with the verdicts WORKLOAD.md defines.
pub fn hand_written() -> Vec<Document> {
    let p = payout_facts;
    let pay = |amount: Value| ("authorise_bacs_payout", json!({"amount": amount}));
    let mut out = vec![
        // R1
        case(
            "unknown tool",
            coach_facts(),
            &[("delete_account", json!({}))],
            &[R1],
        ),
        case(
            "unknown stage",
            with(coach_facts(), "stage", json!("triage")),
            &[("lookup_lesson", json!({}))],
            &[R1],
        ),
        case(
            "stage names are case-sensitive",
            with(coach_facts(), "stage", json!("Coach")),
            &[("lookup_lesson", json!({}))],
            &[R1],
        ),
        case(
            "no stage fact",
            without(coach_facts(), "stage"),
            &[("lookup_lesson", json!({}))],
            &[R1],
        ),
        case(
            "no facts at all",
            Value::Null,
            &[("lookup_lesson", json!({}))],
            &[R1],
        ),
        case(
            "intake allows nothing",
            with(coach_facts(), "stage", json!("intake_claim")),
            &[("get_claim", json!({})), ("verify_identity", json!({}))],
            &[R1, R1],
        ),
        case(
            "classified but not whitelisted",
            coach_facts(),
            &[("get_claim", json!({}))],
            &[R1],
        ),
        case("empty batch", coach_facts(), &[], &[]),
        case(
            "ncd whitelist",
            with(coach_facts(), "stage", json!("ncd_policy_faq")),
            &[
                ("query_policy_handbook_rag", json!({})),
                ("lookup_lesson", json!({})),
            ],
            &[A, R1],
        ),
        // R2
        case(
            "latch fact blocks writes",
            with(coach_facts(), "latched", json!(true)),
            &[("grade_attempt", json!({})), ("lookup_lesson", json!({}))],
            &[R2, A],
        ),
        case(
            "latch fact does not block ingest",
            with(coach_facts(), "latched", json!(true)),
            &[("search_aws_docs", json!({}))],
            &[A],
        ),
        case(
            "ingest before write",
            coach_facts(),
            &[("search_aws_docs", json!({})), ("grade_attempt", json!({}))],
            &[A, R2],
        ),
        case(
            "write before ingest (pre-scan)",
            coach_facts(),
            &[("grade_attempt", json!({})), ("search_aws_docs", json!({}))],
            &[R2, A],
        ),
        case(
            "denied web_fetch still latches",
            coach_facts(),
            &[
                ("update_memory", json!({})),
                ("web_fetch", json!({"url": "https://evil.example/"})),
            ],
            &[R2, R3],
        ),
        case(
            "ingest denied by stage still latches",
            p(),
            &[
                ("authorise_bacs_payout", json!({"amount": 10})),
                ("query_policy_handbook_rag", json!({})),
            ],
            &[R2, R1],
        ),
        case(
            "unknown tools set nothing",
            coach_facts(),
            &[("web_fetch2", json!({})), ("update_memory", json!({}))],
            &[R1, A],
        ),
        case(
            "latched false",
            with(coach_facts(), "latched", json!(false)),
            &[("schedule_review", json!({}))],
            &[A],
        ),
        case(
            "R1 before R2",
            with(coach_facts(), "latched", json!(true)),
            &[("send_email", json!({}))],
            &[R1],
        ),
        // R3
        case(
            "url missing",
            coach_facts(),
            &[("web_fetch", json!({}))],
            &[R3],
        ),
        case(
            "url a number",
            coach_facts(),
            &[("web_fetch", json!({"url": 5}))],
            &[R3],
        ),
        case(
            "url null",
            coach_facts(),
            &[("web_fetch", json!({"url": null}))],
            &[R3],
        ),
        case(
            "no args",
            coach_facts(),
            &[("web_fetch", Value::Null)],
            &[R3],
        ),
        // R4
        case("payout allowed", p(), &[pay(json!(100))], &[A]),
        case("amount 250", p(), &[pay(json!(250))], &[A]),
        case("amount 250.0", p(), &[pay(json!(250.0))], &[A]),
        case("amount 250.0001", p(), &[pay(json!(250.0001))], &[R4d]),
        case("amount 251", p(), &[pay(json!(251))], &[R4d]),
        case("amount 1e3", p(), &[pay(json!(1e3))], &[R4d]),
        case("amount -5", p(), &[pay(json!(-5))], &[A]),
        case("amount 0", p(), &[pay(json!(0))], &[A]),
        case("amount \"100\"", p(), &[pay(json!("100"))], &[R4d]),
        case(
            "amount missing",
            p(),
            &[("authorise_bacs_payout", json!({}))],
            &[R4d],
        ),
        case("amount null", p(), &[pay(Value::Null)], &[R4d]),
        case(
            "phone missing",
            with(p(), "fields", json!({})),
            &[pay(json!(1))],
            &[R4b],
        ),
        case(
            "phone empty",
            with(p(), "fields", json!({"phone": ""})),
            &[pay(json!(1))],
            &[R4b],
        ),
        case(
            "phone blank is a non-empty string",
            with(p(), "fields", json!({"phone": " "})),
            &[pay(json!(1))],
            &[A],
        ),
        case(
            "phone a number",
            with(p(), "fields", json!({"phone": 7_700_900_123_u64})),
            &[pay(json!(1))],
            &[R4b],
        ),
        case(
            "phone null",
            with(p(), "fields", json!({"phone": null})),
            &[pay(json!(1))],
            &[R4b],
        ),
        case(
            "fields absent",
            without(p(), "fields"),
            &[pay(json!(1))],
            &[R4b],
        ),
        case(
            "verify not ok",
            with(
                p(),
                "called",
                json!([{"tool": "verify_identity", "ok": false}]),
            ),
            &[pay(json!(1))],
            &[R4c],
        ),
        case(
            "verify ok missing",
            with(p(), "called", json!([{"tool": "verify_identity"}])),
            &[pay(json!(1))],
            &[R4c],
        ),
        case(
            "called absent",
            without(p(), "called"),
            &[pay(json!(1))],
            &[R4c],
        ),
        case(
            "verify in the same batch does not count",
            without(p(), "called"),
            &[("verify_identity", json!({})), pay(json!(1))],
            &[A, R4c],
        ),
        case(
            "messages absent",
            without(p(), "messages"),
            &[pay(json!(1))],
            &[R4a],
        ),
        case(
            "messages empty",
            with(p(), "messages", json!([])),
            &[pay(json!(1))],
            &[R4a],
        ),
        case(
            "bot media does not count",
            with(
                p(),
                "messages",
                json!([{"from": "bot", "media": ["image"]}]),
            ),
            &[pay(json!(1))],
            &[R4a],
        ),
        case(
            "kinds are case-sensitive",
            with(
                p(),
                "messages",
                json!([{"from": "client", "media": ["Image"]}]),
            ),
            &[pay(json!(1))],
            &[R4a],
        ),
        case(
            "other kinds do not count",
            with(
                p(),
                "messages",
                json!([{"from": "client", "media": ["pdf", "audio"]}]),
            ),
            &[pay(json!(1))],
            &[R4a],
        ),
        case(
            "document counts",
            with(
                p(),
                "messages",
                json!([{"from": "client", "media": ["audio", "document"]}]),
            ),
            &[pay(json!(1))],
            &[A],
        ),
        case(
            "from is case-sensitive",
            with(
                p(),
                "messages",
                json!([{"from": "Client", "media": ["image"]}]),
            ),
            &[pay(json!(1))],
            &[R4a],
        ),
        case(
            "window of 9",
            with(p(), "messages", window(9, "image")),
            &[pay(json!(1))],
            &[A],
        ),
        case(
            "window of 10",
            with(p(), "messages", window(10, "document")),
            &[pay(json!(1))],
            &[A],
        ),
        case(
            "window of 11",
            with(p(), "messages", window(11, "image")),
            &[pay(json!(1))],
            &[R4a],
        ),
        case(
            "first failing: media before phone",
            with(with(p(), "messages", json!([])), "fields", json!({})),
            &[pay(json!(999))],
            &[R4a],
        ),
        case(
            "first failing: phone before verify",
            without(with(p(), "fields", json!({})), "called"),
            &[pay(json!(999))],
            &[R4b],
        ),
        case(
            "first failing: verify before amount",
            without(p(), "called"),
            &[pay(json!(999))],
            &[R4c],
        ),
        case(
            "first failing: latch before preconditions",
            with(with(p(), "latched", json!(true)), "messages", json!([])),
            &[pay(json!(999))],
            &[R2],
        ),
        case(
            "preconditions only on payouts",
            with(p(), "messages", json!([])),
            &[("verify_identity", json!({}))],
            &[A],
        ),
    ];
    for (i, (url, ok)) in URLS.iter().enumerate() {
        out.push(case(
            &format!("url {i}: {url}"),
            coach_facts(),
            &[("web_fetch", json!({"url": url}))],
            &[if *ok { A } else { R3 }],
        ));
    }
    out
}

/// Seeded random documents; their expected answer is whatever all engines agree on.
pub fn random(count: usize, seed: u64) -> Vec<Document> {
    let mut rng = Rng::new(seed);
    let tools: Vec<&str> = all_tools()
        .chain(["delete_account", "web_fetch2", "Web_Fetch"])
        .collect();
    let stages = [
        Some("intake_claim"),
        Some("ncd_policy_faq"),
        Some("tier_auto_payout"),
        Some("tier_auto_payout"),
        Some("coach"),
        Some("coach"),
        Some("unknown_stage"),
        None,
    ];
    let kinds = ["image", "document", "Image", "pdf", "audio"];
    let froms = ["client", "client", "bot", "assistant"];
    let amounts = [
        json!(0),
        json!(100),
        json!(249.9999),
        json!(250),
        json!(250.0001),
        json!(300),
        json!(-1),
        json!("100"),
        Value::Null,
    ];
    let phones = [
        json!("+44 7700 900123"),
        json!(""),
        json!(" "),
        json!(447_700),
        Value::Null,
    ];
    (0..count)
        .map(|n| {
            let mut facts = serde_json::Map::new();
            if let Some(s) = rng.pick(&stages) {
                facts.insert("stage".into(), json!(s));
            }
            if rng.chance(70) {
                facts.insert("latched".into(), json!(rng.chance(20)));
            }
            if rng.chance(90) {
                let len = rng.below(16);
                let ms: Vec<Value> = (0..len)
                    .map(|_| {
                        let mut m = json!({"from": rng.pick(&froms), "text": "t"});
                        if rng.chance(40) {
                            let k = rng.below(3);
                            let media: Vec<&str> = (0..k).map(|_| *rng.pick(&kinds)).collect();
                            m["media"] = json!(media);
                        }
                        m
                    })
                    .collect();
                facts.insert("messages".into(), Value::Array(ms));
            }
            if rng.chance(85) {
                let mut fields = serde_json::Map::new();
                if rng.chance(80) {
                    fields.insert("phone".into(), rng.pick(&phones).clone());
                }
                facts.insert("fields".into(), Value::Object(fields));
            }
            if rng.chance(85) {
                let called: Vec<Value> = (0..rng.below(3))
                    .map(|_| {
                        json!({
                            "tool": rng.pick(&["verify_identity", "verify_identity", "get_claim"]),
                            "ok": rng.chance(75)
                        })
                    })
                    .collect();
                facts.insert("called".into(), Value::Array(called));
            }
            // Two in five documents are "friendly": facts under which payouts can pass, and
            // mostly whitelisted tools, so allowed calls are common too.
            let friendly = rng.chance(40);
            if friendly {
                let stage = *rng.pick(&["tier_auto_payout", "coach", "ncd_policy_faq"]);
                facts.insert("stage".into(), json!(stage));
                let mut good = payout_facts();
                for key in ["messages", "fields", "called"] {
                    if rng.chance(85) {
                        facts.insert(key.into(), good[key].take());
                    }
                }
            }
            let stage = facts.get("stage").and_then(Value::as_str).unwrap_or("");
            let whitelisted = crate::workload::whitelist(stage);
            let batch = 1 + rng.below(6);
            let list: Vec<(&str, Value)> = (0..batch)
                .map(|_| {
                    let tool = if friendly && rng.chance(75) {
                        *rng.pick(whitelisted)
                    } else {
                        *rng.pick(&tools)
                    };
                    let args = match tool {
                        "web_fetch" if rng.chance(90) => json!({"url": rng.pick(&URLS).0}),
                        "authorise_bacs_payout" if rng.chance(90) => {
                            json!({"amount": rng.pick(&amounts).clone()})
                        }
                        _ => json!({}),
                    };
                    (tool, args)
                })
                .collect();
            Document {
                name: format!("random {n}"),
                json: json!({"facts": Value::Object(facts), "calls": calls(&list)}).to_string(),
                expected: None,
            }
        })
        .collect()
}

/// Every equivalence case: benchmark documents, hand-written cases, random cases.
pub fn all() -> Vec<Document> {
    let mut out: Vec<Document> = BATCH_SIZES
        .iter()
        .flat_map(|&b| bench_documents(b))
        .collect();
    out.extend(hand_written());
    out.extend(random(RANDOM_CASES, SEED));
    out
}
