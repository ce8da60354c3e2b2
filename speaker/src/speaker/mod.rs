//! `podcidr-bgp speaker`: the per-node daemon. The pure announce core ([`core::Core`])
//! decides; this loop moves events in (source, Node, config file, sessions, ticks, signals)
//! and carries effects out (sessions, listeners, source, status writes, Kubernetes Events,
//! logs, metrics).
//! Routes are never dropped by accident: a source that is not ready, an API outage or a bad
//! reload changes nothing.

mod bfd;
pub mod cni;
mod cni_io;
pub mod core;
mod core_io;
pub mod default_route;
mod gateway_watch;
pub mod guard;
mod kube_events;
pub mod neighbors;
mod netlink;
pub mod netlink_route;
pub mod node;
mod notice;
pub mod peers;
pub mod publish;
pub mod report;
pub mod routes;
mod shutdown;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bgp_proto::session::driver::SessionEvent;
use ipam_watch::crd::SpeakerReport;
use ipam_watch::source::{
    CiliumNodeSource, DesiredSet, FileSource, IpamCrdSource, NodeSpecSource, PodCidrSource,
};
use kube::Client;
use podcidr_config::{Config, SourceConfig};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::admin::{self, AdminState};
use crate::metrics::Metrics;
use crate::process::logging::LogHandle;
use crate::process::{self, Signals};
use core::{Core, Effect, Event, watches_node};
use node::NodeInfo;
use peers::PeerManager;
use publish::{LeaseWriter, StatusWriter};

/// Bound on one status write or Lease renewal; they run off the loop, so a hanging API
/// delays nothing else.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(10);
/// Session events waiting for the loop; beyond this the sessions' broadcast lags (drops).
const EVENT_QUEUE: usize = 1024;

#[derive(Debug, clap::Args)]
pub struct SpeakerArgs {
    /// Config file (YAML).
    #[arg(long, default_value = "/etc/podcidr/config/config.yaml")]
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
    /// Time between checks of the config file for changes (SIGHUP reloads at once), e.g. `2`
    /// (seconds), `2s`, `1m`.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = crate::cli::parse_duration)]
    pub config_poll_seconds: u64,
    /// Time between checks of a `file` source for changes, e.g. `2000` (milliseconds), `500ms`,
    /// `2s`; changes inotify reports are checked at once, this bounds the rest.
    #[arg(long, value_name = "DURATION", default_value = "2000ms", value_parser = crate::cli::parse_millis)]
    pub file_poll_ms: u64,
    /// Serve `/metrics` (only) on this address too, overriding `admin.metricsListen`: the
    /// DaemonSet passes the node's address, e.g. `--metrics-listen=$(NODE_IP):9182`.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Namespace of the node's Lease (liveness, renewed every minute) [default:
    /// $POD_NAMESPACE, else the kubeconfig's or service account's namespace].
    #[arg(long, value_name = "NAMESPACE")]
    pub lease_namespace: Option<String>,
}

/// Why a config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Config(#[from] podcidr_config::ConfigErrors),
    #[error(transparent)]
    Key(#[from] peers::KeyError),
}

/// Validates config and keys; the error text names every bad field.
pub fn load(path: &Path) -> Result<Config, LoadError> {
    let config = Config::load(path)?;
    peers::check_keys(&config.peers)?;
    Ok(config)
}

/// Command-line settings that replace config values (applied on every load, so a reload
/// does not see them as a change).
fn with_overrides(mut config: Config, metrics_listen: Option<SocketAddr>) -> Config {
    if metrics_listen.is_some() {
        config.admin.metrics_listen = metrics_listen;
    }
    config
}

/// Why the speaker cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("admin.listen {addr}: {source}")]
    Admin {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("admin.metricsListen {addr}: {source}")]
    Metrics {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("source.kind {0} needs the Kubernetes API")]
    SourceNeedsApi(&'static str),
}

fn start_source(
    source: &SourceConfig,
    client: Option<&Client>,
    node: &str,
    file_poll: Duration,
) -> Result<(watch::Receiver<Arc<DesiredSet>>, JoinHandle<()>), StartError> {
    let src: Box<dyn PodCidrSource> = match (source, client) {
        (SourceConfig::File { path }, _) => {
            Box::new(FileSource::new(path.clone()).with_interval(file_poll))
        }
        (SourceConfig::NodeSpec, Some(c)) => Box::new(NodeSpecSource::new(c.clone())),
        (SourceConfig::IpamCrd, Some(c)) => Box::new(IpamCrdSource::new(c.clone())),
        (SourceConfig::CiliumNode, Some(c)) => Box::new(CiliumNodeSource::new(c.clone())),
        (other, None) => return Err(StartError::SourceNeedsApi(other.kind())),
    };
    let (rx, driver) = src.watch_node(node);
    Ok((rx, tokio::spawn(driver)))
}

pub async fn run(args: SpeakerArgs) -> ExitCode {
    let config = match load(&args.config) {
        Ok(c) => with_overrides(c, args.metrics_listen),
        Err(e) => {
            eprintln!("{}: invalid config:\n{e}", args.config.display());
            return ExitCode::from(2);
        }
    };
    let fallback = args
        .node_name
        .clone()
        .or_else(|| std::env::var("NODE_NAME").ok());
    let node_name = match config.resolve_node_name(fallback.clone(), None) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("{}: {e}", args.config.display());
            return ExitCode::from(2);
        }
    };
    if args.check_config {
        println!(
            "{}: config OK (node {node_name}, {}, source {})",
            args.config.display(),
            crate::cli::render::count(config.peers.len(), "peer"),
            config.source
        );
        return ExitCode::SUCCESS;
    }
    let log = process::logging::init(&config.log);
    let needs_api = !config.source.is_file();
    let client = match process::kube_client(args.kubeconfig.as_deref()).await {
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
    let signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("podcidr-bgp speaker: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = RunOptions {
        config_path: Some(args.config.clone()),
        final_stop: args.final_stop,
        config_poll: Duration::from_secs(args.config_poll_seconds.max(1)),
        file_poll: Duration::from_millis(args.file_poll_ms.max(1)),
        node_name_fallback: fallback,
        log: Some(log),
        metrics_listen: args.metrics_listen,
        lease_namespace: args
            .lease_namespace
            .clone()
            .or_else(|| non_empty_env("POD_NAMESPACE")),
        pod_name: non_empty_env("POD_NAME"),
    };
    match Speaker::start(config, node_name, client, opts).await {
        Ok(s) => {
            s.run_with_signals(signals).await;
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
    /// `--node-name`, else `$NODE_NAME`: the node when a reloaded config has no `nodeName`.
    pub node_name_fallback: Option<String>,
    /// Applies `log.level` on reload (none: the process's logging is not ours to change).
    pub log: Option<LogHandle>,
    /// `--metrics-listen`, kept over reloads.
    pub metrics_listen: Option<SocketAddr>,
    /// Namespace of the node's Lease (none: the client's default namespace).
    pub lease_namespace: Option<String>,
    /// The pod in the Lease's `holderIdentity` (none: `pid-<pid>`).
    pub pod_name: Option<String>,
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl RunOptions {
    /// An in-process speaker (demo, tests): no config file, no logging control.
    pub fn in_process(final_stop: bool) -> Self {
        RunOptions {
            config_path: None,
            final_stop,
            config_poll: Duration::from_secs(2),
            file_poll: Duration::from_secs(2),
            node_name_fallback: None,
            log: None,
            metrics_listen: None,
            lease_namespace: None,
            pod_name: None,
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
    desired: watch::Receiver<Arc<DesiredSet>>,
    source_task: JoinHandle<()>,
    source_alive: bool,
    node: watch::Receiver<NodeInfo>,
    node_task: Option<JoinHandle<()>>,
    node_alive: bool,
    peers: PeerManager,
    events: mpsc::Receiver<(String, SessionEvent)>,
    finished_tx: mpsc::Sender<Event>,
    finished: mpsc::Receiver<Event>,
    publisher: Option<JoinHandle<()>>,
    /// Kubernetes Events go through this queue to their publisher task (with an API).
    kube_events: Option<(kube_events::EventSink, JoinHandle<()>)>,
    status_writer: Option<Arc<StatusWriter>>,
    lease_writer: Option<Arc<LeaseWriter>>,
    lease_task: Option<JoinHandle<()>>,
    config_stamp: Option<FileStamp>,
    gateways: gateway_watch::GatewayWatch,
    started: Instant,
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

fn watch_node(
    client: Option<&Client>,
    config: &Config,
    node: &str,
) -> (watch::Receiver<NodeInfo>, Option<JoinHandle<()>>) {
    match client {
        Some(c) if watches_node(true, config) => {
            let (rx, t) = node::watch_node(c.clone(), node);
            (rx, Some(t))
        }
        // File mode: no Node object to wait for; the core counts it as known.
        _ => (watch::channel(NodeInfo::default()).1, None),
    }
}

impl Speaker {
    /// Starts the admin endpoint, the source and the Node watch; sessions start in `run`.
    pub async fn start(
        config: Config,
        node_name: String,
        client: Option<Client>,
        opts: RunOptions,
    ) -> Result<Speaker, StartError> {
        // `default-gateway` peers become the gateways' addresses before the core sees them.
        let (gateways, config) = gateway_watch::GatewayWatch::new(config);
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
        let (desired, source_task) =
            start_source(&config.source, client.as_ref(), &node_name, opts.file_poll)?;
        let (node, node_task) = watch_node(client.as_ref(), &config, &node_name);
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        let (finished_tx, finished) = mpsc::channel(4);
        let config_stamp = opts.config_path.as_deref().and_then(stamp);
        tracing::info!(node = %node_name, source = %config.source, peers = config.peers.len(), "speaker starting");
        let kube_events = client
            .as_ref()
            .map(|c| kube_events::EventSink::spawn(c.clone(), &node_name, Arc::clone(&metrics)));
        let core = Core::new(config, node_name, client.is_some(), routes::peer_source);
        let status_writer = client.clone().map(|c| Arc::new(StatusWriter::new(c)));
        let lease_writer = client.clone().map(|c| {
            let namespace = opts
                .lease_namespace
                .clone()
                .unwrap_or_else(|| c.default_namespace().to_owned());
            let pod = opts
                .pod_name
                .clone()
                .unwrap_or_else(|| format!("pid-{}", std::process::id()));
            Arc::new(LeaseWriter::new(c, &namespace, &pod))
        });
        Ok(Speaker {
            core,
            opts,
            client,
            metrics,
            admin,
            admin_task,
            metrics_task,
            admin_addr,
            desired,
            source_task,
            source_alive: true,
            node,
            node_alive: node_task.is_some(),
            node_task,
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
            gateways,
            started: Instant::now(),
        })
    }

    /// The admin endpoint's address (useful when the config asked for port 0).
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Runs until `shutdown` completes, then stops every session (graceful restart or
    /// Cease, per [`RunOptions::final_stop`]).
    pub async fn run(&mut self, shutdown: impl std::future::Future<Output = ()>) {
        self.run_until(shutdown, std::future::pending()).await;
    }

    /// [`Speaker::run`]; `again` (a second SIGTERM) ends a graceful shutdown wait early.
    pub async fn run_until(
        &mut self,
        shutdown: impl std::future::Future<Output = ()>,
        again: impl std::future::Future<Output = ()>,
    ) {
        let mut sighup = match process::sighup() {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::error!(error = %e, "no SIGHUP reloads");
                None
            }
        };
        let reloadable = self.opts.config_path.is_some();
        tokio::pin!(shutdown);
        let mut poll = tokio::time::interval(self.opts.config_poll);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut gateway_poll = tokio::time::interval(gateway_watch::GATEWAY_POLL);
        let first = self.core.start();
        self.apply(first).await;
        // The values present before the loop count as changes too.
        let node = self.node.borrow_and_update().clone();
        self.handle(Event::Node(node)).await;
        let desired = self.desired.borrow_and_update().clone();
        self.handle(Event::Desired(desired)).await;
        if let Some(u) = self.gateways.condition_changed() {
            self.handle(Event::Unresolved(u)).await;
        }
        loop {
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
                changed = self.node.changed(), if self.node_alive => {
                    if changed.is_err() {
                        self.node_alive = false;
                        continue;
                    }
                    Event::Node(self.node.borrow_and_update().clone())
                }
                Some((peer, ev)) = self.events.recv() => Event::Session(peer, ev),
                Some(ev) = self.finished.recv() => ev,
                Some(()) = recv_hup(&mut sighup), if reloadable => self.reload_event("SIGHUP"),
                _ = poll.tick(), if reloadable => {
                    let now = self.opts.config_path.as_deref().and_then(stamp);
                    if now == self.config_stamp {
                        continue;
                    }
                    self.config_stamp = now;
                    self.reload_event("config file changed")
                }
                _ = gateway_poll.tick(), if self.gateways.active() => {
                    let Some(config) = self.gateways.poll() else {
                        continue;
                    };
                    Event::ConfigReloaded {
                        config: Box::new(config),
                        node_name: self.core.node_name().to_owned(),
                        why: "default route changed",
                    }
                }
                _ = tick.tick() => {
                    self.admin.beat();
                    for e in self.peers.refresh_keys() {
                        tracing::warn!(error = %e, "passive peer key");
                    }
                    Event::Tick {
                        now: self.started.elapsed(),
                        unix: unix_now(),
                        statuses: self.peers.statuses(),
                    }
                }
                _ = &mut shutdown => break,
            };
            self.handle(event).await;
            if let Some(u) = self.gateways.condition_changed() {
                self.handle(Event::Unresolved(u)).await;
            }
        }
        tracing::info!(
            graceful_restart = !self.opts.final_stop,
            "stopping sessions"
        );
        let stop = Event::Shutdown {
            final_stop: self.opts.final_stop,
        };
        let effects = self.core.handle(stop.clone());
        let wait = effects.iter().find_map(|e| match e {
            Effect::GracefulShutdownWait(d) => Some(*d),
            _ => None,
        });
        self.apply(effects).await;
        if let Some(wait) = wait {
            self.graceful_shutdown_wait(wait, again).await;
            let effects = self.core.handle(stop);
            self.apply(effects).await;
        }
        self.source_task.abort();
        if let Some(t) = &self.node_task {
            t.abort();
        }
        if let Some(t) = &self.publisher {
            t.abort();
        }
        if let Some((_, t)) = &self.kube_events {
            t.abort();
        }
        if let Some(t) = &self.lease_task {
            t.abort();
        }
        self.admin_task.abort();
        if let Some(t) = &self.metrics_task {
            t.abort();
        }
    }

    async fn handle(&mut self, event: Event) {
        let effects = self.core.handle(event);
        self.apply(effects).await;
    }

    /// Loads the config file; the core gets either the new config or the rejection.
    fn reload_event(&mut self, why: &'static str) -> Event {
        let Some(path) = &self.opts.config_path else {
            return Event::ConfigRejected {
                why,
                errors: "no config file".into(),
            };
        };
        let rejected = |errors: String| Event::ConfigRejected { why, errors };
        let config = match load(path) {
            Ok(c) => with_overrides(c, self.opts.metrics_listen),
            Err(e) => return rejected(e.to_string()),
        };
        if self.client.is_none() && !config.source.is_file() {
            return rejected(StartError::SourceNeedsApi(config.source.kind()).to_string());
        }
        match config.resolve_node_name(self.opts.node_name_fallback.clone(), None) {
            Ok(node_name) => Event::ConfigReloaded {
                config: Box::new(self.gateways.reloaded(config)),
                node_name,
                why,
            },
            Err(e) => rejected(e.to_string()),
        }
    }

    /// Carries out the core's effects in order. Stops and resets of one batch are stopped
    /// together and awaited once (bounded), before any session of the batch starts.
    async fn apply(&mut self, effects: Vec<Effect>) {
        let stops: Vec<_> = effects
            .iter()
            .filter_map(|e| match e {
                Effect::StopPeer { name, reason } => Some((name.clone(), reason.clone())),
                Effect::ResetPeer(setup) => Some((
                    setup.config.name.clone(),
                    bgp_proto::session::StopReason::ConfigurationChange,
                )),
                _ => None,
            })
            .collect();
        for (name, _) in &stops {
            self.metrics.remove_peer(name);
        }
        self.peers.stop(stops).await;
        for effect in effects {
            match effect {
                Effect::StopPeer { .. } => {}
                Effect::StartPeer(setup) | Effect::ResetPeer(setup) => self.peers.start(&setup),
                Effect::SetConnectRetry { name, base, max } => {
                    self.peers.set_connect_retry(&name, base, max);
                }
                Effect::SetRoutes { name, routes } => self.peers.set_routes(&name, routes),
                Effect::SetListeners(layout) => {
                    for e in self.peers.set_listeners(&layout) {
                        tracing::error!(error = %e, "passive peers cannot be served");
                    }
                }
                Effect::WatchNode(name) => {
                    if let Some(t) = self.node_task.take() {
                        t.abort();
                    }
                    let (rx, task) = watch_node(self.client.as_ref(), self.core.config(), &name);
                    self.node = rx;
                    self.node_alive = task.is_some();
                    self.node_task = task;
                }
                Effect::RestartSource { source, node } => {
                    match start_source(&source, self.client.as_ref(), &node, self.opts.file_poll) {
                        Ok((rx, task)) => {
                            self.source_task.abort();
                            self.desired = rx;
                            self.source_task = task;
                            self.source_alive = true;
                        }
                        Err(e) => tracing::error!(error = %e, "cannot start the pod-CIDR source"),
                    }
                }
                Effect::SetLog(cfg) => match &self.opts.log {
                    Some(h) => {
                        if let Err(e) = h.apply(&cfg) {
                            tracing::warn!(error = %e, "log settings not applied");
                        }
                    }
                    None => tracing::warn!("log settings are not reloadable in this process"),
                },
                Effect::SetReady(ready) => {
                    self.metrics.source_ready.set(i64::from(ready));
                    self.admin.ready.store(ready, Ordering::Relaxed);
                }
                Effect::ReportInputs(inputs) => self.admin.set_report_inputs(inputs.0),
                Effect::Publish {
                    report,
                    fingerprint,
                    node_uid,
                    at,
                } => self.spawn_publish(*report, fingerprint, node_uid, at),
                Effect::RenewLease {
                    node,
                    node_uid,
                    duration,
                    unix,
                    at,
                } => self.spawn_renew(node, node_uid, duration, unix, at),
                Effect::StopAll(stops) => self.peers.shutdown(stops).await,
                Effect::GracefulShutdownWait(_) => {}
                Effect::WriteCni(file) => self.spawn_cni_write(file),
                Effect::KubeEvent(event) => {
                    if let Some((sink, _)) = &self.kube_events {
                        sink.send(*event);
                    }
                }
                Effect::Notice(n) => notice::record(&self.metrics, n),
            }
        }
    }

    /// Writes the conflist off the loop (a slow disk delays no session); the core hears
    /// the outcome as [`Event::CniWritten`].
    fn spawn_cni_write(&self, file: cni::CniFile) {
        let done = self.finished_tx.clone();
        tokio::spawn(async move {
            let (path, content) = (file.path.clone(), Arc::clone(&file.content));
            let result =
                tokio::task::spawn_blocking(move || cni_io::write_conflist(&path, &content))
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.map_err(|e| e.to_string()));
            let _ = done.send(Event::CniWritten { file, result }).await;
        });
    }

    /// Writes the status off the loop: a hanging API call delays nothing else.
    fn spawn_publish(
        &mut self,
        report: SpeakerReport,
        fingerprint: u64,
        node_uid: Option<String>,
        at: Duration,
    ) {
        let Some(writer) = self.status_writer.clone() else {
            return;
        };
        let node = self.core.node_name().to_owned();
        let done = self.finished_tx.clone();
        let metrics = Arc::clone(&self.metrics);
        self.publisher = Some(tokio::spawn(async move {
            let write = writer.write(&node, node_uid.as_deref(), &report);
            let ok = match tokio::time::timeout(PUBLISH_TIMEOUT, write).await {
                Ok(Ok(())) => true,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "publishing NodeBGPStatus failed; will retry");
                    false
                }
                Err(_) => {
                    tracing::warn!("publishing NodeBGPStatus timed out; will retry");
                    false
                }
            };
            if ok {
                metrics
                    .status_last_published
                    .set(i64::try_from(unix_now()).unwrap_or(i64::MAX));
            } else {
                metrics.status_publish_failures.inc();
            }
            let _ = done
                .send(Event::Published {
                    fingerprint,
                    at,
                    ok,
                })
                .await;
        }));
    }

    /// Renews the node's Lease off the loop.
    fn spawn_renew(
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
        let done = self.finished_tx.clone();
        let metrics = Arc::clone(&self.metrics);
        self.lease_task = Some(tokio::spawn(async move {
            let renew = writer.renew(&node, node_uid.as_deref(), duration, unix);
            let ok = match tokio::time::timeout(PUBLISH_TIMEOUT, renew).await {
                Ok(Ok(())) => true,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, lease = %format!("{}/{node}", writer.namespace()), "renewing the Lease failed; will retry");
                    false
                }
                Err(_) => {
                    tracing::warn!(lease = %format!("{}/{node}", writer.namespace()), "renewing the Lease timed out; will retry");
                    false
                }
            };
            if ok {
                metrics
                    .lease_last_renewed
                    .set(i64::try_from(unix).unwrap_or(i64::MAX));
            } else {
                metrics.lease_renew_failures.inc();
            }
            let _ = done.send(Event::LeaseRenewed { node, at, ok }).await;
        }));
    }
}

async fn recv_hup(s: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match s {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
#[path = "control_plane_tests.rs"]
mod control_plane_tests;
