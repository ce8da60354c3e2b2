//! `podcidr-bgp allocator`: flags, validation (exit 2 before any write), the admin listener,
//! SIGTERM handling; the allocator itself is `ipam_watch::allocator::run`. Logging, the
//! Kubernetes client, signals and the admin HTTP server come from [`crate::process`], shared
//! with the speaker.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use ipam_watch::allocator::lease::{DEFAULT_LEASE_NAME, default_identity};
use ipam_watch::allocator::{
    AllocatorMetrics, AllocatorOptions, ApiLimits, ApiLimitsError, DEFAULT_API_BURST,
    DEFAULT_API_QPS, DEFAULT_QUARANTINE_SECS, Family, LeaderState, LeaseConfig, PodCidr,
    PodCidrPool,
};
use podcidr_config::{LogConfig, LogFormat, LogLevel};
use tokio::net::TcpListener;

use crate::config_status::StatusSettings;
use crate::process::http::{self, HttpLimits};
use crate::process::{ProcessError, kube_config_in_context, logging, signals};

/// `/livez` fails when the main loop has not ticked for this long.
const LIVENESS_WINDOW: u64 = 30;

/// Flags of `podcidr-bgp allocator`.
#[derive(Debug, clap::Args)]
pub struct AllocatorArgs {
    /// IPv4 CIDR(s) of the `default` pool (repeatable or comma-separated).
    #[arg(
        long = "cluster-pool-ipv4-cidr",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    pub ipv4_cidrs: Vec<String>,
    /// Prefix length of each node's IPv4 block.
    #[arg(
        long = "cluster-pool-ipv4-mask-size",
        value_name = "LEN",
        default_value_t = 24
    )]
    pub ipv4_mask_size: u8,
    /// IPv6 CIDR(s) of the `default` pool (repeatable or comma-separated).
    #[arg(
        long = "cluster-pool-ipv6-cidr",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    pub ipv6_cidrs: Vec<String>,
    /// Prefix length of each node's IPv6 block.
    #[arg(
        long = "cluster-pool-ipv6-mask-size",
        value_name = "LEN",
        default_value_t = 64
    )]
    pub ipv6_mask_size: u8,
    /// Families every node gets, primary first (default: the families of the flag pool,
    /// else ipv4).
    #[arg(long, value_name = "FAMILY", value_delimiter = ',')]
    pub families: Vec<String>,
    /// How long a released CIDR is withheld before reuse (longer than BGP hold time plus
    /// graceful-restart time), e.g. `300` (seconds), `5m`.
    #[arg(long, value_name = "DURATION", default_value_t = DEFAULT_QUARANTINE_SECS, value_parser = crate::cli::parse_duration)]
    pub quarantine: u64,
    /// Namespace of the Lease [default: $POD_NAMESPACE, else kube-system].
    #[arg(long, value_name = "NAMESPACE", env = "POD_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Name of the Lease.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_LEASE_NAME)]
    pub lease_name: String,
    /// Lease duration (renewed every third of it), e.g. `15` (seconds), `15s`.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = crate::cli::parse_duration)]
    pub lease_duration: u64,
    /// Time between full reconcile passes, e.g. `60` (seconds), `1m`.
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = crate::cli::parse_duration)]
    pub resync: u64,
    /// Client-side limit on API requests per second, every request counted (reads, writes,
    /// the Lease on a bucket of its own); as kube-controller-manager's --kube-api-qps.
    #[arg(long, value_name = "QPS", default_value_t = DEFAULT_API_QPS)]
    pub api_qps: f64,
    /// Requests that may go out back to back before --api-qps applies (bucket size); as
    /// kube-controller-manager's --kube-api-burst.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_API_BURST)]
    pub api_burst: u32,
    /// Admin listener: /metrics, /livez, /readyz. Keep it on loopback (the kubelet's probes
    /// reach it on a host-network pod): anything that can connect can fill its connection cap.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9181")]
    pub admin_listen: SocketAddr,
    /// Also serve /metrics, and nothing else, on this address (the node's, for Prometheus):
    /// a client flooding it can delay a scrape, never a probe.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: the current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Log format: text or json (the config's `log.format` spelling).
    #[arg(long, default_value = "text", value_parser = log_format)]
    pub log_format: LogFormat,
    /// Write the status of the BGPSpeakerConfig and BGPPeer objects (conditions, selected
    /// nodes) and the Events on Services (BGPAnnounced, BGPWithdrawn) while leading: the one
    /// writer of the cluster. `false` where the bgp.podcidr.io CRDs are not installed.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub config_status: bool,
    /// Namespace of the Secrets BGPPeers name in passwordSecretRef (the speakers')
    /// [default: $POD_NAMESPACE, else kube-system].
    #[arg(long, value_name = "NAMESPACE")]
    pub speaker_namespace: Option<String>,
}

/// A flag error: which flag, which value, why.
#[derive(Debug, PartialEq, Eq)]
pub struct FlagError {
    pub flag: &'static str,
    pub value: String,
    pub reason: String,
}

impl std::fmt::Display for FlagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid value {:?} for --{}: {}",
            self.value, self.flag, self.reason
        )
    }
}

fn bad(flag: &'static str, value: impl ToString, reason: impl Into<String>) -> FlagError {
    FlagError {
        flag,
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn check_family(
    cidrs: &[String],
    mask: u8,
    family: Family,
    cidr_flag: &'static str,
    mask_flag: &'static str,
) -> Result<(), FlagError> {
    if mask == 0 || mask > family.bits() {
        return Err(bad(
            mask_flag,
            mask,
            format!("must be 1..={}", family.bits()),
        ));
    }
    for s in cidrs {
        let c = PodCidr::parse(s).map_err(|e| bad(cidr_flag, s, e.to_string()))?;
        if c.family() != family {
            return Err(bad(cidr_flag, s, format!("not an {} CIDR", family.name())));
        }
        if c.prefix_len() > mask {
            return Err(bad(
                mask_flag,
                mask,
                format!("shorter than the pool CIDR {s}"),
            ));
        }
    }
    Ok(())
}

/// Validates flags into options; nothing has touched the API yet.
pub fn options(args: &AllocatorArgs) -> Result<AllocatorOptions, FlagError> {
    let v4 = "cluster-pool-ipv4-cidr";
    let v6 = "cluster-pool-ipv6-cidr";
    check_family(
        &args.ipv4_cidrs,
        args.ipv4_mask_size,
        Family::V4,
        v4,
        "cluster-pool-ipv4-mask-size",
    )?;
    check_family(
        &args.ipv6_cidrs,
        args.ipv6_mask_size,
        Family::V6,
        v6,
        "cluster-pool-ipv6-mask-size",
    )?;
    let mut families = Vec::new();
    for f in &args.families {
        let fam = match f.to_ascii_lowercase().as_str() {
            "ipv4" | "v4" => Family::V4,
            "ipv6" | "v6" => Family::V6,
            _ => return Err(bad("families", f, "expected ipv4 or ipv6")),
        };
        if families.contains(&fam) {
            return Err(bad("families", f, "listed twice"));
        }
        families.push(fam);
    }
    if families.is_empty() {
        if !args.ipv4_cidrs.is_empty() || args.ipv6_cidrs.is_empty() {
            families.push(Family::V4);
        }
        if !args.ipv6_cidrs.is_empty() {
            families.push(Family::V6);
        }
    }
    if args.lease_duration < 3 || args.lease_duration > 3600 {
        return Err(bad(
            "lease-duration",
            args.lease_duration,
            "must be 3..=3600 seconds",
        ));
    }
    if args.resync == 0 {
        return Err(bad("resync", 0, "must be at least 1 second"));
    }
    if args.lease_name.is_empty() {
        return Err(bad("lease-name", "", "must not be empty"));
    }
    let namespace = args
        .lease_namespace
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "kube-system".into());
    let lease = LeaseConfig {
        namespace,
        name: args.lease_name.clone(),
        identity: default_identity(),
        duration: Duration::from_secs(args.lease_duration),
    };
    let api = ApiLimits::new(args.api_qps, args.api_burst).map_err(|e| match e {
        ApiLimitsError::Qps(v) => bad("api-qps", v, e.to_string()),
        ApiLimitsError::Burst(v) => bad("api-burst", v, e.to_string()),
    })?;
    let mut opts = AllocatorOptions::new(lease);
    opts.api = api;
    opts.families = families;
    opts.quarantine_secs = args.quarantine;
    opts.resync = Duration::from_secs(args.resync);
    if !args.ipv4_cidrs.is_empty() || !args.ipv6_cidrs.is_empty() {
        opts.flag_pool = Some(PodCidrPool::default_from_flags(
            &args.ipv4_cidrs,
            args.ipv4_mask_size,
            &args.ipv6_cidrs,
            args.ipv6_mask_size,
        ));
    }
    Ok(opts)
}

/// The speakers' namespace: the flag, else the allocator's own (both ship in one).
fn speaker_namespace(args: &AllocatorArgs) -> String {
    args.speaker_namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "kube-system".into())
}

fn log_config(format: LogFormat) -> LogConfig {
    LogConfig {
        format,
        level: LogLevel::Info,
    }
}

fn log_format(value: &str) -> Result<LogFormat, String> {
    LogFormat::parse(value).ok_or_else(|| format!("{value:?} is not one of text, json"))
}

fn respond(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r
}

/// `/metrics`, `/livez`, `/readyz`.
fn handle(metrics: &AllocatorMetrics, path: &str) -> Response<Full<Bytes>> {
    let ok = |b: bool| {
        if b {
            respond(StatusCode::OK, "ok\n".into())
        } else {
            respond(StatusCode::SERVICE_UNAVAILABLE, "not ok\n".into())
        }
    };
    match path {
        "/metrics" => respond(StatusCode::OK, metrics.encode()),
        "/livez" => ok(metrics.is_live(LIVENESS_WINDOW)),
        "/readyz" => ok(metrics.is_ready()),
        _ => respond(StatusCode::NOT_FOUND, "not found\n".into()),
    }
}

/// The admin endpoint (probes and metrics, on loopback as shipped): the shared hardened
/// server, with the default [`HttpLimits`] outside tests.
async fn serve_admin(listener: TcpListener, metrics: Arc<AllocatorMetrics>, limits: HttpLimits) {
    let handler =
        move |req: Request<Incoming>| std::future::ready(handle(&metrics, req.uri().path()));
    http::serve(listener, handler, limits).await;
}

/// `--metrics-listen`: /metrics only, on an address other pods reach. Its own connection cap,
/// so filling it holds no probe back.
async fn serve_metrics(listener: TcpListener, metrics: Arc<AllocatorMetrics>, limits: HttpLimits) {
    let handler = move |req: Request<Incoming>| {
        std::future::ready(match req.uri().path() {
            "/metrics" => handle(&metrics, "/metrics"),
            _ => respond(StatusCode::NOT_FOUND, "not found\n".into()),
        })
    };
    http::serve(listener, handler, limits).await;
}

/// The API client without kube's retry layer: the allocator's own layer applies
/// --api-qps/--api-burst and honours 429/Retry-After (kube's would retry up to 15 times per
/// request, uncounted, with waits of up to 1000 s).
async fn allocator_client(args: &AllocatorArgs) -> Result<kube::Client, ProcessError> {
    let mut config =
        kube_config_in_context(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    config.default_retry = false;
    let cluster_url = config.cluster_url.to_string();
    kube::Client::try_from(config).map_err(|e| ProcessError::KubeClient {
        cluster_url,
        source: Box::new(e),
    })
}

/// Runs the allocator: 0 after SIGTERM, 1 on lost lease or runtime failure, 2 on bad flags.
pub async fn run(args: AllocatorArgs) -> ExitCode {
    let opts = match options(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("podcidr-bgp allocator: {e}");
            return ExitCode::from(2);
        }
    };
    logging::init(&log_config(args.log_format));
    let shutdown = match signals::shutdown() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("podcidr-bgp allocator: {e}");
            return ExitCode::from(2);
        }
    };
    let client = match allocator_client(&args).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("podcidr-bgp allocator: {e}");
            return ExitCode::from(2);
        }
    };
    let listener = match TcpListener::bind(args.admin_listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "podcidr-bgp allocator: invalid value {:?} for --admin-listen: {e}",
                args.admin_listen.to_string()
            );
            return ExitCode::from(2);
        }
    };
    let metrics_listener = match args.metrics_listen {
        None => None,
        Some(addr) => match TcpListener::bind(addr).await {
            Ok(l) => Some(l),
            Err(e) => {
                eprintln!(
                    "podcidr-bgp allocator: invalid value {:?} for --metrics-listen: {e}",
                    addr.to_string()
                );
                return ExitCode::from(2);
            }
        },
    };
    let metrics = Arc::new(AllocatorMetrics::new());
    metrics.set_build_info(env!("CARGO_PKG_VERSION"), env!("PODCIDR_GIT_COMMIT"));
    let admin = tokio::spawn(serve_admin(
        listener,
        metrics.clone(),
        HttpLimits::default(),
    ));
    let metrics_only = metrics_listener
        .map(|l| tokio::spawn(serve_metrics(l, metrics.clone(), HttpLimits::default())));
    tracing::info!(
        identity = %opts.lease.identity,
        lease = %format!("{}/{}", opts.lease.namespace, opts.lease.name),
        api_qps = opts.api.qps,
        api_burst = opts.api.burst,
        "allocator starting"
    );
    let stop = async move {
        let signal = shutdown.wait().await;
        tracing::info!(%signal, "stopping");
    };
    let mut opts = opts;
    let config_status = args.config_status.then(|| {
        let (tx, rx) = tokio::sync::watch::channel(LeaderState::Follower);
        opts.leadership = Some(tx);
        let settings = StatusSettings {
            secret_namespace: speaker_namespace(&args),
        };
        // Events on Services (BGPAnnounced, BGPWithdrawn): the same leader, the one
        // cluster-wide view.
        let events = tokio::spawn(crate::service_events::run(
            client.clone(),
            rx.clone(),
            metrics.clone(),
        ));
        let status = tokio::spawn(crate::config_status::run(
            client.clone(),
            settings,
            rx,
            metrics.clone(),
        ));
        (status, events)
    });
    // In the allocator's own namespace (its Lease's), where the shipped install put the old
    // speaker Role and where the allocator's Role may read it.
    let leftovers = tokio::spawn(crate::leftovers::watch(
        client.clone(),
        opts.lease.namespace.clone(),
        metrics.clone(),
    ));
    let result = ipam_watch::allocator::run(client, opts, metrics, stop).await;
    admin.abort();
    if let Some(m) = metrics_only {
        m.abort();
    }
    leftovers.abort();
    if let Some((status, events)) = config_status {
        status.abort();
        events.abort();
    }
    match result {
        Ok(()) => {
            tracing::info!("allocator stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("podcidr-bgp allocator: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: AllocatorArgs,
    }

    fn parse(args: &[&str]) -> Result<AllocatorOptions, FlagError> {
        let cli = Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied())).unwrap();
        options(&cli.args)
    }

    /// The allocator's admin endpoint goes through the shared server: a request head that
    /// never finishes is closed after the header-read timeout, and the endpoints answer as
    /// before.
    #[tokio::test]
    async fn allocator_admin_closes_a_half_open_request() {
        use crate::process::http::testing::{closed_within, get, half_open, short_limits};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let metrics = Arc::new(AllocatorMetrics::new());
        metrics.beat();
        let task = tokio::spawn(serve_admin(listener, metrics.clone(), short_limits()));
        let mut slow = half_open(addr).await;
        assert_eq!(get(addr, "/livez").await, (200, "ok\n".to_owned()));
        assert_eq!(get(addr, "/readyz").await.0, 503);
        metrics.set_ready(true);
        assert_eq!(get(addr, "/readyz").await.0, 200);
        assert_eq!(get(addr, "/metrics").await.0, 200);
        assert_eq!(get(addr, "/nope").await.0, 404);
        closed_within(&mut slow, Duration::from_secs(4))
            .await
            .expect("half-open request closed by the header-read timeout");
        task.abort();
    }

    #[test]
    fn flags_validate_and_name_the_flag() {
        let o = parse(&["--cluster-pool-ipv4-cidr", "10.0.0.0/16,10.1.0.0/16"]).unwrap();
        let pool = o.flag_pool.unwrap();
        assert_eq!(pool.ipv4.unwrap().cidrs.len(), 2);
        assert_eq!(o.families, vec![Family::V4]);
        let e = parse(&["--cluster-pool-ipv4-cidr", "10.0.0.1/16"]).unwrap_err();
        assert_eq!(e.flag, "cluster-pool-ipv4-cidr");
        let e = parse(&["--cluster-pool-ipv6-cidr", "10.0.0.0/16"]).unwrap_err();
        assert_eq!(e.flag, "cluster-pool-ipv6-cidr");
        let e = parse(&[
            "--cluster-pool-ipv4-cidr",
            "10.0.0.0/16",
            "--cluster-pool-ipv4-mask-size",
            "8",
        ])
        .unwrap_err();
        assert_eq!(e.flag, "cluster-pool-ipv4-mask-size");
        let e = parse(&["--lease-duration", "1"]).unwrap_err();
        assert_eq!(e.flag, "lease-duration");
        let o = parse(&["--cluster-pool-ipv6-cidr", "fd00::/48"]).unwrap();
        assert_eq!(o.families, vec![Family::V6]);
        let o = parse(&[]).unwrap();
        assert!(o.flag_pool.is_none());
        assert_eq!(o.quarantine_secs, DEFAULT_QUARANTINE_SECS);
        assert_eq!(o.api, ApiLimits::new(20.0, 30).unwrap());
        let o = parse(&["--api-qps", "0.5", "--api-burst", "1"]).unwrap();
        assert_eq!((o.api.qps, o.api.burst), (0.5, 1));
        for qps in ["0", "-3", "NaN", "inf"] {
            let e = parse(&[&format!("--api-qps={qps}")]).unwrap_err();
            assert_eq!(e.flag, "api-qps", "{qps}");
            assert!(e.to_string().contains("greater than 0"), "{e}");
        }
        let e = parse(&["--api-burst", "0"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"invalid value "0" for --api-burst: must be at least 1"#
        );
    }
}
