//! Turn state in Redis or Valkey (`serve --state redis://HOST:PORT[/DB]`), shared by every
//! replica that names the same store, or in a Redis / Valkey Cluster
//! (`--state redis+cluster://HOST:PORT,HOST:PORT`, [`CLUSTER_SCHEMES`]).
//!
//! Every key a batch touches is in one cluster slot: the session's keys share the hash tag
//! `{MODULE:SESSION}`, and in a cluster the store-loss marker is kept per slot (16 384 of
//! them, each under a tag chosen to land in its slot, [`marker_key`]). So a batch is one round
//! trip to one shard in a cluster too, and a shard that lost its data is detected for its own
//! slots. A single node keeps one marker (slot 0's) for every session, so its latch counter
//! is global and a restore is seen for sessions a replica never judged. Single node and
//! cluster run the same scripts; only the connection and the marker's slot differ
//! ([`StoreConnection`]).
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
//! The same script checks and adds the batch's budget counts ([`budgets`]), so budgets add no
//! round trip; in a cluster, a principal's or a tenant's count is in a slot of its own, and
//! adds one round trip per such slot.
//!
//! The approvals of a session are kept here too ([`approvals`]), under the session's own hash
//! tag and its slot's marker: a batch that asks nothing never touches them; one that asks
//! takes its approvals in one more round trip, and records its asks (and gives back what it
//! did not use) in one more.
//!
//! Any failure (no connection, an error reply, no answer within the timeout) is reported as
//! [`Unavailable`]; the caller then judges fail-closed. A write that timed out may still have
//! happened: it only ever sets latches and adds consumption of calls the caller then denies,
//! so that errs towards latched and spent.

pub(crate) mod approvals;
pub mod budgets;
mod hooks;

pub use budgets::{BatchCounts, Counted};
pub use hooks::SharedHookError;

use super::latches;
use super::stats::{Failure, Stats};
use crate::config::{RedisConfig, StoreTls};
use crate::error::StateError;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{Client, ClientTlsConfig, RedisError, Script, TlsCertificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use toolgate_engine::{LatchState, Policy};
use toolgate_turns::{Carried, Origin, SessionLimits, MAX_LATCHED_TURNS, RECENT_TURNS};

/// The shared store could not be read or written in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable;

/// What one exchange with the store gave.
pub enum Reply {
    /// The turn's state before this batch, and what became of the batch's counts.
    Carried(Carried, Counted),
    /// The session has pushed out too many latched turns.
    TooManyTurns,
    /// The batch's counts changed under it: nothing was written, the counts now hold the
    /// store's, and the batch is judged again ([`budgets`]).
    Conflict,
}

impl StoreTls {
    fn is_empty(&self) -> bool {
        self.ca.is_none() && self.client.is_none()
    }

    /// The client for `url` with this material; a TLS URL without material uses the
    /// system's trust store.
    fn client(&self, url: &str) -> Result<Client, StateError> {
        if !self.tls_url(url)? {
            return Client::open(url).map_err(StateError::Client);
        }
        Client::build_with_tls(url, self.certificates()?).map_err(StateError::Client)
    }

    /// Whether `url` asks for TLS; refuses TLS material for a plain URL and a `#fragment` on
    /// a TLS one.
    fn tls_url(&self, url: &str) -> Result<bool, StateError> {
        let tls = url.starts_with("rediss:")
            || url.starts_with("valkeys:")
            || url.starts_with("rediss+cluster:")
            || url.starts_with("valkeys+cluster:");
        if !tls {
            if !self.is_empty() {
                return Err(StateError::TlsFilesWithoutTls);
            }
            return Ok(false);
        }
        if url.contains('#') {
            // The client reads `#insecure` as "skip verification"; it is refused here, at
            // start-up, rather than as a store that is down at the first connection.
            return Err(StateError::Fragment);
        }
        Ok(true)
    }

    /// The CA and client certificate files, read and checked.
    fn certificates(&self) -> Result<TlsCertificates, StateError> {
        let read = |flag: &'static str, path: &Path| {
            std::fs::read(path).map_err(|source| StateError::Read {
                flag,
                path: path.to_path_buf(),
                source,
            })
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
                return Err(StateError::NoCertificate { flag: "--state-ca" });
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
        Ok(TlsCertificates {
            client_tls,
            root_cert,
        })
    }
}

/// The URL schemes of a Redis or Valkey Cluster: `redis+cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]`
/// names one or more of its nodes (the rest are found from them); `rediss+cluster://` (or
/// the `valkey` spellings) for TLS.
pub const CLUSTER_SCHEMES: [&str; 4] = [
    "redis+cluster",
    "rediss+cluster",
    "valkey+cluster",
    "valkeys+cluster",
];

/// The node URLs of a cluster URL (`redis+cluster://[auth@]h1:p1,h2:p2`), each with the
/// cluster URL's credentials and the plain or TLS scheme; `None` for a URL of one node.
fn cluster_nodes(url: &str) -> Option<Result<Vec<String>, StateError>> {
    let (scheme, rest) = url.split_once("://")?;
    if !CLUSTER_SCHEMES.contains(&scheme) {
        return None;
    }
    let node_scheme = if scheme.starts_with("rediss+") || scheme.starts_with("valkeys+") {
        "rediss"
    } else {
        "redis"
    };
    let (auth, hosts) = match rest.rsplit_once('@') {
        Some((auth, hosts)) => (format!("{auth}@"), hosts),
        None => (String::new(), rest),
    };
    let hosts = hosts.strip_suffix('/').unwrap_or(hosts);
    if hosts.contains('/') {
        return Some(Err(StateError::ClusterDatabase));
    }
    let nodes: Vec<String> = hosts
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|h| format!("{node_scheme}://{auth}{h}"))
        .collect();
    if nodes.is_empty() {
        return Some(Err(StateError::ClusterNodes));
    }
    Some(Ok(nodes))
}

/// A connection to the store: one node (a reconnecting [`ConnectionManager`]) or a cluster
/// (the client's [`ClusterConnection`], which routes each command by its first key's slot
/// and follows `MOVED` and `ASK`). Cheap to clone; every clone shares the same connections.
///
/// Both run commands and scripts the same way, through [`redis::aio::ConnectionLike`]:
/// `redis::cmd("GET").arg(key).query_async(&mut conn)` or
/// `script.key(k).arg(a).invoke_async(&mut conn)`. In a cluster, every key of one command or
/// script must be in one slot: give them one hash tag (`{...}`; [`key_slot`] says where a
/// key lands).
#[derive(Clone)]
pub enum StoreConnection {
    /// A single Redis or Valkey node.
    Single(ConnectionManager),
    /// A Redis or Valkey Cluster.
    Cluster(ClusterConnection),
}

impl redis::aio::ConnectionLike for StoreConnection {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            StoreConnection::Single(c) => c.req_packed_command(cmd),
            StoreConnection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            StoreConnection::Single(c) => c.req_packed_commands(cmd, offset, count),
            StoreConnection::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            StoreConnection::Single(c) => c.get_db(),
            StoreConnection::Cluster(c) => c.get_db(),
        }
    }
}

/// Slots of a Redis Cluster.
pub const SLOTS: usize = 16_384;

/// The cluster slot of `key`, as Redis computes it: CRC16 (XMODEM) of the key's hash tag (the
/// text between its first `{` and the next `}`, when not empty) or else of the whole key,
/// modulo 16 384. The same on a single node, where it only picks the key's marker.
pub fn key_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes.iter().position(|b| *b == b'{').and_then(|open| {
        let rest = &bytes[open + 1..];
        let close = rest.iter().position(|b| *b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(bytes)) % SLOTS as u16
}

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for b in data {
        crc ^= u16::from(*b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// For each slot, the first decimal number whose hash lands in it: the hash tags of the
/// slots' markers. The same on every replica, computed once (about 170 000 CRCs).
fn slot_tags() -> &'static [u32] {
    static TAGS: OnceLock<Vec<u32>> = OnceLock::new();
    TAGS.get_or_init(|| {
        let mut tags = vec![u32::MAX; SLOTS];
        let mut left = SLOTS;
        let mut n: u32 = 0;
        while left > 0 {
            let slot = usize::from(crc16(n.to_string().as_bytes()) % SLOTS as u16);
            if tags[slot] == u32::MAX {
                tags[slot] = n;
                left -= 1;
            }
            n += 1;
        }
        tags
    })
}

/// The marker key of `slot` under `prefix`: `PREFIX:m:{N}`, N chosen so that the key lands in
/// `slot`.
pub fn marker_key(prefix: &str, slot: u16) -> String {
    format!("{prefix}:m:{{{}}}", slot_tags()[usize::from(slot)])
}

/// A Redis or Valkey store of turn state.
pub struct RedisStore {
    conn: StoreConnection,
    exchange: Script,
    peek: Script,
    marker: Script,
    hook: Script,
    budget_only: Script,
    approvals: Script,
    /// The budget counts this replica saw last ([`budgets`]).
    budget_seen: budgets::Seen,
    timeout: Duration,
    prefix: String,
    limits: SessionLimits,
    /// Per slot, the store epoch and the highest latch counter this replica has seen ("", 0
    /// before its first answer there): how a slot that lost data or went back in time is
    /// told from one that never had any.
    seen: Mutex<Vec<(Arc<str>, u64)>>,
    /// `--state-new`.
    declared_new: bool,
    /// The store's eviction policy was checked and keeps session keys, and every slot's
    /// marker was read (created, under `--state-new`).
    checked: std::sync::atomic::AtomicBool,
    /// The epoch this replica writes when it finds no marker.
    proposed: String,
    /// Round trips, failures and latency.
    pub stats: Stats,
}

/// A session's keys: its packed state and its set of forgotten latched turns. The `{...}`
/// hash tag keeps both in one slot, that of the session's marker. Module names are
/// identifiers, so `:` cannot occur in one.
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
fn check_identity(cert_pem: &[u8], key_pem: &[u8]) -> Result<(), StateError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| StateError::Pem {
            flag: "--state-cert",
            what: "certificate",
            source,
        })?;
    if chain.is_empty() {
        return Err(StateError::NoCertificate {
            flag: "--state-cert",
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|source| StateError::Pem {
        flag: "--state-key",
        what: "private key",
        source,
    })?;
    crate::http_client::install_crypto();
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .ok_or(StateError::NoCryptoProvider)?;
    CertifiedKey::from_der(chain, key, &provider)
        .map(|_| ())
        .map_err(StateError::Identity)
}

impl RedisStore {
    /// A store at `config.url` (one node, or a cluster for a [`CLUSTER_SCHEMES`] URL).
    /// Connects lazily: a store that is down at start-up makes the server judge fail-closed
    /// until it is up, rather than refuse to start.
    pub fn open(
        config: &RedisConfig,
        limits: SessionLimits,
        boot: u64,
    ) -> Result<Self, StateError> {
        let conn = match cluster_nodes(&config.url) {
            Some(nodes) => {
                let nodes = nodes?;
                // A TLS cluster's node connections need rustls' process-wide provider.
                crate::http_client::install_crypto();
                let mut builder = ClusterClientBuilder::new(nodes)
                    .connection_timeout(config.timeout)
                    .response_timeout(config.timeout)
                    .retries(2)
                    .max_retry_wait(500);
                if config.tls.tls_url(&config.url)? {
                    builder = builder.certs(config.tls.certificates()?);
                }
                let client = builder.build().map_err(StateError::Client)?;
                StoreConnection::Cluster(
                    client.get_pending_async_connection_with_config(
                        redis::cluster::ClusterConfig::new()
                            .set_connection_timeout(config.timeout)
                            .set_response_timeout(config.timeout),
                    ),
                )
            }
            None => {
                let client = config.tls.client(&config.url)?;
                let manager = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(config.timeout))
                    .set_response_timeout(Some(config.timeout))
                    .set_number_of_retries(2)
                    .set_max_delay(Duration::from_millis(500));
                StoreConnection::Single(
                    ConnectionManager::new_lazy_with_config(client, manager)
                        .map_err(StateError::Client)?,
                )
            }
        };
        // Each script: whether it may write the marker, common.lua, then its own part.
        let source = |writes: &str, parts: &[&str]| {
            format!(
                "local writes = {writes}\n{}\n{}",
                include_str!("common.lua"),
                parts.join("\n")
            )
        };
        let session = include_str!("session.lua");
        let budget = include_str!("budget.lua");
        let none: Arc<str> = Arc::from("");
        Ok(RedisStore {
            conn,
            exchange: Script::new(&source(
                "true",
                &[
                    session,
                    "local B = 11",
                    budget,
                    include_str!("exchange.lua"),
                ],
            )),
            budget_only: Script::new(&source(
                "true",
                &["local B = 8", budget, include_str!("budget_only.lua")],
            )),
            budget_seen: budgets::Seen::default(),
            peek: Script::new(&source("false", &[session, include_str!("peek.lua")])),
            marker: Script::new(&source("true", &[include_str!("marker.lua")])),
            hook: Script::new(&source("ARGV[8] == 'write'", &[include_str!("hook.lua")])),
            approvals: Script::new(&source(
                "ARGV[8] ~= 'list'",
                &[include_str!("approvals.lua")],
            )),
            timeout: config.timeout,
            prefix: config.prefix.clone(),
            limits,
            seen: Mutex::new(vec![(none, 0); SLOTS]),
            declared_new: config.declared_new,
            checked: std::sync::atomic::AtomicBool::new(false),
            proposed: format!("{boot:x}-{:x}", std::process::id()),
            stats: Stats::default(),
        })
    }

    /// A connection to the store, to run commands or scripts of one's own (see
    /// [`StoreConnection`]); a clone of the one this store uses, reconnecting by itself.
    /// Give each round trip [`RedisStore::timeout`] (`tokio::time::timeout`).
    pub fn connection(&self) -> StoreConnection {
        self.conn.clone()
    }

    /// `--state-timeout-ms`: how long one round trip may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `--state-prefix`: the prefix of every key toolgate writes.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn known(&self, slot: u16) -> (Arc<str>, u64) {
        self.seen
            .lock()
            .ok()
            .and_then(|s| s.get(usize::from(slot)).cloned())
            .unwrap_or_else(|| (Arc::from(""), 0))
    }

    /// Remembers the epoch and counter a reply from `slot` showed.
    fn learn(&self, slot: u16, reply: &[String]) {
        if let (Some(epoch), Some(seq)) = (reply.get(2), reply.get(3)) {
            let seq: u64 = seq.parse().unwrap_or(0);
            if let Ok(mut known) = self.seen.lock() {
                if let Some(entry) = known.get_mut(usize::from(slot)) {
                    if *entry.0 != **epoch {
                        entry.0 = Arc::from(epoch.as_str());
                    }
                    entry.1 = entry.1.max(seq);
                }
            }
        }
    }

    /// Runs one script invocation within the timeout, counting it.
    async fn run(
        &self,
        slot: u16,
        invocation: redis::ScriptInvocation<'_>,
    ) -> Result<Vec<String>, Unavailable> {
        let started = Instant::now();
        let mut conn = self.connection();
        let result = match tokio::time::timeout(
            self.timeout(),
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
        self.learn(slot, &reply);
        Ok(reply)
    }

    /// The keys and common arguments of a script call on a session's two keys (or, for the
    /// marker script, the marker's key three times) and `slot`'s marker.
    fn common_args<'s>(
        &'s self,
        script: &'s Script,
        (first, second): (String, String),
        slot: u16,
        turn: &str,
    ) -> redis::ScriptInvocation<'s> {
        let (epoch, seq) = self.known(slot);
        let mut inv = script.prepare_invoke();
        inv.key(first)
            .key(second)
            .key(marker_key(self.prefix(), slot))
            .arg(stored_id(turn).as_ref())
            .arg(millis(self.limits.ttl))
            .arg(millis(self.limits.keep_expired))
            .arg(&*epoch)
            .arg(&self.proposed)
            .arg(seq)
            .arg(if self.declared_new { "new" } else { "" });
        inv
    }

    /// The slot whose marker judges `key`: in a cluster its own slot (a script's keys must all
    /// be in one), on a single node slot 0 for every key. One marker for a whole node keeps
    /// its counter global: a replica that saw any latch written knows a restore to an older
    /// snapshot went back for every session, those it never judged included.
    fn marker_slot(&self, key: &str) -> u16 {
        match self.conn {
            StoreConnection::Cluster(_) => key_slot(key),
            StoreConnection::Single(_) => 0,
        }
    }

    /// How many markers the store has: one per slot in a cluster, one on a single node.
    fn marker_slots(&self) -> usize {
        match self.conn {
            StoreConnection::Cluster(_) => SLOTS,
            StoreConnection::Single(_) => 1,
        }
    }

    /// Reads every slot's marker, so this replica knows each slot's epoch and counter from
    /// the start; under `--state-new`, creates the markers that are missing (a replica started
    /// later must not take a slot no batch has used yet for one that lost its data).
    /// Without it, a missing marker is a loss, recorded as the first batch there would.
    /// Runs a few scripts at a time over the one connection, pipelined.
    async fn read_markers(&self) -> Result<(), Unavailable> {
        const WORKERS: usize = 32;
        let slots = self.marker_slots();
        let mut tasks = Vec::with_capacity(WORKERS);
        for worker in 0..WORKERS.min(slots) {
            tasks.push(async move {
                let mut slot = worker;
                while slot < slots {
                    let slot16 = u16::try_from(slot).map_err(|_| Unavailable)?;
                    let key = marker_key(self.prefix(), slot16);
                    let inv = self.common_args(&self.marker, (key.clone(), key), slot16, "");
                    self.run(slot16, inv).await?;
                    slot += WORKERS;
                }
                Ok::<(), Unavailable>(())
            });
        }
        join_all(tasks).await.into_iter().collect()
    }

    /// Starts or continues `turn`: the state the store held for it, after unioning in `own`
    /// (the latches the batch sets by itself); with `counts`, the batch's budget counts in
    /// the session's slot checked and what `judged` consumed added, in the same script
    /// ([`budgets`]; the others are [`RedisStore::add_counts`]'s).
    pub async fn exchange(
        &self,
        policy: &Policy,
        (session, turn): (&str, &str),
        own: &LatchState,
        mut counts: Option<(&mut BatchCounts, &toolgate_engine::Response)>,
    ) -> Result<Reply, Unavailable> {
        self.ensure_checked().await?;
        let keys = session_keys(self.prefix(), policy, session);
        let slot = self.marker_slot(&keys.0);
        let mut inv = self.common_args(&self.exchange, keys, slot, turn);
        inv.arg(latches::encode(policy, own))
            .arg(RECENT_TURNS)
            .arg(MAX_LATCHED_TURNS);
        let which = Self::push_counts(&mut inv, counts.as_ref().map(|(c, r)| (&**c, *r)), slot);
        let reply = self.run(slot, inv).await?;
        if reply.first().map(String::as_str) == Some("too_many") {
            return Ok(Reply::TooManyTurns);
        }
        let counts = counts.as_mut().map(|(c, r)| (&mut **c, *r));
        let Some(counted) = self.counted(counts, &which, &reply)? else {
            return Ok(Reply::Conflict);
        };
        self.carried(policy, &reply)
            .map(|carried| Reply::Carried(carried, counted))
    }

    /// The state `turn` would carry, changing nothing.
    pub async fn peek(
        &self,
        policy: &Policy,
        session: &str,
        turn: &str,
    ) -> Result<Carried, Unavailable> {
        self.ensure_checked().await?;
        let keys = session_keys(self.prefix(), policy, session);
        let slot = self.marker_slot(&keys.0);
        let inv = self.common_args(&self.peek, keys, slot, turn);
        let reply = self.run(slot, inv).await?;
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
        Ok(match origin {
            Origin::Expired => Carried::every_latch(origin),
            _ => Carried::held(origin, latches::decode(policy, stored)),
        })
    }

    /// Checks the store once it answers: an eviction policy that can drop session keys makes
    /// every batch judged fail-closed (at start-up, [`RedisStore::inspect`] refuses it).
    /// Then reads (or, under `--state-new`, creates) every slot's marker. Called at start-up
    /// by [`super::TurnState::announce`], and before each batch until it has succeeded once.
    pub async fn ensure_checked(&self) -> Result<(), Unavailable> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.checked.load(Relaxed) {
            return Ok(());
        }
        match self.inspect().await {
            Ok(Inspection { evicting: None, .. }) => {
                self.read_markers().await?;
                self.checked.store(true, Relaxed);
                Ok(())
            }
            Ok(Inspection {
                evicting: Some(policy),
                ..
            }) => {
                eprintln!("toolgate: {}", StateError::Evicting(policy));
                Err(Unavailable)
            }
            Err(Unavailable) => Err(Unavailable),
        }
    }

    /// What the store says of its eviction policy and persistence (`INFO memory`,
    /// `INFO persistence`, and `CONFIG GET save` where the store allows it).
    pub async fn inspect(&self) -> Result<Inspection, Unavailable> {
        let mut conn = self.connection();
        // A cluster answers INFO from every primary, as a map by node: every node must keep
        // keys (and have the AOF on, for it to count).
        let info = |section: &'static str| {
            let mut conn = conn.clone();
            async move {
                let reply = tokio::time::timeout(
                    self.timeout,
                    redis::cmd("INFO")
                        .arg(section)
                        .query_async::<redis::Value>(&mut conn),
                )
                .await
                .map_err(|_| Unavailable)?
                .map_err(|_| Unavailable)?;
                let texts: Vec<String> = match reply {
                    redis::Value::Map(nodes) => nodes
                        .into_iter()
                        .map(|(_, v)| redis::from_redis_value::<String>(v))
                        .collect::<Result<_, _>>()
                        .map_err(|_| Unavailable)?,
                    v => vec![redis::from_redis_value::<String>(v).map_err(|_| Unavailable)?],
                };
                Ok::<_, Unavailable>(texts)
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
        let evicting = memory
            .iter()
            .map(|text| field(text, "maxmemory_policy").unwrap_or_default())
            .find(|policy| policy != "noeviction");
        Ok(Inspection {
            evicting,
            aof: !persistence.is_empty()
                && persistence
                    .iter()
                    .all(|text| field(text, "aof_enabled").as_deref() == Some("1")),
            save,
        })
    }

    /// Says on standard error whether the store answers and what its persistence means for
    /// latches ([`super::TurnState::announce`]). Refuses a store whose eviction policy can
    /// drop session keys.
    pub async fn announce(&self) -> Result<(), StateError> {
        match self.inspect().await {
            Ok(found) => {
                if let Some(policy) = found.evicting.clone() {
                    return Err(StateError::Evicting(policy));
                }
                // Every slot's marker is read (created, under --state-new) now, not at the
                // first batch: a replica started later then finds them all.
                let markers = match self.ensure_checked().await {
                    Ok(()) => "",
                    Err(_) => " (its slot markers could not all be read yet: judging fail-closed until they are)",
                };
                eprintln!(
                    "toolgate: turn state in redis (up){markers}; {}",
                    found.persistence()
                );
            }
            Err(_) => eprintln!(
                "toolgate: turn state in redis (down: judging fail-closed until it answers and its eviction policy is checked)"
            ),
        }
        Ok(())
    }

    /// Whether the store answers a `PING` within the timeout.
    pub async fn ping(&self) -> bool {
        let started = Instant::now();
        let mut conn = self.connection();
        let result = match tokio::time::timeout(
            self.timeout(),
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

/// A turn id as the session string stores it (common.lua): `%`, "\n", "\x01" and "\x02"
/// written `%XX`, so the script finds a turn with one plain search and never escapes.
fn stored_id(turn: &str) -> std::borrow::Cow<'_, str> {
    if !turn.contains(['%', '\n', '\u{1}', '\u{2}']) {
        return std::borrow::Cow::Borrowed(turn);
    }
    let mut out = String::with_capacity(turn.len() + 8);
    for c in turn.chars() {
        match c {
            '%' | '\n' | '\u{1}' | '\u{2}' => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Runs `futures` concurrently on this task, their outputs in order (the few lines of
/// `futures::future::join_all` this needs, without the crate).
async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    use std::task::Poll;
    let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, done) in futures.iter_mut().zip(out.iter_mut()) {
            if done.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(v) => *done = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_cluster_slots() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(
            key_slot("{user1000}.following"),
            key_slot("{user1000}.followers")
        );
        // An empty tag hashes the whole key; only the first `{...}` counts.
        assert_eq!(key_slot("foo{}{bar}"), crc16(b"foo{}{bar}") % 16_384);
        assert_eq!(key_slot("foo{{bar}}zap"), crc16(b"{bar") % 16_384);
    }

    #[test]
    fn every_slot_has_a_marker_in_it() {
        for slot in 0..u16::try_from(SLOTS).unwrap_or(u16::MAX) {
            assert_eq!(key_slot(&marker_key("toolgate", slot)), slot);
        }
    }

    #[test]
    fn stored_ids_escape_the_separators_and_the_escape() {
        assert_eq!(stored_id("t1"), "t1");
        assert_eq!(stored_id("a%\n\u{1}\u{2}|b"), "a%25%0A%01%02|b");
        assert_ne!(stored_id("t\u{1}"), stored_id("t%01"));
    }
}
