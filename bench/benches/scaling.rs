//! (4) Scaling: batch-4 decisions on the workload policy and on a generated policy with 1000
//! tools, 100 stages and a rule on every filler tool, which answers the documents identically.

use criterion::Criterion;
use std::hint::black_box;
use toolgate_bench::bench_support::{or_exit, run};
use toolgate_bench::documents::bench_documents;
use toolgate_bench::engines::toolgate;
use toolgate_engine::Request;

fn bench(c: &mut Criterion) {
    let workload = or_exit(toolgate::compile_workload());
    let big = or_exit(toolgate::compile(
        "scaling.gate",
        &toolgate_bench::scaling::source(),
    ));
    let requests: Vec<Request> = bench_documents(4)
        .iter()
        .filter_map(|d| Request::from_json(&d.json).ok())
        .collect();
    for r in &requests {
        let a = or_exit(toolgate::verdicts(&workload.decide(r)));
        let b = or_exit(toolgate::verdicts(&big.decide(r)));
        if a != b {
            eprintln!("the scaling policy answers differently: {a:?} vs {b:?}");
            std::process::exit(1);
        }
    }
    let mut group = c.benchmark_group("scaling");
    for (name, policy) in [("workload", &workload), ("tools1000", &big)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                for r in &requests {
                    black_box(policy.decide(black_box(r)));
                }
            })
        });
    }
    group.finish();
}

fn main() {
    run(bench);
}
