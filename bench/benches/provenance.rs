//! What provenance costs (issue 25: indexing at most 1 µs per KB of output; a check at most
//! 1 µs per argument against 100 KB of indexed output; a policy without provenance tests
//! unchanged).
//!
//! One latched write judged into verdicts, with ~100 KB of inbox output in `facts.outputs`:
//! - `plain_latch_100kb`: a policy whose latch `blocks` the write: it never reads the outputs
//!   (the baseline: parsing aside, what the request costs without provenance);
//! - `tainted_1_arg_100kb` / `tainted_11_args_100kb`: `blocks tainted`, so the index is built
//!   and each argument checked. The first minus the baseline is the index; the second minus
//!   the first, over ten, is one argument's check.

use criterion::{Criterion, Throughput};
use serde_json::{json, Value};
use std::hint::black_box;
use toolgate_engine::{Policy, Request};

const TAINTED: &str = "module m\ningest read_inbox\nwrite send_email\nstage s { tools [read_inbox, send_email] }\nlatch l { set_by ingest blocks tainted write }\n";
const PLAIN: &str = "module m\ningest read_inbox\nwrite send_email\nstage s { tools [read_inbox, send_email] }\nlatch l { set_by ingest blocks write }\n";

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

fn request(args: usize) -> Request {
    let mut a = serde_json::Map::new();
    a.insert("to".into(), json!("friend@example.net"));
    for k in 1..args {
        a.insert(format!("cc{k}"), json!(format!("colleague{k}@example.net")));
    }
    Request::from_value(json!({"facts": {"stage": "s", "latched": true,
        "prompt": "Summarise my inbox and send the summary to friend@example.net",
        "outputs": [{"id": "c1", "tool": "read_inbox", "output": inbox(100)}]},
        "calls": [{"id": "c2", "tool": "send_email", "args": a}]}))
    .expect("a valid request")
}

fn bench(c: &mut Criterion) {
    let tainted = Policy::compile("m.gate", TAINTED).expect("compiles");
    let plain = Policy::compile("m.gate", PLAIN).expect("compiles");
    let one = request(1);
    let eleven = request(11);
    let bytes = one.to_value()["facts"]["outputs"].to_string().len();
    assert!(bytes >= 100 * 1024, "{bytes} bytes of output");
    assert!(tainted.decide(&one).decisions[0].allow);
    assert!(tainted.decide(&eleven).decisions[0].allow);
    assert!(!plain.decide(&one).decisions[0].allow);
    let mut group = c.benchmark_group("provenance");
    group.throughput(Throughput::Bytes(bytes as u64));
    let mut verdicts = Vec::with_capacity(1);
    group.bench_function("plain_latch_100kb", |b| {
        b.iter(|| black_box(plain.decide_into(black_box(&one), &mut verdicts)))
    });
    group.bench_function("tainted_1_arg_100kb", |b| {
        b.iter(|| black_box(tainted.decide_into(black_box(&one), &mut verdicts)))
    });
    group.bench_function("tainted_11_args_100kb", |b| {
        b.iter(|| black_box(tainted.decide_into(black_box(&eleven), &mut verdicts)))
    });
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
