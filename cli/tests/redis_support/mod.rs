//! A real `redis-server` for the shared-state tests, started on a free loopback port and
//! killed on drop. Missing `redis-server` fails the test under `CI=true` and skips it
//! otherwise (`.ci/run` installs Debian's `redis-server`).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A running `redis-server`.
pub struct Redis {
    child: Option<Child>,
    /// Its loopback port.
    pub port: u16,
    dir: PathBuf,
    persist: bool,
    tls: Option<Tls>,
    /// Started with `--cluster-enabled yes` (a node of a [`RedisCluster`]): the cluster bus
    /// port, given with `--cluster-port`. Redis's default, the port + 10 000, fails for an
    /// ephemeral port above 55 535 and may be taken by another test's store.
    cluster: Option<u16>,
}

/// A TLS listener beside the plain one, with certificates made for it by `openssl`.
pub struct Tls {
    /// The TLS port.
    pub port: u16,
    /// Whether the store requires a client certificate.
    pub require_client_cert: bool,
}

/// Where `Redis::start_tls` wrote its certificates.
pub struct TlsFiles {
    /// The private CA that signed the server's and the client's certificates.
    pub ca: PathBuf,
    /// A client certificate signed by the CA, and its key.
    pub client_cert: PathBuf,
    /// The client certificate's key.
    pub client_key: PathBuf,
    /// A second CA, which signed nothing the store holds.
    pub other_ca: PathBuf,
    /// An X.509 v1 client certificate (no extensions), signed by the CA; its key is
    /// `v1-client.key` beside it.
    pub v1_client_cert: PathBuf,
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

/// A loopback port for a server a test starts later (a redis-server, a replica). It is
/// chosen below the kernel's ephemeral range (`ip_local_port_range`, 32768 up by default),
/// where no `bind(0)` of another test (every test of the crate runs in one process) is
/// handed it meanwhile; ports from `bind(0)` could be. Each call gives another port, and a
/// starter still tries again on another one if the port was taken after all.
pub fn free_port() -> u16 {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let seed = std::process::id() as usize * 7_919;
    for _ in 0..12_000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + ((seed + n * 13) % 12_000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
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
        Redis::spawn(tag, persist, false)
    }

    /// Starts a store in a fresh directory named after `tag`; `cluster` enables cluster mode.
    /// The test files are modules of one binary, so they share a process id: the sequence
    /// number keeps two stores started with the same tag apart.
    fn spawn(tag: &str, persist: bool, cluster: bool) -> Redis {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("toolgate-redis-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut r = Redis {
            child: None,
            port: free_port(),
            dir,
            persist,
            tls: None,
            cluster: cluster.then(free_port),
        };
        // A port found free may be taken by another test's server before redis binds it
        // (every test of the crate runs in one process): the store then exits at once, and
        // it is started again on fresh ports.
        let mut tries = 0;
        loop {
            if r.try_start() {
                return r;
            }
            tries += 1;
            assert!(
                tries < 5,
                "redis-server did not start on five pairs of free ports"
            );
            r.port = free_port();
            r.cluster = cluster.then(free_port);
        }
    }

    /// Starts a store that also listens with TLS (a certificate for 127.0.0.1 signed by a
    /// private CA); `require_client_cert` makes it refuse clients without one. The plain
    /// port stays open for the test's own `command`s.
    pub fn start_tls(tag: &str, require_client_cert: bool) -> (Redis, TlsFiles) {
        let mut r = Redis::start(tag, false);
        let files = make_certificates(&r.dir);
        r.tls = Some(Tls {
            port: free_port(),
            require_client_cert,
        });
        r.restart();
        (r, files)
    }

    /// `rediss://127.0.0.1:TLS_PORT`.
    pub fn tls_url(&self) -> String {
        let tls = self.tls.as_ref().expect("started with start_tls");
        format!("rediss://127.0.0.1:{}", tls.port)
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
        assert!(self.try_start(), "redis-server did not start");
    }

    /// Starts the store on its ports and waits until it answers; false when it exited before
    /// it did (a port was taken).
    fn try_start(&mut self) -> bool {
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
        if let Some(bus) = self.cluster {
            cmd.args(["--cluster-enabled", "yes", "--cluster-config-file"])
                .arg(self.dir.join("nodes.conf"))
                .args(["--cluster-port", &bus.to_string()])
                .args(["--cluster-node-timeout", "5000"]);
        }
        if let Some(tls) = &self.tls {
            cmd.args(["--tls-port", &tls.port.to_string()])
                .arg("--tls-cert-file")
                .arg(self.dir.join("server.pem"))
                .arg("--tls-key-file")
                .arg(self.dir.join("server.key"))
                .arg("--tls-ca-cert-file")
                .arg(self.dir.join("ca.pem"))
                .args([
                    "--tls-auth-clients",
                    if tls.require_client_cert { "yes" } else { "no" },
                ]);
        }
        self.child = Some(
            cmd.stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.command(&["PING"]).as_deref() != Some("+PONG") {
            let exited = self
                .child
                .as_mut()
                .is_some_and(|c| c.try_wait().ok().flatten().is_some());
            if exited {
                self.child = None;
                return false;
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        // The answer must be this store's, not another test's that holds the port.
        let pid = self.child.as_ref().map_or(0, |c| c.id());
        let ours = format!("process_id:{pid}");
        if !self
            .cli(&["INFO", "server"])
            .lines()
            .any(|l| l.trim() == ours)
        {
            self.kill();
            return false;
        }
        true
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

impl Redis {
    /// Runs `redis-cli -p PORT ARGS...` against this node; its standard output, trimmed (the
    /// whole reply, where [`Redis::command`] gives only its first line).
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli (Debian's redis-server package brings it, through redis-tools)");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

/// A Redis Cluster of `n` primaries and no replicas on free loopback ports, made with
/// `redis-cli --cluster create` (the 16 384 slots split evenly); every node killed on drop.
pub struct RedisCluster {
    /// The nodes, in the order of their slot ranges (node 0 holds slots 0 to about 5460).
    pub nodes: Vec<Redis>,
}

impl RedisCluster {
    /// Starts the nodes, joins them and waits until every node says `cluster_state:ok`.
    pub fn start(tag: &str, n: usize) -> RedisCluster {
        let nodes: Vec<Redis> = (0..n)
            .map(|i| Redis::spawn(&format!("{tag}-{i}"), false, true))
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|r| format!("127.0.0.1:{}", r.port))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in &nodes {
            while !node.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
                assert!(Instant::now() < deadline, "the cluster never became ok");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        RedisCluster { nodes }
    }

    /// `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,...`.
    pub fn url(&self) -> String {
        let addrs: Vec<String> = self
            .nodes
            .iter()
            .map(|r| format!("127.0.0.1:{}", r.port))
            .collect();
        format!("redis+cluster://{}", addrs.join(","))
    }

    /// The index of the node that holds `key` (the one that answers `EXISTS` without
    /// redirecting), when any holds it.
    pub fn holder(&self, key: &str) -> Option<usize> {
        self.nodes
            .iter()
            .position(|r| r.command(&["EXISTS", key]).as_deref() == Some(":1"))
    }

    /// How many keys matching `pattern` each node holds.
    pub fn counts(&self, pattern: &str) -> Vec<usize> {
        self.nodes
            .iter()
            .map(|r| r.cli(&["--scan", "--pattern", pattern]).lines().count())
            .collect()
    }
}

/// Runs `openssl` with `args` in `dir`; panics with its output on failure.
fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (.ci/run installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, both signed by it, and
/// an unrelated second CA.
fn make_certificates(dir: &std::path::Path) -> TlsFiles {
    for ca in ["ca", "other-ca"] {
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                &format!("/CN=toolgate test {ca}"),
                "-keyout",
                &format!("{ca}.key"),
                "-out",
                &format!("{ca}.pem"),
            ],
        );
    }
    std::fs::write(dir.join("server.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    // `v1-client` has no extensions, so openssl makes an X.509 v1 certificate.
    for (name, ext) in [
        ("server", Some("server.ext")),
        ("client", Some("client.ext")),
        ("v1-client", None),
    ] {
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                &format!("/CN={name}"),
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
            ],
        );
        let mut sign = vec![
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &format!("{name}.pem"),
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
        if let Some(ext) = ext {
            sign.extend(["-extfile".to_string(), ext.to_string()]);
        }
        let sign: Vec<&str> = sign.iter().map(String::as_str).collect();
        openssl(dir, &sign);
    }
    TlsFiles {
        ca: dir.join("ca.pem"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client.key"),
        other_ca: dir.join("other-ca.pem"),
        v1_client_cert: dir.join("v1-client.pem"),
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
