//! What a `per batch` budget costs (issue 26: at most 30 ns a call): a batch of four refunds
//! judged into verdicts by the same policy without a budget and with `sum args.amount <= N
//! per batch`. The difference, divided by four, is the budget's cost per call.

use criterion::Criterion;
use serde_json::json;
use std::hint::black_box;
use toolgate_engine::{Policy, Request};

const POLICY: &str = "module m\nwrite refund\nstage s { tools [refund] }\nrule small for refund { require args.amount is number and args.amount <= 99 }\n";
const BUDGET: &str = "budget batch_refunds for refund { sum args.amount <= 1000 per batch }\n";

fn request() -> Request {
    let calls: Vec<_> = (0..4)
        .map(|i| json!({"id": format!("c{i}"), "tool": "refund", "args": {"amount": 50 + i, "order": "A-17"}}))
        .collect();
    Request::from_value(json!({"facts": {"stage": "s"}, "calls": calls})).expect("a valid request")
}

fn bench(c: &mut Criterion) {
    let plain = Policy::compile("m.gate", POLICY).expect("compiles");
    let budgeted = Policy::compile("m.gate", &format!("{POLICY}{BUDGET}")).expect("compiles");
    let req = request();
    assert!(plain.decide(&req).decisions.iter().all(|d| d.allow));
    assert!(budgeted.decide(&req).decisions.iter().all(|d| d.allow));
    let mut group = c.benchmark_group("budget");
    let mut verdicts = Vec::with_capacity(4);
    group.bench_function("decide_into_4_calls_no_budget", |b| {
        b.iter(|| black_box(plain.decide_into(black_box(&req), &mut verdicts)))
    });
    group.bench_function("decide_into_4_calls_per_batch_budget", |b| {
        b.iter(|| black_box(budgeted.decide_into(black_box(&req), &mut verdicts)))
    });
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
