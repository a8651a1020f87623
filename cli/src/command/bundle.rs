//! `toolgate bundle`: make a signing key, build a signed policy bundle, inspect one.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;
use toolgate_bundle::{self as bundle, keys, Limits};

/// Arguments of `toolgate bundle`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Write a new Ed25519 key pair: DIR/bundle.key (keep it secret) and DIR/bundle.pub.
    Keygen {
        /// Folder for the two key files (created if missing; existing keys are never
        /// overwritten).
        #[arg(long)]
        out: PathBuf,
    },
    /// Pack a policy directory (policies, imported files, tests, invariants) into one
    /// signed tar.gz bundle.
    Build {
        /// The policy directory.
        dir: PathBuf,
        /// The private key (`bundle.key`).
        #[arg(long)]
        key: PathBuf,
        /// The bundle file to write.
        #[arg(short, long)]
        output: PathBuf,
        /// The fleet or policy set the bundle is for; `serve --bundle` refuses a bundle whose
        /// scope is not its own `--scope`. Letters, digits and `- _ . : /`.
        #[arg(long, value_parser = toolgate_bundle::manifest::parse_scope)]
        scope: String,
        /// The bundle's serial: a number at least 1 that grows with each bundle of the scope
        /// (a CI run number, or `$(date +%s)`). A replica refuses a bundle whose serial is not
        /// above the one it serves.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        serial: u64,
        /// The bundle's free-form revision (for example a commit id); a hash of its files by
        /// default.
        #[arg(long)]
        revision: Option<String>,
    },
    /// Print a bundle's manifest and file list; with --verify-key, verify its signature and
    /// compile its policies (exit 1 when either fails).
    Inspect {
        /// The bundle file.
        file: PathBuf,
        /// The public key (`bundle.pub`) to verify with.
        #[arg(long)]
        verify_key: Option<PathBuf>,
    },
}

/// Runs the subcommand: exit 0 on success, 1 when a bundle is refused, 2 on usage or I/O
/// errors.
pub fn run(args: &Args) -> ExitCode {
    match &args.command {
        Sub::Keygen { out } => match keys::generate(out) {
            Ok((private, public)) => {
                println!(
                    "wrote {} (secret: keep it out of the repository) and {}",
                    private.display(),
                    public.display()
                );
                ExitCode::SUCCESS
            }
            Err(e) => fail(2, &e),
        },
        Sub::Build {
            dir,
            key: key_path,
            output,
            scope,
            serial,
            revision,
        } => {
            let key = match keys::read_private(key_path) {
                Ok(k) => k,
                Err(e) => return fail(2, &e),
            };
            if let Some(warning) = keys::loose_permissions(key_path) {
                eprintln!("warning: {warning}");
            }
            let stamp = bundle::Stamp {
                scope: scope.clone(),
                serial: *serial,
                revision: revision.clone(),
            };
            let bytes = match bundle::build(dir, &key, stamp, SystemTime::now()) {
                Ok(b) => b,
                Err(e) => return fail(1, &e),
            };
            if let Err(e) = std::fs::write(output, &bytes) {
                eprintln!("error: cannot write `{}`: {e}", output.display());
                return ExitCode::from(2);
            }
            println!("wrote {} ({} bytes)", output.display(), bytes.len());
            ExitCode::SUCCESS
        }
        Sub::Inspect { file, verify_key } => inspect(file, verify_key.as_deref()),
    }
}

fn inspect(file: &std::path::Path, verify_key: Option<&std::path::Path>) -> ExitCode {
    let key = match verify_key.map(keys::read_public).transpose() {
        Ok(k) => k,
        Err(e) => return fail(2, &e),
    };
    let limits = Limits::default();
    let bytes = match bundle::read_bounded(file, limits.compressed) {
        Ok(b) => b,
        Err(e) => return fail(2, &e),
    };
    let verified = match bundle::open(&bytes, key.as_ref(), &limits) {
        Ok(v) => v,
        Err(e) => return fail(1, &format!("bundle refused: {e}")),
    };
    let compiled = verified.compile(0, false);
    let report = serde_json::json!({
        "manifest": verified.manifest,
        "files": verified.files.keys().collect::<Vec<_>>(),
        "signature": match &verified.key_id {
            Some(id) => format!("verified (key id {id})"),
            None => "not checked: pass --verify-key".to_string(),
        },
        "compiles": compiled.is_ok(),
    });
    // A closed pipe (`| head`) is not an error worth a panic.
    let _ = writeln!(
        std::io::stdout(),
        "{}",
        serde_json::to_string_pretty(&report).unwrap_or_default()
    );
    match compiled {
        Err(e) => fail(1, &e),
        Ok(_) => ExitCode::SUCCESS,
    }
}

/// Prints `e` (its control characters escaped: it may quote a bundle's names) and exits.
fn fail(code: u8, e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!(
        "error: {}",
        toolgate_loader::log_text::escape_keeping_lines(&e.to_string())
    );
    ExitCode::from(code)
}
