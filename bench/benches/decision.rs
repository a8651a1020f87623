//! (1) Decision only, from input already parsed into each engine's own form.
//! One iteration judges all 8 documents of a batch size.

use criterion::{BenchmarkId, Criterion};
use std::hint::black_box;
use toolgate_bench::bench_support::{or_exit, run, Prepared};
use toolgate_bench::documents::BATCH_SIZES;
use toolgate_bench::engines::{cedar::CedarGate, floor, rego, toolgate};

fn bench(c: &mut Criterion) {
    let policy = or_exit(toolgate::compile_workload());
    let cedar = or_exit(CedarGate::new());
    let mut interpreter = or_exit(rego::interpreter());
    let mut vm = or_exit(rego::vm());
    let mut group = c.benchmark_group("decision");
    for batch in BATCH_SIZES {
        let p = or_exit(Prepared::new(batch, &cedar));
        group.bench_with_input(BenchmarkId::new("toolgate", batch), &p, |b, p| {
            b.iter(|| {
                for r in &p.requests {
                    black_box(policy.decide(black_box(r)));
                }
            })
        });
        // The allocation-free core: text-free verdicts into a reused buffer, like the floor.
        let mut verdicts = Vec::with_capacity(batch);
        group.bench_with_input(BenchmarkId::new("toolgate_into", batch), &p, |b, p| {
            b.iter(|| {
                for r in &p.requests {
                    black_box(policy.decide_into(black_box(r), &mut verdicts));
                    black_box(&verdicts);
                }
            })
        });
        let mut out = Vec::with_capacity(batch);
        group.bench_with_input(BenchmarkId::new("floor", batch), &p, |b, p| {
            b.iter(|| {
                for f in &p.facts {
                    floor::decide_into(black_box(f), &mut out);
                    black_box(&out);
                }
            })
        });
        group.bench_with_input(BenchmarkId::new("regorus_rvm", batch), &p, |b, p| {
            b.iter(|| {
                for input in &p.rego_inputs {
                    vm.set_input(input.clone());
                    black_box(vm.execute().ok());
                }
            })
        });
        group.bench_with_input(
            BenchmarkId::new("regorus_interpreter", batch),
            &p,
            |b, p| {
                b.iter(|| {
                    for input in &p.rego_inputs {
                        black_box(rego::run_interpreter(&mut interpreter, input.clone()).ok());
                    }
                })
            },
        );
        group.bench_with_input(BenchmarkId::new("cedar_bare", batch), &p, |b, p| {
            b.iter(|| {
                for requests in &p.cedar_requests {
                    for r in requests {
                        black_box(cedar.authorize(black_box(r)).ok());
                    }
                }
            })
        });
        group.bench_with_input(BenchmarkId::new("cedar_build", batch), &p, |b, p| {
            b.iter(|| {
                for v in &p.values {
                    if let Ok(requests) = cedar.build(black_box(v)) {
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
