//! `toolgate test PATH...`: run a policy's example tests and check its invariants.
//!
//! For each policy `NAME.gate` found (a file, or every `.gate` under a directory), runs
//! `NAME.tests.json` and checks the policy's inline invariants and `NAME.invariants.gate`
//! when they exist. Prints a line per test and invariant, details of each failure, and
//! `N passed, M failed`. Exit 0 when nothing failed, 1 otherwise, 2 when no policy was found.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use toolgate_prove::invariants::{DEFAULT_CASES, DEFAULT_SEED};
use toolgate_prove::{Config, Coverage, InvariantResult, TestFile};

/// Arguments of `toolgate test`.
#[derive(clap::Args)]
pub struct Args {
    /// Policy files (`NAME.gate`, `NAME.tests.json`, `NAME.invariants.gate`) or directories.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Generated cases per invariant where enumeration leaves points open.
    #[arg(long, default_value_t = DEFAULT_CASES)]
    cases: u32,
    /// The search seed; the same seed gives the same cases.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Also print which rules, stages and tools the example tests exercised, and which not.
    #[arg(long)]
    coverage: bool,
    /// Treat every warning of a policy (and of its invariants) as an error: the policy fails.
    #[arg(long)]
    deny_warnings: bool,
    /// A baseline (file or directory): each call the policies allow and it denied fails,
    /// unless acknowledged in `--accept-widenings` (docs/policy-changes.md).
    #[arg(long)]
    against: Option<PathBuf>,
    /// Widenings accepted by review: one line each, as `--against` prints them.
    #[arg(long, requires = "against")]
    accept_widenings: Option<PathBuf>,
}

#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
}

/// Runs the tests; see the module docs for the exit status.
pub fn run(args: &Args) -> ExitCode {
    if let Some(missing) = args.paths.iter().find(|p| !p.exists()) {
        eprintln!("error: `{}` does not exist", missing.display());
        return ExitCode::from(2);
    }
    let policies = discover(&args.paths);
    if policies.is_empty() {
        eprintln!("error: no policy (`.gate` file) found in the paths given");
        return ExitCode::from(2);
    }
    let config = Config {
        cases: args.cases,
        seed: args.seed,
    };
    let mut tally = Tally::default();
    for path in &policies {
        test_policy(path, &config, args, &mut tally);
    }
    if let Some(old) = &args.against {
        let (passed, failed) =
            super::against::check(old, &policies, args.accept_widenings.as_deref(), args.seed);
        tally.passed += passed;
        tally.failed += failed;
    }
    println!();
    println!("{} passed, {} failed", tally.passed, tally.failed);
    if tally.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The policy files named by `paths`, sorted and without repeats.
fn discover(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out);
        } else if let Some(policy) = policy_for(p) {
            out.push(policy);
        }
    }
    out.sort();
    out.dedup();
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if is_policy(&p) {
            out.push(p);
        }
    }
}

fn file_name(p: &Path) -> &str {
    p.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

fn is_policy(p: &Path) -> bool {
    let n = file_name(p);
    n.ends_with(".gate") && !n.ends_with(".invariants.gate")
}

/// `NAME.gate` for `NAME.gate`, `NAME.tests.json` or `NAME.invariants.gate`.
fn policy_for(p: &Path) -> Option<PathBuf> {
    let n = file_name(p);
    let stem = n
        .strip_suffix(".invariants.gate")
        .or_else(|| n.strip_suffix(".tests.json"))
        .or_else(|| n.strip_suffix(".gate"))?;
    Some(p.with_file_name(format!("{stem}.gate")))
}

fn sibling(policy: &Path, suffix: &str) -> PathBuf {
    let n = file_name(policy);
    let stem = n.strip_suffix(".gate").unwrap_or(n);
    policy.with_file_name(format!("{stem}{suffix}"))
}

fn fail(tally: &mut Tally, line: &str, details: &str) {
    println!("{line} ... FAILED");
    for l in details.trim_end().lines() {
        println!("    {l}");
    }
    tally.failed += 1;
}

fn test_policy(path: &Path, config: &Config, args: &Args, tally: &mut Tally) {
    let coverage = args.coverage;
    let shown = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            return fail(
                tally,
                &format!("policy {shown}"),
                &format!("cannot read: {e}"),
            )
        }
    };
    let compiled = super::compile_file(&shown, &text);
    let compiled = if args.deny_warnings {
        compiled.and_then(toolgate_engine::Policy::deny_warnings)
    } else {
        compiled
    };
    let policy = match compiled {
        Ok(p) => p,
        Err(e) => {
            return fail(
                tally,
                &format!("policy {shown}"),
                &format!("does not compile:\n{}", e.render()),
            )
        }
    };
    let module = policy.module().to_string();
    let tests_path = sibling(path, ".tests.json");
    let inv_path = sibling(path, ".invariants.gate");
    let has_tests = tests_path.is_file();
    let has_inv_file = inv_path.is_file();
    if !has_tests && !has_inv_file && policy.invariants().is_empty() {
        println!("policy {shown}: no tests or invariants");
        println!("{}", no_tests_notice(&tests_path));
        return;
    }
    println!("policy {shown}");
    if !has_tests {
        println!("{}", no_tests_notice(&tests_path));
    }

    if has_tests {
        let name = tests_path.display().to_string();
        let file = std::fs::read_to_string(&tests_path)
            .map_err(|e| format!("cannot read: {e}"))
            .and_then(|t| TestFile::parse(&t).map_err(|e| e.to_string()));
        match file {
            Err(e) => fail(tally, &format!("tests {name}"), &e),
            Ok(file) => {
                let results = file.run(&policy);
                for r in &results {
                    let line = format!("test {module}::{}", r.name);
                    if r.passed() {
                        println!("{line} ... ok");
                        tally.passed += 1;
                    } else {
                        fail(tally, &line, &r.failures.join("\n"));
                    }
                }
                if coverage {
                    print_coverage(&Coverage::of(&policy, &results));
                }
            }
        }
    } else if coverage {
        println!(
            "coverage: no example tests ({} not found)",
            tests_path.display()
        );
    }

    let inv_text = if has_inv_file {
        match std::fs::read_to_string(&inv_path) {
            Ok(t) => Some(t),
            Err(e) => {
                fail(
                    tally,
                    &format!("invariants {}", inv_path.display()),
                    &format!("cannot read: {e}"),
                );
                None
            }
        }
    } else {
        None
    };
    let inv_name = inv_path.display().to_string();
    let file = inv_text.as_deref().map(|t| (inv_name.as_str(), t));
    if let (true, Some((name, text))) = (args.deny_warnings, file) {
        if let Ok(inv) = toolgate_engine::Invariants::compile(&policy, name, text) {
            if !inv.warnings().is_empty() {
                let source = toolgate_lang::SourceFile::new(name, text);
                let rendered = toolgate_lang::render_all(inv.warnings(), &source);
                return fail(
                    tally,
                    &format!("invariants {inv_name}"),
                    &format!("have warnings, denied by --deny-warnings:\n{rendered}"),
                );
            }
        }
    }
    match toolgate_prove::check_policy(&policy, file, config) {
        Err(e) => fail(
            tally,
            &format!("invariants {inv_name}"),
            &format!("do not compile:\n{}", e.render()),
        ),
        Ok(results) => {
            for r in &results {
                report_invariant(&module, path, r, tally);
            }
        }
    }
}

/// A policy with no example tests passes vacuously; say so, and how to add them.
fn no_tests_notice(tests_path: &Path) -> String {
    format!(
        "notice: no example tests: write `{}` (cases of a request and the decisions it must get; docs/testing.md)",
        tests_path.display()
    )
}

fn report_invariant(module: &str, policy_path: &Path, r: &InvariantResult, tally: &mut Tally) {
    let line = format!("invariant {module}::{}", r.name);
    let search = if r.open == 0 {
        "no point left to search".to_string()
    } else if r.cases == 0 {
        format!("{} open points, not searched", r.open)
    } else {
        format!(
            "{} open points searched with {} cases, seed {}",
            r.open, r.cases, r.seed
        )
    };
    let summary = format!(
        "{} requests enumerated, proved at {} of {} call points; {search}",
        r.requests, r.proved, r.points
    );
    match &r.counterexample {
        None => {
            let verdict = if r.open == 0 { "proved" } else { "ok" };
            println!("{line} ... {verdict} ({summary})");
            tally.passed += 1;
        }
        Some(cx) => {
            let call = cx
                .request
                .calls
                .get(cx.call)
                .map(|c| format!("`{}` ({})", c.id, c.tool))
                .unwrap_or_default();
            let how = if cx.searched {
                format!(
                    "found by the search after {} cases (seed {}), shrunk",
                    r.cases, r.seed
                )
            } else {
                "found by enumeration".to_string()
            };
            let details = format!(
                "{}: invariant `{}` is violated: call {call} is allowed\n{summary}\n{how}\n\
                 decision: {}\n\
                 counterexample, ready for `toolgate eval --policy {} --input FILE`:\n{}",
                r.location,
                r.name,
                cx.decision_json(),
                policy_path.display(),
                cx.request_json()
            );
            fail(tally, &line, &details);
        }
    }
}

fn print_coverage(c: &Coverage) {
    let line = |what: &str, hit: usize, missed: &std::collections::BTreeSet<String>| {
        let total = hit + missed.len();
        if missed.is_empty() {
            println!("coverage: {what} {hit}/{total}");
        } else {
            let names: Vec<&str> = missed.iter().map(String::as_str).collect();
            println!(
                "coverage: {what} {hit}/{total}, never hit: {}",
                names.join(", ")
            );
        }
    };
    line("rules", c.rules_hit.len(), &c.rules_missed);
    line("stages", c.stages_hit.len(), &c.stages_missed);
    line("tools", c.tools_hit.len(), &c.tools_missed);
}
