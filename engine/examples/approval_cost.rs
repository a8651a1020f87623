//! What an approval digest costs (issue 24: under 1 µs for a 1 KB argument object), in the
//! engine's own build (`bench/` links regorus and Cedar, which turn on serde_json's
//! `preserve_order`; toolgate's maps are sorted, so the digest's key sort is skipped here as in
//! production). One call whose `ask when` holds is judged into verdicts with no approval (the
//! ask check alone) and with its approval in `facts.approvals` (the digest computed and
//! compared as well); the difference is the digest.
//!
//! `cargo run --release -p toolgate-engine --example approval_cost [ROUNDS]` prints the
//! fastest of ROUNDS (default 2,000) rounds of 200 judgements of each, in ns per judgement:
//! the minimum, since a busy neighbour only ever adds time.

use serde_json::{json, Value};
use std::hint::black_box;
use std::time::Instant;
use toolgate_engine::{Policy, Request, Verdict};

const POLICY: &str = "module m\nwrite pay\nstage s { tools [pay] }\nrule big for pay { require args.n is number  ask when args.n >= 0 }\n";
const PER_ROUND: u32 = 200;

/// Arguments of about 1 KB: a number, a few strings, a nested list.
fn args() -> Value {
    let mut m = serde_json::Map::new();
    m.insert("n".into(), json!(100));
    for i in 0..14 {
        m.insert(format!("field_{i:02}"), json!(format!("{:-<60}", i)));
    }
    m.insert("items".into(), json!([1.5, 2, "three", {"k": true}]));
    Value::Object(m)
}

fn request(approvals: Option<&str>) -> Result<Request, toolgate_engine::RequestError> {
    let mut facts = json!({"stage": "s"});
    if let Some(a) = approvals {
        facts["approvals"] = json!([a]);
    }
    Request::from_value(json!({"session": "s1", "turn": "t1", "facts": facts,
        "calls": [{"id": "c", "tool": "pay", "args": args()}]}))
}

/// The fastest round, in ns per judgement.
fn fastest(policy: &Policy, request: &Request, rounds: u32) -> f64 {
    let mut verdicts: Vec<Verdict> = Vec::with_capacity(1);
    (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..PER_ROUND {
                black_box(policy.decide_into(black_box(request), &mut verdicts));
            }
            start.elapsed().as_nanos() as f64 / f64::from(PER_ROUND)
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: u32 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000);
    let policy = Policy::compile("m.gate", POLICY)?;
    let asked = request(None)?;
    let size = serde_json::to_string(&asked.calls[0].args).map_or(0, |s| s.len());
    let digest = policy.decide(&asked).decisions[0]
        .approval
        .clone()
        .ok_or("the call does not ask")?;
    let approved = request(Some(&digest))?;
    if !policy.decide(&approved).decisions[0].allow {
        return Err("the approval does not allow the call".into());
    }
    let ask = fastest(&policy, &asked, rounds);
    let with = fastest(&policy, &approved, rounds);
    println!("arguments: {size} bytes of JSON");
    println!("decide_into, asks:             {ask:8.1} ns");
    println!("decide_into, approved:         {with:8.1} ns");
    println!("the digest (the difference):   {:8.1} ns", with - ask);
    Ok(())
}
