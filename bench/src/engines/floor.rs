//! The practical floor: plain, non-general Rust for exactly this workload, on typed facts.
//!
//! Tool ids come from a `match` (a u8), whitelists and classes are u32 bitsets, the latch is a
//! pre-scan and the precondition facts are computed lazily, once per batch. `Facts::from_value`
//! stands in for a serde derive.

use crate::url_host::{extract_host, host_allowed};
use crate::verdict::Verdict;
use serde_json::Value;

/// One message of the conversation, typed.
#[derive(Debug, Clone, Default)]
pub struct Message {
    /// True when `from` is `"client"`.
    pub from_client: bool,
    /// The media kinds it carries.
    pub media: Vec<String>,
}

/// One proposed call, typed: only what the rules read.
#[derive(Debug, Clone, Default)]
pub struct Call {
    /// The tool name (`None` when not a string: a malformed entry).
    pub tool: Option<String>,
    /// `args.url` when it is a string.
    pub url: Option<String>,
    /// `args.amount` when it is a number.
    pub amount: Option<f64>,
}

/// One batch's facts and calls, typed.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The active stage, when it is a string.
    pub stage: Option<String>,
    /// The latch fact.
    pub latched: bool,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// `fields.phone` when it is a string.
    pub phone: Option<String>,
    /// Tools called earlier with `ok: true`.
    pub called_ok: Vec<String>,
    /// The batch.
    pub calls: Vec<Call>,
}

fn string(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_owned)
}

impl Facts {
    /// Reads the shared document format (`{facts: {..}, calls: [..]}`).
    pub fn from_value(doc: &Value) -> Facts {
        let facts = doc.get("facts");
        let f = |k: &str| facts.and_then(|f| f.get(k));
        let messages = f("messages")
            .and_then(Value::as_array)
            .map(|ms| {
                ms.iter()
                    .map(|m| Message {
                        from_client: m.get("from").and_then(Value::as_str) == Some("client"),
                        media: m
                            .get("media")
                            .and_then(Value::as_array)
                            .map(|ks| ks.iter().filter_map(|k| string(Some(k))).collect())
                            .unwrap_or_default(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let called_ok = f("called")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .filter(|c| c.get("ok") == Some(&Value::Bool(true)))
                    .filter_map(|c| string(c.get("tool")))
                    .collect()
            })
            .unwrap_or_default();
        let calls = doc
            .get("calls")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        let args = c.get("args");
                        Call {
                            tool: string(c.get("tool")),
                            url: string(args.and_then(|a| a.get("url"))),
                            amount: args.and_then(|a| a.get("amount")).and_then(Value::as_f64),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        Facts {
            stage: string(f("stage")),
            latched: f("latched") == Some(&Value::Bool(true)),
            messages,
            phone: string(f("fields").and_then(|fs| fs.get("phone"))),
            called_ok,
            calls,
        }
    }
}

const AUTHORISE: u8 = 0;
const WEB_FETCH: u8 = 8;
const VERIFY_IDENTITY: u8 = 10;
const WRITE: u32 = 0b11_1111;
const INGEST: u32 = 0b11_1100_0000;
const INTAKE: u32 = 0;
const NCD: u32 = 1 << 9;
const TIER: u32 = 1 << AUTHORISE | 1 << VERIFY_IDENTITY;
const COACH: u32 = 1 << 2 | 1 << 3 | 1 << 4 | 1 << 6 | 1 << 7 | 1 << WEB_FETCH | 1 << 11 | 1 << 12;

fn tool_id(name: &str) -> Option<u8> {
    Some(match name {
        "authorise_bacs_payout" => AUTHORISE,
        "update_claim_notes" => 1,
        "update_memory" => 2,
        "grade_attempt" => 3,
        "schedule_review" => 4,
        "send_email" => 5,
        "search_aws_docs" => 6,
        "search_cloudflare_docs" => 7,
        "web_fetch" => WEB_FETCH,
        "query_policy_handbook_rag" => 9,
        "verify_identity" => VERIFY_IDENTITY,
        "lookup_lesson" => 11,
        "get_progress" => 12,
        "get_claim" => 13,
        "get_policy_document" => 14,
        "list_claim_documents" => 15,
        "get_customer_profile" => 16,
        "check_payment_status" => 17,
        "get_vehicle_details" => 18,
        "lookup_ncd_years" => 19,
        _ => return None,
    })
}

fn stage_mask(name: &str) -> u32 {
    match name {
        "intake_claim" => INTAKE,
        "ncd_policy_faq" => NCD,
        "tier_auto_payout" => TIER,
        "coach" => COACH,
        _ => 0,
    }
}

/// The batch-level precondition facts, computed on first use.
#[derive(Default)]
struct Lazy {
    pre: Option<Verdict>,
}

impl Lazy {
    /// The first failing of R4a..R4c, or `Allow`.
    fn preconditions(&mut self, facts: &Facts) -> Verdict {
        *self.pre.get_or_insert_with(|| {
            let media = facts
                .messages
                .iter()
                .rev()
                .filter(|m| m.from_client)
                .take(10)
                .any(|m| m.media.iter().any(|k| k == "image" || k == "document"));
            if !media {
                Verdict::R4aClientMedia
            } else if facts.phone.as_deref().is_none_or(str::is_empty) {
                Verdict::R4bPhone
            } else if !facts.called_ok.iter().any(|t| t == "verify_identity") {
                Verdict::R4cVerifyIdentity
            } else {
                Verdict::Allow
            }
        })
    }
}

/// Judges every call of the batch, writing one verdict per call into `out`.
pub fn decide_into(facts: &Facts, out: &mut Vec<Verdict>) {
    out.clear();
    let mut small = [None; 16];
    let mut big: Vec<Option<u8>> = Vec::new();
    let ids: &mut [Option<u8>] = if facts.calls.len() <= 16 {
        &mut small[..facts.calls.len()]
    } else {
        big.resize(facts.calls.len(), None);
        &mut big
    };
    let mut latch = facts.latched;
    for (slot, call) in ids.iter_mut().zip(&facts.calls) {
        *slot = call.tool.as_deref().and_then(tool_id);
        if let Some(t) = *slot {
            latch |= INGEST & (1 << t) != 0;
        }
    }
    let whitelist = facts.stage.as_deref().map_or(0, stage_mask);
    let mut lazy = Lazy::default();
    for (id, call) in ids.iter().zip(&facts.calls) {
        let v = match *id {
            None => Verdict::R1StageWhitelist,
            Some(t) if whitelist & (1 << t) == 0 => Verdict::R1StageWhitelist,
            Some(t) if latch && WRITE & (1 << t) != 0 => Verdict::R2CapabilityLatch,
            Some(WEB_FETCH) => {
                let ok = call.url.as_deref().and_then(extract_host).is_some_and(|h| {
                    if h.bytes().any(|b| b.is_ascii_uppercase()) {
                        host_allowed(&h.to_ascii_lowercase())
                    } else {
                        host_allowed(h)
                    }
                });
                if ok {
                    Verdict::Allow
                } else {
                    Verdict::R3HostAllowlist
                }
            }
            Some(AUTHORISE) => match lazy.preconditions(facts) {
                Verdict::Allow if call.amount.is_some_and(|a| a <= 250.0) => Verdict::Allow,
                Verdict::Allow => Verdict::R4dAmount,
                failed => failed,
            },
            Some(_) => Verdict::Allow,
        };
        out.push(v);
    }
}

/// Judges every call of the batch.
pub fn decide(facts: &Facts) -> Vec<Verdict> {
    let mut out = Vec::with_capacity(facts.calls.len());
    decide_into(facts, &mut out);
    out
}
