//! What the bundle and decision-log tests share: the loopback Python services
//! (`services.py`), `toolgate serve` started without a policy directory, and the CLI.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Python's `http.server` with the handlers of `services.py`; killed on drop.
pub struct Services {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// The folder it serves bundles from.
    pub root: PathBuf,
}

impl Drop for Services {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Services {
    /// Starts the services on `port` (0: any free port), serving bundles from `root`.
    pub fn start(root: &Path, port: u16) -> Services {
        Services::start_tls(root, port, None)
    }

    /// [`Services::start`], speaking HTTPS with `(cert, key)` when given.
    pub fn start_tls(root: &Path, port: u16, tls: Option<(&Path, &Path)>) -> Services {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bundle_support/services.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .arg(root)
            .args(tls.into_iter().flat_map(|(c, k)| [c, k]))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 is needed for the loopback bundle server");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let port = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("services.py did not start: {line:?}"));
        Services {
            addr: format!("127.0.0.1:{port}"),
            child,
            root: root.to_path_buf(),
        }
    }

    /// The URL of `path` on these services.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{path}", self.addr)
    }
}

/// A loopback port whose server is down: it is held (so no other test, all running in one
/// process, can be given it) and every connection to it is closed at once, as a receiver that
/// fails; [`Down::up`] starts the services there. A port merely found free and released could
/// be handed to another test's server in the meantime, which would answer for the one that
/// is meant to be down.
pub struct Down {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    closer: Option<std::thread::JoinHandle<()>>,
}

impl Down {
    /// Holds a fresh port.
    pub fn new() -> Down {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        let closer = std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => drop(conn),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Down {
            port,
            stop,
            closer: Some(closer),
        }
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Releases the port and starts the services on it, serving `root`.
    pub fn up(mut self, root: &Path) -> Services {
        self.release();
        Services::start(root, self.port)
    }

    fn release(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(closer) = self.closer.take() {
            let _ = closer.join();
        }
    }
}

impl Drop for Down {
    fn drop(&mut self) {
        self.release();
    }
}

/// A running `toolgate serve` with the given flags; killed on drop.
pub struct Toolgate {
    pub child: Child,
    pub addr: String,
    /// Every line the server wrote to standard error so far.
    pub stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for Toolgate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `toolgate serve ARGS --addr 127.0.0.1:0` and waits until it listens.
pub fn serve(args: &[&str]) -> Toolgate {
    serve_with_env(args, &[])
}

/// [`serve`] with extra environment variables.
pub fn serve_with_env(args: &[&str], env: &[(&str, &str)]) -> Toolgate {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("serve")
        .args(args)
        .envs(env.iter().copied())
        .args(["--addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let addr = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("server exited before listening: {:?}", seen.lock().unwrap()))
            .unwrap();
        if let Some(rest) = line.strip_prefix("toolgate: listening on http://") {
            break rest.trim().to_string();
        }
        seen.lock().unwrap().push(line);
    };
    let keep = seen.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            keep.lock().unwrap().push(line);
        }
    });
    Toolgate {
        child,
        addr,
        stderr: seen,
    }
}

impl Toolgate {
    /// Sends SIGTERM and waits for the exit; panics unless the server exits cleanly.
    pub fn terminate(&mut self) {
        let term = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(term.success());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status:?}");
    }
}

/// A policy directory holding `gate.gate` with `text`, and an empty folder for the loopback
/// services, for one test.
pub fn policy_and_www(tag: &str, text: &str) -> (PathBuf, PathBuf) {
    let dir = scratch(tag);
    std::fs::write(dir.join("gate.gate"), text).unwrap();
    (dir, scratch(&format!("{tag}-www")))
}

/// A fresh directory. The test files are modules of one binary, so they share a process id:
/// the sequence number keeps two tests that pass the same tag apart.
fn scratch(tag: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("toolgate-svc-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the `toolgate` binary to completion.
pub fn toolgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .output()
        .unwrap()
}

/// Standard error (or output) as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Waits until `ready` holds, polling; panics with `what` after a generous bound, so a
/// slow machine passes and a broken feature still fails.
pub fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
