//! What a windowed budget kept in memory costs (issue 26: at most 1 µs a batch): a batch of
//! four refunds judged by the same policy without a budget and with
//! `sum args.amount <= N within 1h per session`, whose count a `toolgate_turns::Book` keeps
//! (the server's book with turn state in memory), and the same through the in-process turn
//! state (`EmbeddedTurns::judge`, the Python and Node `TurnState`), whose session keeps it.
//! The difference is the budget's cost per batch: giving the count (`facts.spent`), judging
//! it, and adding what the batch consumed to a sliding window.

// A bench's setup fails loudly: a policy that does not compile is a broken bench.
#![allow(clippy::expect_used)]

use criterion::Criterion;
use serde_json::json;
use std::hint::black_box;
use std::time::{Duration, Instant};
use toolgate_engine::{Policy, Request};
use toolgate_turns::budgets::Scopes;
use toolgate_turns::{Book, EmbeddedTurns};

const POLICY: &str = "module m\nwrite refund\nstage s { tools [refund] }\nrule small for refund { require args.amount is number and args.amount <= 99 }\n";
// A limit no run reaches: every batch is allowed and consumes, so the window keeps growing
// (to its cap of 4 096 entries, past which the oldest are merged), as under real traffic.
const BUDGET: &str =
    "budget hourly for refund { sum args.amount <= 1000000000000 within 1h per session }\n";

fn request() -> Request {
    let calls: Vec<_> = (0..4)
        .map(|i| json!({"id": format!("c{i}"), "tool": "refund", "args": {"amount": 50 + i, "order": "A-17"}}))
        .collect();
    Request::from_value(
        json!({"session": "s1", "turn": "t1", "facts": {"stage": "s"}, "calls": calls}),
    )
    .expect("a valid request")
}

fn bench(c: &mut Criterion) {
    let plain = Policy::compile("m.gate", POLICY).expect("compiles");
    let budgeted = Policy::compile("m.gate", &format!("{POLICY}{BUDGET}")).expect("compiles");
    let mut req = request();
    assert!(plain.decide(&req).decisions.iter().all(|d| d.allow));
    let book = Book::new(Duration::from_secs(3600));
    let mut group = c.benchmark_group("budget_window");
    group.bench_function("decide_4_calls_no_budget", |b| {
        b.iter(|| black_box(plain.decide(black_box(&req))))
    });
    // The engine's part alone: the same batch with its count given as a fact.
    let mut given = req.clone();
    given.facts.spent = Some([("hourly".to_string(), 1000.0)].into_iter().collect());
    group.bench_function("decide_4_calls_within_1h_per_session_count_given", |b| {
        b.iter(|| black_box(budgeted.decide(black_box(&given))))
    });
    group.bench_function("book_judge_4_calls_within_1h_per_session", |b| {
        b.iter(|| {
            let scopes = Scopes::of(&budgeted, req.session.as_deref(), req.turn.as_deref(), None);
            let response = book.judge(
                &budgeted,
                scopes,
                Instant::now(),
                |given| {
                    req.facts.spent = given.map(|g| g.into_iter().collect());
                    budgeted.decide(black_box(&req))
                },
                |r| Some(r),
            );
            debug_assert!(response.decisions.iter().all(|d| d.allow));
            black_box(response)
        })
    });
    req.facts.spent = None;
    let mut plain_turns = EmbeddedTurns::default();
    let mut budget_turns = EmbeddedTurns::default();
    group.bench_function("embedded_judge_4_calls_no_budget", |b| {
        b.iter(|| {
            let r = plain_turns.judge(&plain, req.clone(), Some("t1"), None, Instant::now(), true);
            black_box(r.expect("judged"))
        })
    });
    group.bench_function("embedded_judge_4_calls_within_1h_per_session", |b| {
        b.iter(|| {
            let r = budget_turns.judge(
                &budgeted,
                req.clone(),
                Some("t1"),
                None,
                Instant::now(),
                true,
            );
            black_box(r.expect("judged"))
        })
    });
    group.finish();
    let last = budget_turns
        .judge(
            &budgeted,
            req.clone(),
            Some("t1"),
            None,
            Instant::now(),
            true,
        )
        .expect("judged");
    assert!(last.decisions.iter().all(|d| d.allow), "{last:?}");
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
