//! Instruction counts of a windowed budget kept in memory (issue 26: at most 1 µs a batch;
//! counted with callgrind, since wall time is noisy on a shared machine):
//! `cargo build --release -p toolgate-turns --example budget_window_instructions`, then
//! `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*run_measured*'
//! target/release/examples/budget_window_instructions book|embedded|engine off|on ITERATIONS`
//! judges a batch of four refunds ITERATIONS times, by the policy without (`off`) or with
//! (`on`) `sum args.amount <= N within 1h per session`: through a `Book` (`book`: the
//! server's in-memory keeper) or through `EmbeddedTurns::judge` (`embedded`: the Python and
//! Node `TurnState`). The difference per batch is the budget's cost. An example of this
//! crate rather than a bench binary, so serde_json's maps are the ones toolgate builds with
//! (`bench/README.md`); `bench/benches/budget_window.rs` gives the wall time.

use serde_json::json;
use std::hint::black_box;
use std::time::{Duration, Instant};
use toolgate_engine::{Policy, Request};
use toolgate_turns::budgets::Scopes;
use toolgate_turns::{Book, EmbeddedTurns};

const POLICY: &str = "module m\nwrite refund\nstage s { tools [refund] }\nrule small for refund { require args.amount is number and args.amount <= 99 }\n";
const BUDGET: &str =
    "budget hourly for refund { sum args.amount <= 1000000000000 within 1h per session }\n";

#[inline(never)]
fn run_measured(policy: &Policy, request: &mut Request, keeper: &str, iterations: usize) {
    let book = Book::new(Duration::from_secs(3600));
    let mut turns = EmbeddedTurns::default();
    if keeper == "engine" && policy.keeps_counts() {
        request.facts.spent = Some([("hourly".to_string(), 1000.0)].into_iter().collect());
    }
    for _ in 0..iterations {
        let response = if keeper == "engine" {
            Some(policy.decide(black_box(&*request)))
        } else if keeper == "embedded" {
            let judged = turns.judge(
                policy,
                request.clone(),
                Some("t1"),
                None,
                Instant::now(),
                true,
            );
            judged.ok()
        } else {
            let scopes = Scopes::of(
                policy,
                request.session.as_deref(),
                request.turn.as_deref(),
                None,
            );
            let judged = book.judge(
                policy,
                scopes,
                Instant::now(),
                |given| {
                    if given.is_some() {
                        request.facts.spent = given.map(|g| g.into_iter().collect());
                    }
                    policy.decide(black_box(&*request))
                },
                |r| Some(r),
            );
            Some(judged)
        };
        black_box(response);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(keeper), Some(mode), Some(iterations)) = (
        args.get(1),
        args.get(2),
        args.get(3).and_then(|n| n.parse().ok()),
    ) else {
        eprintln!("usage: budget_window_instructions book|embedded|engine off|on ITERATIONS");
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
    let body = json!({"session": "s1", "turn": "t1", "facts": {"stage": "s"}, "calls": calls});
    let mut request = match Request::from_value(body) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    run_measured(&policy, &mut request, keeper, iterations);
    println!("{iterations}");
}
