//! Which signals a running `toolgate` process handles, read from /proc.
#![allow(dead_code, clippy::unwrap_used)]

/// SIGHUP as a bit of a /proc signal mask (bit N-1 for signal N).
pub const SIGHUP: u64 = 1;
/// SIGINT as a bit of a /proc signal mask.
pub const SIGINT: u64 = 1 << 1;
/// SIGTERM as a bit of a /proc signal mask.
pub const SIGTERM: u64 = 1 << 14;
/// SIGHUP, SIGINT and SIGTERM.
pub const HUP_INT_TERM: u64 = SIGHUP | SIGINT | SIGTERM;

/// The signals whose handlers `pid` has installed (`SigCgt` in /proc/PID/status).
pub fn caught_signals(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .unwrap()
        .trim();
    u64::from_str_radix(mask, 16).unwrap()
}
