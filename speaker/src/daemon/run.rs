//! The speaker's thin loop: moves events in (the source's set, the kernel's facts, the config
//! file, sessions, ticks, signals) and carries the core's effects out (sessions, listeners,
//! the source, status and Lease writes, Kubernetes Events, logs, metrics). It decides nothing
//! the core could.

use std::collections::BTreeSet;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bgp_proto::session::SessionEvent;
use ipam_watch::source::DesiredSet;
use kube::Client;
use podcidr_api::SpeakerReport;
use podcidr_config::{Config, LogConfig, SourceConfig};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::admin::{self, AdminState};
use super::core::errors::{ApiWriteError, CniWriteError, ConfigError, Shared};
use super::core::kernel::KernelQuery;
use super::core::{ConfigOrigin, Core, Effect, Event};
use super::host::netlink::monitor::RouteMonitor;
use super::host::state_file::StateFile;
use super::host::{cni_write, kernel};
use super::kube::config_objects::{self, ObjectSettings};
use super::kube::events::EventSink;
use super::kube::lease::LeaseWriter;
use super::kube::node::{NodeState, node_events, watch_node};
use super::kube::source::start_source;
use super::kube::status::StatusWriter;
use super::metrics::Metrics;
use super::service_probe::Prober;
use super::sessions::PeerManager;
use super::{StartError, load, telemetry, with_overrides};
use crate::objects::NodeConfig;
use crate::process::logging::LogHandle;
use crate::process::{self, Signals};
use crate::time::unix_now;

/// Bound on one status write or Lease renewal; they run off the loop, so a hanging API
/// delays nothing else.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(10);
/// Session events waiting for the loop; beyond this the sessions' broadcast lags (drops).
const EVENT_QUEUE: usize = 1024;

/// How a speaker runs besides its config.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Reload from this file on SIGHUP and when it changes (none for in-process speakers).
    pub config_path: Option<PathBuf>,
    /// Always stop with Cease/Administrative Shutdown (a departure), whatever the Node says;
    /// otherwise the Node decides (see `core::departure`).
    pub final_stop: bool,
    /// How long a peer that says nothing holds `/readyz` back (see `core::readiness`).
    pub ready_peer_grace: Duration,
    pub config_poll: Duration,
    /// Polling interval of a `file` source.
    pub file_poll: Duration,
    /// `--node-name`, else `$NODE_NAME`: the node when a reloaded config has no `nodeName`.
    pub node_name_fallback: Option<String>,
    /// Applies `log.level` on reload (none: the process's logging is not ours to change).
    pub log: Option<LogHandle>,
    /// `--metrics-listen`, kept over reloads.
    pub metrics_listen: Option<SocketAddr>,
    /// `--admin-listen`, kept over reloads.
    pub admin_listen: Option<SocketAddr>,
    /// `--config-source kubernetes`: the config comes from configuration objects (the
    /// config given to [`Speaker::start`] is only the starting point, with no peer).
    pub objects: Option<ObjectSettings>,
    /// Namespace of the node's Lease (none: the client's default namespace).
    /// Where the node's Lease is written (`--lease-namespace`).
    pub lease_namespace: String,
    /// The pod in the Lease's `holderIdentity` (none: `pid-<pid>`).
    pub pod_name: Option<String>,
    /// `--state-dir`: what the next process on this node needs (the peers Established here;
    /// the objects mode keeps its last good objects there too).
    pub state_dir: Option<PathBuf>,
    /// `--termination-grace`: the pod's termination grace, which the RFC 8326 wait must fit.
    pub termination_grace: Option<Duration>,
}

impl RunOptions {
    /// An in-process speaker (demo, tests): no config file, no logging control.
    pub fn in_process(final_stop: bool) -> Self {
        RunOptions {
            config_path: None,
            final_stop,
            ready_peer_grace: super::core::readiness::DEFAULT_READY_PEER_GRACE,
            config_poll: Duration::from_secs(2),
            file_poll: Duration::from_secs(2),
            node_name_fallback: None,
            log: None,
            metrics_listen: None,
            admin_listen: None,
            objects: None,
            lease_namespace: crate::install::SPEAKER_LEASE_NAMESPACE.to_owned(),
            pod_name: None,
            state_dir: None,
            termination_grace: None,
        }
    }

    /// Command-line settings that replace config values (applied on every load, so a
    /// reload does not see them as a change).
    pub fn overrides(&self, config: Config) -> Config {
        with_overrides(
            config,
            self.admin_listen,
            self.metrics_listen,
            self.termination_grace,
        )
    }
}

/// What changed in the Service watch; nothing until every kind is listed once.
type ServiceChanges = mpsc::UnboundedReceiver<podcidr_services::Changes>;

/// Objects mode: the speaker's one Node watch and the node's configuration objects.
struct ObjectsMode {
    node: watch::Receiver<NodeState>,
    configs: watch::Receiver<Option<Arc<NodeConfig>>>,
    tasks: [JoinHandle<()>; 2],
}

impl ObjectsMode {
    fn start(client: &Client, settings: ObjectSettings, node_name: &str) -> Self {
        let (node, node_task) = watch_node(client.clone(), node_name);
        let (configs, task) =
            config_objects::spawn(client.clone(), settings, node_name, node.clone());
        ObjectsMode {
            node,
            configs,
            tasks: [node_task, task],
        }
    }

    /// The next config the objects make for this node (never, once they stop).
    async fn next(&mut self) -> Arc<NodeConfig> {
        loop {
            if self.configs.changed().await.is_err() {
                tracing::error!(
                    "the configuration objects' watch stopped; keeping the running config"
                );
                return std::future::pending().await;
            }
            if let Some(c) = self.configs.borrow_and_update().clone() {
                return c;
            }
        }
    }
}

pub struct Speaker {
    core: Core,
    opts: RunOptions,
    client: Option<Client>,
    metrics: Arc<Metrics>,
    admin: Arc<AdminState>,
    admin_task: JoinHandle<()>,
    metrics_task: Option<JoinHandle<()>>,
    admin_addr: SocketAddr,
    /// `--config-source kubernetes`.
    objects: Option<ObjectsMode>,
    /// Services, endpoints and `BGPAdvertisement`s (with an API).
    service_watch: Option<(ServiceChanges, JoinHandle<()>)>,
    /// The datapath gate's prober, once some Service is to be probed.
    prober: Option<Prober>,
    /// The source's latest set (pod CIDRs and the Node's facts, from one watch).
    desired: watch::Receiver<Arc<DesiredSet>>,
    source_task: JoinHandle<()>,
    source_alive: bool,
    peers: PeerManager,
    events: mpsc::Receiver<(String, SessionEvent)>,
    /// Outcomes of work run off the loop (writes, kernel reads), as events for the core.
    finished_tx: mpsc::Sender<Event>,
    finished: mpsc::Receiver<Event>,
    publisher: Option<JoinHandle<()>>,
    /// Kubernetes Events go through this queue to their publisher task (with an API).
    kube_events: Option<(EventSink, JoinHandle<()>)>,
    status_writer: Option<Arc<StatusWriter>>,
    lease_writer: Option<Arc<LeaseWriter>>,
    lease_task: Option<JoinHandle<()>>,
    config_stamp: Option<FileStamp>,
    /// What the core needs read from the kernel, for the config as written.
    kernel_query: KernelQuery,
    /// A kernel read is running (one at a time).
    kernel_reading: bool,
    /// The kernel changed while a read ran: read again when it ends.
    kernel_dirty: bool,
    /// Route, address and link notifications, while the forwarding gate reads routes.
    route_monitor: Option<RouteMonitor>,
    /// The end of an RFC 8326 graceful shutdown wait, while one runs.
    final_wait_until: Option<Instant>,
    started: Instant,
    /// The peers Established on this node, kept for the next process (`--state-dir`).
    established_file: Option<StateFile>,
}

/// The file in `--state-dir` with the peers Established on this node.
pub const ESTABLISHED_FILE: &str = "established.json";

/// What `established.json` holds.
#[derive(serde::Serialize, serde::Deserialize)]
struct Established {
    peers: std::collections::BTreeSet<String>,
}

/// The peers the previous process on this node had Established, and the file to keep this
/// one's in.
fn established_before(
    state_dir: Option<&Path>,
    node_name: &str,
) -> (Option<StateFile>, std::collections::BTreeSet<String>) {
    let Some(dir) = state_dir else {
        return (None, Default::default());
    };
    let mut file = StateFile::new(dir, ESTABLISHED_FILE, node_name);
    let peers = match file.load::<Established>() {
        Ok(Some(e)) => {
            tracing::info!(peers = ?e.peers, "peers Established before this process: each must be again before the pod is Ready");
            e.peers
        }
        Ok(None) => Default::default(),
        Err(e) => {
            tracing::warn!(error = %e, "no record of the peers Established before this process");
            Default::default()
        }
    };
    (Some(file), peers)
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
            .field("node", &self.core.node_name())
            .finish()
    }
}

impl Speaker {
    /// Starts the admin endpoint and the source; sessions start in `run`.
    pub async fn start(
        config: Config,
        node_name: String,
        client: Option<Client>,
        opts: RunOptions,
    ) -> Result<Speaker, StartError> {
        let metrics = Arc::new(Metrics::new());
        let admin = Arc::new(AdminState::new(node_name.clone(), Arc::clone(&metrics)));
        let admin_err = |source| StartError::Admin {
            addr: config.admin.listen,
            source,
        };
        let listener = tokio::net::TcpListener::bind(config.admin.listen)
            .await
            .map_err(admin_err)?;
        let admin_addr = listener.local_addr().map_err(admin_err)?;
        tracing::info!(listen = %admin_addr, "admin endpoint up");
        let admin_task = tokio::spawn(admin::serve(listener, Arc::clone(&admin)));
        let metrics_task = match config.admin.metrics_listen {
            Some(addr) => {
                let err = |source| StartError::Metrics { addr, source };
                let listener = tokio::net::TcpListener::bind(addr).await.map_err(err)?;
                let addr = listener.local_addr().map_err(err)?;
                tracing::info!(listen = %addr, "metrics endpoint up");
                Some(tokio::spawn(admin::serve_metrics(
                    listener,
                    Arc::clone(&admin),
                )))
            }
            None => None,
        };
        let objects = match (&opts.objects, &client) {
            (Some(settings), Some(c)) => Some(ObjectsMode::start(c, settings.clone(), &node_name)),
            (Some(_), None) => return Err(StartError::ObjectsNeedApi),
            (None, _) => None,
        };
        let (desired, source_task) = start_source(
            &config.source,
            client.as_ref(),
            &node_name,
            opts.file_poll,
            objects.as_ref().map(|o| node_events(o.node.clone())),
            objects.is_some(),
        )?;
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        let (finished_tx, finished) = mpsc::channel(4);
        let config_stamp = opts.config_path.as_deref().and_then(stamp);
        tracing::info!(node = %node_name, source = %config.source, peers = config.peers.len(), "speaker starting");
        let kube_events = client
            .as_ref()
            .map(|c| EventSink::spawn(c.clone(), &node_name, Arc::clone(&metrics)));
        let kernel_query = KernelQuery::for_config(&config);
        // At start the routes of ours are read whatever the config: a previous process's
        // are adopted, or removed when egress is off now.
        let facts = kernel::read(&KernelQuery {
            egress: true,
            ..kernel_query.clone()
        });
        let origin = match objects {
            Some(_) => ConfigOrigin::Objects(None),
            None => ConfigOrigin::File,
        };
        let (established_file, before) = established_before(opts.state_dir.as_deref(), &node_name);
        let service_watch = client
            .as_ref()
            .map(|c| super::kube::services::spawn(c.clone(), &node_name));
        let core = Core::new(config, node_name, client.is_some(), facts)
            .with_origin(origin)
            .with_ready_grace(opts.ready_peer_grace)
            .with_established_before(before);
        let status_writer = client.clone().map(|c| Arc::new(StatusWriter::new(c)));
        let lease_writer = client.clone().map(|c| {
            let namespace = opts.lease_namespace.clone();
            let pod = opts
                .pod_name
                .clone()
                .unwrap_or_else(|| format!("pid-{}", std::process::id()));
            Arc::new(LeaseWriter::new(c, &namespace, &pod))
        });
        Ok(Speaker {
            service_watch,
            prober: None,
            established_file,
            core,
            opts,
            client,
            metrics,
            admin,
            admin_task,
            metrics_task,
            admin_addr,
            objects,
            desired,
            source_task,
            source_alive: true,
            peers: PeerManager::new(events_tx),
            events,
            finished_tx,
            finished,
            publisher: None,
            kube_events,
            status_writer,
            lease_writer,
            lease_task: None,
            config_stamp,
            route_monitor: None,
            kernel_query,
            kernel_reading: false,
            kernel_dirty: false,
            final_wait_until: None,
            started: Instant::now(),
        })
    }

    /// The admin endpoint's address (useful when the config asked for port 0).
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Runs until `shutdown` completes, then stops every session: a departure (RFC 8326,
    /// then Cease) when [`RunOptions::final_stop`] or the Node says the node is leaving, a
    /// graceful-restart close otherwise.
    pub async fn run(&mut self, shutdown: impl Future<Output = ()>) {
        self.run_until(shutdown, std::future::pending()).await;
    }

    /// [`Speaker::run`]; `again` (a second SIGTERM) ends a graceful shutdown wait early. The
    /// wait (RFC 8326) is a state of this loop: ticks, the Lease, status and `/livez` go on.
    pub async fn run_until(
        &mut self,
        shutdown: impl Future<Output = ()>,
        again: impl Future<Output = ()>,
    ) {
        let mut sighup = match process::sighup() {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::error!(error = %e, "no SIGHUP reloads");
                None
            }
        };
        let reloadable = self.opts.config_path.is_some();
        tokio::pin!(shutdown, again);
        let (mut signalled, mut signalled_again) = (false, false);
        let stop = Event::Shutdown {
            final_stop: self.opts.final_stop,
        };
        let mut poll = tokio::time::interval(self.opts.config_poll);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut kernel_poll = tokio::time::interval(kernel::KERNEL_POLL);
        self.follow_routes();
        let first = self.core.start();
        self.apply(first).await;
        // The value present before the loop counts as a change too.
        let desired = self.desired.borrow_and_update().clone();
        self.handle(Event::Desired(desired)).await;
        while !self.core.stopped() {
            let event = tokio::select! {
                changed = self.desired.changed(), if self.source_alive => {
                    if changed.is_err() {
                        // Keep what is announced; the last known set stays.
                        tracing::error!("pod-CIDR source stopped; keeping announced routes");
                        self.source_alive = false;
                        continue;
                    }
                    Event::Desired(self.desired.borrow_and_update().clone())
                }
                Some((peer, ev)) = self.events.recv() => Event::Session(peer, ev),
                config = next_objects(&mut self.objects) => self.objects_event(config),
                changes = next_services(&mut self.service_watch) => Event::Services(changes),
                Some(ev) = self.finished.recv() => {
                    if matches!(ev, Event::Kernel(_)) {
                        self.kernel_reading = false;
                        if std::mem::take(&mut self.kernel_dirty) {
                            self.spawn_kernel_read();
                        }
                    }
                    ev
                }
                changed = route_changes(&self.route_monitor) => {
                    if let Err(e) = changed {
                        tracing::warn!(error = %e, "route notifications stopped; the routing table is read every {} s", kernel::KERNEL_POLL.as_secs());
                        self.route_monitor = None;
                    }
                    if self.kernel_reading {
                        self.kernel_dirty = true;
                    } else {
                        self.spawn_kernel_read();
                    }
                    continue;
                }
                Some(()) = recv_hup(&mut sighup), if reloadable => self.reload_event("SIGHUP"),
                _ = poll.tick(), if reloadable => {
                    let now = self.opts.config_path.as_deref().and_then(stamp);
                    if now == self.config_stamp {
                        continue;
                    }
                    self.config_stamp = now;
                    self.reload_event("config file changed")
                }
                _ = kernel_poll.tick(), if !self.kernel_query.is_empty() && !self.kernel_reading => {
                    self.spawn_kernel_read();
                    continue;
                }
                _ = tick.tick() => {
                    self.admin.beat();
                    Event::Tick {
                        now: self.started.elapsed(),
                        unix: unix_now(),
                        statuses: self.peers.statuses(),
                    }
                }
                () = &mut shutdown, if !signalled => {
                    signalled = true;
                    stop.clone()
                }
                () = &mut again, if signalled && !signalled_again => {
                    signalled_again = true;
                    tracing::info!("second shutdown signal: sending the Cease now");
                    stop.clone()
                }
                () = sleep_until(self.final_wait_until) => {
                    self.final_wait_until = None;
                    stop.clone()
                }
            };
            self.handle(event).await;
        }
        self.source_task.abort();
        for t in self.objects.iter().flat_map(|o| &o.tasks) {
            t.abort();
        }
        if let Some((_, t)) = &self.service_watch {
            t.abort();
        }
        if let Some(p) = &self.prober {
            p.abort();
        }
        for t in [&self.publisher, &self.lease_task, &self.metrics_task]
            .into_iter()
            .flatten()
        {
            t.abort();
        }
        if let Some((_, t)) = &self.kube_events {
            t.abort();
        }
        self.admin_task.abort();
    }

    async fn handle(&mut self, event: Event) {
        let reload = matches!(event, Event::ConfigReloaded { .. });
        let effects = self.core.handle(event);
        self.apply(effects).await;
        if reload {
            self.follow_routes();
        }
    }

    /// Subscribes to route notifications while the config reads the routing table (the
    /// forwarding gate); the periodic read stays as the fallback.
    fn follow_routes(&mut self) {
        if self.kernel_query.routes.is_none() {
            self.route_monitor = None;
            return;
        }
        if self.route_monitor.is_none() {
            match RouteMonitor::open() {
                Ok(m) => self.route_monitor = Some(m),
                Err(e) => {
                    tracing::warn!(error = %e, "no route notifications; the routing table is read every {} s", kernel::KERNEL_POLL.as_secs())
                }
            }
        }
    }

    /// Loads the config file and reads the kernel facts it needs; the core gets either the
    /// new config or why not.
    fn reload_event(&mut self, why: &'static str) -> Event {
        let Some(path) = &self.opts.config_path else {
            return Event::Tick {
                now: self.started.elapsed(),
                unix: unix_now(),
                statuses: self.peers.statuses(),
            };
        };
        let rejected = |error: ConfigError| Event::ConfigRejected {
            why,
            error: Shared::new(error),
        };
        let config = match load(path) {
            Ok(c) => self.opts.overrides(c),
            Err(e) => return rejected(e),
        };
        if let Err(e) = config.source.check_api(self.client.is_some()) {
            return rejected(ConfigError::SourceNeedsApi(e));
        }
        let node_name = match config.resolve_node_name(self.opts.node_name_fallback.clone(), None) {
            Ok(n) => n,
            Err(e) => return rejected(ConfigError::NodeName(e)),
        };
        self.kernel_query = KernelQuery::for_config(&config);
        Event::ConfigReloaded {
            kernel: kernel::read(&self.kernel_query),
            config: Box::new(config),
            node_name,
            why,
            origin: ConfigOrigin::File,
        }
    }

    /// The config the configuration objects make for this node now (no peer, no source
    /// when no `BGPSpeakerConfig` selects it), with the kernel facts it needs.
    fn objects_event(&mut self, objects: Arc<NodeConfig>) -> Event {
        let config = objects.config.clone().unwrap_or_else(Config::unconfigured);
        let config = self.opts.overrides(config);
        self.kernel_query = KernelQuery::for_config(&config);
        Event::ConfigReloaded {
            kernel: kernel::read(&self.kernel_query),
            config: Box::new(config),
            node_name: self.core.node_name().to_owned(),
            why: "configuration objects changed",
            origin: ConfigOrigin::Objects(Some(objects)),
        }
    }

    /// Reads the kernel facts off the loop; the core hears them as [`Event::Kernel`].
    fn spawn_kernel_read(&mut self) {
        self.kernel_reading = true;
        let query = self.kernel_query.clone();
        let done = self.finished_tx.clone();
        tokio::spawn(async move {
            if let Ok(facts) = tokio::task::spawn_blocking(move || kernel::read(&query)).await {
                let _ = done.send(Event::Kernel(facts)).await;
            }
        });
    }

    /// Carries out the core's effects in order. Stops and resets of one batch are stopped
    /// together and awaited once (bounded), before any session of the batch starts.
    async fn apply(&mut self, effects: Vec<Effect>) {
        let stops: Vec<_> = effects
            .iter()
            .filter_map(|e| match e {
                Effect::StopPeer { name, reason } => Some((name.clone(), reason.clone())),
                Effect::ResetPeer { setup, reason } => {
                    Some((setup.config.name.clone(), reason.clone()))
                }
                _ => None,
            })
            .collect();
        self.peers.stop(stops).await;
        for effect in effects {
            self.apply_one(effect).await;
        }
    }

    /// One effect, to the executor it belongs to: sessions, the source, the API writers,
    /// the process (log, readiness, metrics), the node's files.
    async fn apply_one(&mut self, effect: Effect) {
        match effect {
            // Stopped with the batch (`apply`).
            Effect::StopPeer { .. } => {}
            Effect::StartPeer(setup) | Effect::ResetPeer { setup, .. } => self.peers.start(&setup),
            Effect::Bfd { name, input } => self.peers.bfd(&name, input),
            Effect::SetBfd(config) => self.peers.set_bfd(&config).await,
            Effect::SetConnectRetry { name, base, max } => {
                self.peers.set_connect_retry(&name, base, max);
            }
            Effect::SetRoutes { name, routes } => self.peers.set_routes(&name, routes),
            // In line: one or two netlink requests, acknowledged within microseconds, and in
            // order with the session events that decided them.
            Effect::SetEgress(routes) => {
                if let Err(e) = super::host::netlink::egress::set(&routes) {
                    self.metrics.egress_write_failures.inc();
                    tracing::error!(error = %e, "writing the egress routes of ours failed; retried at the next kernel read");
                }
            }
            Effect::ProbeServices(targets) => match &self.prober {
                Some(p) => p.set(targets),
                None if targets.services.is_empty() => {}
                None => {
                    self.prober = Some(Prober::spawn(targets, self.finished_tx.clone()));
                }
            },
            Effect::SetListeners(layout) => {
                for e in self.peers.set_listeners(&layout) {
                    tracing::error!(error = %e, "passive peers cannot be served");
                }
            }
            Effect::StopAll(stops) => self.peers.shutdown(stops).await,
            Effect::RestartSource { source, node } => self.restart_source(&source, &node),
            Effect::SetLog(cfg) => self.set_log(&cfg),
            Effect::SetReady(ready) => {
                self.metrics.source_ready.set(i64::from(ready));
            }
            Effect::KeepEstablished(peers) => self.keep_established(peers),
            Effect::SetReadiness(r) => {
                if r.ready {
                    tracing::info!("ready");
                } else {
                    tracing::info!(why = %r.why, "not ready");
                }
                self.admin.set_readiness(r);
            }
            Effect::ReportInputs(inputs) => self.admin.set_report_inputs(inputs.0),
            Effect::Publish {
                node,
                report,
                fingerprint,
                node_uid,
                at,
            } => self.publish(node, report, fingerprint, node_uid, at),
            Effect::RenewLease {
                node,
                node_uid,
                duration,
                unix,
                at,
            } => self.renew_lease(node, node_uid, duration, unix, at),
            Effect::GracefulShutdownWait(wait) => {
                tracing::info!(
                    wait_seconds = wait.as_secs(),
                    "graceful shutdown (RFC 8326): routes carry GRACEFUL_SHUTDOWN 65535:0 until the Cease"
                );
                self.final_wait_until = Some(Instant::now() + wait);
            }
            Effect::WriteCni(file) => self.spawn_cni_write(file),
            Effect::KubeEvent(event) => {
                if let Some((sink, _)) = &self.kube_events {
                    sink.send(*event);
                }
            }
            Effect::Notice(n) => telemetry::record(&self.metrics, n),
        }
    }

    /// A new pod-CIDR source replaces the running one once it starts; until then the old
    /// one's set stays.
    fn restart_source(&mut self, source: &SourceConfig, node: &str) {
        // Objects mode names no other node: its Node watch serves the source.
        let events = self.objects.as_ref().map(|o| node_events(o.node.clone()));
        let from_objects = self.objects.is_some();
        match start_source(
            source,
            self.client.as_ref(),
            node,
            self.opts.file_poll,
            events,
            from_objects,
        ) {
            Ok((rx, task)) => {
                self.source_task.abort();
                self.desired = rx;
                self.source_task = task;
                self.source_alive = true;
            }
            Err(e) => tracing::error!(error = %e, "cannot start the pod-CIDR source"),
        }
    }

    fn set_log(&self, cfg: &LogConfig) {
        match &self.opts.log {
            Some(h) => {
                if let Err(e) = h.apply(cfg) {
                    tracing::warn!(error = %e, "log settings not applied");
                }
            }
            None => tracing::warn!("log settings are not reloadable in this process"),
        }
    }

    fn keep_established(&mut self, peers: BTreeSet<String>) {
        if let Some(file) = &mut self.established_file
            && let Err(e) = file.save(&Established { peers })
        {
            tracing::error!(path = %file.path().display(), error = %e, "cannot keep the Established peers for the next process");
        }
    }

    /// The node's `NodeBGPStatus`, written off the loop.
    fn publish(
        &mut self,
        node: String,
        report: Box<SpeakerReport>,
        fingerprint: u64,
        node_uid: Option<String>,
        at: Duration,
    ) {
        let Some(writer) = self.status_writer.clone() else {
            return;
        };
        let write = async move { writer.write(&node, node_uid.as_deref(), &report).await };
        self.publisher = Some(self.spawn_write(write, move |result| Event::Published {
            fingerprint,
            at,
            result,
        }));
    }

    /// The node's Lease, renewed off the loop.
    fn renew_lease(
        &mut self,
        node: String,
        node_uid: Option<String>,
        duration: Duration,
        unix: u64,
        at: Duration,
    ) {
        let Some(writer) = self.lease_writer.clone() else {
            return;
        };
        let lease = node.clone();
        let renew = async move {
            writer
                .renew(&lease, node_uid.as_deref(), duration, unix)
                .await
        };
        self.lease_task = Some(self.spawn_write(renew, move |result| Event::LeaseRenewed {
            node,
            at,
            unix,
            result,
        }));
    }

    /// Runs one API write off the loop, bounded by [`PUBLISH_TIMEOUT`]; the core hears the
    /// outcome as the event `done` makes of it.
    fn spawn_write(
        &self,
        write: impl Future<Output = kube::Result<()>> + Send + 'static,
        done: impl FnOnce(Result<(), ApiWriteError>) -> Event + Send + 'static,
    ) -> JoinHandle<()> {
        let tx = self.finished_tx.clone();
        tokio::spawn(async move {
            let result = match tokio::time::timeout(PUBLISH_TIMEOUT, write).await {
                Ok(r) => r.map_err(super::kube::write_error),
                Err(_) => Err(ApiWriteError::Timeout(PUBLISH_TIMEOUT)),
            };
            let _ = tx.send(done(result)).await;
        })
    }

    /// Writes the conflist off the loop (a slow disk delays no session); the core hears
    /// the outcome as [`Event::CniWritten`].
    fn spawn_cni_write(&self, file: super::core::cni::CniFile) {
        let done = self.finished_tx.clone();
        tokio::spawn(async move {
            let (path, content) = (file.path.clone(), Arc::clone(&file.content));
            let result =
                tokio::task::spawn_blocking(move || cni_write::write_conflist(&path, &content))
                    .await
                    .unwrap_or_else(|e| Err(CniWriteError::Aborted(e.to_string())))
                    .map_err(Shared::new);
            let _ = done.send(Event::CniWritten { file, result }).await;
        });
    }

    /// Runs until SIGTERM/SIGINT; a second one ends a graceful shutdown wait early.
    pub(super) async fn run_with_signals(mut self, mut signals: Signals) {
        let (first_tx, first) = tokio::sync::oneshot::channel::<()>();
        let (again_tx, again) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            signals.shutdown().await;
            let _ = first_tx.send(());
            signals.shutdown().await;
            let _ = again_tx.send(());
        });
        self.run_until(
            async move {
                let _ = first.await;
            },
            async move {
                let _ = again.await;
            },
        )
        .await;
        task.abort();
    }
}

/// The Service watch's next changes (never without one, or once it stops), merged with every
/// change queued behind them: a burst is one event.
async fn next_services(
    watch: &mut Option<(ServiceChanges, JoinHandle<()>)>,
) -> podcidr_services::Changes {
    let Some((rx, _)) = watch else {
        return std::future::pending().await;
    };
    let Some(mut changes) = rx.recv().await else {
        tracing::error!("the Service watch stopped; keeping the Service routes announced");
        *watch = None;
        return std::future::pending().await;
    };
    while let Ok(later) = rx.try_recv() {
        changes.merge(later);
    }
    changes
}

/// The next config from the objects; never without objects mode.
async fn next_objects(objects: &mut Option<ObjectsMode>) -> Arc<NodeConfig> {
    match objects {
        Some(o) => o.next().await,
        None => std::future::pending().await,
    }
}

/// The next route, address or link change; never without a monitor.
async fn route_changes(monitor: &Option<RouteMonitor>) -> std::io::Result<()> {
    match monitor {
        Some(m) => m.changed().await,
        None => std::future::pending().await,
    }
}

/// Completes at `until`; never without one.
async fn sleep_until(until: Option<Instant>) {
    match until {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

async fn recv_hup(s: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match s {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}
