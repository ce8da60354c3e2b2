//! The allocator's client-side rate limit and server pushback.
//!
//! The first tests drive the throttled clients ([`ApiClients`]) over a `tower_test` mock with
//! tokio's paused clock, so every wait is exact: requests leave at `burst` then one per
//! `1 / qps`, a 429 holds *every* request until `Retry-After` has passed, waits are capped,
//! retries are bounded, and a write's token is taken once. The last tests run the whole
//! allocator against the fake API server answering 429 with `Retry-After`.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use fake_kube::{FakeKube, Fault, Gvr, Verb};
use http::{Request, Response, StatusCode};
use ipam_watch::allocator::kube_store::KubeStore;
use ipam_watch::allocator::lease::DEFAULT_LEASE_NAME;
use ipam_watch::allocator::throttle::{MAX_PUSHBACK_RETRIES, MAX_RETRY_AFTER};
use ipam_watch::allocator::{
    AllocatorMetrics, AllocatorOptions, ApiClients, ApiLimits, LeaseConfig, NodeUid, PodCidr,
    PodCidrPool, RecordSpec, run,
};
use kube::Client;
use kube::client::Body;
use podcidr_api::NodePodCIDR;
use serde_json::{Value, json};
use tokio::time::{Instant, timeout};
use tower_test::mock::{self, Handle, SendResponse};

type MockHandle = Handle<Request<Body>, Response<Body>>;

const WAIT: Duration = Duration::from_secs(30);

fn limits(qps: f64, burst: u32) -> ApiLimits {
    ApiLimits::new(qps, burst).unwrap()
}

fn mock_clients(l: ApiLimits) -> (ApiClients, MockHandle, Arc<AllocatorMetrics>) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let metrics = Arc::new(AllocatorMetrics::new());
    let api = ApiClients::new(&Client::new(service, "default"), l, &metrics);
    (api, handle, metrics)
}

fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).unwrap()
}

fn answer(send: SendResponse<Response<Body>>, code: u16, retry_after: Option<&str>) {
    let mut b = Response::builder().status(code);
    if let Some(r) = retry_after {
        b = b.header("retry-after", r);
    }
    send.send_response(b.body(Body::from(b"{}".to_vec())).unwrap());
}

async fn next(handle: &mut MockHandle) -> (Request<Body>, SendResponse<Response<Body>>) {
    timeout(Duration::from_secs(3600), handle.next_request())
        .await
        .expect("a request within the (virtual) hour")
        .expect("the client is alive")
}

/// Sends `req` on `client` in a task; the answer comes back through the handle.
fn spawn_send(
    client: &Client,
    req: Request<Body>,
) -> tokio::task::JoinHandle<kube::Result<StatusCode>> {
    let c = client.clone();
    tokio::spawn(async move { c.send(req).await.map(|r| r.status()) })
}

fn metric(m: &AllocatorMetrics, line_start: &str) -> Option<String> {
    m.encode()
        .lines()
        .find(|l| l.starts_with(line_start))
        .map(|l| l.rsplit(' ').next().unwrap_or_default().to_owned())
}

#[tokio::test(start_paused = true)]
async fn requests_leave_at_burst_then_one_per_interval() {
    let (api, mut handle, metrics) = mock_clients(limits(10.0, 5));
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..20)
        .map(|i| spawn_send(&api.main, get(&format!("/api/v1/nodes/n{i}"))))
        .collect();
    let mut at = Vec::new();
    for _ in 0..20 {
        let (_, send) = next(&mut handle).await;
        at.push(t0.elapsed());
        answer(send, 200, None);
    }
    let ms = |n: u64| Duration::from_millis(n);
    assert_eq!(&at[..5], &[ms(0); 5], "the burst goes at once");
    for (i, t) in at.iter().enumerate().skip(5) {
        assert_eq!(*t, ms(100 * (i as u64 - 4)), "request {i}");
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), 200);
    }
    assert_eq!(
        metric(&metrics, "podcidr_allocator_api_requests_total").as_deref(),
        Some("20")
    );
    // 15 requests waited 0.1 s … 1.5 s: 12 s in all.
    let waited: f64 = metric(&metrics, "podcidr_allocator_api_wait_seconds_total")
        .unwrap()
        .parse()
        .unwrap();
    assert!((waited - 12.0).abs() < 1e-6, "{waited}");
}

#[tokio::test(start_paused = true)]
async fn too_many_requests_pauses_every_request_for_retry_after() {
    let (api, mut handle, metrics) = mock_clients(limits(100.0, 10));
    let t0 = Instant::now();
    let first = spawn_send(&api.main, get("/api/v1/nodes/a"));
    let (_, send) = next(&mut handle).await;
    answer(send, 429, Some("3"));
    // Another request issued during the pause waits for it too.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let second = spawn_send(&api.main, get("/api/v1/nodes/b"));
    let mut seen = Vec::new();
    for _ in 0..2 {
        let (req, send) = next(&mut handle).await;
        seen.push((req.uri().path().to_owned(), t0.elapsed()));
        answer(send, 200, None);
    }
    let s3 = Duration::from_secs(3);
    let s3_10ms = s3 + Duration::from_millis(10);
    // The retry goes first at exactly 3 s; the bucket is empty after a pause, so the
    // next request follows one interval (10 ms) later, not as a burst.
    assert_eq!(
        seen,
        vec![
            ("/api/v1/nodes/a".to_owned(), s3),
            ("/api/v1/nodes/b".to_owned(), s3_10ms)
        ]
    );
    assert_eq!(first.await.unwrap().unwrap(), 200);
    assert_eq!(second.await.unwrap().unwrap(), 200);
    assert_eq!(
        metric(
            &metrics,
            "podcidr_allocator_api_throttled_total{code=\"429\"}"
        )
        .as_deref(),
        Some("1")
    );
}

#[tokio::test(start_paused = true)]
async fn pushback_waits_are_capped_and_backed_off_and_retries_bounded() {
    let (api, mut handle, metrics) = mock_clients(limits(1000.0, 1000));
    let t0 = Instant::now();
    let task = spawn_send(&api.main, get("/api/v1/nodes/a"));
    // Retry-After far beyond the cap: 60 s. Then no header: 1 s, 2 s, 4 s, … capped.
    let (_, send) = next(&mut handle).await;
    answer(send, 429, Some("86400"));
    let mut gaps = Vec::new();
    let mut last = t0.elapsed();
    for _ in 0..MAX_PUSHBACK_RETRIES {
        let (_, send) = next(&mut handle).await;
        gaps.push(t0.elapsed() - last);
        last = t0.elapsed();
        answer(send, 429, None);
    }
    let s = Duration::from_secs;
    let expected = [60, 2, 4, 8, 16, 32, 60, 60, 60, 60].map(s);
    assert_eq!(
        gaps, expected,
        "the first retry waited the capped Retry-After"
    );
    assert_eq!(gaps[0], MAX_RETRY_AFTER);
    // Retries used up: the caller gets the 429, nothing more is sent.
    assert_eq!(task.await.unwrap().unwrap(), 429);
    assert!(
        timeout(s(600), handle.next_request()).await.is_err(),
        "no request after the last retry"
    );
    assert_eq!(
        metric(
            &metrics,
            "podcidr_allocator_api_throttled_total{code=\"429\"}"
        )
        .as_deref(),
        Some("10")
    );
}

#[tokio::test(start_paused = true)]
async fn unavailable_is_retried_only_with_retry_after() {
    let (api, mut handle, _) = mock_clients(limits(1000.0, 1000));
    let t0 = Instant::now();
    let task = spawn_send(&api.main, get("/api/v1/nodes/a"));
    let (_, send) = next(&mut handle).await;
    answer(send, 503, Some("2"));
    let (_, send) = next(&mut handle).await;
    assert_eq!(t0.elapsed(), Duration::from_secs(2));
    answer(send, 503, None);
    assert_eq!(
        task.await.unwrap().unwrap(),
        503,
        "no Retry-After: the caller decides"
    );
    // Other failures go straight back as well.
    for code in [500, 504, 409] {
        let task = spawn_send(&api.main, get("/api/v1/nodes/b"));
        let (_, send) = next(&mut handle).await;
        answer(send, code, Some("1"));
        assert_eq!(task.await.unwrap().unwrap(), code);
    }
}

#[tokio::test(start_paused = true)]
async fn the_lease_has_a_bucket_of_its_own() {
    let (api, mut handle, _) = mock_clients(limits(1.0, 1));
    let t0 = Instant::now();
    // Drain the shared bucket with a write permit: the next read waits a second …
    let _permit = api.writes.permit().await;
    let read = spawn_send(&api.main, get("/api/v1/nodes/a"));
    let lease = spawn_send(
        &api.lease,
        get("/apis/coordination.k8s.io/v1/namespaces/x/leases/l"),
    );
    // … but the Lease request goes at once.
    let (req, send) = next(&mut handle).await;
    assert!(req.uri().path().contains("leases"));
    assert_eq!(t0.elapsed(), Duration::ZERO);
    answer(send, 200, None);
    let (req, send) = next(&mut handle).await;
    assert_eq!(req.uri().path(), "/api/v1/nodes/a");
    assert_eq!(t0.elapsed(), Duration::from_secs(1));
    answer(send, 200, None);
    assert_eq!(lease.await.unwrap().unwrap(), 200);
    assert_eq!(read.await.unwrap().unwrap(), 200);
}

fn record_json(name: &str, rv: &str) -> Value {
    json!({
        "apiVersion": "podcidr.io/v1alpha1", "kind": "NodePodCIDR",
        "metadata": {"name": name, "resourceVersion": rv, "uid": "u1"},
        "spec": {"podCIDRs": ["10.0.0.0/24"]},
    })
}

#[tokio::test(start_paused = true)]
async fn a_write_takes_one_token_and_its_retry_another() {
    let (api, mut handle, _) = mock_clients(limits(1.0, 1));
    let store = KubeStore::new(&api.writes, "me", Duration::from_secs(3600));
    let spec = RecordSpec {
        owner_uid: NodeUid("u1".into()),
        pod_cidrs: vec!["10.0.0.0/24".into()],
    };
    let t0 = Instant::now();
    let write = tokio::spawn(async move {
        let paid = store.permit().await;
        store.create(paid, "n1", &spec, None).await
    });
    let (req, send) = next(&mut handle).await;
    assert_eq!(req.method(), http::Method::POST);
    assert_eq!(
        t0.elapsed(),
        Duration::ZERO,
        "the permit was the only token taken"
    );
    answer(send, 429, Some("0"));
    // The retry needs a token of its own: the bucket (1/s, burst 1) gives it after 1 s.
    let (_, send) = next(&mut handle).await;
    assert_eq!(t0.elapsed(), Duration::from_secs(1));
    let body = serde_json::to_vec(&record_json("n1", "7")).unwrap();
    send.send_response(
        Response::builder()
            .status(201)
            .body(Body::from(body))
            .unwrap(),
    );
    let written = write.await.unwrap();
    assert_eq!(written.resource_version, Some(7));
}

// ---- the allocator against the fake API server ----

fn options(l: ApiLimits) -> AllocatorOptions {
    let mut o = AllocatorOptions::new(LeaseConfig {
        namespace: "kube-system".into(),
        name: DEFAULT_LEASE_NAME.into(),
        identity: "throttled".into(),
        duration: Duration::from_secs(15),
    });
    o.debounce = Duration::from_millis(20);
    o.api = l;
    o.flag_pool = Some(PodCidrPool::default_from_flags(
        &["10.0.0.0/16".into()],
        24,
        &["fd00::/48".into()],
        64,
    ));
    o.families = vec![
        ipam_watch::allocator::Family::V4,
        ipam_watch::allocator::Family::V6,
    ];
    o
}

fn is_allocated(o: &Value) -> bool {
    o["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Allocated" && c["status"] == "True")
    })
}

/// Every record holds one IPv4 and one IPv6 CIDR, and no CIDR is held twice.
fn assert_unique_dual_stack(fake: &FakeKube, n: usize) {
    let records = fake.list(&Gvr::of::<NodePodCIDR>(), None);
    assert_eq!(records.len(), n);
    let mut seen = HashSet::new();
    for r in &records {
        let cidrs: Vec<PodCidr> = r["spec"]["podCIDRs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| PodCidr::parse(c.as_str().unwrap()).unwrap())
            .collect();
        assert_eq!(cidrs.len(), 2, "{r}");
        for c in cidrs {
            assert!(seen.insert(c), "{c} handed out twice");
        }
        assert!(is_allocated(r), "{r}");
    }
}

/// The allocator running against `fake` with `limits` until stopped.
struct Running {
    metrics: Arc<AllocatorMetrics>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), ipam_watch::allocator::RunError>>,
    started: std::time::Instant,
}

impl Running {
    fn start(fake: &FakeKube, l: ApiLimits) -> Running {
        let metrics = Arc::new(AllocatorMetrics::new());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let started = std::time::Instant::now();
        let task = tokio::spawn(run(
            fake.client_without_retry(),
            options(l),
            metrics.clone(),
            async {
                let _ = stopped.await;
            },
        ));
        Running {
            metrics,
            stop,
            task,
            started,
        }
    }

    /// Waits until `n` records exist and all are allocated; the time since the start.
    async fn until_allocated(&self, fake: &FakeKube, n: usize) -> Duration {
        fake.wait_for(WAIT, |f| {
            let r = f.list(&Gvr::of::<NodePodCIDR>(), None);
            r.len() == n && r.iter().all(is_allocated)
        })
        .await
        .expect("every node allocated");
        self.started.elapsed()
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        timeout(WAIT, self.task).await.unwrap().unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocator_waits_out_429_retry_after_then_allocates_everything() {
    let fake = FakeKube::start().await.unwrap();
    for i in 0..20 {
        fake.insert(
            &Gvr::nodes(),
            json!({"metadata": {"name": format!("node-{i:02}")}}),
        )
        .unwrap();
    }
    // The server sheds the first 6 record creates with Retry-After: 1.
    fake.inject(
        Fault::too_many_requests(1)
            .verb(Verb::Create)
            .resource("nodepodcidrs")
            .times(6),
    );
    let a = Running::start(&fake, limits(1000.0, 100));
    let elapsed = a.until_allocated(&fake, 20).await;
    assert_eq!(fake.pending_faults(), 0);
    // One pause of 1 s covered all six (they were in flight together); nothing was sent
    // before it ended, so the whole run took at least that second.
    assert!(elapsed >= Duration::from_secs(1), "{elapsed:?}");
    assert_unique_dual_stack(&fake, 20);
    assert_eq!(
        fake.requests(Verb::Create, "nodepodcidrs"),
        26,
        "20 creates plus one retry of each shed one"
    );
    // The pass that made the writes counts them when it ends.
    assert!(a.metrics.wait_for_passes(1, WAIT).await);
    let text = a.metrics.encode();
    assert!(
        text.contains("podcidr_allocator_api_throttled_total{code=\"429\"} 6"),
        "{text}"
    );
    assert!(
        text.contains("podcidr_allocator_writes_total{kind=\"create\",result=\"ok\"} 20"),
        "the retries happened inside the writes: {text}"
    );
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocator_at_a_low_qps_is_paced_by_it() {
    let fake = FakeKube::start().await.unwrap();
    for i in 0..10 {
        fake.insert(
            &Gvr::nodes(),
            json!({"metadata": {"name": format!("node-{i:02}")}}),
        )
        .unwrap();
    }
    // 10 nodes: 20 writes plus 3 LISTs and 3 WATCHes, at 20/s after a burst of 5.
    let a = Running::start(&fake, limits(20.0, 5));
    let elapsed = a.until_allocated(&fake, 10).await;
    // The Lease has a bucket of its own; everything else shares this one.
    let sent: u64 = fake
        .request_counts()
        .iter()
        .filter(|((_, resource), _)| resource != "leases")
        .map(|(_, n)| n)
        .sum();
    // (requests - burst) / qps is a lower bound on the time taken.
    let floor = Duration::from_secs_f64((sent - 5) as f64 / 20.0);
    assert!(sent > 20, "20 writes and the LISTs: {sent}");
    assert!(
        elapsed >= floor,
        "{elapsed:?} < {floor:?} for {sent} requests"
    );
    assert_unique_dual_stack(&fake, 10);
    a.stop().await;
}
