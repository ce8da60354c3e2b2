//! `podcidr-bgp speaker`: the per-node daemon. Config → source → announce guard → one
//! session per peer; status, metrics and health on the side. Routes are never dropped by
//! accident: a source that is not ready, an API outage or a bad reload changes nothing.

pub mod guard;
pub mod node;
pub mod peers;
pub mod report;
pub mod routes;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bgp_proto::session::driver::SessionEvent;
use bgp_proto::session::{RouteSet, State as SessionState, StopReason};
use ipam_watch::crd::{NodeBGPStatus, NodeBGPStatusSpec, SpeakerReport};
use ipam_watch::source::{
    CiliumNodeSource, DesiredSet, FileSource, IpamCrdSource, NodeSpecSource, PodCidrSource,
};
use ipnet::IpNet;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource};
use podcidr_config::{Config, SourceConfig, diff_peers};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};

use crate::admin::{self, AdminState};
use crate::metrics::{Metrics, PeerFamilyLabel, ReasonLabel, ResultLabel};
use guard::{Guarded, guard};
use node::NodeInfo;
use peers::{LocalIdentity, PeerManager, PreparedPeer, prepare};
use routes::{NodeAddresses, PeerRefusal, next_hops, peer_routes, route_source};

/// The routes offered to one peer and what it refuses (sorted by prefix).
type PeerRoutes = (Arc<RouteSet>, Arc<[(IpNet, PeerRefusal)]>);

/// Field manager for server-side apply.
const FIELD_MANAGER: &str = "podcidr-bgp-speaker";
/// A report is re-published at least this often, so `diff` can tell a live speaker from a
/// dead one.
const HEARTBEAT: Duration = Duration::from_secs(60);

#[derive(Debug, clap::Args)]
pub struct SpeakerArgs {
    /// Config file (YAML).
    #[arg(long, default_value = "/etc/podcidr/config.yaml")]
    pub config: PathBuf,
    /// This node's name (default: the config's nodeName, then $NODE_NAME).
    #[arg(long)]
    pub node_name: Option<String>,
    /// Validate the config (and read MD5 key files), print the result and exit.
    #[arg(long)]
    pub check_config: bool,
    /// On SIGTERM send Cease/Administrative Shutdown (routers withdraw at once) instead of
    /// closing for graceful restart (routers keep the routes while we restart).
    #[arg(long = "final")]
    pub final_stop: bool,
    /// Kubeconfig file (default: in-cluster config or $KUBECONFIG).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Seconds between checks of the config file for changes (SIGHUP reloads at once).
    #[arg(long, default_value_t = 2)]
    pub config_poll_seconds: u64,
    /// Milliseconds between checks of a `file` source for changes; changes inotify reports are
    /// checked at once, this bounds the rest.
    #[arg(long, default_value_t = 2000)]
    pub file_poll_ms: u64,
}

/// Validates config and keys; the error text names every bad field.
pub fn load(path: &Path) -> Result<(Config, Vec<PreparedPeer>), String> {
    let config = Config::load(path).map_err(|e| e.to_string())?;
    let prepared = prepare(&config.peers)?;
    Ok((config, prepared))
}

pub async fn kube_client(kubeconfig: Option<&Path>) -> Result<Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("no Kubernetes API configuration: {e}"))?,
    };
    Client::try_from(config).map_err(|e| e.to_string())
}

fn start_source(
    source: &SourceConfig,
    client: Option<&Client>,
    node: &str,
    file_poll: Duration,
) -> Result<
    (
        watch::Receiver<Arc<DesiredSet>>,
        tokio::task::JoinHandle<()>,
    ),
    String,
> {
    let src: Box<dyn PodCidrSource> = match (source, client) {
        (SourceConfig::File { path }, _) => {
            Box::new(FileSource::new(path.clone()).with_interval(file_poll))
        }
        (SourceConfig::NodeSpec, Some(c)) => Box::new(NodeSpecSource::new(c.clone())),
        (SourceConfig::IpamCrd, Some(c)) => Box::new(IpamCrdSource::new(c.clone())),
        (SourceConfig::CiliumNode, Some(c)) => Box::new(CiliumNodeSource::new(c.clone())),
        (other, None) => return Err(format!("source.kind {other} needs the Kubernetes API")),
    };
    let (rx, driver) = src.watch_node(node);
    Ok((rx, tokio::spawn(driver)))
}

pub async fn run(args: SpeakerArgs) -> ExitCode {
    let (config, prepared) = match load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{}: invalid config:\n{e}", args.config.display());
            return ExitCode::from(2);
        }
    };
    let node_name =
        match config.resolve_node_name(args.node_name.clone(), std::env::var("NODE_NAME").ok()) {
            Ok(n) => n,
            Err(e) => {
                eprintln!("{}: {e}", args.config.display());
                return ExitCode::from(2);
            }
        };
    if args.check_config {
        println!(
            "{}: config OK (node {node_name}, {} peers, source {})",
            args.config.display(),
            config.peers.len(),
            config.source
        );
        return ExitCode::SUCCESS;
    }
    crate::logging::init(&config.log);
    let needs_api = !config.source.is_file();
    let client = match kube_client(args.kubeconfig.as_deref()).await {
        Ok(c) => Some(c),
        Err(e) if !needs_api => {
            tracing::warn!(error = %e, "no Kubernetes API: status publishing and nodeSelectors are off");
            None
        }
        Err(e) => {
            eprintln!("podcidr-bgp speaker: {e}");
            return ExitCode::from(2);
        }
    };
    let (Ok(mut sigterm), Ok(mut sigint)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("podcidr-bgp speaker: cannot install signal handlers");
        return ExitCode::from(2);
    };
    let opts = RunOptions {
        config_path: Some(args.config.clone()),
        final_stop: args.final_stop,
        config_poll: Duration::from_secs(args.config_poll_seconds.max(1)),
        file_poll: Duration::from_millis(args.file_poll_ms.max(1)),
    };
    match Speaker::start(config, prepared, node_name, client, opts).await {
        Ok(mut s) => {
            s.run(async move {
                tokio::select! {
                    _ = sigterm.recv() => {}
                    _ = sigint.recv() => {}
                }
            })
            .await;
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("podcidr-bgp speaker: {e}");
            ExitCode::from(2)
        }
    }
}

/// How a speaker runs besides its config.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Reload from this file on SIGHUP and when it changes (none for in-process speakers).
    pub config_path: Option<PathBuf>,
    /// Stop with Cease/Administrative Shutdown instead of closing for graceful restart.
    pub final_stop: bool,
    pub config_poll: Duration,
    /// Polling interval of a `file` source.
    pub file_poll: Duration,
}

pub struct Speaker {
    opts: RunOptions,
    config: Config,
    prepared: BTreeMap<String, PreparedPeer>,
    node_name: String,
    client: Option<Client>,
    metrics: Arc<Metrics>,
    admin: Arc<AdminState>,
    admin_task: tokio::task::JoinHandle<()>,
    admin_addr: SocketAddr,
    desired: watch::Receiver<Arc<DesiredSet>>,
    source_task: tokio::task::JoinHandle<()>,
    node: watch::Receiver<NodeInfo>,
    node_task: Option<tokio::task::JoinHandle<()>>,
    peers: Option<PeerManager>,
    events_tx: mpsc::UnboundedSender<(String, SessionEvent)>,
    events: mpsc::UnboundedReceiver<(String, SessionEvent)>,
    guarded: Option<Arc<Guarded>>,
    peer_routes: BTreeMap<String, PeerRoutes>,
    refusals_seen: BTreeSet<(String, &'static str)>,
    mismatch_seen: Option<String>,
    config_stamp: Option<FileStamp>,
    /// Content fingerprint and time of the last published report.
    published: Option<(u64, Instant)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp(Option<std::time::SystemTime>, u64, u64);

fn stamp(path: &Path) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(FileStamp(m.modified().ok(), m.len(), m.ino()))
}

impl std::fmt::Debug for Speaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Speaker")
            .field("node", &self.node_name)
            .finish()
    }
}

impl Speaker {
    /// Starts the admin endpoint, the source and the Node watch; sessions start in `run`.
    pub async fn start(
        config: Config,
        prepared: Vec<PreparedPeer>,
        node_name: String,
        client: Option<Client>,
        opts: RunOptions,
    ) -> Result<Speaker, String> {
        let metrics = Arc::new(Metrics::new());
        let admin = Arc::new(AdminState::new(node_name.clone(), Arc::clone(&metrics)));
        let listener = tokio::net::TcpListener::bind(config.admin.listen)
            .await
            .map_err(|e| format!("admin.listen {}: {e}", config.admin.listen))?;
        let admin_addr = listener
            .local_addr()
            .map_err(|e| format!("admin.listen: {e}"))?;
        tracing::info!(listen = %admin_addr, "admin endpoint up");
        let admin_task = tokio::spawn(admin::serve(listener, Arc::clone(&admin)));
        let (desired, source_task) =
            start_source(&config.source, client.as_ref(), &node_name, opts.file_poll)?;
        let (node, node_task) = match (&client, config.source.is_file()) {
            (Some(c), false) => {
                let (rx, t) = node::watch_node(c.clone(), &node_name);
                (rx, Some(t))
            }
            _ => {
                // File mode: no Node object to wait for.
                let (_tx, rx) = watch::channel(NodeInfo {
                    known: true,
                    ..NodeInfo::default()
                });
                (rx, None)
            }
        };
        let (events_tx, events) = mpsc::unbounded_channel();
        let config_stamp = opts.config_path.as_deref().and_then(stamp);
        tracing::info!(node = %node_name, source = %config.source, peers = config.peers.len(), "speaker starting");
        Ok(Speaker {
            opts,
            prepared: prepared
                .into_iter()
                .map(|p| (p.config.name.clone(), p))
                .collect(),
            config,
            node_name,
            client,
            metrics,
            admin,
            admin_task,
            admin_addr,
            desired,
            source_task,
            node,
            node_task,
            peers: None,
            events_tx,
            events,
            guarded: None,
            peer_routes: BTreeMap::new(),
            refusals_seen: BTreeSet::new(),
            mismatch_seen: None,
            config_stamp,
            published: None,
        })
    }

    /// The admin endpoint's address (useful when the config asked for port 0).
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Runs until `shutdown` completes, then stops every session (graceful restart or
    /// Cease, per [`RunOptions::final_stop`]).
    pub async fn run(&mut self, shutdown: impl std::future::Future<Output = ()>) {
        let Ok(mut sighup) = signal(SignalKind::hangup()) else {
            tracing::error!("cannot install the SIGHUP handler");
            return;
        };
        let reloadable = self.opts.config_path.is_some();
        tokio::pin!(shutdown);
        let mut poll = tokio::time::interval(self.opts.config_poll);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut source_alive = true;
        let mut node_alive = true;
        self.on_node_change().await;
        self.recompute();
        loop {
            tokio::select! {
                changed = self.desired.changed(), if source_alive => {
                    if changed.is_err() {
                        // Keep what is announced; the last known set stays.
                        tracing::error!("pod-CIDR source stopped; keeping announced routes");
                        source_alive = false;
                        continue;
                    }
                    self.recompute();
                }
                changed = self.node.changed(), if node_alive => {
                    if changed.is_ok() {
                        self.on_node_change().await;
                        self.recompute();
                    } else {
                        // File mode (no Node watch): a closed channel is ready at once, so
                        // polling it again would spin the loop at 100% CPU.
                        node_alive = false;
                    }
                }
                Some((peer, ev)) = self.events.recv() => self.on_event(&peer, ev),
                _ = sighup.recv(), if reloadable => self.reload("SIGHUP").await,
                _ = poll.tick(), if reloadable => {
                    let now = self.opts.config_path.as_deref().and_then(stamp);
                    if now != self.config_stamp {
                        self.config_stamp = now;
                        self.reload("config file changed").await;
                    }
                }
                _ = tick.tick() => self.on_tick().await,
                _ = &mut shutdown => break,
            }
        }
        let graceful = !self.opts.final_stop;
        tracing::info!(graceful_restart = graceful, "stopping sessions");
        if let Some(peers) = &mut self.peers {
            peers
                .shutdown(self.opts.final_stop, "podcidr-bgp speaker stopping")
                .await;
        }
        self.source_task.abort();
        if let Some(t) = &self.node_task {
            t.abort();
        }
        self.admin_task.abort();
    }

    /// Peers for this node (nodeSelector), started once the Node is known.
    async fn on_node_change(&mut self) {
        let info = self.node.borrow().clone();
        if !info.known {
            return;
        }
        let wanted: BTreeSet<String> = self
            .config
            .for_node(&info.labels)
            .peers
            .into_iter()
            .map(|p| p.name)
            .collect();
        if self.peers.is_none() {
            let Some(identity) = self.identity(&info) else {
                tracing::error!(
                    "routerId: not set and no IPv4 address found (set routerId in the config)"
                );
                return;
            };
            self.peers = Some(PeerManager::new(
                identity,
                self.node_name.clone(),
                true,
                self.events_tx.clone(),
            ));
        }
        let Some(peers) = self.peers.as_mut() else {
            return;
        };
        let running: BTreeSet<String> = peers.names().cloned().collect();
        for name in running.difference(&wanted) {
            tracing::info!(peer = %name, "peer no longer selects this node");
            peers.remove(name, StopReason::Deconfigured).await;
            self.metrics.remove_peer(name);
        }
        let mut added = false;
        for name in wanted.difference(&running) {
            if let Some(p) = self.prepared.get(name) {
                peers.add(p.clone(), Arc::new(RouteSet::new()));
                added = true;
            }
        }
        if added && let Err(e) = peers.rebuild_listeners() {
            tracing::error!(error = %e, "passive peers cannot be served");
        }
    }

    fn identity(&self, info: &NodeInfo) -> Option<LocalIdentity> {
        let session_local = self
            .config
            .peers
            .iter()
            .find(|p| p.address.is_ipv4())
            .and_then(|p| {
                p.local_address
                    .filter(IpAddr::is_ipv4)
                    .or_else(|| route_source(p.address))
            });
        let router_id = self
            .config
            .resolve_router_id(&info.internal_ips(), session_local)?;
        Some(LocalIdentity {
            asn: self.config.asn,
            router_id,
        })
    }

    fn recompute(&mut self) {
        let desired = self.desired.borrow().clone();
        self.metrics.source_ready.set(i64::from(desired.ready));
        self.metrics
            .source_mismatch
            .set(i64::from(desired.mismatch.is_some()));
        self.admin.ready.store(desired.ready, Ordering::Relaxed);
        let mismatch = desired
            .mismatch
            .as_ref()
            .map(|m| format!("{:?} vs Node.spec.podCIDRs {:?}", m.chosen, m.node_spec));
        if mismatch != self.mismatch_seen {
            match &mismatch {
                Some(m) => {
                    tracing::warn!(source = %self.config.source, mismatch = %m, "the chosen source and Node.spec.podCIDRs disagree; announcing the chosen source")
                }
                None if self.mismatch_seen.is_some() => {
                    tracing::info!("source and Node.spec.podCIDRs agree again")
                }
                None => {}
            }
            self.mismatch_seen = mismatch;
        }
        let Some(g) = guard(&desired, &self.config.allowed_prefixes) else {
            return; // not ready: announce nothing new, withdraw nothing
        };
        let now_refused: BTreeSet<(String, &'static str)> = g
            .refused
            .iter()
            .map(|r| (r.value.clone(), r.reason.as_str()))
            .collect();
        for (value, reason) in now_refused.difference(&self.refusals_seen) {
            tracing::warn!(cidr = %value, reason, "announce guard refused a pod CIDR");
            self.metrics
                .guard_refused
                .get_or_create(&ReasonLabel {
                    reason: (*reason).to_owned(),
                })
                .inc();
        }
        self.refusals_seen = now_refused;
        self.guarded = Some(Arc::new(g));
        self.push_routes();
    }

    fn push_routes(&mut self) {
        let (Some(g), Some(peers)) = (&self.guarded, &self.peers) else {
            return;
        };
        let info = self.node.borrow().clone();
        let addrs = NodeAddresses {
            internal_v4: info.internal_v4,
            internal_v6: info.internal_v6,
        };
        let names: Vec<String> = peers.names().cloned().collect();
        for name in names {
            let Some(cfg) = self.prepared.get(&name).map(|p| &p.config) else {
                continue;
            };
            let nhs = next_hops(&self.config.next_hop, cfg, &addrs, &route_source);
            let (set, refused) = peer_routes(&g.announce, cfg, nhs);
            let set = Arc::new(set);
            let before = self.peer_routes.get(&name).map(|(_, r)| &r[..]);
            // Both lists are sorted by prefix: new refusals by binary search, not a scan.
            let new =
                |r: &&(IpNet, PeerRefusal)| before.is_none_or(|b| b.binary_search(r).is_err());
            for (prefix, reason) in refused.iter().filter(new) {
                tracing::warn!(peer = %name, %prefix, reason = reason.as_str(), "not announced to this peer");
                self.metrics
                    .guard_refused
                    .get_or_create(&ReasonLabel {
                        reason: reason.as_str().to_owned(),
                    })
                    .inc();
            }
            peers.set_routes(&name, Arc::clone(&set));
            self.peer_routes.insert(name, (set, refused.into()));
        }
    }

    fn on_event(&mut self, peer: &str, ev: SessionEvent) {
        match ev {
            SessionEvent::StateChanged { from, to, reason } => match &reason {
                Some(r) if from == SessionState::Established || to == SessionState::Idle => {
                    tracing::warn!(peer, from = from.as_str(), to = to.as_str(), reason = %r, "session state")
                }
                _ => tracing::info!(
                    peer,
                    from = from.as_str(),
                    to = to.as_str(),
                    "session state"
                ),
            },
            SessionEvent::NotificationSent(n) => {
                tracing::warn!(peer, notification = %n.name(), "NOTIFICATION sent");
                self.metrics.notification("sent", n.code.into(), n.subcode);
            }
            SessionEvent::NotificationReceived(n) => {
                tracing::warn!(peer, notification = %n.name(), message = n.shutdown_message().unwrap_or_default(), "NOTIFICATION received");
                self.metrics
                    .notification("received", n.code.into(), n.subcode);
            }
            SessionEvent::UpdatesSent { messages } => {
                self.metrics
                    .updates_sent
                    .get_or_create(&Metrics::peer(peer))
                    .inc_by(messages as u64);
            }
            SessionEvent::UpdateErrors(errors) => {
                tracing::warn!(
                    peer,
                    ?errors,
                    "malformed UPDATE from the peer handled per RFC 7606"
                );
            }
            SessionEvent::Refused(refused) => {
                for (prefix, reason) in refused {
                    tracing::warn!(peer, %prefix, reason = reason.as_str(), "not sent on this session");
                }
            }
        }
    }

    async fn on_tick(&mut self) {
        self.admin.beat();
        let inputs = Arc::new(self.report_inputs());
        for p in &inputs.peers {
            let label = Metrics::peer(&p.config.name);
            self.metrics
                .session_up
                .get_or_create(&label)
                .set(i64::from(p.status.state == SessionState::Established));
            self.metrics
                .session_state
                .get_or_create(&label)
                .set(i64::from(p.status.state.as_number()));
            for (family, n) in &p.status.advertised {
                self.metrics
                    .announced_prefixes
                    .get_or_create(&PeerFamilyLabel {
                        peer: p.config.name.clone(),
                        family: family.clone(),
                    })
                    .set(i64::try_from(*n).unwrap_or(i64::MAX));
            }
        }
        self.admin.set_report_inputs(Arc::clone(&inputs));
        self.maybe_publish(&inputs).await;
    }

    fn report_inputs(&self) -> report::ReportInputs {
        let no_routes: PeerRoutes = (Arc::new(RouteSet::new()), Arc::new([]));
        let peers = self
            .peers
            .as_ref()
            .map(|m| {
                m.names()
                    .filter_map(|name| {
                        let status = m.status(name)?;
                        let config = self.prepared.get(name)?.config.clone();
                        let (routes, refused) = self.peer_routes.get(name).unwrap_or(&no_routes);
                        Some(report::PeerInput {
                            config,
                            status,
                            routes: Arc::clone(routes),
                            refused: Arc::clone(refused),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        report::ReportInputs {
            source: self.config.source.kind(),
            local_asn: self.config.asn,
            desired: Arc::clone(&self.desired.borrow()),
            guarded: self.guarded.clone(),
            peers,
        }
    }

    async fn maybe_publish(&mut self, inputs: &report::ReportInputs) {
        let Some(client) = &self.client else { return };
        if !self.config.status.publish {
            return;
        }
        let age = self.published.as_ref().map(|(_, at)| at.elapsed());
        if age.is_some_and(|a| a < self.config.status.min_interval) {
            return; // rendered at most once per minInterval
        }
        let mut report = inputs.render(unix_now());
        let fingerprint = report::content_fingerprint(&report);
        let changed = self
            .published
            .as_ref()
            .is_none_or(|(f, _)| *f != fingerprint);
        if !changed && age.is_some_and(|a| a < HEARTBEAT) {
            return;
        }
        report.updated_at = report::rfc3339(unix_now());
        let info = self.node.borrow().clone();
        match tokio::time::timeout(
            Duration::from_secs(10),
            publish(client, &self.node_name, info.uid.as_deref(), &report),
        )
        .await
        {
            Ok(Ok(())) => self.published = Some((fingerprint, Instant::now())),
            Ok(Err(e)) => tracing::warn!(error = %e, "publishing NodeBGPStatus failed; will retry"),
            Err(_) => tracing::warn!("publishing NodeBGPStatus timed out; will retry"),
        }
    }

    fn count_reload(&self, result: &str) {
        self.metrics
            .config_reloads
            .get_or_create(&ResultLabel {
                result: result.to_owned(),
            })
            .inc();
    }

    async fn reload(&mut self, why: &str) {
        let Some(path) = self.opts.config_path.clone() else {
            return;
        };
        let (new, prepared) = match load(&path) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(reason = why, errors = %e, "config reload rejected; keeping the running config");
                self.count_reload("rejected");
                return;
            }
        };
        let labels = self.node.borrow().labels.clone();
        let changes = diff_peers(&self.config.for_node(&labels), &new.for_node(&labels));
        if changes.settings.source {
            match start_source(
                &new.source,
                self.client.as_ref(),
                &self.node_name,
                self.opts.file_poll,
            ) {
                Ok((rx, task)) => {
                    self.source_task.abort();
                    self.desired = rx;
                    self.source_task = task;
                }
                Err(e) => {
                    tracing::error!(error = %e, "config reload rejected; keeping the running config");
                    self.count_reload("rejected");
                    return;
                }
            }
        }
        if changes.settings.admin {
            tracing::warn!("admin.listen changes take effect after a restart");
        }
        self.prepared = prepared
            .into_iter()
            .map(|p| (p.config.name.clone(), p))
            .collect();
        self.config = new;
        if let Some(peers) = self.peers.as_mut() {
            for name in &changes.removed {
                tracing::info!(peer = %name, "peer removed from the config");
                peers.remove(name, StopReason::Deconfigured).await;
                self.metrics.remove_peer(name);
                self.peer_routes.remove(name);
            }
            for name in &changes.changed {
                tracing::info!(peer = %name, "peer settings changed; resetting its session");
                peers.remove(name, StopReason::ConfigurationChange).await;
                if let Some(p) = self.prepared.get(name) {
                    peers.add(p.clone(), Arc::new(RouteSet::new()));
                }
            }
            for name in &changes.added {
                tracing::info!(peer = %name, "peer added");
                if let Some(p) = self.prepared.get(name) {
                    peers.add(p.clone(), Arc::new(RouteSet::new()));
                }
            }
            for name in &changes.updated {
                if let Some(p) = self.prepared.get(name) {
                    peers.update(p.clone());
                }
            }
            if (!changes.changed.is_empty()
                || !changes.added.is_empty()
                || !changes.removed.is_empty())
                && let Err(e) = peers.rebuild_listeners()
            {
                tracing::error!(error = %e, "passive peers cannot be served");
            }
        }
        tracing::info!(
            reason = why,
            added = changes.added.len(),
            removed = changes.removed.len(),
            reset = changes.changed.len(),
            updated = changes.updated.len(),
            "config reloaded"
        );
        self.count_reload("applied");
        self.recompute();
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Server-side apply of the object (owned by the Node), then of its status.
async fn publish(
    client: &Client,
    node: &str,
    node_uid: Option<&str>,
    report: &SpeakerReport,
) -> kube::Result<()> {
    let api: Api<NodeBGPStatus> = Api::all(client.clone());
    let mut obj = NodeBGPStatus::new(
        node,
        NodeBGPStatusSpec {
            node_name: node.to_owned(),
        },
    );
    if let Some(uid) = node_uid {
        obj.meta_mut().owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node.to_owned(),
                uid: uid.to_owned(),
                ..Default::default()
            },
        ]);
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(node, &params, &Patch::Apply(&obj)).await?;
    let status = serde_json::json!({
        "apiVersion": "podcidr.io/v1alpha1",
        "kind": "NodeBGPStatus",
        "status": report,
    });
    api.patch_status(node, &params, &Patch::Apply(&status))
        .await?;
    Ok(())
}
