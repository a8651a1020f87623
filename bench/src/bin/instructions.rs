//! A harness for instruction counts, which stay stable on a loaded machine where wall time
//! does not: `valgrind --tool=callgrind --collect-atstart=no --toggle-collect=run_measured
//! target/release/instructions MODE BATCH ITERATIONS`. `bench/callgrind.sh` runs every mode
//! and prints instructions per document.
//!
//! Modes: `into` (`decide_into`), `decide` (the full response), `json` (`decide_json` from
//! text), `value` (a `serde_json::Value` parse of the same text), `floor` (the plain-Rust
//! floor from typed facts).

use std::hint::black_box;
use toolgate_bench::documents::bench_documents;
use toolgate_bench::engines::{floor, toolgate};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(mode), Some(batch), Some(iterations)) = (
        args.get(1),
        args.get(2).and_then(|b| b.parse::<usize>().ok()),
        args.get(3).and_then(|n| n.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: instructions into|decide|json|value|floor BATCH ITERATIONS");
        std::process::exit(2);
    };
    let policy = match toolgate::compile_workload() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let docs = bench_documents(batch);
    let texts: Vec<&str> = docs.iter().map(|d| d.json.as_str()).collect();
    let requests: Vec<toolgate_engine::Request> = docs
        .iter()
        .filter_map(|d| toolgate_engine::Request::from_json(&d.json).ok())
        .collect();
    let values: Vec<serde_json::Value> = docs
        .iter()
        .filter_map(|d| serde_json::from_str(&d.json).ok())
        .collect();
    let facts: Vec<floor::Facts> = values.iter().map(floor::Facts::from_value).collect();
    if requests.len() != docs.len() || values.len() != docs.len() {
        eprintln!("a benchmark document does not read");
        std::process::exit(1);
    }
    let inputs = Inputs {
        policy: &policy,
        texts: &texts,
        requests: &requests,
        facts: &facts,
    };
    for _ in 0..iterations {
        run_measured(mode, &inputs);
    }
    println!("{} documents per iteration", docs.len());
}

struct Inputs<'a> {
    policy: &'a toolgate_engine::Policy,
    texts: &'a [&'a str],
    requests: &'a [toolgate_engine::Request],
    facts: &'a [floor::Facts],
}

/// One pass over every document; the only function callgrind counts.
#[inline(never)]
fn run_measured(mode: &str, i: &Inputs<'_>) {
    let mut verdicts = Vec::with_capacity(16);
    let mut out = Vec::with_capacity(16);
    match mode {
        "into" => {
            for r in i.requests {
                i.policy.decide_into(black_box(r), &mut verdicts);
                black_box(&verdicts);
            }
        }
        "decide" => {
            for r in i.requests {
                black_box(i.policy.decide(black_box(r)));
            }
        }
        "json" => {
            for t in i.texts {
                black_box(i.policy.decide_json(black_box(t)).ok());
            }
        }
        "value" => {
            for t in i.texts {
                black_box(serde_json::from_str::<serde_json::Value>(black_box(t)).ok());
            }
        }
        "floor" => {
            for f in i.facts {
                floor::decide_into(black_box(f), &mut out);
                black_box(&out);
            }
        }
        _ => {}
    }
}
