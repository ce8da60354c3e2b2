//! The allocator's Kubernetes clients: every request waits for a token of a client-side
//! bucket ([`super::throttle::TokenBucket`], `--api-qps` / `--api-burst`), and server
//! pushback (429, or 503 with `Retry-After`) is honoured before the request is retried.
//!
//! The limits sit in a tower service around the kube [`Client`] (a [`Client`] built on
//! [`Throttled`]), so the watcher's LIST and WATCH requests, the GETs and every write pass
//! the same bucket without each call site having to remember it. The process builds its
//! client without kube's own retry layer (`Config::default_retry = false`), so a 429 reaches
//! this layer: kube's layer would retry up to 15 times per request with waits up to 1000 s
//! and without counting.
//!
//! Pushback is global: a 429 pauses the whole bucket until `Retry-After` has passed, and
//! the bucket is empty then, so requests resume at `--api-qps`, not as a burst (no retry
//! storm). The request is retried at most
//! [`MAX_PUSHBACK_RETRIES`](super::throttle::MAX_PUSHBACK_RETRIES) times, each retry taking
//! a token of its own; then the caller gets the 429.
//!
//! Three clients share one connection pool ([`ApiClients`]):
//! - `main`: watches, GETs, pool status, Events;
//! - `writes` ([`WritePath`]): `NodePodCIDR` writes. The caller takes the token first
//!   ([`WritePath::permit`]) and only then checks the Lease gate and starts the request
//!   timeout, so a wait in the queue is never mistaken for a write of unknown outcome and a
//!   write never starts after our write window closed;
//! - `lease`: the Lease, with a bucket of its own of the same size, so a queue of writes
//!   never delays a renewal (kube-controller-manager gives leader election its own client
//!   for the same reason).

use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{Request, Response};
use kube::Client;
use kube::client::Body;

use super::metrics::AllocatorMetrics;
use super::throttle::{ApiLimits, TokenBucket, pushback};

/// A token bucket shared by the clients that draw from it.
///
/// Waiters hold no lock while they wait: a waiter inside a watch stream that its task
/// stops polling (the allocator's loop runs a pass instead) would otherwise hold every
/// other waiter of that task, the pass's writes included, forever.
#[derive(Clone)]
pub struct Limiter {
    inner: Arc<LimiterInner>,
}

struct LimiterInner {
    bucket: Mutex<TokenBucket>,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter").finish_non_exhaustive()
    }
}

impl Limiter {
    /// A full bucket.
    pub fn new(limits: ApiLimits) -> Self {
        let now = tokio::time::Instant::now().into_std();
        Limiter {
            inner: Arc::new(LimiterInner {
                bucket: Mutex::new(TokenBucket::new(limits, now)),
            }),
        }
    }

    /// Waits for a token; returns how long it waited. Cancel-safe: a waiter that is dropped
    /// takes nothing.
    pub async fn acquire(&self) -> Duration {
        let start = tokio::time::Instant::now();
        loop {
            let now = tokio::time::Instant::now();
            let taken = self
                .inner
                .bucket
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .try_take(now.into_std());
            match taken {
                Ok(()) => return now - start,
                // A pause that arrives meanwhile is seen on the next look.
                Err(wait) => tokio::time::sleep_until(now + wait).await,
            }
        }
    }

    /// Server pushback: no request goes out for `wait`.
    pub fn pause_for(&self, wait: Duration) {
        let until = tokio::time::Instant::now() + wait;
        self.inner
            .bucket
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pause_until(until.into_std());
    }
}

/// Proof that a write took its token ([`WritePath::permit`]); spent by the write.
#[must_use = "a permit is the token of one write"]
#[derive(Debug)]
pub struct Permit(());

/// Tower service around a kube [`Client`]: the token bucket and server pushback.
#[derive(Clone)]
struct Throttled {
    inner: Client,
    limiter: Limiter,
    metrics: Arc<AllocatorMetrics>,
    /// The caller took the token of the first attempt ([`WritePath`]).
    first_paid: bool,
}

impl Throttled {
    async fn send(self, mut req: Request<Body>) -> kube::Result<Response<Body>> {
        let mut attempt = 0u32;
        loop {
            if attempt > 0 || !self.first_paid {
                let waited = self.limiter.acquire().await;
                self.metrics.api_waited(waited);
            }
            let again = clone_request(&req);
            let (method, path) = (req.method().clone(), req.uri().path().to_owned());
            self.metrics.api_requests.inc();
            let resp = self.inner.send(req).await?;
            let status = resp.status().as_u16();
            let retry_after = resp
                .headers()
                .get(http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok());
            let (Some(wait), Some(next)) = (pushback(status, retry_after, attempt), again) else {
                return Ok(resp);
            };
            self.metrics.count_throttled(status);
            tracing::debug!(
                %method, path, status, attempt, wait_ms = wait.as_millis(),
                "API server pushback: waiting before the retry"
            );
            self.limiter.pause_for(wait);
            req = next;
            attempt += 1;
        }
    }
}

impl tower_service::Service<Request<Body>> for Throttled {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, kube::Result<Response<Body>>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        Box::pin(self.clone().send(req))
    }
}

/// A copy for a retry; `None` for a streaming body (never sent by kube's `Api`).
fn clone_request(req: &Request<Body>) -> Option<Request<Body>> {
    let mut copy = Request::new(req.body().try_clone()?);
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    *copy.extensions_mut() = req.extensions().clone();
    Some(copy)
}

fn throttled(
    client: &Client,
    limiter: &Limiter,
    metrics: &Arc<AllocatorMetrics>,
    first_paid: bool,
) -> Client {
    let service = Throttled {
        inner: client.clone(),
        limiter: limiter.clone(),
        metrics: metrics.clone(),
        first_paid,
    };
    Client::new(service, client.default_namespace().to_owned())
}

/// The write path: `NodePodCIDR` writes, each after its [`WritePath::permit`].
#[derive(Clone)]
pub struct WritePath {
    client: Client,
    limiter: Limiter,
    metrics: Arc<AllocatorMetrics>,
}

impl std::fmt::Debug for WritePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WritePath").finish_non_exhaustive()
    }
}

impl WritePath {
    /// Waits for the token of one write (shared bucket with `main`).
    pub async fn permit(&self) -> Permit {
        let waited = self.limiter.acquire().await;
        self.metrics.api_waited(waited);
        Permit(())
    }

    /// The client whose first attempt is paid by a [`Permit`].
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }
}

/// The allocator's clients over one connection pool (see the module docs).
#[derive(Clone)]
pub struct ApiClients {
    /// Watches, GETs, pool status, Events.
    pub main: Client,
    /// `NodePodCIDR` writes (same bucket as `main`).
    pub writes: WritePath,
    /// The Lease (a bucket of its own).
    pub lease: Client,
}

impl std::fmt::Debug for ApiClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClients").finish_non_exhaustive()
    }
}

impl ApiClients {
    /// Throttled clients over `client`, which should be built without kube's retry layer
    /// (`Config::default_retry = false`; see the module docs).
    pub fn new(client: &Client, limits: ApiLimits, metrics: &Arc<AllocatorMetrics>) -> Self {
        let shared = Limiter::new(limits);
        ApiClients {
            main: throttled(client, &shared, metrics, false),
            writes: WritePath {
                client: throttled(client, &shared, metrics, true),
                limiter: shared,
                metrics: metrics.clone(),
            },
            lease: throttled(client, &Limiter::new(limits), metrics, false),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::task::Poll;

    use super::*;

    /// Chaos soak finding (seed 424242, no leader faults): both allocators hung for good
    /// after losing the Lease. A watch stream's request had started waiting for a token and
    /// held the bucket's turn; the loop then ran a pass instead of polling the stream, and
    /// the pass's first write waited for the turn behind a waiter nobody polled.
    #[tokio::test(start_paused = true)]
    async fn a_waiter_that_is_no_longer_polled_blocks_no_other_waiter() {
        let l = Limiter::new(ApiLimits::new(1.0, 1).unwrap());
        l.acquire().await;
        let mut stalled = pin!(l.acquire());
        assert!(matches!(futures::poll!(stalled.as_mut()), Poll::Pending));
        // Same task, `stalled` not polled again.
        let other = tokio::time::timeout(Duration::from_secs(10), l.acquire()).await;
        assert_eq!(other.ok(), Some(Duration::from_secs(1)));
    }
}
