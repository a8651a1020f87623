//! The process's stop and reload signals, for the two long-running commands (`serve` and
//! `mcp --listen`), and for any program that runs the server and wants them handled alike.
//!
//! A command installs its handlers before it announces that it listens: a signal sent the
//! moment a supervisor reads that line then reaches the handler instead of the default
//! action, which would end the process without draining connections or flushing the
//! decision log.

/// An installed handler for SIGINT and SIGTERM.
pub struct Stop {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

/// An installed handler for SIGHUP, the reload signal.
pub struct Reload {
    #[cfg(unix)]
    hup: tokio::signal::unix::Signal,
}

/// A signal whose handler could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("cannot handle {signal}: {source}")]
pub struct SignalError {
    /// The signal (`SIGTERM`, `SIGINT`, `SIGHUP`).
    pub signal: &'static str,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

#[cfg(unix)]
fn handler(
    kind: tokio::signal::unix::SignalKind,
    signal: &'static str,
) -> Result<tokio::signal::unix::Signal, SignalError> {
    tokio::signal::unix::signal(kind).map_err(|source| SignalError { signal, source })
}

impl Stop {
    /// Installs the handlers now; an error names the signal that could not be handled.
    pub fn install() -> Result<Self, SignalError> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::SignalKind;
            Ok(Self {
                term: handler(SignalKind::terminate(), "SIGTERM")?,
                int: handler(SignalKind::interrupt(), "SIGINT")?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Resolves on the first SIGINT or SIGTERM (Ctrl-C where there are no Unix signals).
    pub async fn recv(mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {},
            _ = self.int.recv() => {},
        }
        #[cfg(not(unix))]
        {
            let _ = &mut self;
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

impl Reload {
    /// Installs the handler now; `None` where the platform has no SIGHUP.
    pub fn install() -> Result<Option<Self>, SignalError> {
        #[cfg(unix)]
        {
            let hup = handler(tokio::signal::unix::SignalKind::hangup(), "SIGHUP")?;
            Ok(Some(Self { hup }))
        }
        #[cfg(not(unix))]
        Ok(None)
    }

    /// Resolves on the next SIGHUP; `false` once no more can arrive.
    pub async fn recv(&mut self) -> bool {
        #[cfg(unix)]
        {
            self.hup.recv().await.is_some()
        }
        #[cfg(not(unix))]
        {
            false
        }
    }
}
