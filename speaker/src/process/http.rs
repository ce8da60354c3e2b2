//! The one HTTP/1 server behind both admin endpoints (speaker and allocator).
//!
//! Plain `hyper` leaves every limit off: without a timer there is no header-read timeout, a
//! connection may idle forever, nothing caps the number of connections, and an `accept` that
//! fails (EMFILE/ENFILE) is retried in a hot loop. The allocator's admin port is reachable
//! from every pod, so a handful of slow clients (slowloris) could pin all of the process's
//! descriptors. [`serve`] bounds each of these ([`HttpLimits`]):
//!
//! - **header-read timeout** (default 10 s): a request head (request line and headers) must
//!   arrive within it, counted from when the connection starts waiting for a request, so it
//!   also ends idle keep-alive connections;
//! - **idle timeout** (default 30 s): a connection on which nothing is read or written for
//!   that long is closed (a client that stops reading its response, a stalled body);
//! - **connection cap** (default 256): at the cap the server *stops accepting*; further
//!   connections wait in the kernel's listen backlog and are accepted, oldest first, as soon
//!   as a slot frees (at the latest after the header-read timeout of a slow client). The
//!   process never holds more than `max_connections` client sockets;
//! - **request-head size** (default 16 KiB; hyper's minimum is 8 KiB);
//! - **accept errors**: a refused/aborted/reset connection is skipped, anything else
//!   (out of descriptors, out of memory) backs off 100 ms, doubling to 1 s, and is logged at
//!   most once per 10 s with the number of suppressed repeats.
//!
//! Dropping (aborting) the [`serve`] future closes every connection it accepted.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};

/// hyper refuses a smaller read buffer.
const MIN_HEAD_BYTES: usize = 8 * 1024;
/// At most one accept-error log line per this interval.
const ACCEPT_ERROR_LOG_EVERY: Duration = Duration::from_secs(10);

/// Limits of one HTTP server (see the module docs). `Default` is what the admin endpoints
/// ship with; tests shorten the timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// A request head must arrive within this long after the connection starts waiting for
    /// one (new connection, or the previous response finished).
    pub header_read_timeout: Duration,
    /// Close a connection on which nothing was read or written for this long.
    pub idle_timeout: Duration,
    /// Open connections at most; at the cap the server stops accepting until one closes.
    pub max_connections: usize,
    /// Largest request head accepted (raised to hyper's minimum of 8 KiB).
    pub max_request_head_bytes: usize,
    /// First pause after a failed `accept` (out of descriptors …); doubles per failure.
    pub accept_backoff_min: Duration,
    /// Longest pause after a failed `accept`.
    pub accept_backoff_max: Duration,
}

impl HttpLimits {
    pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
    pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_read_timeout: Self::DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            max_request_head_bytes: 16 * 1024,
            accept_backoff_min: Duration::from_millis(100),
            accept_backoff_max: Duration::from_secs(1),
        }
    }
}

/// Live counters of one server, for metrics and tests.
#[derive(Debug)]
pub struct ConnectionStats {
    active: watch::Sender<usize>,
    peak: AtomicUsize,
    accepted: AtomicU64,
    accept_errors: AtomicU64,
}

impl Default for ConnectionStats {
    fn default() -> Self {
        Self::new()
    }
}

#[allow(dead_code)] // Read by tests today; meant for the admin metrics.
impl ConnectionStats {
    pub fn new() -> Self {
        ConnectionStats {
            active: watch::Sender::new(0),
            peak: AtomicUsize::new(0),
            accepted: AtomicU64::new(0),
            accept_errors: AtomicU64::new(0),
        }
    }

    /// Connections open now (accepted, not yet closed).
    pub fn active(&self) -> usize {
        *self.active.borrow()
    }

    /// Follows [`ConnectionStats::active`] (`wait_for(|n| …)`).
    pub fn watch_active(&self) -> watch::Receiver<usize> {
        self.active.subscribe()
    }

    /// The most connections ever open at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Failed `accept` calls that caused a back-off (not counting aborted handshakes).
    pub fn accept_errors(&self) -> u64 {
        self.accept_errors.load(Ordering::Relaxed)
    }

    fn set_active(&self, n: usize) {
        self.peak.fetch_max(n, Ordering::Relaxed);
        self.active.send_replace(n);
    }
}

/// Serves HTTP/1 on `listener` with `handler` until the future is dropped (abort the task to
/// stop; every accepted connection closes with it). `handler` answers every request; it is
/// called once per request and must not block.
pub async fn serve<H, F, B>(listener: TcpListener, handler: H, limits: HttpLimits)
where
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    serve_with_stats(listener, handler, limits, Arc::new(ConnectionStats::new())).await;
}

/// [`serve`], keeping its counters in `stats`.
pub async fn serve_with_stats<H, F, B>(
    listener: TcpListener,
    handler: H,
    limits: HttpLimits,
    stats: Arc<ConnectionStats>,
) where
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    run(listener, Arc::new(handler), limits, stats).await;
}

/// Where connections come from: a [`TcpListener`], or a scripted fake in tests.
pub(crate) trait Acceptor: Send {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn accept(&mut self) -> impl Future<Output = io::Result<Self::Io>> + Send;
    fn local_addr(&self) -> Option<SocketAddr>;
}

impl Acceptor for TcpListener {
    type Io = TcpStream;

    async fn accept(&mut self) -> io::Result<TcpStream> {
        TcpListener::accept(self).await.map(|(s, _)| s)
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        TcpListener::local_addr(self).ok()
    }
}

/// The peer gave up before we accepted: nothing wrong with us, take the next one.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}

pub(crate) async fn run<A, H, F, B>(
    mut acceptor: A,
    handler: Arc<H>,
    limits: HttpLimits,
    stats: Arc<ConnectionStats>,
) where
    A: Acceptor,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listen = acceptor
        .local_addr()
        .map_or_else(|| "?".to_owned(), |a| a.to_string());
    let max = limits.max_connections.max(1);
    let mut conns = JoinSet::new();
    let mut backoff = Backoff::new(limits.accept_backoff_min, limits.accept_backoff_max);
    let mut error_log = RateLimit::new(ACCEPT_ERROR_LOG_EVERY);
    let mut full_logged = false;
    loop {
        // At the cap: stop accepting; the kernel's backlog holds further connections.
        while conns.len() >= max {
            if !full_logged {
                tracing::warn!(%listen, max_connections = max, "HTTP server at its connection cap; new connections wait until one closes");
                full_logged = true;
            }
            let _ = conns.join_next().await;
            stats.set_active(conns.len());
        }
        let accepted = tokio::select! {
            // Reap closed connections while waiting, so `conns.len()` is what is open.
            Some(_) = conns.join_next() => {
                stats.set_active(conns.len());
                continue;
            }
            r = acceptor.accept() => r,
        };
        match accepted {
            Ok(io) => {
                backoff.reset();
                stats.accepted.fetch_add(1, Ordering::Relaxed);
                conns.spawn(connection(io, Arc::clone(&handler), limits));
                stats.set_active(conns.len());
                if conns.len() < max / 2 {
                    full_logged = false;
                }
            }
            Err(e) if is_connection_error(&e) => {
                tracing::debug!(%listen, error = %e, "HTTP server: connection gone before accept");
            }
            Err(e) => {
                stats.accept_errors.fetch_add(1, Ordering::Relaxed);
                let pause = backoff.next_pause();
                if let Some(suppressed) = error_log.allow(Instant::now()) {
                    tracing::warn!(
                        %listen,
                        error = %e,
                        retry_in_ms = u64::try_from(pause.as_millis()).unwrap_or(u64::MAX),
                        suppressed,
                        "HTTP server: accept failed (out of file descriptors?); backing off"
                    );
                }
                // Keep closing finished connections meanwhile: that frees descriptors.
                let sleep = tokio::time::sleep(pause);
                tokio::pin!(sleep);
                loop {
                    tokio::select! {
                        () = &mut sleep => break,
                        Some(_) = conns.join_next() => stats.set_active(conns.len()),
                    }
                }
            }
        }
    }
}

async fn connection<I, H, F, B>(io: I, handler: Arc<H>, limits: HttpLimits)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let io = TokioIo::new(IdleTimeout::new(io, limits.idle_timeout));
    let svc = service_fn(move |req| {
        let response = (*handler)(req);
        async move { Ok::<_, Infallible>(response.await) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_request_head_bytes.max(MIN_HEAD_BYTES));
    if let Err(e) = builder.serve_connection(io, svc).await {
        tracing::debug!(error = %e, "HTTP connection closed");
    }
}

/// Fails the I/O once neither reads nor writes made progress for `idle`.
#[derive(Debug)]
struct IdleTimeout<T> {
    inner: T,
    idle: Duration,
    last_progress: Instant,
    /// Armed lazily: moved to `last_progress + idle` only when the I/O waits.
    sleep: Pin<Box<Sleep>>,
}

impl<T> IdleTimeout<T> {
    fn new(inner: T, idle: Duration) -> Self {
        let now = Instant::now();
        IdleTimeout {
            inner,
            idle,
            last_progress: now,
            sleep: Box::pin(tokio::time::sleep_until(now + idle)),
        }
    }

    fn progress(&mut self) {
        self.last_progress = Instant::now();
    }

    /// The inner I/O is pending: `Ready(error)` once the connection has been idle too long.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let deadline = self.last_progress + self.idle;
        if self.sleep.deadline() < deadline {
            self.sleep.as_mut().reset(deadline);
        }
        ready!(self.sleep.as_mut().poll(cx));
        Poll::Ready(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("connection idle for {:?}", self.idle),
        ))
    }

    fn track<R>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        match r {
            Poll::Ready(r) => {
                if r.is_ok() {
                    self.progress();
                }
                Poll::Ready(r)
            }
            Poll::Pending => self.poll_idle(cx).map(Err),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleTimeout<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        this.track(cx, r)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleTimeout<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.track(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.track(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        this.track(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.track(cx, r)
    }
}

/// Exponential back-off between `min` and `max`.
#[derive(Debug)]
struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    fn new(min: Duration, max: Duration) -> Self {
        // Never zero: a zero pause is the hot loop this exists to prevent.
        let min = min.max(Duration::from_millis(1));
        let max = max.max(min);
        Backoff {
            min,
            max,
            next: min,
        }
    }

    fn next_pause(&mut self) -> Duration {
        let pause = self.next;
        self.next = pause.saturating_mul(2).min(self.max);
        pause
    }

    fn reset(&mut self) {
        self.next = self.min;
    }
}

/// Lets one event through per interval and counts the rest.
#[derive(Debug)]
struct RateLimit {
    every: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimit {
    fn new(every: Duration) -> Self {
        RateLimit {
            every,
            last: None,
            suppressed: 0,
        }
    }

    /// `Some(suppressed since the last one)` when this event may be logged.
    fn allow(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(last) if now.saturating_duration_since(last) < self.every => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

/// Client-side helpers for tests of servers built on [`serve`].
#[cfg(test)]
pub(crate) mod testing {
    use std::net::SocketAddr;
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::HttpLimits;

    /// A request cut off in the middle of its headers.
    pub const PARTIAL_REQUEST: &[u8] = b"GET /livez HTTP/1.1\r\nHost: admin\r\nX-Slow: ";

    /// Default limits with a 1 s header-read timeout.
    pub fn short_limits() -> HttpLimits {
        HttpLimits {
            header_read_timeout: Duration::from_secs(1),
            ..HttpLimits::default()
        }
    }

    /// Raises the soft descriptor limit to the hard limit; returns the new soft limit.
    pub fn raise_nofile_limit() -> u64 {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit with a valid, exclusively borrowed struct.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim) != 0 {
                return 0;
            }
            if lim.rlim_cur < lim.rlim_max {
                let want = libc::rlimit {
                    rlim_cur: lim.rlim_max,
                    rlim_max: lim.rlim_max,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raw const want) == 0 {
                    lim.rlim_cur = lim.rlim_max;
                }
            }
        }
        lim.rlim_cur
    }

    /// Opens a connection and sends a request head that never finishes.
    pub async fn half_open(addr: SocketAddr) -> TcpStream {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(PARTIAL_REQUEST)
            .await
            .expect("send partial head");
        s
    }

    /// Reads until the server closes (EOF or reset); `Err` if it is still open after `within`.
    pub async fn closed_within(s: &mut TcpStream, within: Duration) -> Result<(), String> {
        let mut buf = [0u8; 4096];
        tokio::time::timeout(within, async {
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await
        .map_err(|_| format!("still open after {within:?}"))
    }

    /// `GET path` on a fresh connection (`Connection: close`): status code and body.
    pub async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        tokio::time::timeout(Duration::from_secs(10), async {
            let mut s = TcpStream::connect(addr).await.expect("connect");
            let req = format!("GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n");
            s.write_all(req.as_bytes()).await.expect("send");
            read_response(&mut s).await
        })
        .await
        .expect("response within 10 s")
    }

    /// Reads one `Connection: close` response to EOF.
    pub async fn read_response(s: &mut TcpStream) -> (u16, String) {
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.expect("read response");
        let text = String::from_utf8_lossy(&raw).into_owned();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP response: {text:?}"));
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        (status, body)
    }
}

#[cfg(test)]
mod tests;
