//! `toolgate diff OLD NEW`: what NEW allows that OLD denied, and whether that is proved.
//!
//! OLD and NEW are two policy files, or two directories whose policies are matched by module
//! name. Prints each widening with a request NEW allows and OLD denies, each point left
//! undecided (NEW's rules neither proved to allow nothing more nor shown to, with the rule
//! and the reason), and each narrowing; `--json` prints the same as one JSON object. Exit 0
//! only when NEW is proved to allow nothing OLD denies; 1 on a widening or an undecided
//! point; 2 when either side does not load. The analysis is `toolgate_prove::diff`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use toolgate_engine::PolicySet;
use toolgate_prove::diff::DEFAULT_DIFF_CASES;
use toolgate_prove::invariants::DEFAULT_SEED;
use toolgate_prove::{Config, SetDiff};

/// Arguments of `toolgate diff`.
#[derive(clap::Args)]
pub struct Args {
    /// The old policy: a `.gate` file or a directory of them.
    old: PathBuf,
    /// The new policy: a `.gate` file or a directory of them.
    new: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// Generated cases per group of call points whose rules differ.
    #[arg(long, default_value_t = DEFAULT_DIFF_CASES)]
    cases: u32,
    /// The search seed; the same seed gives the same cases.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
}

/// Loads a policy file or directory into a set.
pub fn load_set(path: &Path) -> Result<PolicySet, String> {
    if path.is_dir() {
        toolgate_loader::load_dir(path, 0, false).map_err(|e| e.to_string())
    } else {
        let policy = toolgate_loader::load_file(path).map_err(|e| e.to_string())?;
        PolicySet::new(vec![policy], 0).map_err(|e| e.to_string())
    }
}

/// Diffs two files or directories with the given search budget.
pub fn diff_paths(old: &Path, new: &Path, config: &Config) -> Result<SetDiff, String> {
    let old = load_set(old).map_err(|e| format!("OLD `{}`: {e}", old.display()))?;
    let new = load_set(new).map_err(|e| format!("NEW `{}`: {e}", new.display()))?;
    Ok(toolgate_prove::diff_sets(&old, &new, config))
}

/// Runs the diff; see the module docs for the exit status.
pub fn run(args: &Args) -> ExitCode {
    let config = Config {
        cases: args.cases,
        seed: args.seed,
    };
    let diff = match diff_paths(&args.old, &args.new, &config) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if args.json {
        println!("{}", diff.to_json());
    } else {
        print!("{}", diff.render());
        println!(
            "{}",
            if diff.found_widening() {
                "NEW allows calls that OLD denied"
            } else if diff.widens() {
                "not proved that NEW allows nothing OLD denied: held"
            } else {
                "NEW allows nothing that OLD denied"
            }
        );
    }
    if diff.widens() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
