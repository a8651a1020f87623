//! `toolgate playground POLICY`: the decision server over one policy file, on loopback, with
//! its playground page's address printed (`docs/server.md`).

use super::serve;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `toolgate playground`.
#[derive(clap::Args)]
pub struct Args {
    /// The `.gate` policy file to open in the playground.
    policy: PathBuf,
    /// Loopback port to listen on (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
}

/// `serve`'s own arguments, so the playground's server has exactly `serve`'s defaults.
#[derive(Parser)]
struct ServeArgs {
    #[command(flatten)]
    args: serve::Args,
}

/// Serves the file until Ctrl-C; the server prints the page's address. A file that does not
/// compile is still opened (the page reads its text from `/v1/playground/file`): its
/// diagnostics are what the page is for.
pub fn run(args: &Args) -> ExitCode {
    if !args.policy.exists() {
        eprintln!("error: no such file: `{}`", args.policy.display());
        return ExitCode::from(2);
    }
    if !args.policy.is_file() {
        eprintln!(
            "error: `{}` is not a policy file (for a directory, run `toolgate serve DIR` and open /playground)",
            args.policy.display()
        );
        return ExitCode::from(2);
    }
    let addr = format!("127.0.0.1:{}", args.port);
    let Ok(parsed) = ServeArgs::try_parse_from([
        "serve".as_ref(),
        args.policy.as_os_str(),
        "--addr".as_ref(),
        addr.as_ref(),
        "--log".as_ref(),
        "off".as_ref(),
    ]) else {
        eprintln!("error: cannot configure the playground's server");
        return ExitCode::from(2);
    };
    let mut config = serve::config(&parsed.args);
    config.announce = Some("/playground?file".to_string());
    serve::serve(config)
}
