//! `serve --bundle URL`: the policy set comes from a signed bundle on an HTTP(S) server,
//! polled with `If-None-Match`. A downloaded bundle is verified before anything in it is
//! compiled, then compiled and swapped in through the server's one install path ([`Installer::install_set`]), all or nothing;
//! a bundle that is refused (unsigned, another key's, tampered with, malformed, over a
//! bound, or failing to compile) leaves the serving set in place, and the refusal shows in
//! the log, `/v1/policies`, `/health` and `/metrics`.

use super::clock::now_ms;
use super::config::BundleSource;
use super::http_client::error_chain;
use super::loader::BundleRefused;
use super::reload_gate::Source as GateSource;
use super::reload_gate::{Installer, ReloadError};
use super::ServerError;
use ed25519_dalek::VerifyingKey;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use toolgate_bundle::{self as bundle, Limits};
use toolgate_engine::PolicySet;
use toolgate_loader::log_text::escape;

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
    /// The scope every bundle must name.
    pub scope: String,
    /// The serial of the bundle being served.
    pub serial: Option<u64>,
    /// The manifest revision of the bundle being served.
    pub revision: Option<String>,
    /// The id of the key that signed the bundle being served.
    pub key_id: Option<String>,
    /// The ETag of the last bundle downloaded.
    pub etag: Option<String>,
    /// Unix milliseconds of the last fetch attempt (a 304 included).
    pub checked_at_ms: Option<u128>,
    /// Unix milliseconds of the last time the whole bundle was downloaded and compared with
    /// what this replica holds; a 304 does not count, since a reused ETag can hide a change.
    pub confirmed_at_ms: Option<u128>,
    /// Whether `confirmed_at_ms` is recent: within two refetch intervals and one poll. A
    /// replica that is not fresh may be serving an old set, and `/health` says `degraded`.
    pub fresh: bool,
    /// What the last fetch came to.
    pub outcome: Option<Outcome>,
    /// Why the last bundle was refused or could not be fetched; cleared by the next load.
    pub error: Option<String>,
}

/// The bundle source and its status, held in the server state.
pub struct Bundle {
    source: BundleSource,
    /// The key read from `source.verify_key`.
    key: Option<VerifyingKey>,
    client: reqwest::Client,
    limits: Limits,
    status: Mutex<Status>,
    /// The SHA-256 of the last bundle body handled (applied, held or refused), to skip a
    /// recompile of the same bytes from a server that sends no ETag.
    digest: Mutex<Option<String>>,
    /// One fetch at a time, so ETags and generations stay in step.
    fetching: tokio::sync::Mutex<()>,
    /// Fetches by [`Outcome`], in its order.
    counts: [AtomicU64; 4],
}

/// Longest wait for one bundle download.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

impl Bundle {
    /// Reads the verification key and sets up the HTTP client for `source`.
    pub fn new(source: BundleSource) -> Result<Bundle, ServerError> {
        let key = match &source.verify_key {
            Some(path) => {
                Some(toolgate_bundle::keys::read_public(path).map_err(ServerError::BundleKey)?)
            }
            None => None,
        };
        let status = Status {
            url: source.url.clone(),
            verified: key.is_some(),
            scope: source.scope.clone(),
            ..Status::default()
        };
        Ok(Bundle {
            client: super::http_client::client(FETCH_TIMEOUT)?,
            source,
            key,
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

    /// A copy of the status, with `fresh` as of now.
    pub fn status(&self) -> Status {
        let mut status = self.status.lock().map(|s| s.clone()).unwrap_or_default();
        let window = (2 * self.source.refetch + self.source.poll).as_millis();
        status.fresh = status
            .confirmed_at_ms
            .is_some_and(|at| now_ms().saturating_sub(at) <= window);
        status
    }

    /// Whether the next poll downloads the whole bundle: none was downloaded yet, or the
    /// last was `--refetch-s` ago or more.
    fn refetch_due(&self) -> bool {
        let last = self.status.lock().ok().and_then(|s| s.confirmed_at_ms);
        last.is_none_or(|at| now_ms().saturating_sub(at) >= self.source.refetch.as_millis())
    }

    /// Records a whole download at `at_ms`.
    fn confirmed(&self, at_ms: u128) {
        if let Ok(mut s) = self.status.lock() {
            s.confirmed_at_ms = Some(at_ms);
        }
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
        let status = self.status();
        out.push_str(&format!(
            "# HELP toolgate_bundle_fresh 1 while the bundle was downloaded whole within two refetch intervals.\n\
             # TYPE toolgate_bundle_fresh gauge\n\
             toolgate_bundle_fresh {}\n\
             # HELP toolgate_bundle_serial The serial of the bundle serving (0 before the first).\n\
             # TYPE toolgate_bundle_serial gauge\n\
             toolgate_bundle_serial {}\n",
            u8::from(status.fresh),
            status.serial.unwrap_or(0)
        ));
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

/// What one download gave.
enum Fetched {
    /// 304.
    Unchanged,
    /// A new body, with its ETag.
    Body(Vec<u8>, Option<String>),
}

/// Fetches the bundle and, when it changed, verifies, compiles and swaps it in.
///
/// A `poll` sends the last ETag (`If-None-Match`) and skips a body it has handled before,
/// except once every `--refetch-s`, when it downloads the whole bundle regardless, so a
/// server that reuses an ETag for new bytes cannot hold a replica on an old set. Startup
/// and explicit reloads always download the whole bundle.
///
/// An explicit reload (`POST /v1/reload`, SIGHUP) applies a widening only for the bundle
/// that was reported: `want` (the `digest` the operator names) or else the digest of the
/// held change under `pending`. A bundle with another digest is not applied
/// ([`ReloadError::Changed`]); with nothing pending and no digest named, the bundle is gated
/// as a poll would gate it (a widening is held and becomes `pending`).
pub async fn reload<H: Installer>(
    b: &Bundle,
    state: Arc<H>,
    trigger: &str,
    want: Option<String>,
) -> Result<u64, ReloadError> {
    let _one = b.fetching.lock().await;
    let source = GateSource::from_trigger(trigger);
    let conditional = source == GateSource::Automatic && !b.refetch_due();
    let fetched = match fetch(b, conditional).await {
        Ok(f) => f,
        Err(e) => {
            let msg = format!("bundle {} unreachable: {e}", b.source.url);
            eprintln!(
                "toolgate: {}; still serving generation {}",
                escape(&msg),
                state.generation()
            );
            b.note(Outcome::Unreachable, Some(msg.clone()), |_| {});
            return Err(ReloadError::Failed(msg));
        }
    };
    let (body, etag) = match fetched {
        Fetched::Unchanged => {
            b.note(Outcome::NotModified, None, |_| {});
            return Ok(state.generation());
        }
        Fetched::Body(body, etag) => (body, etag),
    };
    // The whole bundle was downloaded: what the URL holds is known as of now.
    b.confirmed(now_ms());
    let digest = bundle::sha256_hex(&body);
    let last_digest = b.digest.lock().ok().and_then(|d| d.clone());
    let last_etag = b.status().etag;
    if source == GateSource::Automatic && last_digest.as_deref() == Some(digest.as_str()) {
        b.note(Outcome::NotModified, None, |s| s.etag = etag);
        return Ok(state.generation());
    }
    let new_bytes = last_digest.as_deref().is_some_and(|d| d != digest);
    if new_bytes && etag.is_some() && etag == last_etag {
        eprintln!(
            "toolgate: warning: bundle {} sent ETag {} again for different bytes; the server reuses ETags, so only the unconditional fetch every --refetch-s sees a new bundle",
            escape(&b.source.url),
            escape(etag.as_deref().unwrap_or_default())
        );
    }
    let named = if want.is_some() {
        "`digest` names"
    } else {
        "`pending` reported"
    };
    let gate_source = match source {
        GateSource::Explicit => match want.or_else(|| state.gate().pending_digest()) {
            Some(w) if w == digest => GateSource::Explicit,
            Some(w) => {
                let msg = format!(
                    "the bundle changed since it was reported: {named} {w}, and {} now holds {digest}; nothing applied (the next poll gates the new bundle; review `pending` again)",
                    b.source.url
                );
                eprintln!("toolgate: reload ({trigger}) refused: {}", escape(&msg));
                return Err(ReloadError::Changed(msg));
            }
            None => GateSource::Automatic,
        },
        other => other,
    };
    if let Ok(mut d) = b.digest.lock() {
        *d = Some(digest.clone());
    }
    let check = Checks {
        key: b.key,
        limits: b.limits,
        scope: b.source.scope.clone(),
        floor: b.status().serial,
        min: b.source.min_serial,
        rollback: source == GateSource::Explicit && b.source.allow_rollback,
        deny_warnings: state.deny_warnings(),
        url: b.source.url.clone(),
    };
    let manifest = Arc::new(Mutex::new(None));
    let seen = manifest.clone();
    let result = state
        .clone()
        .install_set(trigger, gate_source, Some(digest.clone()), move |next| {
            let (set, served) = check.open(&body, next)?;
            if let Ok(mut m) = seen.lock() {
                *m = Some(served);
            }
            Ok(set)
        })
        .await;
    match &result {
        Ok(_) => {
            let served = manifest.lock().ok().and_then(|m| m.clone());
            b.note(Outcome::Loaded, None, |s| {
                s.etag = etag;
                if let Some(m) = served {
                    s.revision = Some(m.revision);
                    s.key_id = m.key_id;
                    s.serial = Some(m.serial);
                }
            });
        }
        Err(e) => {
            if let (ReloadError::Held(_), Some(m)) =
                (e, manifest.lock().ok().and_then(|m| m.clone()))
            {
                let described = serde_json::json!({
                    "scope": b.source.scope,
                    "serial": m.serial,
                    "revision": m.revision,
                    "key_id": m.key_id,
                });
                state.gate().describe_pending(&digest, described);
            }
            b.note(Outcome::Refused, Some(e.to_string()), |s| s.etag = etag)
        }
    }
    result
}

/// What a replica checks a downloaded bundle against, moved into the load task.
struct Checks {
    key: Option<VerifyingKey>,
    limits: Limits,
    scope: String,
    /// The serial of the bundle serving now; a new one must be above it.
    floor: Option<u64>,
    /// `--min-serial`: no bundle below it, ever.
    min: u64,
    /// Whether this reload may apply a serial not above `floor` (`--allow-rollback` and an
    /// explicit reload).
    rollback: bool,
    deny_warnings: bool,
    url: String,
}

/// What the manifest of the bundle swapped in says.
#[derive(Clone)]
struct Served {
    revision: String,
    key_id: Option<String>,
    serial: u64,
}

impl Checks {
    /// Verifies the bundle, then its scope and serial, and only then compiles it.
    fn open(&self, body: &[u8], next: u64) -> Result<(PolicySet, Served), BundleRefused> {
        let url = &self.url;
        // Verified first: nothing from the bundle is compiled before its signature holds.
        let verified = bundle::open(body, self.key.as_ref(), &self.limits).map_err(|source| {
            BundleRefused::Unverified {
                url: url.clone(),
                source,
            }
        })?;
        let built = &verified.manifest.metadata.toolgate;
        if built.scope != self.scope {
            return Err(BundleRefused::Scope {
                url: url.clone(),
                found: built.scope.clone(),
                serving: self.scope.clone(),
            });
        }
        if built.serial < self.min {
            return Err(BundleRefused::BelowMinimum {
                url: url.clone(),
                serial: built.serial,
                min: self.min,
            });
        }
        if let Some(floor) = self.floor.filter(|f| built.serial <= *f && !self.rollback) {
            return Err(BundleRefused::NotNewer {
                url: url.clone(),
                serial: built.serial,
                floor,
            });
        }
        let set = verified
            .compile(next, self.deny_warnings)
            .map_err(|source| BundleRefused::Compile {
                url: url.clone(),
                source,
            })?;
        let served = Served {
            revision: verified.manifest.revision.clone(),
            key_id: verified.key_id.clone(),
            serial: built.serial,
        };
        Ok((set, served))
    }
}

/// One GET, bounded in size; `conditional` sends the last ETag.
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
    Ok(Fetched::Body(body, etag))
}
