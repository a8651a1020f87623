//! What the tests of the one-shot commands share: running the real `toolgate` binary and
//! reading what it printed.
#![allow(dead_code, clippy::unwrap_used)]

use std::process::{Command, Output};

/// Runs `toolgate ARGS...` to completion.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .output()
        .unwrap()
}

/// Bytes as text, lossily.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// What the command printed on standard output.
pub fn stdout(o: &Output) -> String {
    text(&o.stdout)
}

/// What the command printed on standard error.
pub fn stderr(o: &Output) -> String {
    text(&o.stderr)
}
