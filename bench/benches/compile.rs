//! (3) Policy load: toolgate compiles of the workload and the three example policies, regorus
//! load + compile to RVM, cedar PolicySet parse (and with the entity store).

use cedar_policy::{Entities, PolicySet};
use criterion::{BenchmarkId, Criterion};
use std::hint::black_box;
use std::str::FromStr;
use toolgate_bench::bench_support::run;
use toolgate_bench::engines::{cedar, rego, toolgate};

/// The policies toolgate compiles, by benchmark name.
pub const GATES: [(&str, &str); 4] = [
    ("workload", toolgate::WORKLOAD_GATE),
    (
        "coach",
        include_str!("../../stdlib-rules/examples/coach.gate"),
    ),
    (
        "motor_claims",
        include_str!("../../stdlib-rules/examples/motor_claims.gate"),
    ),
    (
        "messenger_payments",
        include_str!("../../stdlib-rules/examples/messenger_payments.gate"),
    ),
];

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("compile");
    for (name, src) in GATES {
        group.bench_with_input(BenchmarkId::new("toolgate", name), src, |b, src| {
            b.iter(|| black_box(toolgate::compile("p.gate", black_box(src)).ok()))
        });
    }
    group.bench_function("regorus_load_compile", |b| {
        b.iter(|| black_box(rego::compile_program().ok()))
    });
    group.bench_function("cedar_parse", |b| {
        b.iter(|| black_box(PolicySet::from_str(black_box(cedar::WORKLOAD_CEDAR)).ok()))
    });
    group.bench_function("cedar_parse_with_entities", |b| {
        b.iter(|| {
            black_box(PolicySet::from_str(black_box(cedar::WORKLOAD_CEDAR)).ok());
            black_box(Entities::from_json_str(black_box(cedar::WORKLOAD_ENTITIES), None).ok());
        })
    });
    group.finish();
}

fn main() {
    run(bench);
}
