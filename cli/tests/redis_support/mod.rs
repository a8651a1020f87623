//! A real `redis-server` for the shared-state tests, started on a free loopback port and
//! killed on drop. Missing `redis-server` fails the test under `CI=true` and skips it
//! otherwise (`.ci/run` installs Debian's `redis-server`).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `redis-server`.
pub struct Redis {
    child: Option<Child>,
    /// Its loopback port.
    pub port: u16,
    dir: PathBuf,
    persist: bool,
}

/// `redis-server` on the PATH, or `None` (a failure under CI).
pub fn redis_available() -> bool {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "redis-server is missing; .ci/run installs it (apt-get install redis-server)"
        );
        eprintln!("skipped: redis-server is missing (set CI=true to make this a failure)");
    }
    found
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Redis {
    /// Starts a store; `persist` writes every change to an append-only file first
    /// (`appendfsync always`), so a restart keeps everything written.
    pub fn start(tag: &str, persist: bool) -> Redis {
        let dir = std::env::temp_dir().join(format!("toolgate-redis-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut r = Redis {
            child: None,
            port: free_port(),
            dir,
            persist,
        };
        r.restart();
        r
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the store at once (SIGKILL: nothing is saved on the way out).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the store again on the same port and waits until it answers.
    pub fn restart(&mut self) {
        self.kill();
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--dir"])
            .arg(&self.dir)
            .args(["--maxmemory-policy", "noeviction"]);
        if self.persist {
            cmd.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            cmd.args(["--appendonly", "no"]);
        }
        self.child = Some(
            cmd.stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.command(&["PING"]).as_deref() != Some("+PONG") {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends one command; the first line of the reply, or `None` when the store cannot be
    /// reached.
    pub fn command(&self, args: &[&str]) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(req.as_bytes()).ok()?;
        let mut line = String::new();
        BufReader::new(&mut s).read_line(&mut line).ok()?;
        Some(line.trim_end().to_string())
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
