//! An agent executor loop with toolgate embedded, and a scripted stand-in for the model.
//!
//! The "model" emits the attacks of the three source documents in turn: a write listed
//! before a documentation search in one batch (document 001), a look-alike host, and a
//! retry. Each batch is judged before anything is dispatched; denials go back to the model
//! as tool results it can read, and the latch state is carried across the model turns of
//! one user turn and dropped when the next user message arrives.
//!
//! Run: `cargo run -p toolgate-engine --example executor_loop`
#![allow(clippy::expect_used)]

use serde_json::json;
use toolgate_engine::{Call, Facts, Latched, Policy, Request};

fn main() {
    let source = include_str!("../../stdlib-rules/examples/coach.gate");
    let policy = Policy::compile("coach.gate", source).expect("the example policy compiles");

    // One user turn, three model turns. Each inner vec is one batch the model asked for.
    let model_turns = vec![
        vec![
            Call::new("c1", "grade_attempt", json!({"attempt": "a-1", "score": 1})),
            Call::new("c2", "search_aws_docs", json!({"q": "lambda limits"})),
        ],
        vec![Call::new(
            "c3",
            "fetch_vendor_doc",
            json!({"url": "https://docs.aws.amazon.com.evil.tld/x"}),
        )],
        vec![Call::new(
            "c4",
            "update_memory",
            json!({"note": "likes lambda"}),
        )],
    ];

    let mut latched = Latched::Flag(false); // reset on every new user message
    for (turn, batch) in model_turns.into_iter().enumerate() {
        let request = Request::new(
            Facts {
                stage: Some("coach".into()),
                latched: latched.clone(),
                ..Facts::default()
            },
            batch,
        );
        let response = policy.decide(&request);
        latched = Latched::from(&response.latched);
        println!(
            "model turn {}: latched after batch = {}",
            turn + 1,
            response.latched.any()
        );
        for (call, decision) in request.calls.iter().zip(&response.decisions) {
            if decision.allow {
                println!("  dispatch {} {}", call.tool, call.args);
            } else {
                // The refusal is returned to the model as the tool's result.
                println!(
                    "  refuse   {} ({:?}, rule {}): {}",
                    call.tool,
                    decision.kind.map(|k| k.as_str()),
                    decision.rule.as_deref().unwrap_or("-"),
                    decision.reason.as_deref().unwrap_or("")
                );
            }
        }
    }
    assert!(
        latched == Latched::Flag(true),
        "the latch holds for the rest of the user turn"
    );
}
