//! `toolgate fmt [--check] PATH...`: rewrite policies in the one canonical layout. A directory
//! stands for every `.gate` file under it; `--check` prints what would change as a unified
//! diff.

use super::{display_name, read_input};
use std::io::Write as _;
use std::process::ExitCode;
use toolgate_lang::{format_source, render_all, SourceFile};

/// Arguments of `toolgate fmt`.
#[derive(clap::Args)]
pub struct Args {
    /// Change nothing; print a unified diff for each file whose layout differs and exit 1 if
    /// there are any.
    #[arg(long)]
    check: bool,
    /// Policy files (`.gate`) or directories of them to format in place; `-` reads standard
    /// input and writes the result to standard output.
    #[arg(required = true)]
    files: Vec<String>,
}

/// What happened to one file.
enum Outcome {
    /// Already in the canonical layout.
    Clean,
    /// Its layout differs (and, without `--check`, was rewritten).
    Changed,
    /// Unreadable, unwritable or not parseable; the reason is already on stderr.
    Failed,
}

/// Exit 0 when all went well (with `--check`: every file already formatted), 1 when
/// `--check` found a file to reformat, 2 when a file could not be read, parsed or written.
pub fn run(args: &Args) -> ExitCode {
    let mut changed = false;
    let mut failed = false;
    for path in &super::paths::gate_files(&args.files, true) {
        match format_one(path, args.check) {
            Outcome::Clean => {}
            Outcome::Changed => changed = true,
            Outcome::Failed => failed = true,
        }
    }
    if failed {
        ExitCode::from(2)
    } else if changed && args.check {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn format_one(path: &str, check: bool) -> Outcome {
    let name = display_name(path);
    let text = match read_input(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return Outcome::Failed;
        }
    };
    let formatted = match format_source(name, &text) {
        Ok(f) => f,
        Err(diagnostics) => {
            eprintln!("{}", render_all(&diagnostics, &SourceFile::new(name, text)));
            eprintln!("error: {name}: not formatted: it has syntax errors");
            return Outcome::Failed;
        }
    };
    let differs = formatted != text;
    if check {
        if differs {
            println!("{name}: not formatted");
            let diff = similar::TextDiff::from_lines(text.as_str(), formatted.as_str());
            print!(
                "{}",
                diff.unified_diff().context_radius(3).header(
                    &format!("{name} (as written)"),
                    &format!("{name} (formatted)")
                )
            );
            return Outcome::Changed;
        }
        return Outcome::Clean;
    }
    if path == "-" {
        let mut out = std::io::stdout().lock();
        if let Err(e) = out
            .write_all(formatted.as_bytes())
            .and_then(|()| out.flush())
        {
            eprintln!("error: cannot write standard output: {e}");
            return Outcome::Failed;
        }
    } else if differs {
        if let Err(e) = std::fs::write(path, &formatted) {
            eprintln!("error: cannot write `{path}`: {e}");
            return Outcome::Failed;
        }
    }
    if differs {
        Outcome::Changed
    } else {
        Outcome::Clean
    }
}
