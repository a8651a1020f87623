//! A large generated policy: the workload plus filler up to 1000 tools and 100 stages, with a
//! rule on every filler tool. The workload's documents get the same answers from it, so the
//! batch-4 cost on both policies measures what policy size alone costs per decision.

use std::fmt::Write;

/// Tools in the scaling policy.
pub const TOOLS: usize = 1000;
/// Stages in the scaling policy.
pub const STAGES: usize = 100;

/// The source of the scaling policy.
pub fn source() -> String {
    let base =
        crate::engines::toolgate::WORKLOAD_GATE.replacen("module workload", "module scaling", 1);
    let mut s = base;
    let filler_tools = TOOLS - crate::workload::all_tools().count();
    let filler_stages = STAGES - crate::workload::STAGES.len();
    let name = |i: usize| format!("tool_{i:04}");
    let _ = writeln!(
        s,
        "\n// Generated filler: {filler_tools} tools, {filler_stages} stages."
    );
    for (class, range) in [
        ("write", 0..filler_tools / 3),
        ("ingest", filler_tools / 3..filler_tools / 2),
        ("read", filler_tools / 2..filler_tools),
    ] {
        let names: Vec<String> = range.map(name).collect();
        let _ = writeln!(s, "{class} {}", names.join(", "));
    }
    for st in 0..filler_stages {
        let tools: Vec<String> = (0..20)
            .map(|k| name((st * 37 + k * 11) % filler_tools))
            .collect();
        let _ = writeln!(s, "stage stage_{st:03} {{ tools [{}] }}", tools.join(", "));
    }
    for i in 0..filler_tools {
        let _ = writeln!(
            s,
            "rule limit_{i:04} for {} {{ require args.limit is number and args.limit <= {} }}",
            name(i),
            i + 1
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_with_the_promised_size() {
        let policy = toolgate_engine::Policy::compile("scaling.gate", &source())
            .map_err(|e| e.render())
            .unwrap();
        assert_eq!(policy.tools().count(), TOOLS);
        assert_eq!(policy.stages().count(), STAGES);
        assert_eq!(policy.rules().count(), TOOLS - 20 + 5);
    }
}
