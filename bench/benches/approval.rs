//! What an approval digest costs (issue 24: under 1 µs for a 1 KB argument object): one call
//! whose `ask when` holds, judged into verdicts with no approval (the ask check alone) and
//! with its approval in `facts.approvals` (the digest computed and compared as well). The
//! difference between the two is the digest.

use criterion::Criterion;
use serde_json::{json, Value};
use std::hint::black_box;
use toolgate_engine::{Policy, Request};

const POLICY: &str = "module m\nwrite pay\nstage s { tools [pay] }\nrule big for pay { require args.n is number  ask when args.n >= 0 }\n";

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

fn request(approvals: Option<&str>) -> Request {
    let mut facts = json!({"stage": "s"});
    if let Some(a) = approvals {
        facts["approvals"] = json!([a]);
    }
    Request::from_value(json!({"session": "s1", "turn": "t1", "facts": facts,
        "calls": [{"id": "c", "tool": "pay", "args": args()}]}))
    .expect("a valid request")
}

fn bench(c: &mut Criterion) {
    let policy = Policy::compile("m.gate", POLICY).expect("compiles");
    let asked = request(None);
    assert!(serde_json::to_string(&asked.calls[0].args).unwrap().len() >= 1000);
    let digest = policy.decide(&asked).decisions[0]
        .approval
        .clone()
        .expect("it asks");
    let approved = request(Some(&digest));
    assert!(policy.decide(&approved).decisions[0].allow);
    let mut group = c.benchmark_group("approval");
    let mut verdicts = Vec::with_capacity(1);
    group.bench_function("decide_into_ask_1kb", |b| {
        b.iter(|| black_box(policy.decide_into(black_box(&asked), &mut verdicts)))
    });
    group.bench_function("decide_into_approved_1kb", |b| {
        b.iter(|| black_box(policy.decide_into(black_box(&approved), &mut verdicts)))
    });
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
