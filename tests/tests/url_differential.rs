//! The host allowlist against real URL readers: thousands of URLs glued from tricky
//! fragments (schemes, userinfo, hosts, ports, separators, encodings, whitespace,
//! backslashes, `@`, Unicode, percent) are judged by toolgate, and every URL it allows is
//! read again by Python's `urllib.parse.urlsplit` and `urllib3.util.parse_url`, Node's
//! WHATWG `new URL()` and legacy `url.parse`, and curl (the host it asks a capturing proxy on
//! loopback to connect to). Each of them must name a host on the list.
//!
//! The Python and Node readers run once each over every allowed URL (JSON lines on stdin,
//! scripts in `tests/url_differential/`); curl is one process per URL, so it reads an evenly
//! spread sample. Control URLs that the readers are known to disagree on make sure the
//! harness would see a disagreement.
//!
//! When a reader is missing, the test fails if `CI=true` and is skipped (with a message)
//! otherwise. `.ci/run` installs them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use std::io::{BufRead, Read, Write};
use std::net::{IpAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use toolgate_engine::{Call, Facts, Request};
use toolgate_tests::compile;

/// The plain list: no userinfo, no internationalised names.
const PLAIN: &[&str] = &[
    "aws.amazon.com",
    ".aws.amazon.com",
    "developers.cloudflare.com",
    "127.0.0.1",
    "[::1]",
];

/// The open list adds `userinfo allow`, `idn allow` and an internationalised suffix (here in
/// the punycode form the readers must name).
const OPEN_EXTRA: &[&str] = &[".xn--bcher-kva.de"];

// Each fragment list is split in two: ordinary fragments (the first `plain` of each list)
// and hostile ones. A URL takes each part from the hostile ones a quarter of the time, so
// there are plain URLs, URLs with one odd part, and URLs with several.

const SCHEMES: (usize, &[&str]) = (
    4,
    &[
        "https://",
        "http://",
        "HTTPS://",
        "hTTp://",
        "https:/",
        "https:",
        "https:///",
        "ftp://",
        "https:\\\\",
        " https://",
        "https:\\/",
        "https:/\\",
        "//",
        "https:////",
    ],
);

const USERINFO: (usize, &[&str]) = (
    1,
    &[
        "",
        "user@",
        "user:pw@",
        "a-b.c_d~e:p.w@",
        "a@b@",
        "docs.aws.amazon.com@",
        "evil.tld@",
        "evil.tld:443@",
        "u%40x@",
        ":@",
        "@",
        "u;x@",
        "u\\@",
        "u:p:q@",
        "us\u{e9}r@",
        "u!$&'()*+,=@",
    ],
);

const HOSTS: (usize, &[&str]) = (
    12,
    &[
        "docs.aws.amazon.com",
        "aws.amazon.com",
        "AWS.Amazon.COM",
        "Lambda.US-East-1.Docs.aws.amazon.com",
        "developers.cloudflare.com",
        "aws.amazon.com.",
        "127.0.0.1",
        "[::1]",
        "[0:0::1]",
        "evil.tld",
        "docs.aws.amazon.com.evil.tld",
        "a.b\u{fc}cher.de",
        "evil-aws.amazon.com",
        "aws.amazon.com..",
        ".aws.amazon.com",
        "docs..aws.amazon.com",
        "0x7f.1",
        "2130706433",
        "127.1",
        "0177.0.0.1",
        "127.0.0.1.",
        "[::ffff:127.0.0.1]",
        "[::1%25eth0]",
        "[v1.x]",
        "docs\u{3002}aws.amazon.com",
        "\u{ff41}\u{ff57}\u{ff53}.amazon.com",
        "\u{430}ws.amazon.com",
        "xn--ws-8cd.amazon.com",
        "b\u{fc}cher.de",
        "a.B\u{dc}CHER.de",
        "a.xn--bcher-kva.de",
        "a.XN--BCHER-KVA.de",
        "a.fa\u{df}.b\u{fc}cher.de",
        "a.bu\u{308}cher.de",
        "aws%2Eamazon.com",
        "docs.aws.amazon.com%2F",
        "%64ocs.aws.amazon.com",
        "docs.aws.amazon.com\\",
        "evil.tld\\",
        "evil.tld\\.aws.amazon.com",
        "evil.tld#",
        "evil.tld?",
        "evil.tld;",
        "evil.tld'",
        "docs.aws.amazon.com\t",
        "docs.aws.amazon.\ncom",
        "_x.aws.amazon.com",
        "x!.aws.amazon.com",
        "docs.aws.amazon.com\u{ff0f}evil.tld",
        "docs.aws.amazon.com\u{200b}",
        "",
    ],
);

const PORTS: (usize, &[&str]) = (
    6,
    &[
        "",
        ":443",
        ":8443",
        ":1",
        ":65535",
        ":08080",
        ":0",
        ":65536",
        ":",
        ":99999",
        ":443@evil.tld",
        ":4%343",
        ": 443",
        ":+1",
        ":0x1bb",
    ],
);

const TAILS: (usize, &[&str]) = (
    9,
    &[
        "",
        "/",
        "/lambda/latest/dg/welcome.html",
        "/p?q=1",
        "?q=1",
        "#f",
        "/?email=a@evil.tld",
        "/?x=https://evil.tld/",
        "/caf\u{e9}",
        "\\@evil.tld/",
        "@evil.tld/",
        "?@evil.tld/",
        "#@evil.tld/",
        ";@evil.tld/",
        "/@evil.tld",
        "\\evil.tld",
        "%2F@evil.tld/",
        " .evil.tld/",
        "\t.evil.tld/",
        "\n",
        ".evil.tld/",
        "/a b",
        "/x@y@z",
    ],
);

/// How many URLs are generated (before duplicates are dropped).
const GENERATED: usize = 40_000;

/// How many allowed URLs curl reads at most (one process each).
const CURL_SAMPLE: usize = 1_000;

/// A small deterministic generator (splitmix64), so every run judges the same URLs.
struct Mix(u64);

impl Mix {
    fn next(&mut self, below: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z % below as u64) as usize
    }

    /// An ordinary fragment three times in four, else a hostile one.
    fn pick<'a>(&mut self, (plain, all): (usize, &[&'a str])) -> &'a str {
        if self.next(4) > 0 {
            all[self.next(plain)]
        } else {
            all[plain + self.next(all.len() - plain)]
        }
    }
}

fn generate() -> Vec<String> {
    let mut mix = Mix(11);
    let mut urls: Vec<String> = (0..GENERATED)
        .map(|_| {
            [
                mix.pick(SCHEMES),
                mix.pick(USERINFO),
                mix.pick(HOSTS),
                mix.pick(PORTS),
                mix.pick(TAILS),
            ]
            .concat()
        })
        .collect();
    urls.sort();
    urls.dedup();
    urls
}

fn quoted(entries: &[&str]) -> String {
    entries
        .iter()
        .map(|e| format!("\"{e}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Which of `urls` each list allows: (plain, open).
fn judge(urls: &[String]) -> (Vec<bool>, Vec<bool>) {
    let policy = compile(&format!(
        "module differential\n\
         ingest plain_fetch, open_fetch\n\
         stage s {{ tools [plain_fetch, open_fetch] }}\n\
         hosts plain {{ schemes [http, https] allow [{}] }}\n\
         hosts open {{ schemes [http, https] userinfo allow idn allow allow [{}, \".b\u{fc}cher.de\"] }}\n\
         rule plain_host for plain_fetch {{ require args.url in hosts plain }}\n\
         rule open_host for open_fetch {{ require args.url in hosts open }}\n",
        quoted(PLAIN),
        quoted(PLAIN),
    ));
    let calls = urls
        .iter()
        .enumerate()
        .flat_map(|(i, u)| {
            [
                Call::new(format!("p{i}"), "plain_fetch", json!({ "url": u })),
                Call::new(format!("o{i}"), "open_fetch", json!({ "url": u })),
            ]
        })
        .collect();
    let response = policy.decide(&Request::new(Facts::in_stage("s"), calls));
    let allowed: Vec<bool> = response.decisions.iter().map(|d| d.allow).collect();
    (
        allowed.iter().step_by(2).copied().collect(),
        allowed.iter().skip(1).step_by(2).copied().collect(),
    )
}

/// True when `host`, as a reader gives it, is on the list `entries`.
fn on_list(host: &str, entries: &[&str]) -> bool {
    let h = host.to_ascii_lowercase();
    let h = h.trim_start_matches('[').trim_end_matches(']');
    let h = h.strip_suffix('.').unwrap_or(h);
    if let Ok(ip) = h.parse::<IpAddr>() {
        return entries.iter().any(|e| {
            e.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                == Ok(ip)
        });
    }
    entries.iter().any(|e| match e.strip_prefix('.') {
        Some(_) => h.len() > e.len() && h.ends_with(e),
        None => h == *e,
    })
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("url_differential")
        .join(name)
}

/// True when `program args` runs and exits 0.
fn works(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Fails under CI, skips otherwise, when a reader is missing. Returns true to go on.
fn readers_present() -> bool {
    let missing: Vec<&str> = [
        ("python3", works("python3", &["--version"])),
        (
            "python3 urllib3 (pip install urllib3)",
            works("python3", &["-c", "import urllib3"]),
        ),
        ("node", works("node", &["--version"])),
        ("curl", works("curl", &["--version"])),
    ]
    .into_iter()
    .filter(|(_, ok)| !ok)
    .map(|(name, _)| name)
    .collect();
    if missing.is_empty() {
        return true;
    }
    let message = format!(
        "the URL differential test needs {}; `.ci/run` installs them",
        missing.join(", ")
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{message}");
    }
    eprintln!("skipped: {message} (set CI=true to make this a failure)");
    false
}

/// Runs `program script` with `urls` as JSON lines on stdin; one JSON object per URL back.
fn batch(program: &str, script_name: &str, urls: &[&String]) -> Vec<Value> {
    let mut child = Command::new(program)
        .arg(script(script_name))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let mut input = String::new();
    for u in urls {
        input.push_str(&Value::from(u.as_str()).to_string());
        input.push('\n');
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "{program} {script_name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert_eq!(answers.len(), urls.len(), "{program}: one answer per URL");
    answers
}

/// A proxy on loopback that records the head of each request and refuses it.
struct Proxy {
    port: u16,
    heads: mpsc::Receiver<String>,
}

impl Proxy {
    fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (tx, heads) = mpsc::channel();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                if tx
                    .send(String::from_utf8_lossy(&head).into_owned())
                    .is_err()
                {
                    return;
                }
                let _ = conn.write_all(
                    b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        Proxy { port, heads }
    }

    /// The hosts curl asked the proxy for when fetching `url`: the request target's host and
    /// the `Host` header's, or why there are none.
    fn curl(&self, url: &str) -> Result<Vec<String>, String> {
        let status = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "--max-time", "10", "--proxy"])
            .arg(format!("http://127.0.0.1:{}", self.port))
            .arg("--")
            .arg(url)
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .status()
            .map_err(|e| format!("cannot run curl: {e}"))?;
        let head = self
            .heads
            .recv_timeout(Duration::from_secs(2))
            .map_err(|_| format!("curl sent no request (exit {status})"))?;
        let mut lines = head.lines();
        let target = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .ok_or_else(|| format!("no request line in {head:?}"))?;
        let target = target
            .strip_prefix("http://")
            .map_or(target, |t| t.split('/').next().unwrap_or(t));
        let host_header = lines
            .find_map(|l| {
                l.split_once(':')
                    .filter(|(k, _)| k.eq_ignore_ascii_case("host"))
                    .map(|(_, v)| v.trim().to_string())
            })
            .ok_or_else(|| format!("no Host header in {head:?}"))?;
        Ok(vec![without_port(target), without_port(&host_header)])
    }
}

/// `host:port` or `[v6]:port` less the port.
fn without_port(authority: &str) -> String {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest).to_string();
    }
    match authority.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h.to_string(),
        _ => authority.to_string(),
    }
}

/// The host a reader's answer names, or why it names none.
fn named(answer: &Value) -> Result<&str, String> {
    answer["host"]
        .as_str()
        .ok_or_else(|| format!("no host: {}", answer["error"]))
}

#[test]
fn every_allowed_url_names_a_listed_host_to_every_reader() {
    if !readers_present() {
        return;
    }
    let urls = generate();
    let (plain, open) = judge(&urls);
    let open_list: Vec<&str> = PLAIN.iter().chain(OPEN_EXTRA).copied().collect();
    // Every URL either list allows, with the entries it must name a host on.
    let allowed: Vec<(&String, &[&str])> = urls
        .iter()
        .zip(plain.iter().zip(&open))
        .filter_map(|(u, (&p, &o))| match (p, o) {
            (true, _) => Some((u, PLAIN)),
            (false, true) => Some((u, open_list.as_slice())),
            (false, false) => None,
        })
        .collect();
    let plain_allowed = plain.iter().filter(|&&a| a).count();
    let open_allowed = open.iter().filter(|&&a| a).count();
    assert!(
        plain.iter().zip(&open).all(|(p, o)| !p || *o),
        "the open list allows everything the plain list does"
    );
    assert!(
        plain_allowed > 500 && open_allowed > plain_allowed,
        "the fragments should give many allowed URLs: {plain_allowed} plain, {open_allowed} open"
    );

    // Control URLs the readers are known to disagree on: the harness must see it.
    let controls = [
        "https://docs.aws.amazon.com\\@evil.tld/".to_string(),
        "https://aws%2Eamazon.com/".to_string(),
    ];
    let control_refs: Vec<&String> = controls.iter().collect();
    let python_controls = batch("python3", "readers.py", &control_refs);
    assert_eq!(
        python_controls[0]["urlsplit"]["host"], "evil.tld",
        "urlsplit reads the backslash URL as evil.tld: {python_controls:?}"
    );
    let node_controls = batch("node", "readers.js", &control_refs);
    assert_eq!(
        node_controls[0]["whatwg"]["host"], "docs.aws.amazon.com",
        "{node_controls:?}"
    );
    assert!(!on_list(
        python_controls[1]["urlsplit"]["host"]
            .as_str()
            .unwrap_or(""),
        PLAIN
    ));

    let refs: Vec<&String> = allowed.iter().map(|(u, _)| *u).collect();
    let mut wrong = Vec::new();
    let python = batch("python3", "readers.py", &refs);
    let node = batch("node", "readers.js", &refs);
    for (((url, entries), py), js) in allowed.iter().zip(&python).zip(&node) {
        for (reader, answer) in [
            ("urlsplit", &py["urlsplit"]),
            ("urllib3", &py["urllib3"]),
            ("new URL", &js["whatwg"]),
            ("url.parse", &js["legacy"]),
        ] {
            match named(answer) {
                Ok(h) if on_list(h, entries) => {}
                Ok(h) => wrong.push(format!("{reader}: {url:?} names {h:?}")),
                Err(why) => wrong.push(format!("{reader}: {url:?}: {why}")),
            }
        }
    }

    // curl, one process per URL: an evenly spread sample.
    let proxy = Proxy::start();
    let step = allowed.len().div_ceil(CURL_SAMPLE).max(1);
    let sample: Vec<&(&String, &[&str])> = allowed.iter().step_by(step).collect();
    for (url, entries) in &sample {
        match proxy.curl(url) {
            Ok(hosts) => {
                for h in hosts.iter().filter(|h| !on_list(h, entries)) {
                    wrong.push(format!("curl: {url:?} asks the proxy for {h:?}"));
                }
            }
            Err(why) => wrong.push(format!("curl: {url:?}: {why}")),
        }
    }

    eprintln!(
        "url differential: {} URLs generated ({} distinct), {} allowed by the plain list, \
         {} by the open list ({} distinct allowed); urlsplit, urllib3, new URL and url.parse \
         read {} each; curl read {}",
        GENERATED,
        urls.len(),
        plain_allowed,
        open_allowed,
        allowed.len(),
        python.len(),
        sample.len()
    );
    assert!(
        wrong.is_empty(),
        "{} disagreements:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
