//! The shared HTTP server against real sockets on 127.0.0.1 (and a scripted acceptor for
//! accept errors). Every wait is bounded.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, timeout};

use super::testing::{
    PARTIAL_REQUEST, closed_within, get, half_open, raise_nofile_limit, read_response,
};
use super::*;

const BIG: usize = 32 * 1024 * 1024;

fn handler(req: Request<Incoming>) -> std::future::Ready<Response<Full<Bytes>>> {
    static BIG_BODY: std::sync::OnceLock<Bytes> = std::sync::OnceLock::new();
    let (status, body) = match req.uri().path() {
        "/livez" => (StatusCode::OK, Bytes::from_static(b"ok\n")),
        "/big" => (
            StatusCode::OK,
            BIG_BODY
                .get_or_init(|| Bytes::from(vec![b'x'; BIG]))
                .clone(),
        ),
        _ => (StatusCode::NOT_FOUND, Bytes::from_static(b"not found\n")),
    };
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    std::future::ready(r)
}

struct Server {
    addr: SocketAddr,
    stats: Arc<ConnectionStats>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn start(limits: HttpLimits) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stats = Arc::new(ConnectionStats::new());
    let task = tokio::spawn(serve_with_stats(
        listener,
        handler,
        limits,
        Arc::clone(&stats),
    ));
    Server { addr, stats, task }
}

async fn wait_active(stats: &ConnectionStats, what: &str, f: impl Fn(usize) -> bool) {
    let mut rx = stats.watch_active();
    timeout(Duration::from_secs(20), rx.wait_for(|n| f(*n)))
        .await
        .unwrap_or_else(|_| panic!("{what}: active = {}", stats.active()))
        .unwrap();
}

/// The defect: with no timer, hyper never timed out a request head, so 1,000 clients that
/// each sent half a request held 1,000 sockets (and descriptors) forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_headers_are_timed_out_and_livez_still_answers() {
    const N: usize = 1000;
    let nofile = raise_nofile_limit();
    assert!(
        nofile >= 2 * N as u64 + 100,
        "RLIMIT_NOFILE {nofile} too low for {N} client + {N} server sockets"
    );
    let header_timeout = Duration::from_secs(1);
    let margin = Duration::from_secs(3);
    let server = start(HttpLimits {
        header_read_timeout: header_timeout,
        // Above N: this test is about the timeout, `connection_cap_…` about the cap.
        max_connections: 2 * N,
        ..HttpLimits::default()
    })
    .await;

    let mut slow = Vec::with_capacity(N);
    for _ in 0..N {
        let s = half_open(server.addr).await;
        slow.push((s, Instant::now()));
    }
    let (status, body) = get(server.addr, "/livez").await;
    let answered = Instant::now();
    assert_eq!((status, body.as_str()), (200, "ok\n"));

    let mut waits = tokio::task::JoinSet::new();
    for (i, (mut s, sent)) in slow.into_iter().enumerate() {
        waits.spawn(async move {
            let deadline = sent + header_timeout + margin;
            let r = closed_within(&mut s, deadline.saturating_duration_since(Instant::now())).await;
            (i, sent, r, Instant::now())
        });
    }
    let mut open = Vec::new();
    let mut first_close: Option<Instant> = None;
    while let Some(j) = waits.join_next().await {
        let (i, sent, r, closed) = j.unwrap();
        match r {
            Ok(()) => {
                first_close = Some(first_close.map_or(closed, |f| f.min(closed)));
                // Closed by the timeout, not turned away at once.
                assert!(
                    closed - sent >= header_timeout.mul_f32(0.8),
                    "connection {i} closed after {:?}, before the header timeout",
                    closed - sent
                );
            }
            Err(e) => open.push(format!("#{i}: {e}")),
        }
    }
    assert!(
        open.is_empty(),
        "{} of {N} half-open connections not closed within {:?}: {:?}",
        open.len(),
        header_timeout + margin,
        &open[..open.len().min(5)]
    );
    // `/livez` answered while every slow connection was still open.
    assert!(answered < first_close.unwrap());
    wait_active(&server.stats, "all closed", |n| n == 0).await;
}

/// Over the cap the server stops accepting: it never holds more than `max_connections`
/// sockets, and the connections queued in the backlog are served once slots free up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_cap_holds_and_excess_connections_wait_in_the_backlog() {
    const CAP: usize = 8;
    const EXTRA: usize = 32;
    let server = start(HttpLimits {
        // Nothing times out during the test.
        header_read_timeout: Duration::from_secs(60),
        max_connections: CAP,
        ..HttpLimits::default()
    })
    .await;
    let mut slow = Vec::new();
    for _ in 0..CAP + EXTRA {
        slow.push(half_open(server.addr).await);
    }
    wait_active(&server.stats, "cap reached", |n| n >= CAP).await;
    // The listener keeps the rest in its backlog; the server accepted exactly the cap.
    assert_eq!(server.stats.accepted(), CAP as u64);

    // A complete request behind them is answered once the slow ones go away.
    let mut late = TcpStream::connect(server.addr).await.unwrap();
    late.write_all(b"GET /livez HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    drop(slow);
    let (status, _) = timeout(Duration::from_secs(20), read_response(&mut late))
        .await
        .expect("the queued request is served after the slow clients left");
    assert_eq!(status, 200);
    wait_active(&server.stats, "all closed", |n| n == 0).await;
    assert_eq!(server.stats.accepted(), (CAP + EXTRA + 1) as u64);
    assert!(
        server.stats.peak() <= CAP,
        "held {} connections with a cap of {CAP}",
        server.stats.peak()
    );
}

/// A connection that never sends a byte is closed too (keep-alive idle bound).
#[tokio::test]
async fn silent_connection_is_closed() {
    let server = start(HttpLimits {
        header_read_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(2),
        ..HttpLimits::default()
    })
    .await;
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    closed_within(&mut s, Duration::from_secs(5)).await.unwrap();
}

/// After a response the connection may stay open for the next request, but only for the
/// header-read timeout.
#[tokio::test]
async fn keep_alive_serves_several_requests_then_idles_out() {
    let server = start(HttpLimits {
        header_read_timeout: Duration::from_secs(1),
        ..HttpLimits::default()
    })
    .await;
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    for _ in 0..3 {
        s.write_all(b"GET /livez HTTP/1.1\r\nHost: a\r\n\r\n")
            .await
            .unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        timeout(Duration::from_secs(5), async {
            while !buf.ends_with(b"\r\n\r\nok\n") {
                let n = s.read(&mut chunk).await.unwrap();
                assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&buf));
                buf.extend_from_slice(&chunk[..n]);
            }
        })
        .await
        .expect("response");
        assert!(buf.starts_with(b"HTTP/1.1 200 OK\r\n"));
    }
    closed_within(&mut s, Duration::from_secs(5)).await.unwrap();
    assert_eq!(get(server.addr, "/nope").await.0, 404);
}

/// A client that asks for a large response and never reads it would pin the connection on a
/// full socket buffer; the idle timeout closes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_reader_is_closed_after_the_idle_timeout() {
    let server = start(HttpLimits {
        header_read_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(1),
        ..HttpLimits::default()
    })
    .await;
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    s.write_all(b"GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    wait_active(&server.stats, "accepted", |n| n == 1).await;
    // Never read: the server's writes stall, then it gives up.
    wait_active(&server.stats, "slow reader closed", |n| n == 0).await;
    drop(s);
}

/// Limits do not cut legitimate responses short.
#[tokio::test]
async fn large_response_is_delivered_whole() {
    let server = start(HttpLimits::default()).await;
    let (status, body) = get(server.addr, "/big").await;
    assert_eq!(status, 200);
    assert_eq!(body.len(), BIG);
}

/// A request head larger than the limit is refused, not buffered without bound.
#[tokio::test]
async fn oversized_request_head_is_refused() {
    let server = start(HttpLimits::default()).await;
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    // 32 KiB in four headers: over the 16 KiB limit, under hyper's defaults (~400 KiB,
    // 100 headers).
    let mut req = b"GET /livez HTTP/1.1\r\nHost: a\r\n".to_vec();
    for i in 0..4 {
        req.extend_from_slice(format!("X-Pad-{i}: {}\r\n", "y".repeat(8 * 1024)).as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    // The server may close while we are still writing.
    let _ = s.write_all(&req).await;
    let mut raw = Vec::new();
    let _ = timeout(Duration::from_secs(10), s.read_to_end(&mut raw))
        .await
        .expect("closed");
    let text = String::from_utf8_lossy(&raw);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 431"),
        "{text:?}"
    );
}

/// An acceptor that always fails like a process out of descriptors and reports each call.
/// After `limit` calls it hangs, so that a hot loop ends (and the test fails) instead of
/// spinning forever.
struct FailingAcceptor {
    calls: tokio::sync::watch::Sender<usize>,
    limit: usize,
}

impl Acceptor for FailingAcceptor {
    type Io = TcpStream;

    fn accept(&mut self) -> impl Future<Output = io::Result<TcpStream>> + Send {
        let mut n = 0;
        self.calls.send_modify(|c| {
            *c += 1;
            n = *c;
        });
        let limit = self.limit;
        async move {
            if n > limit {
                std::future::pending::<()>().await;
            }
            Err(io::Error::from_raw_os_error(libc::EMFILE))
        }
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        None
    }
}

/// The defect: `accept` failing with EMFILE was retried at once, forever (100 % CPU while
/// the descriptors stayed exhausted).
#[tokio::test]
async fn accept_errors_back_off_instead_of_spinning() {
    let (calls, mut seen) = tokio::sync::watch::channel(0usize);
    let stats = Arc::new(ConnectionStats::new());
    let limits = HttpLimits {
        accept_backoff_min: Duration::from_millis(10),
        accept_backoff_max: Duration::from_millis(40),
        ..HttpLimits::default()
    };
    let started = Instant::now();
    let task = tokio::spawn(run(
        FailingAcceptor {
            calls,
            limit: 100_000,
        },
        Arc::new(handler),
        limits,
        Arc::clone(&stats),
    ));
    // Eight calls need seven pauses in between: 10 + 20 + 40 + 40 + 40 + 40 + 40 ms.
    timeout(Duration::from_secs(10), seen.wait_for(|n| *n >= 8))
        .await
        .expect("accept retried")
        .unwrap();
    let elapsed = started.elapsed();
    let calls = *seen.borrow();
    task.abort();
    assert!(
        elapsed >= Duration::from_millis(230),
        "{calls} accept calls within {elapsed:?} of EMFILE: no back-off"
    );
    assert!(stats.accept_errors() >= 7, "{}", stats.accept_errors());
}

#[test]
fn backoff_doubles_up_to_the_max_and_resets() {
    let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
    let got: Vec<u128> = (0..6).map(|_| b.next_pause().as_millis()).collect();
    assert_eq!(got, [100, 200, 400, 800, 1000, 1000]);
    b.reset();
    assert_eq!(b.next_pause(), Duration::from_millis(100));
    // A zero minimum would be a hot loop again.
    let mut z = Backoff::new(Duration::ZERO, Duration::ZERO);
    assert!(z.next_pause() > Duration::ZERO);
}

#[test]
fn accept_error_log_is_rate_limited() {
    let t0 = Instant::now();
    let mut r = RateLimit::new(Duration::from_secs(10));
    assert_eq!(r.allow(t0), Some(0));
    assert_eq!(r.allow(t0 + Duration::from_secs(1)), None);
    assert_eq!(r.allow(t0 + Duration::from_secs(9)), None);
    assert_eq!(r.allow(t0 + Duration::from_secs(10)), Some(2));
    assert_eq!(r.allow(t0 + Duration::from_secs(11)), None);
}

#[test]
fn only_lost_connections_skip_the_backoff() {
    use std::io::ErrorKind;
    assert!(is_connection_error(&ErrorKind::ConnectionAborted.into()));
    assert!(is_connection_error(&ErrorKind::ConnectionReset.into()));
    assert!(!is_connection_error(&io::Error::from_raw_os_error(
        libc::EMFILE
    )));
    assert!(!is_connection_error(&io::Error::from_raw_os_error(
        libc::ENFILE
    )));
}

#[test]
fn partial_request_is_really_partial() {
    assert!(!PARTIAL_REQUEST.windows(4).any(|w| w == b"\r\n\r\n"));
}
