//! The errors at the crate's boundary: why a server could not start ([`ServerError`]), why
//! the shared turn-state store was refused ([`StateError`]), and which optional part a
//! build lacks ([`Feature`]). A leaf, like `config.rs`.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Why a server could not start. Each message names the setting at fault the way
/// `toolgate serve` spells it (`--state: ...`), since that is where operators meet them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The listening address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address in the configuration.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The bound listener's own address could not be read.
    #[error("{0}")]
    LocalAddr(#[source] io::Error),
    /// The decision log's file could not be opened.
    #[error("cannot open the decision log: {0}")]
    DecisionLog(#[source] io::Error),
    /// The HTTP client for bundle downloads or log shipping could not be built.
    #[cfg(any(feature = "bundles", feature = "shipper"))]
    #[error("cannot set up the HTTP client: {0}")]
    HttpClient(#[source] reqwest::Error),
    /// The bundle's verification key could not be read.
    #[cfg(feature = "bundles")]
    #[error(transparent)]
    BundleKey(toolgate_bundle::BundleError),
    /// The shared turn-state store was refused.
    #[error("--state: {0}")]
    State(#[source] StateError),
    /// The OTLP exporter could not be built.
    #[cfg(feature = "otel")]
    #[error("--otel-endpoint: {0}")]
    Otel(#[source] opentelemetry_otlp::ExporterBuildError),
    /// A signal handler could not be installed.
    #[error(transparent)]
    Signal(#[from] crate::signals::SignalError),
    /// The shadow policy set (`--shadow`) did not load at startup.
    #[error("--shadow `{}`: the shadow policies do not load:\n{diagnostics}", path.display())]
    Shadow {
        /// The shadow path as configured.
        path: PathBuf,
        /// Why: the rendered diagnostics, or the loader's error.
        diagnostics: String,
    },
    /// The key set of `--jwks` cannot be used.
    #[error("--jwks `{jwks}`: {why}")]
    Jwks {
        /// The file or URL as configured.
        jwks: String,
        /// What is wrong with it.
        why: String,
    },
    /// The AuthZEN PDP identifier (`--authzen-pdp`) is not one the spec allows.
    #[error("--authzen-pdp `{url}`: {why}")]
    AuthzenPdp {
        /// The identifier as configured.
        url: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The configuration asks for a part this build was compiled without.
    #[error(
        "{}: this build has no {} support; rebuild with --features {}",
        .0.setting(),
        .0.what(),
        .0.name()
    )]
    Unsupported(Feature),
}

/// Why the shared turn-state store (`--state`) was refused at start-up. A store that is
/// only down is not refused: the server starts and judges fail-closed until it answers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// TLS files were given for a plain (`redis://`) URL.
    #[error("--state-ca, --state-cert and --state-key are for a TLS store: use a rediss:// URL")]
    TlsFilesWithoutTls,
    /// A TLS URL carried a `#fragment` (the client reads `#insecure` as "skip verification").
    #[error("a rediss:// URL takes no #fragment: the store's certificate is always verified (use --state-ca for a private CA)")]
    Fragment,
    /// A TLS file could not be read.
    #[error("{flag} `{}`: {source}", path.display())]
    Read {
        /// The flag that named it (`--state-ca`, `--state-cert`, `--state-key`).
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A PEM file held no certificate.
    #[error("{flag}: the file holds no PEM certificate")]
    NoCertificate {
        /// `--state-ca` or `--state-cert`.
        flag: &'static str,
    },
    /// A PEM file could not be read as a certificate or a key.
    #[cfg(feature = "redis")]
    #[error("{flag}: not a PEM {what}: {source}")]
    Pem {
        /// `--state-cert` or `--state-key`.
        flag: &'static str,
        /// `certificate` or `private key`.
        what: &'static str,
        /// The PEM reader's error.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// No TLS crypto provider could be installed.
    #[error("no TLS crypto provider is installed")]
    NoCryptoProvider,
    /// The client certificate and key cannot be used together.
    #[cfg(feature = "redis")]
    #[error("--state-cert and --state-key cannot be used: {0} (a client certificate must be X.509 v3 and match its key)")]
    Identity(#[source] rustls::Error),
    /// A cluster URL named a database.
    #[error("a cluster URL names no database: a Redis Cluster has database 0 only")]
    ClusterDatabase,
    /// A cluster URL named no node.
    #[error("a cluster URL names at least one HOST:PORT")]
    ClusterNodes,
    /// The client refused the URL or its settings.
    #[cfg(feature = "redis")]
    #[error("{0}")]
    Client(#[source] redis::RedisError),
    /// The store's eviction policy can drop a session's key, and with it a latch.
    #[error("the turn-state store's maxmemory-policy is `{0}`, which can evict a session's key and with it a latch; set `maxmemory-policy noeviction` (redis.conf or CONFIG SET)")]
    Evicting(String),
}

/// An optional part of the server, one cargo feature each (all on by default). A
/// configuration that asks for a part the build lacks is refused when the server starts
/// ([`ServerError::Unsupported`]), never ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Feature {
    /// Turn state shared in Redis or Valkey (`redis`).
    Redis,
    /// OpenTelemetry spans (`otel`).
    Otel,
    /// Decision-log shipping (`shipper`).
    Shipper,
    /// Signed bundles polled over HTTP(S) (`bundles`).
    Bundles,
    /// The playground page and its endpoints (`playground`).
    Playground,
    /// Bearer tokens verified against a JWKS (`jwt`).
    Jwt,
}

impl Feature {
    /// Every feature.
    pub const ALL: [Feature; 6] = [
        Feature::Redis,
        Feature::Otel,
        Feature::Shipper,
        Feature::Bundles,
        Feature::Playground,
        Feature::Jwt,
    ];

    /// The cargo feature's name.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Redis => "redis",
            Feature::Otel => "otel",
            Feature::Shipper => "shipper",
            Feature::Bundles => "bundles",
            Feature::Playground => "playground",
            Feature::Jwt => "jwt",
        }
    }

    /// Whether this build has it.
    pub fn enabled(self) -> bool {
        match self {
            Feature::Redis => cfg!(feature = "redis"),
            Feature::Otel => cfg!(feature = "otel"),
            Feature::Shipper => cfg!(feature = "shipper"),
            Feature::Bundles => cfg!(feature = "bundles"),
            Feature::Playground => cfg!(feature = "playground"),
            Feature::Jwt => cfg!(feature = "jwt"),
        }
    }

    /// `Ok` when this build has it, else [`ServerError::Unsupported`].
    pub fn require(self) -> Result<(), ServerError> {
        if self.enabled() {
            Ok(())
        } else {
            Err(ServerError::Unsupported(self))
        }
    }

    /// The setting that asks for it, as `toolgate` spells it.
    fn setting(self) -> &'static str {
        match self {
            Feature::Redis => "--state",
            Feature::Otel => "--otel-endpoint",
            Feature::Shipper => "--decision-log-url",
            Feature::Bundles => "--bundle",
            Feature::Playground => "toolgate playground",
            Feature::Jwt => "--jwks",
        }
    }

    /// What it is, in the error's words.
    fn what(self) -> &'static str {
        match self {
            Feature::Redis => "redis",
            Feature::Otel => "OpenTelemetry",
            Feature::Shipper => "decision-log shipping",
            Feature::Bundles => "bundle",
            Feature::Playground => "playground",
            Feature::Jwt => "bearer-token",
        }
    }
}
