//! The integration tests of `toolgate-tests`, one binary with a module per topic
//! (regex-automata's layout, issue 23): each `tests/*.rs` used to be a binary of its own that
//! linked the whole engine again, which cost CI minutes and gigabytes of `target/`. Cargo
//! builds only this file (`autotests = false` in `Cargo.toml`); `test_layout.rs` fails for a
//! `tests/*.rs` file not declared here, so none can be left out unrun. One topic:
//! `cargo test -p toolgate-tests --test it hosts::`.

mod ambiguous_requests;
mod approvals;
mod architecture_paths;
mod budgets;
mod closed_requests;
mod decisions;
mod diff;
mod differential;
mod explain;
mod fast_json;
mod fmt;
mod gate_soundness;
mod golden;
mod hosts;
mod invariants;
mod language;
mod module_cycles;
mod preconditions;
mod principal;
mod properties;
mod provenance;
mod read_json;
mod refusals;
mod requests;
mod robustness;
mod scenarios;
mod shadow_rules;
mod stdlib;
mod test_layout;
mod tool_shapes;
mod unguarded;
mod url_differential;
mod vault;
mod wire_schema;
