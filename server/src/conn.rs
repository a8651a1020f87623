//! The accept loop: a cap on open connections, a deadline on request headers, an idle
//! timeout on keep-alive connections, and JSON bodies on the errors hyper answers itself.
//!
//! Every HTTP listener toolgate runs goes through it (the decision server and
//! `mcp --listen`); what differs is the [`ConnHost`]: where refusals are counted and what a
//! connection over the cap is told. A program that embeds the server's router in its own
//! app may serve it with its own loop; this one is what `run` uses.

pub use super::metrics::Refusal;

use super::api_error::ApiError;
use super::config::HttpLimits;
use super::state::AppState;
use axum::http::StatusCode;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

/// hyper's read buffer, and so the largest request head (431 beyond). hyper's default is
/// about 400 KiB; no executor needs more than a few hundred bytes of headers.
const MAX_HEAD_BYTES: usize = 64 << 10;

/// How long a refused connection is drained before it is closed, so the client reads the
/// 503 rather than a reset.
const REFUSAL_LINGER: Duration = Duration::from_millis(200);
/// Most refused connections lingering at once; beyond it they are closed at once.
const REFUSALS_LINGERING: usize = 64;

/// What a listener's accept loop reports to, and asks of, the server it runs.
pub trait ConnHost: Send + Sync + 'static {
    /// The timeouts and the connection cap.
    fn limits(&self) -> HttpLimits;
    /// A connection or request refused by the loop (over the cap, timed out, malformed).
    fn refused(&self, why: Refusal);
    /// A connection accepted.
    fn opened(&self) {}
    /// An accepted connection closed.
    fn closed(&self) {}
    /// The raw answer to a connection over the cap whose request head begins `head`, when it
    /// is not the JSON 503 every other one gets.
    fn over_capacity(&self, _head: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

/// The decision server: its metrics count the loop's refusals, and a coding-agent hook
/// request over the cap gets a denial in the agent's format.
impl ConnHost for AppState {
    fn limits(&self) -> HttpLimits {
        self.http
    }

    fn refused(&self, why: Refusal) {
        self.decider.decisions.refused(why);
    }

    fn opened(&self) {
        self.decider.decisions.opened();
    }

    fn closed(&self) {
        self.decider.decisions.closed();
    }

    fn over_capacity(&self, head: &[u8]) -> Option<Vec<u8>> {
        super::hooks::agent_of_head(head).map(super::hooks::over_capacity)
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then waits for open connections to
/// finish their requests (at most `drain`).
pub async fn serve<H: ConnHost>(
    listener: TcpListener,
    app: Router,
    state: Arc<H>,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) {
    let limits = state.limits();
    let permits = Arc::new(Semaphore::new(
        limits.max_connections.clamp(1, Semaphore::MAX_PERMITS),
    ));
    let lingering = Arc::new(Semaphore::new(REFUSALS_LINGERING));
    let graceful = GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEAD_BYTES)
        .keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors, say: back off instead of spinning.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            state.refused(Refusal::Connections);
            refuse(stream, &lingering, limits.max_connections, state.clone());
            continue;
        };
        state.opened();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let io = GuardedIo::new(
            stream,
            limits.idle_timeout,
            in_flight.clone(),
            state.clone() as Arc<dyn ConnHost>,
        );
        let app = app.clone();
        let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let flight = InFlight::enter(in_flight.clone());
            let app = app.clone();
            async move {
                let response = app.oneshot(req).await;
                drop(flight);
                response
            }
        });
        let conn = graceful.watch(builder.serve_connection(TokioIo::new(io), service));
        let state = state.clone();
        tokio::spawn(async move {
            // Refusals are counted by the socket wrapper, before the client can see them.
            let _ = conn.await;
            state.closed();
            drop(permit);
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(drain, graceful.shutdown()).await;
}

/// Answers a connection over the cap with a JSON 503 and closes it, unless the host answers
/// its request otherwise ([`ConnHost::over_capacity`]: the server's coding-agent hook
/// requests get a 200 denial in the agent's format, since an agent runs the call on any other
/// answer); the request head is read first (within the linger time) to tell which it is.
fn refuse<H: ConnHost>(stream: TcpStream, lingering: &Arc<Semaphore>, cap: usize, host: Arc<H>) {
    let response = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "too_many_connections",
        format!("the server has {cap} connections open, its limit; retry shortly"),
    )
    .raw_response();
    let Ok(slot) = lingering.clone().try_acquire_owned() else {
        // The answer is far smaller than a socket buffer, so one non-blocking write sends it.
        let _ = stream.try_write(&response);
        return;
    };
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = stream;
        let mut head = [0u8; 512];
        let mut got = 0;
        let _ = tokio::time::timeout(REFUSAL_LINGER, async {
            while got < head.len() && !head[..got].contains(&b'\n') {
                match stream.read(&mut head[got..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
            }
        })
        .await;
        let answer = host.over_capacity(&head[..got]).unwrap_or(response);
        let _ = stream.write_all(&answer).await;
        // Read what the client sent, so closing does not reset the connection before it
        // reads the answer.
        let _ = tokio::time::timeout(REFUSAL_LINGER, async {
            let _ = stream.shutdown().await;
            let mut sink = [0u8; 4096];
            while let Ok(n) = stream.read(&mut sink).await {
                if n == 0 {
                    break;
                }
            }
        })
        .await;
        drop(slot);
    });
}

/// Counts a request as in flight until its response is produced (or the request dropped).
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn enter(n: Arc<AtomicUsize>) -> Self {
        n.fetch_add(1, Relaxed);
        InFlight(n)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// The socket as hyper sees it. Reading: a connection with no request in flight and no byte
/// read or written for the idle timeout reads as closed. Writing: hyper's own answer to a
/// malformed request (a status line and `content-length: 0`, no content type, since every
/// response of the router has one) is replaced by the same status with a JSON body.
struct GuardedIo {
    inner: TcpStream,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    in_flight: Arc<AtomicUsize>,
    state: Arc<dyn ConnHost>,
    /// A replacement response still to be written, and how much of it is.
    pending: Option<(Vec<u8>, usize)>,
    /// Bytes of a request have been read and nothing written since: a request is unanswered.
    unanswered: bool,
    /// The idle timeout closed the read side.
    idled: bool,
    /// The client closed its side.
    eof: bool,
}

impl GuardedIo {
    fn new(
        inner: TcpStream,
        idle: Duration,
        in_flight: Arc<AtomicUsize>,
        state: Arc<dyn ConnHost>,
    ) -> Self {
        GuardedIo {
            inner,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
            in_flight,
            state,
            pending: None,
            unanswered: false,
            idled: false,
            eof: false,
        }
    }

    fn touch(&mut self) {
        let next = Instant::now() + self.idle;
        self.deadline.as_mut().reset(next);
    }

    /// A write the client is not reading: an error once nothing has moved for the idle
    /// timeout, so a client that stops reading cannot hold a connection slot forever.
    fn stalled<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        if self.deadline.as_mut().poll(cx).is_ready() {
            self.state.refused(Refusal::IdleTimeout);
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading",
            )));
        }
        Poll::Pending
    }

    /// Writes what is left of a replacement response.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, done)) = &mut self.pending {
            if *done >= bytes.len() {
                self.pending = None;
                break;
            }
            let n = match Pin::new(&mut self.inner).poll_write(cx, &bytes[*done..]) {
                Poll::Pending => return self.stalled(cx),
                Poll::Ready(r) => r?,
            };
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *done += n;
            self.touch();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for GuardedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.touch();
                    this.unanswered = true;
                } else {
                    this.eof = true;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                if this.in_flight.load(Relaxed) == 0 && this.deadline.as_mut().poll(cx).is_ready() {
                    this.state.refused(Refusal::IdleTimeout);
                    this.idled = true;
                    // End of stream: hyper closes an idle connection quietly.
                    return Poll::Ready(Ok(()));
                }
                Poll::Pending
            }
        }
    }
}

/// hyper's automatic answer to a request it cannot parse: `HTTP/1.x 4xx` with no body and no
/// content type. Returns the status.
fn automatic_error(buf: &[u8]) -> Option<StatusCode> {
    let rest = buf
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| buf.strip_prefix(b"HTTP/1.0 "))?;
    let status = StatusCode::from_bytes(rest.get(..3)?).ok()?;
    if !status.is_client_error() {
        return None;
    }
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    (head.contains("\r\ncontent-length: 0") && !head.contains("\r\ncontent-type:"))
        .then_some(status)
}

fn json_for(status: StatusCode) -> Vec<u8> {
    let (code, message) = match status {
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => {
            ("too_large", "the request headers are over the size limit")
        }
        StatusCode::URI_TOO_LONG => ("too_large", "the request target is over the size limit"),
        _ => (
            "malformed_http",
            "the request is not valid HTTP/1.1 (request line, header names or framing)",
        ),
    };
    ApiError::new(status, code, message).raw_response()
}

impl AsyncWrite for GuardedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.poll_pending(cx))?;
        if let Some(status) = automatic_error(buf) {
            this.state.refused(Refusal::Malformed);
            this.unanswered = false;
            this.pending = Some((json_for(status), 0));
            ready!(this.poll_pending(cx))?;
            return Poll::Ready(Ok(buf.len()));
        }
        match Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => {
                if n > 0 {
                    this.touch();
                    this.unanswered = false;
                }
                Poll::Ready(Ok(n))
            }
            Poll::Pending => this.stalled(cx),
            other => other,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// A connection closed with a request half read (its headers or body did not arrive in time)
/// gets a JSON 408 on the way out, if the socket takes it without waiting.
impl Drop for GuardedIo {
    fn drop(&mut self) {
        if self.unanswered && self.pending.is_none() {
            // Half a request, not cut by the idle timeout nor by the client, and no handler
            // running: hyper's header deadline passed.
            if !self.idled && !self.eof && self.in_flight.load(Relaxed) == 0 {
                self.state.refused(Refusal::HeaderTimeout);
            }
            let timeout = ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "timeout",
                "the request did not arrive in time",
            );
            let _ = self.inner.try_write(&timeout.raw_response());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_bodiless_error_heads_are_rewritten() {
        let hyper_400 = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        assert_eq!(automatic_error(hyper_400), Some(StatusCode::BAD_REQUEST));
        let hyper_431 =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(
            automatic_error(hyper_431),
            Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        );
        for ours in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
            b"{\"error\": \"HTTP/1.1 400 \"}",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n",
        ] {
            assert_eq!(automatic_error(ours), None, "{}", String::from_utf8_lossy(ours));
        }
    }
}
