//! Instruction counts of a `per batch` budget (issue 26: at most 30 ns a call, measured with
//! callgrind where wall time is noisy): `cargo build --release -p toolgate-engine --example
//! budget_instructions`, then `valgrind --tool=callgrind --collect-atstart=no
//! --toggle-collect='*run_measured*' target/release/examples/budget_instructions off|on
//! ITERATIONS`
//! judges a batch of four refunds ITERATIONS times with `decide_into`, by the policy without
//! (`off`) or with (`on`) `sum args.amount <= 1000 per batch`. It is an example of the
//! engine, not a bench binary, so serde_json's maps are the ones toolgate builds with
//! (`bench/README.md`).

use serde_json::json;
use std::hint::black_box;
use toolgate_engine::{Policy, Request, Verdict};

const POLICY: &str = "module m\nwrite refund\nstage s { tools [refund] }\nrule small for refund { require args.amount is number and args.amount <= 99 }\n";
const BUDGET: &str = "budget batch_refunds for refund { sum args.amount <= 1000 per batch }\n";

#[inline(never)]
fn run_measured(policy: &Policy, request: &Request, iterations: usize) {
    let mut verdicts: Vec<Verdict> = Vec::with_capacity(4);
    for _ in 0..iterations {
        policy.decide_into(black_box(request), &mut verdicts);
        black_box(&verdicts);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(mode), Some(iterations)) = (args.get(1), args.get(2).and_then(|n| n.parse().ok()))
    else {
        eprintln!("usage: budget_instructions off|on ITERATIONS");
        std::process::exit(2);
    };
    let text = match mode.as_str() {
        "on" => format!("{POLICY}{BUDGET}"),
        _ => POLICY.to_string(),
    };
    let policy = match Policy::compile("m.gate", &text) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let calls: Vec<_> = (0..4)
        .map(|i| json!({"id": format!("c{i}"), "tool": "refund", "args": {"amount": 50 + i, "order": "A-17"}}))
        .collect();
    let request = match Request::from_value(json!({"facts": {"stage": "s"}, "calls": calls})) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    run_measured(&policy, &request, iterations);
    println!("{iterations}");
}
