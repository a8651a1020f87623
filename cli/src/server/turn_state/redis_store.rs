//! Turn state in Redis or Valkey (`serve --state redis://HOST:PORT[/DB]`), shared by every
//! replica that names the same store.
//!
//! `rediss://` (or `valkeys://`) reaches the store over TLS (rustls, through the client's own
//! `tokio-rustls-comp` support). The store's certificate is always verified, against the
//! system's trust store or the CAs of `--state-ca`; there is no option to skip it. A store
//! that requires client certificates gets `--state-cert` and `--state-key`. A handshake that
//! fails is an unreachable store: the batch is judged fail-closed.
//!
//! One batch is one round trip: a server-side Lua script (`EVALSHA`, loaded again on
//! `NOSCRIPT`) reads the turn's state and unions in the latches the batch sets by itself,
//! atomically, so concurrent batches of one turn through different replicas are serialised
//! by the store and the turn ends with the union of all of them. The script only ever adds
//! latches. Expiry is the store's: each session key carries a TTL. The store's own clock
//! judges idleness, so replicas' clocks never matter.
//!
//! Any failure (no connection, an error reply, no answer within the timeout) is reported as
//! [`Unavailable`]; the caller then judges fail-closed. A write that timed out may still have
//! happened: it only ever sets latches, so that errs towards latched.

mod hooks;

pub use hooks::{HookKey, SharedHookError};

use super::latches;
use super::stats::{Failure, Stats};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, ClientTlsConfig, RedisError, Script, TlsCertificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use toolgate_engine::{LatchState, Latched, Policy};
use toolgate_turns::{Carried, Origin, SessionLimits, MAX_LATCHED_TURNS, RECENT_TURNS};

/// The shared store could not be read or written in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable;

/// What one exchange with the store gave.
pub enum Reply {
    /// The turn's state before this batch.
    Carried(Carried),
    /// The session has pushed out too many latched turns.
    TooManyTurns,
}

/// Where the store is, and how long a round trip may take.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// `redis://[:PASSWORD@]HOST:PORT[/DB]`, `rediss://` for TLS, or `unix://PATH`.
    pub url: String,
    /// Longest a round trip may take before the batch is judged fail-closed.
    pub timeout: Duration,
    /// Prefix of every key toolgate writes, so several fleets can share one store.
    pub prefix: String,
    /// TLS material for a `rediss://` store (files, read when the store is opened).
    pub tls: StoreTls,
    /// The operator declared the store new (`--state-new`): a store with no marker is taken
    /// as never used, not as one that lost its data.
    pub declared_new: bool,
}

/// Files for TLS to the store: `--state-ca`, and `--state-cert` with `--state-key`.
#[derive(Debug, Clone, Default)]
pub struct StoreTls {
    /// PEM CA certificates that replace the system's trust store.
    pub ca: Option<PathBuf>,
    /// PEM client certificate and its private key, for a store that requires one.
    pub client: Option<(PathBuf, PathBuf)>,
}

impl StoreTls {
    fn is_empty(&self) -> bool {
        self.ca.is_none() && self.client.is_none()
    }

    /// The client for `url` with this material; a TLS URL without material uses the
    /// system's trust store.
    fn client(&self, url: &str) -> Result<Client, String> {
        let tls = url.starts_with("rediss:") || url.starts_with("valkeys:");
        if !tls {
            if !self.is_empty() {
                return Err(
                    "--state-ca, --state-cert and --state-key are for a TLS store: use a rediss:// URL"
                        .into(),
                );
            }
            return Client::open(url).map_err(|e| e.to_string());
        }
        if url.contains('#') {
            // The client reads `#insecure` as "skip verification"; it is refused here, at
            // start-up, rather than as a store that is down at the first connection.
            return Err(
                "a rediss:// URL takes no #fragment: the store's certificate is always verified (use --state-ca for a private CA)"
                    .into(),
            );
        }
        let read = |flag: &str, path: &Path| {
            std::fs::read(path).map_err(|e| format!("{flag} `{}`: {e}", path.display()))
        };
        let root_cert = self
            .ca
            .as_deref()
            .map(|p| read("--state-ca", p))
            .transpose()?;
        if let Some(ca) = &root_cert {
            let found = CertificateDer::pem_slice_iter(ca)
                .filter(Result::is_ok)
                .count();
            if found == 0 {
                return Err("--state-ca: the file holds no PEM certificate".into());
            }
        }
        let client_tls = match &self.client {
            Some((cert, key)) => {
                let client_cert = read("--state-cert", cert)?;
                let client_key = read("--state-key", key)?;
                check_identity(&client_cert, &client_key)?;
                Some(ClientTlsConfig {
                    client_cert,
                    client_key,
                })
            }
            None => None,
        };
        Client::build_with_tls(
            url,
            TlsCertificates {
                client_tls,
                root_cert,
            },
        )
        .map_err(|e| e.to_string())
    }
}

/// A Redis or Valkey store of turn state.
pub struct RedisStore {
    conn: ConnectionManager,
    exchange: Script,
    peek: Script,
    hook: Script,
    timeout: Duration,
    prefix: String,
    limits: SessionLimits,
    /// The store epoch and the highest latch counter this replica has seen ("", 0 before its
    /// first answer): how a store that lost data or went back in time is told from one that
    /// never had any.
    seen: Mutex<(String, u64)>,
    /// `--state-new`.
    declared_new: bool,
    /// The store's eviction policy was checked and keeps session keys.
    checked: std::sync::atomic::AtomicBool,
    /// The epoch this replica writes when it finds no marker.
    proposed: String,
    /// Round trips, failures and latency.
    pub stats: Stats,
}

/// The marker key's name under `prefix`.
fn marker_key(prefix: &str) -> String {
    format!("{prefix}:marker")
}

/// A session's keys: its hash and its set of forgotten latched turns. The `{...}` hash tag
/// keeps both in one slot. Module names are identifiers, so `:` cannot occur in one.
fn session_keys(prefix: &str, policy: &Policy, session: &str) -> (String, String) {
    let hash = format!("{prefix}:s:{{{}:{session}}}", policy.module());
    let old = format!("{hash}:old");
    (hash, old)
}

fn failure(e: &RedisError) -> Failure {
    if e.is_timeout() {
        Failure::Timeout
    } else if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
        Failure::Connection
    } else {
        Failure::Reply
    }
}

fn origin(s: &str) -> Option<Origin> {
    match s {
        "new" => Some(Origin::New),
        "carried" => Some(Origin::Carried),
        "expired" => Some(Origin::Expired),
        _ => None,
    }
}

/// Checks at start-up what the TLS library would otherwise refuse only at the first
/// connection, where it would look like a store that is down: the client certificate must
/// parse (an X.509 v3 certificate) and match its key.
fn check_identity(cert_pem: &[u8], key_pem: &[u8]) -> Result<(), String> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--state-cert: not a PEM certificate: {e}"))?;
    if chain.is_empty() {
        return Err("--state-cert: the file holds no PEM certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| format!("--state-key: not a PEM private key: {e}"))?;
    crate::http_client::install_crypto();
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .ok_or("no TLS crypto provider is installed")?;
    CertifiedKey::from_der(chain, key, &provider)
        .map(|_| ())
        .map_err(|e| format!("--state-cert and --state-key cannot be used: {e} (a client certificate must be X.509 v3 and match its key)"))
}

impl RedisStore {
    /// A store at `config.url`. Connects lazily: a store that is down at start-up makes the
    /// server judge fail-closed until it is up, rather than refuse to start.
    pub fn open(config: &RedisConfig, limits: SessionLimits, boot: u64) -> Result<Self, String> {
        let client = config.tls.client(&config.url)?;
        let manager = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.timeout))
            .set_response_timeout(Some(config.timeout))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let conn =
            ConnectionManager::new_lazy_with_config(client, manager).map_err(|e| e.to_string())?;
        let source = |body: &str| format!("{}\n{body}", include_str!("common.lua"));
        Ok(RedisStore {
            conn,
            exchange: Script::new(&source(include_str!("exchange.lua"))),
            peek: Script::new(&source(include_str!("peek.lua"))),
            hook: Script::new(&source(include_str!("hook.lua"))),
            timeout: config.timeout,
            prefix: config.prefix.clone(),
            limits,
            seen: Mutex::new((String::new(), 0)),
            declared_new: config.declared_new,
            checked: std::sync::atomic::AtomicBool::new(false),
            proposed: format!("{boot:x}-{:x}", std::process::id()),
            stats: Stats::default(),
        })
    }

    fn known(&self) -> (String, u64) {
        self.seen.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// Runs one script invocation within the timeout, counting it.
    async fn run(
        &self,
        invocation: redis::ScriptInvocation<'_>,
    ) -> Result<Vec<String>, Unavailable> {
        let started = Instant::now();
        let mut conn = self.conn.clone();
        let result = match tokio::time::timeout(
            self.timeout,
            invocation.invoke_async::<Vec<String>>(&mut conn),
        )
        .await
        {
            Err(_) => Err(Failure::Timeout),
            Ok(Err(e)) => Err(failure(&e)),
            Ok(Ok(reply)) => Ok(reply),
        };
        self.stats.observe(
            started.elapsed(),
            result.as_ref().map(|_| ()).map_err(|f| *f),
        );
        let reply = result.map_err(|_| Unavailable)?;
        if let (Some(epoch), Some(seq)) = (reply.get(2), reply.get(3)) {
            let seq: u64 = seq.parse().unwrap_or(0);
            if let Ok(mut known) = self.seen.lock() {
                if known.0 != *epoch {
                    epoch.clone_into(&mut known.0);
                }
                known.1 = known.1.max(seq);
            }
        }
        Ok(reply)
    }

    fn common_args<'s>(
        &'s self,
        script: &'s Script,
        policy: &Policy,
        session: &str,
        turn: &str,
    ) -> redis::ScriptInvocation<'s> {
        let (hash, old) = session_keys(&self.prefix, policy, session);
        self.invocation(script, [&hash, &old], turn)
    }

    /// An invocation of `script` (common.lua's layout) on a session's two keys, with the
    /// marker and this replica's view of it.
    fn invocation<'s>(
        &'s self,
        script: &'s Script,
        [hash, old]: [&str; 2],
        turn: &str,
    ) -> redis::ScriptInvocation<'s> {
        let (epoch, seq) = self.known();
        let mut inv = script.prepare_invoke();
        inv.key(hash)
            .key(old)
            .key(marker_key(&self.prefix))
            .arg(turn)
            .arg(millis(self.limits.ttl))
            .arg(millis(self.limits.keep_expired))
            .arg(epoch)
            .arg(&self.proposed)
            .arg(seq)
            .arg(if self.declared_new { "new" } else { "" });
        inv
    }

    /// Starts or continues `turn`: the state the store held for it, after unioning in `own`
    /// (the latches the batch sets by itself).
    pub async fn exchange(
        &self,
        policy: &Policy,
        session: &str,
        turn: &str,
        own: &LatchState,
    ) -> Result<Reply, Unavailable> {
        self.ensure_checked().await?;
        let mut inv = self.common_args(&self.exchange, policy, session, turn);
        inv.arg(latches::encode(policy, own))
            .arg(RECENT_TURNS)
            .arg(MAX_LATCHED_TURNS);
        let reply = self.run(inv).await?;
        match reply.first().map(String::as_str) {
            Some("too_many") => Ok(Reply::TooManyTurns),
            _ => self.carried(policy, &reply).map(Reply::Carried),
        }
    }

    /// The state `turn` would carry, changing nothing.
    pub async fn peek(
        &self,
        policy: &Policy,
        session: &str,
        turn: &str,
    ) -> Result<Carried, Unavailable> {
        self.ensure_checked().await?;
        let inv = self.common_args(&self.peek, policy, session, turn);
        let reply = self.run(inv).await?;
        self.carried(policy, &reply)
    }

    fn carried(&self, policy: &Policy, reply: &[String]) -> Result<Carried, Unavailable> {
        let (Some(origin), Some(stored)) = (reply.first().and_then(|o| origin(o)), reply.get(1))
        else {
            // An answer this version does not know: as good as none.
            self.stats
                .up
                .store(false, std::sync::atomic::Ordering::Relaxed);
            return Err(Unavailable);
        };
        let latched = match origin {
            Origin::Expired => Latched::Flag(true),
            _ => latches::decode(policy, stored),
        };
        Ok(Carried { origin, latched })
    }

    /// Checks the store once it answers: an eviction policy that can drop session keys makes
    /// every batch judged fail-closed (at start-up, [`RedisStore::inspect`] refuses it).
    async fn ensure_checked(&self) -> Result<(), Unavailable> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.checked.load(Relaxed) {
            return Ok(());
        }
        match self.inspect().await {
            Ok(Inspection { evicting: None, .. }) => {
                self.checked.store(true, Relaxed);
                Ok(())
            }
            Ok(Inspection {
                evicting: Some(policy),
                ..
            }) => {
                eprintln!("toolgate: {}", evicting_error(&policy));
                Err(Unavailable)
            }
            Err(Unavailable) => Err(Unavailable),
        }
    }

    /// What the store says of its eviction policy and persistence (`INFO memory`,
    /// `INFO persistence`, and `CONFIG GET save` where the store allows it).
    pub async fn inspect(&self) -> Result<Inspection, Unavailable> {
        let mut conn = self.conn.clone();
        let info = |section: &'static str| {
            let mut conn = conn.clone();
            async move {
                tokio::time::timeout(
                    self.timeout,
                    redis::cmd("INFO")
                        .arg(section)
                        .query_async::<String>(&mut conn),
                )
                .await
                .map_err(|_| Unavailable)?
                .map_err(|_| Unavailable)
            }
        };
        let memory = info("memory").await?;
        let persistence = info("persistence").await?;
        let save = tokio::time::timeout(
            self.timeout,
            redis::cmd("CONFIG")
                .arg("GET")
                .arg("save")
                .query_async::<Vec<String>>(&mut conn),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .and_then(|v| v.get(1).cloned());
        let field = |text: &str, name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(|v| v.trim().to_string())
        };
        let policy = field(&memory, "maxmemory_policy").unwrap_or_default();
        Ok(Inspection {
            evicting: (policy != "noeviction").then_some(policy),
            aof: field(&persistence, "aof_enabled").as_deref() == Some("1"),
            save,
        })
    }

    /// Whether the store answers a `PING` within the timeout.
    pub async fn ping(&self) -> bool {
        let started = Instant::now();
        let mut conn = self.conn.clone();
        let result = match tokio::time::timeout(
            self.timeout,
            redis::cmd("PING").query_async::<String>(&mut conn),
        )
        .await
        {
            Err(_) => Err(Failure::Timeout),
            Ok(Err(e)) => Err(failure(&e)),
            Ok(Ok(_)) => Ok(()),
        };
        self.stats.observe(started.elapsed(), result);
        result.is_ok()
    }
}

/// What [`RedisStore::inspect`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// The eviction policy, when it is one that can drop keys (anything but `noeviction`).
    pub evicting: Option<String>,
    /// Whether the append-only file is on.
    pub aof: bool,
    /// The `save` setting (RDB snapshots), when the store lets `CONFIG GET` read it.
    pub save: Option<String>,
}

impl Inspection {
    /// One line on what the store's persistence means for latches.
    pub fn persistence(&self) -> String {
        let rdb = match self.save.as_deref() {
            Some("") => "RDB snapshots off".to_string(),
            Some(s) => format!("RDB snapshots (save {s})"),
            None => "RDB snapshots unknown (CONFIG GET is not allowed)".to_string(),
        };
        let meaning = if self.aof {
            "a restart keeps what the append-only file holds"
        } else {
            "a restart loses every latch set since the last snapshot"
        };
        format!(
            "AOF {}, {rdb}: {meaning}; a store that lost state or went back in time is detected, and turns it no longer holds are judged latched for TTL + keep-expired",
            if self.aof { "on" } else { "off" }
        )
    }
}

/// The refusal of a store whose eviction policy can drop session keys.
pub fn evicting_error(policy: &str) -> String {
    format!(
        "the turn-state store's maxmemory-policy is `{policy}`, which can evict a session's key and with it a latch; set `maxmemory-policy noeviction` (redis.conf or CONFIG SET)"
    )
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}
