//! `serve --bundle URL`: the policy set comes from a signed bundle on an HTTP(S) server,
//! polled with `If-None-Match`. A downloaded bundle is verified before anything in it is
//! compiled, then compiled and swapped in through [`AppState::install`], all or nothing;
//! a bundle that is refused (unsigned, another key's, tampered with, malformed, over a
//! bound, or failing to compile) leaves the serving set in place, and the refusal shows in
//! the log, `/v1/policies`, `/health` and `/metrics`.

use super::state::AppState;
use crate::bundle::{self, Limits};
use ed25519_dalek::VerifyingKey;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where bundles come from and how they are checked.
pub struct Source {
    /// The bundle's URL (`http://` or `https://`).
    pub url: String,
    /// The public key bundles must be signed with; `None` only with `--insecure-unsigned`.
    pub key: Option<VerifyingKey>,
    /// How often to poll.
    pub poll: Duration,
}

/// What one fetch came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Verified, compiled and swapped in.
    Loaded,
    /// 304, or the same bytes again: nothing recompiled.
    NotModified,
    /// Refused: archive, signature or compilation.
    Refused,
    /// Not downloaded: connection, HTTP status or size.
    Unreachable,
}

impl Outcome {
    const ALL: [Outcome; 4] = [
        Outcome::Loaded,
        Outcome::NotModified,
        Outcome::Refused,
        Outcome::Unreachable,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Outcome::Loaded => "loaded",
            Outcome::NotModified => "not_modified",
            Outcome::Refused => "refused",
            Outcome::Unreachable => "unreachable",
        }
    }
}

/// What the last fetches did, for `/v1/policies` and `/health`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Status {
    /// The bundle URL.
    pub url: String,
    /// Whether bundles must be signed by the configured key.
    pub verified: bool,
    /// The manifest revision of the bundle being served.
    pub revision: Option<String>,
    /// The id of the key that signed the bundle being served.
    pub key_id: Option<String>,
    /// The ETag of the last bundle downloaded.
    pub etag: Option<String>,
    /// Unix milliseconds of the last fetch attempt.
    pub checked_at_ms: Option<u128>,
    /// What the last fetch came to.
    pub outcome: Option<Outcome>,
    /// Why the last bundle was refused or could not be fetched; cleared by the next load.
    pub error: Option<String>,
}

/// The bundle source and its status, held in the server state.
pub struct Bundle {
    source: Source,
    client: reqwest::Client,
    limits: Limits,
    status: Mutex<Status>,
    /// The SHA-256 of the last bundle body handled, to skip a recompile of the same bytes
    /// from a server that sends no ETag.
    digest: Mutex<Option<String>>,
    /// One fetch at a time, so ETags and generations stay in step.
    fetching: tokio::sync::Mutex<()>,
    /// Fetches by [`Outcome`], in its order.
    counts: [AtomicU64; 4],
}

/// Longest wait for one bundle download.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

impl Bundle {
    /// Sets up the HTTP client for `source`.
    pub fn new(source: Source) -> Result<Bundle, String> {
        let status = Status {
            url: source.url.clone(),
            verified: source.key.is_some(),
            ..Status::default()
        };
        Ok(Bundle {
            client: crate::http_client::client(FETCH_TIMEOUT)?,
            source,
            limits: Limits::default(),
            status: Mutex::new(status),
            digest: Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
            counts: Default::default(),
        })
    }

    /// How often to poll.
    pub fn poll_every(&self) -> Duration {
        self.source.poll
    }

    /// A copy of the status.
    pub fn status(&self) -> Status {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The fetch counters in Prometheus text format.
    pub fn render_metrics(&self) -> String {
        let mut out = String::from(
            "# HELP toolgate_bundle_fetches_total Bundle fetches by outcome.\n\
             # TYPE toolgate_bundle_fetches_total counter\n",
        );
        for outcome in Outcome::ALL {
            out.push_str(&format!(
                "toolgate_bundle_fetches_total{{outcome=\"{}\"}} {}\n",
                outcome.as_str(),
                self.counts[outcome as usize].load(Relaxed)
            ));
        }
        out
    }

    fn note(&self, outcome: Outcome, error: Option<String>, f: impl FnOnce(&mut Status)) {
        self.counts[outcome as usize].fetch_add(1, Relaxed);
        if let Ok(mut s) = self.status.lock() {
            s.checked_at_ms = Some(now_ms());
            s.outcome = Some(outcome);
            if outcome != Outcome::NotModified {
                s.error = error;
            }
            f(&mut s);
        }
    }
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// What one download gave.
enum Fetched {
    /// 304, or the same bytes as last time.
    Unchanged,
    /// A new body, with its ETag.
    Body(Vec<u8>, Option<String>),
}

/// Fetches the bundle and, when it changed, verifies, compiles and swaps it in. A `poll`
/// sends the last ETag (`If-None-Match`) and skips an unchanged body; any other trigger
/// (startup, `POST /v1/reload`, SIGHUP) downloads and checks the bundle again.
pub async fn reload(state: Arc<AppState>, trigger: &str) -> Result<u64, String> {
    let Some(b) = state.bundle.as_ref() else {
        return Err("no bundle is configured".into());
    };
    let _one = b.fetching.lock().await;
    let conditional = trigger == "poll";
    let fetched = match fetch(b, conditional).await {
        Ok(f) => f,
        Err(e) => {
            let msg = format!("bundle {} unreachable: {e}", b.source.url);
            eprintln!(
                "toolgate: {msg}; still serving generation {}",
                state.store.snapshot().generation()
            );
            b.note(Outcome::Unreachable, Some(msg.clone()), |_| {});
            return Err(msg);
        }
    };
    let (body, etag) = match fetched {
        Fetched::Unchanged => {
            b.note(Outcome::NotModified, None, |_| {});
            return Ok(state.store.snapshot().generation());
        }
        Fetched::Body(body, etag) => (body, etag),
    };
    if let Ok(mut d) = b.digest.lock() {
        *d = Some(bundle_digest(&body));
    }
    let key = b.source.key;
    let limits = b.limits;
    let deny_warnings = state.deny_warnings;
    let url = b.source.url.clone();
    let manifest = Arc::new(Mutex::new(None));
    let seen = manifest.clone();
    let result = state
        .clone()
        .install(trigger, move |next| {
            // Verified first: nothing from the bundle is compiled before its signature holds.
            let verified = bundle::open(&body, key.as_ref(), &limits)
                .map_err(|e| format!("bundle {url} refused: {e}"))?;
            let set = verified
                .compile(next, deny_warnings)
                .map_err(|e| format!("bundle {url} refused: its policies do not compile:\n{e}"))?;
            if let Ok(mut m) = seen.lock() {
                *m = Some((verified.manifest.revision.clone(), verified.key_id.clone()));
            }
            Ok(set)
        })
        .await;
    match &result {
        Ok(_) => {
            let (revision, key_id) = manifest.lock().ok().and_then(|m| m.clone()).unzip();
            b.note(Outcome::Loaded, None, |s| {
                s.etag = etag;
                s.revision = revision;
                s.key_id = key_id.flatten();
            });
        }
        Err(e) => b.note(Outcome::Refused, Some(e.clone()), |s| s.etag = etag),
    }
    result
}

fn bundle_digest(body: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One GET, bounded in size; `conditional` sends the last ETag and compares the body.
async fn fetch(b: &Bundle, conditional: bool) -> Result<Fetched, String> {
    let mut request = b.client.get(&b.source.url);
    let last_etag = b.status().etag;
    if let (true, Some(etag)) = (conditional, &last_etag) {
        request = request.header(reqwest::header::IF_NONE_MATCH, etag);
    }
    let mut response = request.send().await.map_err(|e| error_chain(&e))?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_MODIFIED && conditional {
        return Ok(Fetched::Unchanged);
    }
    if !status.is_success() {
        return Err(format!("the server answered {status}"));
    }
    let etag = response
        .headers()
        .get(reqwest::header::ETAG)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let limit = b.limits.compressed;
    if response.content_length().is_some_and(|n| n > limit) {
        return Err(format!("the bundle is over the limit of {limit} bytes"));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| error_chain(&e))? {
        if (body.len() + chunk.len()) as u64 > limit {
            return Err(format!("the bundle is over the limit of {limit} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    let same = b
        .digest
        .lock()
        .ok()
        .is_some_and(|d| d.as_deref() == Some(&bundle_digest(&body)));
    if conditional && same {
        return Ok(Fetched::Unchanged);
    }
    Ok(Fetched::Body(body, etag))
}

/// An error with its causes, which reqwest keeps apart (`error sending request: connection
/// refused`).
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Polls the bundle URL every `every`.
pub async fn poll(state: Arc<AppState>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        let _ = reload(state.clone(), "poll").await;
    }
}
