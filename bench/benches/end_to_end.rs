//! (2) End to end from the JSON text of each document. One iteration = all 8 documents.

use criterion::{BenchmarkId, Criterion};
use std::hint::black_box;
use toolgate_bench::bench_support::{or_exit, run};
use toolgate_bench::documents::{bench_documents, BATCH_SIZES};
use toolgate_bench::engines::{cedar::CedarGate, floor, rego, toolgate};

fn bench(c: &mut Criterion) {
    let policy = or_exit(toolgate::compile_workload());
    let cedar = or_exit(CedarGate::new());
    let mut vm = or_exit(rego::vm());
    let mut group = c.benchmark_group("e2e");
    for batch in BATCH_SIZES {
        let docs: Vec<String> = bench_documents(batch).into_iter().map(|d| d.json).collect();
        group.bench_with_input(
            BenchmarkId::new("serde_json_value", batch),
            &docs,
            |b, docs| {
                b.iter(|| {
                    for d in docs {
                        black_box(serde_json::from_str::<serde_json::Value>(black_box(d)).ok());
                    }
                })
            },
        );
        group.bench_with_input(BenchmarkId::new("toolgate", batch), &docs, |b, docs| {
            b.iter(|| {
                for d in docs {
                    black_box(policy.decide_json(black_box(d)).ok());
                }
            })
        });
        let mut out = Vec::with_capacity(batch);
        group.bench_with_input(BenchmarkId::new("floor", batch), &docs, |b, docs| {
            b.iter(|| {
                for d in docs {
                    if let Ok(v) = serde_json::from_str::<serde_json::Value>(black_box(d)) {
                        floor::decide_into(&floor::Facts::from_value(&v), &mut out);
                        black_box(&out);
                    }
                }
            })
        });
        group.bench_with_input(BenchmarkId::new("regorus_rvm", batch), &docs, |b, docs| {
            b.iter(|| {
                for d in docs {
                    if let Ok(input) = rego::input(black_box(d)) {
                        black_box(rego::run_vm(&mut vm, input).ok());
                    }
                }
            })
        });
        group.bench_with_input(BenchmarkId::new("cedar", batch), &docs, |b, docs| {
            b.iter(|| {
                for d in docs {
                    let Ok(v) = serde_json::from_str::<serde_json::Value>(black_box(d)) else {
                        continue;
                    };
                    if let Ok(requests) = cedar.build(&v) {
                        for r in &requests {
                            black_box(cedar.authorize(r).ok());
                        }
                    }
                }
            })
        });
    }
    group.finish();
}

fn main() {
    run(bench);
}
