//! What provenance costs (issue 25: indexing at most 1 µs per KB of output; a check at most
//! 1 µs per argument against 100 KB of indexed output), in the engine's own build. The inbox
//! and policies are those of `bench/benches/provenance.rs`: one latched write judged into
//! verdicts with ~100 KB of inbox output in `facts.outputs`, by a latch that `blocks` the
//! write (never reads the outputs: the baseline) and one that `blocks tainted` it (builds the
//! index and checks each argument), with 1 and 11 arguments.
//!
//! `cargo run --release -p toolgate-engine --example provenance_cost [ROUNDS]` prints the
//! fastest of ROUNDS (default 200) rounds of 10 judgements of each: the minimum, since a busy
//! neighbour only ever adds time. `provenance_cost loop N` judges the 1-argument request N
//! times with the tainted policy and nothing else, for `perf record` or callgrind.
//! `provenance_cost hostile` times the index of 1 MB outputs made to be hard to scan.

use serde_json::{json, Value};
use std::hint::black_box;
use std::time::Instant;
use toolgate_engine::{Policy, Request, Verdict};

const TAINTED: &str = "module m\ningest read_inbox\nwrite send_email\nstage s { tools [read_inbox, send_email] }\nlatch l { set_by ingest blocks tainted write }\n";
const PLAIN: &str = "module m\ningest read_inbox\nwrite send_email\nstage s { tools [read_inbox, send_email] }\nlatch l { set_by ingest blocks write }\n";
const PER_ROUND: u32 = 10;

/// About `kb` KB of e-mails: prose with a link, an address and an account number in each.
fn inbox(kb: usize) -> Value {
    let mut mails = Vec::new();
    let mut size = 0;
    let mut i = 0;
    while size < kb * 1024 {
        let body = format!(
            "Hello team, following up on invoice {i:07} from last week. Please see \
             https://portal{i}.example.com/invoices/{i} for the details, or write to \
             billing{i}@vendor{i}.example. The remaining balance can be paid to \
             GB{:02}NWBK6016133192{i:04}. {}",
            i % 97,
            "Thanks for your patience while we sort this out. ".repeat(20)
        );
        let mail = json!({"id": format!("m{i}"), "sender": format!("sender{i}@example.org"),
            "subject": format!("Invoice {i}"), "body": body, "timestamp": "2026-12-01T10:00:00"});
        size += mail.to_string().len();
        mails.push(mail);
        i += 1;
    }
    Value::Array(mails)
}

fn request(args: usize) -> Result<Request, toolgate_engine::RequestError> {
    let mut a = serde_json::Map::new();
    a.insert("to".into(), json!("friend@example.net"));
    for k in 1..args {
        a.insert(format!("cc{k}"), json!(format!("colleague{k}@example.net")));
    }
    Request::from_value(json!({"facts": {"stage": "s", "latched": true,
        "prompt": "Summarise my inbox and send the summary to friend@example.net",
        "outputs": [{"id": "c1", "tool": "read_inbox", "output": inbox(100)}]},
        "calls": [{"id": "c2", "tool": "send_email", "args": a}]}))
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

#[inline(never)]
fn run_measured(policy: &Policy, request: &Request, iterations: usize) {
    let mut verdicts: Vec<Verdict> = Vec::with_capacity(1);
    for _ in 0..iterations {
        policy.decide_into(black_box(request), &mut verdicts);
        black_box(&verdicts);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let tainted = Policy::compile("m.gate", TAINTED)?;
    let plain = Policy::compile("m.gate", PLAIN)?;
    let one = request(1)?;
    if args.get(1).map(String::as_str) == Some("loop") {
        let n = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(1_000);
        run_measured(&tainted, &one, n);
        return Ok(());
    }
    if args.get(1).map(String::as_str) == Some("hostile") {
        return hostile(&tainted, &plain);
    }
    let rounds: u32 = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(200);
    let eleven = request(11)?;
    let bytes = one.to_value()["facts"]["outputs"].to_string().len();
    if !tainted.decide(&one).decisions[0].allow || !tainted.decide(&eleven).decisions[0].allow {
        return Err("the tainted latch denies a clean write".into());
    }
    if plain.decide(&one).decisions[0].allow {
        return Err("the plain latch allows the write".into());
    }
    let base = fastest(&plain, &one, rounds);
    let t1 = fastest(&tainted, &one, rounds);
    let t11 = fastest(&tainted, &eleven, rounds);
    let kb = bytes as f64 / 1024.0;
    println!("outputs: {bytes} bytes of JSON ({kb:.1} KB)");
    println!("plain_latch_100kb:      {base:12.0} ns");
    println!("tainted_1_arg_100kb:    {t1:12.0} ns");
    println!("tainted_11_args_100kb:  {t11:12.0} ns");
    println!(
        "indexing:               {:12.3} µs per KB",
        (t1 - base) / 1000.0 / kb
    );
    println!(
        "check:                  {:12.1} ns per argument",
        (t11 - t1) / 10.0
    );
    Ok(())
}

/// The index of 1 MB outputs of one repeated piece each, in µs per KB.
fn hostile(tainted: &Policy, plain: &Policy) -> Result<(), Box<dyn std::error::Error>> {
    for piece in [
        "a.",
        "a-",
        "1",
        ".",
        "a@",
        "x.y@",
        "DE89 ",
        "AB12 CDEF ",
        "www.a.b ",
        "a.b.c.d.e.f ",
        "1.2.3.4 ",
        "é.ü.",
        "https://x.com/y ",
    ] {
        let text = piece.repeat((1 << 20) / piece.len());
        let request = Request::from_value(json!({"facts": {"stage": "s", "latched": true,
            "prompt": "", "outputs": [{"id": "c1", "tool": "read_inbox", "output": text}]},
            "calls": [{"id": "c2", "tool": "send_email", "args": {"to": "friend@example.net"}}]}))?;
        let per_kb = |p: &Policy| fastest(p, &request, 3) / 1000.0 / 1024.0;
        let cost = per_kb(tainted) - per_kb(plain);
        println!("{:>20}: {cost:8.3} µs per KB", format!("{piece:?}"));
    }
    Ok(())
}
