//! The 8 benchmark documents per batch size, with the WORKLOAD decision mix.
//!
//! Documents 0-1 are in `intake_claim`, 2-3 in `ncd_policy_faq`, 4-5 in `tier_auto_payout`,
//! 6-7 in `coach`; documents 3 and 5 carry `latched: true`. Each document is planned as a list
//! of intended verdicts; a call is then drawn (seeded) that yields that verdict in that
//! document, and the plan is kept as the document's expected answer, which every engine must
//! reproduce. Message texts are padded so the documents average 2.0 / 2.2 / 3.1 KB.

use crate::rng::Rng;
use crate::verdict::Verdict;
use crate::workload::{all_tools, is_ingest, is_write, whitelist, STAGES};
use serde_json::{json, Value};

/// One facts document (one batch) and the answer the workload defines for it.
#[derive(Debug, Clone)]
pub struct Document {
    /// A short label for reports.
    pub name: String,
    /// The JSON text every engine reads.
    pub json: String,
    /// The expected verdict of each call, when known independently of the engines.
    pub expected: Option<Vec<Verdict>>,
}

/// The batch sizes benchmarked.
pub const BATCH_SIZES: [usize; 3] = [1, 4, 16];

/// Target average document size per batch size, in bytes.
pub fn target_bytes(batch: usize) -> usize {
    match batch {
        1 => 2000,
        4 => 2200,
        _ => 3100,
    }
}

use Verdict::{Allow as A, R1StageWhitelist as R1, R2CapabilityLatch as R2};
use Verdict::{R3HostAllowlist as R3, R4dAmount as R4d};

/// The plan: per document, the intended verdicts. Totals match WORKLOAD.md's decision mix.
fn plan(batch: usize) -> [Vec<Verdict>; 8] {
    let n = |v: Verdict, k: usize| std::iter::repeat_n(v, k);
    let mk = |parts: &[(Verdict, usize)]| -> Vec<Verdict> {
        parts.iter().flat_map(|&(v, k)| n(v, k)).collect()
    };
    match batch {
        1 => [
            mk(&[(R1, 1)]),
            mk(&[(R1, 1)]),
            mk(&[(A, 1)]),
            mk(&[(R1, 1)]),
            mk(&[(R4d, 1)]),
            mk(&[(R2, 1)]),
            mk(&[(A, 1)]),
            mk(&[(R1, 1)]),
        ],
        4 => [
            mk(&[(R1, 4)]),
            mk(&[(R1, 4)]),
            mk(&[(A, 2), (R1, 2)]),
            mk(&[(A, 2), (R1, 2)]),
            mk(&[(A, 2), (R4d, 1), (R1, 1)]),
            mk(&[(A, 1), (R2, 1), (R1, 2)]),
            mk(&[(A, 4)]),
            mk(&[(A, 1), (R3, 1), (R2, 1), (R1, 1)]),
        ],
        _ => [
            mk(&[(R1, 16)]),
            mk(&[(R1, 16)]),
            mk(&[(A, 8), (R1, 8)]),
            mk(&[(A, 8), (R1, 8)]),
            mk(&[(A, 7), (R4d, 5), (R1, 4)]),
            mk(&[(A, 6), (R2, 4), (R1, 6)]),
            mk(&[(A, 16)]),
            mk(&[(A, 6), (R2, 6), (R3, 2), (R1, 2)]),
        ],
    }
}

const WORDS: [&str; 16] = [
    "claim",
    "photo",
    "bank",
    "details",
    "thanks",
    "policy",
    "renewal",
    "quote",
    "windscreen",
    "payout",
    "lesson",
    "review",
    "please",
    "update",
    "sorted",
    "tomorrow",
];
const GOOD_URLS: [&str; 4] = [
    "https://docs.aws.amazon.com/lambda/latest/dg/welcome.html",
    "https://developers.cloudflare.com/workers/",
    "HTTPS://AWS.Amazon.com/s3/?nc=sn",
    "http://developers.cloudflare.com:443/r2/#pricing",
];
const BAD_URLS: [&str; 4] = [
    "https://aws.amazon.com.evil.example/x",
    "https://aws.amazon.com@attacker.example/",
    "ftp://developers.cloudflare.com/",
    "https://evilaws.amazon.com/",
];
const UNKNOWN_TOOLS: [&str; 3] = ["delete_account", "run_shell", "transfer_funds"];

/// Draws a call whose verdict in this document is `want`.
fn call_for(
    rng: &mut Rng,
    stage: &str,
    want: Verdict,
    coach_ingests: bool,
    latched: bool,
    id: usize,
) -> Value {
    let wl = whitelist(stage);
    let (tool, args): (&str, Value) = match want {
        Verdict::Allow => match stage {
            "tier_auto_payout" => {
                if latched || rng.chance(50) {
                    ("verify_identity", json!({"customer": "C-1042"}))
                } else {
                    let amount = *rng.pick(&[12.5, 99.0, 180.25, 250.0]);
                    (
                        "authorise_bacs_payout",
                        json!({"claim": "CL-77812", "amount": amount, "sort_code": "12-34-56"}),
                    )
                }
            }
            "coach" if coach_ingests => {
                let tool = *rng.pick(&[
                    "search_aws_docs",
                    "search_cloudflare_docs",
                    "web_fetch",
                    "lookup_lesson",
                    "get_progress",
                ]);
                let args = if tool == "web_fetch" {
                    json!({"url": *rng.pick(&GOOD_URLS)})
                } else {
                    json!({"query": "durable objects"})
                };
                (tool, args)
            }
            "coach" => {
                let tool = *rng.pick(&[
                    "update_memory",
                    "grade_attempt",
                    "schedule_review",
                    "lookup_lesson",
                    "get_progress",
                ]);
                (tool, json!({"learner": "L-9", "note": "spaced repetition"}))
            }
            _ => (
                "query_policy_handbook_rag",
                json!({"question": "does ncd survive a windscreen claim"}),
            ),
        },
        Verdict::R1StageWhitelist => {
            // In a stage with a write-blocking interest (tier, coach) an R1 call must not be
            // an ingest, or it would latch the batch's writes.
            let pool: Vec<&str> = all_tools()
                .chain(UNKNOWN_TOOLS)
                .filter(|t| !wl.contains(t))
                .filter(|t| !(matches!(stage, "tier_auto_payout" | "coach") && is_ingest(t)))
                .collect();
            (*rng.pick(&pool), json!({"ref": "X-1"}))
        }
        Verdict::R2CapabilityLatch => {
            let writes: Vec<&str> = wl.iter().copied().filter(|t| is_write(t)).collect();
            let tool = *rng.pick(&writes);
            let args = if tool == "authorise_bacs_payout" {
                json!({"claim": "CL-5", "amount": 40})
            } else {
                json!({"learner": "L-9"})
            };
            (tool, args)
        }
        Verdict::R3HostAllowlist => ("web_fetch", json!({"url": *rng.pick(&BAD_URLS)})),
        _ => {
            let amount = rng.pick(&[json!(250.5), json!(1200), json!("100")]).clone();
            (
                "authorise_bacs_payout",
                json!({"claim": "CL-9", "amount": amount}),
            )
        }
    };
    // Ids as a provider writes them (Anthropic's `toolu_` + 24 characters, 30 bytes; OpenAI's
    // `call_` ids are 29), so echoing them costs what it costs in production.
    json!({"id": format!("toolu_01A09q90qw90lq9178{id:06}"), "tool": tool, "args": args})
}

/// The 30-message conversation; in payout stages the client sent a photo recently.
fn messages(rng: &mut Rng, words_per_text: usize, recent_media: bool) -> Vec<Value> {
    (0..30)
        .map(|i| {
            let client = i % 2 == 0 || rng.chance(20);
            let text: Vec<&str> = (0..words_per_text).map(|_| *rng.pick(&WORDS)).collect();
            let mut m = json!({
                "from": if client { "client" } else { "bot" },
                "text": text.join(" "),
            });
            let media: Vec<&str> = if client && recent_media && i == 26 {
                vec!["image"]
            } else if rng.chance(8) {
                vec![*rng.pick(&["image", "document", "audio", "Image"])]
            } else {
                vec![]
            };
            if !media.is_empty() || rng.chance(50) {
                m["media"] = json!(media);
            }
            m
        })
        .collect()
}

fn document(batch: usize, index: usize, words: usize) -> (Value, Vec<Verdict>) {
    let mut rng = Rng::new(0x7001_6a7e ^ (batch as u64) << 8 ^ index as u64);
    let stage = STAGES[index / 2];
    let latched = index == 3 || index == 5;
    let wants = plan(batch)[index].clone();
    let payout = stage == "tier_auto_payout";
    let mut msgs = messages(&mut rng, words, payout);
    if payout {
        // The client's message 26 carries the image; make sure 26 is a client message.
        msgs[26]["from"] = json!("client");
    }
    let coach_ingests = stage == "coach" && index == 7;
    let mut order: Vec<usize> = (0..wants.len()).collect();
    rng.shuffle(&mut order);
    let calls: Vec<Value> = order
        .iter()
        .map(|&k| call_for(&mut rng, stage, wants[k], coach_ingests, latched, k))
        .collect();
    let expected = order.iter().map(|&k| wants[k]).collect();
    let doc = json!({
        "facts": {
            "stage": stage,
            "latched": latched,
            "messages": msgs,
            "fields": {"phone": "+44 7700 900123", "name": "Sam Doe", "postcode": "LS1 4AP"},
            "called": [
                {"tool": "verify_identity", "ok": payout},
                {"tool": "get_claim", "ok": true}
            ],
        },
        "calls": calls,
    });
    (doc, expected)
}

/// The 8 benchmark documents for `batch` calls each.
pub fn bench_documents(batch: usize) -> Vec<Document> {
    // Pick the text length whose average size is closest to the target.
    let size = |words: usize| -> usize {
        (0..8)
            .map(|i| document(batch, i, words).0.to_string().len())
            .sum::<usize>()
            / 8
    };
    let target = target_bytes(batch);
    let words = (0..12)
        .min_by_key(|&w| size(w).abs_diff(target))
        .unwrap_or(3);
    (0..8)
        .map(|i| {
            let (doc, expected) = document(batch, i, words);
            Document {
                name: format!("batch{batch}/doc{i}"),
                json: doc.to_string(),
                expected: Some(expected),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn mix(batch: usize) -> BTreeMap<Verdict, usize> {
        let mut m = BTreeMap::new();
        for d in bench_documents(batch) {
            for v in d.expected.unwrap_or_default() {
                *m.entry(v).or_insert(0) += 1;
            }
        }
        m
    }

    #[test]
    fn decision_mix_is_the_workloads() {
        let want = |pairs: &[(Verdict, usize)]| pairs.iter().copied().collect::<BTreeMap<_, _>>();
        assert_eq!(mix(1), want(&[(A, 2), (R1, 4), (R2, 1), (R4d, 1)]));
        assert_eq!(
            mix(4),
            want(&[(A, 12), (R1, 16), (R2, 2), (R3, 1), (R4d, 1)])
        );
        assert_eq!(
            mix(16),
            want(&[(A, 51), (R1, 60), (R2, 10), (R3, 2), (R4d, 5)])
        );
    }

    #[test]
    fn sizes_are_near_the_targets() {
        for batch in BATCH_SIZES {
            let docs = bench_documents(batch);
            assert_eq!(docs.len(), 8);
            let avg = docs.iter().map(|d| d.json.len()).sum::<usize>() / 8;
            let target = target_bytes(batch);
            assert!(
                avg.abs_diff(target) * 10 < target,
                "batch {batch}: {avg} vs {target}"
            );
        }
    }

    #[test]
    fn documents_are_deterministic() {
        let a: Vec<String> = bench_documents(4).into_iter().map(|d| d.json).collect();
        let b: Vec<String> = bench_documents(4).into_iter().map(|d| d.json).collect();
        assert_eq!(a, b);
    }
}
