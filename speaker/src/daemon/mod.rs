//! `podcidr-bgp speaker`: the per-node daemon. The pure announce core ([`core::Core`])
//! decides; this loop moves events in (source, Node, config file, sessions, ticks, signals)
//! and carries effects out (sessions, listeners, source, status writes, Kubernetes Events,
//! logs, metrics).
//! Routes are never dropped by accident: a source that is not ready, an API outage or a bad
//! reload changes nothing.

mod admin;
#[cfg(test)]
mod control_plane_tests;
pub mod core;
pub mod host;
pub mod kube;
pub mod metrics;
mod run;
mod service_probe;
mod sessions;
mod telemetry;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use podcidr_config::Config;

use core::errors::ConfigError;

use crate::process::{self, Signals};
pub use kube::config_objects::ObjectSettings;
pub use run::{RunOptions, Speaker};

use podcidr_api::contract::DEFAULT_SECRET_NAMESPACE;

#[derive(Debug, clap::Args)]
pub struct SpeakerArgs {
    /// Where the config comes from: `file` (`--config`) or `kubernetes` (the
    /// `BGPSpeakerConfig` and `BGPPeer` objects that select this node).
    #[arg(long, value_enum, default_value = "file")]
    pub config_source: ConfigSource,
    /// Config file (YAML), with `--config-source file`.
    #[arg(long, default_value = "/etc/podcidr/config/config.yaml")]
    pub config: PathBuf,
    /// Serve the admin endpoint (`/livez`, `/readyz`, `/debug/*`, `/metrics`) here,
    /// overriding `admin.listen` (the only way to set it with `--config-source kubernetes`).
    #[arg(long, value_name = "ADDR")]
    pub admin_listen: Option<SocketAddr>,
    /// With `--config-source kubernetes`: the namespace of the Secrets
    /// `passwordSecretRef` names [default: $POD_NAMESPACE, else podcidr-system].
    #[arg(long, value_name = "NAMESPACE")]
    pub secret_namespace: Option<String>,
    /// With `--config-source kubernetes`: where the MD5 keys of the Secrets are written for
    /// the sessions (mode 0400; an in-memory volume in the DaemonSet).
    #[arg(long, value_name = "DIR", default_value = "/run/podcidr-bgp/keys")]
    pub key_dir: PathBuf,
    /// Keep what the next speaker process on this node needs here (a hostPath in the
    /// DaemonSet: /var/lib/podcidr-bgp): the peers Established on this node (each must be
    /// again before a restarted pod is Ready) and, with --config-source kubernetes, the last
    /// good version of each configuration object it ran (run again after a restart where the
    /// current one cannot run). Unset: nothing survives a restart.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// This node's name (default: the config's nodeName, then $NODE_NAME).
    #[arg(long)]
    pub node_name: Option<String>,
    /// Validate the config (and read MD5 key files), print the result and exit. With
    /// `--config-source kubernetes`: validate the `--objects` manifests offline instead.
    #[arg(long)]
    pub check_config: bool,
    /// With `--config-source kubernetes --check-config`: manifest files (YAML, any number of
    /// documents; kinds other than BGPSpeakerConfig and BGPPeer are skipped), checked as the
    /// node with `--node-labels` would run them.
    #[arg(long, value_name = "FILE")]
    pub objects: Vec<PathBuf>,
    /// With `--objects`: the node's labels, `key=value[,key=value…]`.
    #[arg(long, value_name = "LABELS", default_value = "")]
    pub node_labels: String,
    /// On SIGTERM always depart: RFC 8326 graceful shutdown, then Cease/Administrative
    /// Shutdown (routers withdraw at once). Without it the Node decides: deleted, marked for
    /// removal, shutting down or cordoned is a departure, anything else a graceful-restart
    /// close (routers keep the routes while the pod restarts).
    #[arg(long = "final")]
    pub final_stop: bool,
    /// `/readyz` waits for every peer to reach Established; a peer that sends nothing at all
    /// (down, unreachable) is excused this long after start, e.g. `120` (seconds), `2m`.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = crate::flags::parse_duration)]
    pub ready_peer_grace: u64,
    /// The pod's `terminationGracePeriodSeconds` (the DaemonSet passes it, the API gives a
    /// pod no way to read it): `gracefulShutdown.wait` is shortened to end 5 s before it, so
    /// a departure's Cease is sent before the kubelet's SIGKILL.
    #[arg(long, value_name = "DURATION", value_parser = crate::flags::parse_duration)]
    pub termination_grace: Option<u64>,
    /// Kubeconfig file (default: in-cluster config or $KUBECONFIG).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Time between checks of the config file for changes (SIGHUP reloads at once), e.g. `2`
    /// (seconds), `2s`, `1m`.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = crate::flags::parse_duration)]
    pub config_poll_seconds: u64,
    /// Time between checks of a `file` source for changes, e.g. `2000` (milliseconds), `500ms`,
    /// `2s`; changes inotify reports are checked at once, this bounds the rest.
    #[arg(long, value_name = "DURATION", default_value = "2000ms", value_parser = crate::flags::parse_millis)]
    pub file_poll_ms: u64,
    /// Serve `/metrics` (only) on this address too, overriding `admin.metricsListen`: the
    /// DaemonSet passes the node's address, e.g. `--metrics-listen=$(NODE_IP):9182`.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Namespace of the node's Lease (liveness, renewed every minute): where the shipped
    /// speaker Role may write Leases, and where `diff` reads them.
    #[arg(long, value_name = "NAMESPACE", default_value = crate::install::SPEAKER_LEASE_NAMESPACE)]
    pub lease_namespace: String,
}

/// Validates config and keys; the error text names every bad field.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let config = Config::load(path)?;
    sessions::check_keys(&config.peers)?;
    Ok(config)
}

/// Command-line settings that replace config values (applied on every load, so a reload
/// does not see them as a change).
pub(crate) fn with_overrides(
    mut config: Config,
    admin_listen: Option<SocketAddr>,
    metrics_listen: Option<SocketAddr>,
    termination_grace: Option<Duration>,
) -> Config {
    if let Some(a) = admin_listen {
        config.admin.listen = a;
    }
    if metrics_listen.is_some() {
        config.admin.metrics_listen = metrics_listen;
    }
    if let Some(grace) = termination_grace {
        fit_graceful_shutdown_wait(&mut config, grace);
    }
    config
}

/// Time a departure needs after the RFC 8326 wait: the Cease on every session, and the
/// process's exit, before the kubelet's SIGKILL.
pub const CEASE_MARGIN: Duration = Duration::from_secs(5);

/// The RFC 8326 wait must end, and the Cease go out, before the pod's termination grace
/// does: a SIGKILL first closes every session without a NOTIFICATION, which routers take for
/// a graceful restart and keep the departed node's routes for `restartTime`. A wait that
/// does not fit is shortened to what does, and said.
pub fn fit_graceful_shutdown_wait(config: &mut Config, grace: Duration) {
    let fits = grace.saturating_sub(CEASE_MARGIN);
    let wait = config.graceful_shutdown.wait;
    if wait > fits {
        tracing::warn!(
            wait_seconds = wait.as_secs(),
            termination_grace_seconds = grace.as_secs(),
            used_seconds = fits.as_secs(),
            "gracefulShutdown.wait does not fit the pod's termination grace (--termination-grace) with {} s left for the Cease: shortened; raise terminationGracePeriodSeconds and --termination-grace together, or lower the wait",
            CEASE_MARGIN.as_secs()
        );
        config.graceful_shutdown.wait = fits;
    }
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
    #[error(transparent)]
    SourceNeedsApi(#[from] podcidr_config::SourceNeedsApi),
    #[error("--config-source kubernetes needs the Kubernetes API")]
    ObjectsNeedApi,
}

/// Where the speaker's config comes from (`--config-source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConfigSource {
    /// The YAML file `--config` names, reloaded when it changes.
    File,
    /// `BGPSpeakerConfig` and `BGPPeer` objects selecting this node.
    Kubernetes,
}

/// The node's name and the first config to run, or the exit code after an error was printed.
fn initial_config(args: &SpeakerArgs) -> Result<(Config, String, Option<String>), ExitCode> {
    let fallback = args
        .node_name
        .clone()
        .or_else(|| non_empty_env("NODE_NAME"));
    let grace = args.termination_grace.map(Duration::from_secs);
    let overrides = |c| with_overrides(c, args.admin_listen, args.metrics_listen, grace);
    if args.config_source == ConfigSource::Kubernetes {
        let Some(node_name) = fallback.clone() else {
            eprintln!(
                "podcidr-bgp speaker: --config-source kubernetes needs the node's name: --node-name or $NODE_NAME"
            );
            return Err(ExitCode::from(2));
        };
        // No peer, no source until the objects are listed.
        return Ok((overrides(Config::unconfigured()), node_name, fallback));
    }
    let config = match load(&args.config) {
        Ok(c) => overrides(c),
        Err(e) => {
            eprintln!("{}: invalid config:\n{e}", args.config.display());
            return Err(ExitCode::from(2));
        }
    };
    match config.resolve_node_name(fallback.clone(), None) {
        Ok(n) => Ok((config, n, fallback)),
        Err(e) => {
            eprintln!("{}: {e}", args.config.display());
            Err(ExitCode::from(2))
        }
    }
}

/// `--check-config` of object manifests: 0 when the node runs a valid config, 1 when an
/// object it runs is invalid or none selects it, 2 when the files cannot be read.
fn check_objects(args: &SpeakerArgs) -> ExitCode {
    use crate::objects::check;
    if args.objects.is_empty() {
        eprintln!(
            "podcidr-bgp speaker: --check-config with --config-source kubernetes checks manifests: --objects FILE"
        );
        return ExitCode::from(2);
    }
    let labels = match check::parse_labels(&args.node_labels) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("podcidr-bgp speaker: --node-labels: {e}");
            return ExitCode::from(2);
        }
    };
    let (objects, raw) = match check::read_manifests(&args.objects) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let result = check::check(&objects, &raw, &labels, &args.key_dir);
    for line in &result.not_applied {
        println!("not applied: {line}");
    }
    let Some(config) = &result.config else {
        if !result.errors.is_empty() {
            println!("invalid:\n{}", result.errors.join("\n"));
        }
        println!(
            "no BGPSpeakerConfig selects a node with labels {labels:?}: it would announce nothing"
        );
        return ExitCode::from(1);
    };
    if !result.errors.is_empty() {
        println!("invalid:\n{}", result.errors.join("\n"));
        return ExitCode::from(1);
    }
    println!(
        "objects OK: a node with labels {labels:?} runs BGPSpeakerConfig {config} and {} ({})",
        crate::text::count(result.peers.len(), "BGPPeer"),
        result.peers.join(", ")
    );
    if !result.advertisements.is_empty() {
        println!(
            "it announces the Services of {} ({})",
            crate::text::count(result.advertisements.len(), "BGPAdvertisement"),
            result.advertisements.join(", ")
        );
    }
    for w in &result.warnings {
        println!("warning: {w}");
    }
    ExitCode::SUCCESS
}

pub async fn run(args: SpeakerArgs) -> ExitCode {
    let objects_mode = args.config_source == ConfigSource::Kubernetes;
    if args.check_config && objects_mode {
        return check_objects(&args);
    }
    let (config, node_name, fallback) = match initial_config(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if args.check_config {
        println!(
            "{}: config OK (node {node_name}, {}, source {})",
            args.config.display(),
            crate::text::count(config.peers.len(), "peer"),
            config.source
        );
        // Valid, and it runs: a family without a next hop is a warning (exit 0), since
        // whether a node has the InternalIP `self` falls back to is not in the config.
        for gap in config.next_hop_gaps() {
            println!("warning: {gap}");
        }
        for note in core::bfd_gate::handover_notes(&config.peers) {
            println!("note: {note}");
        }
        return ExitCode::SUCCESS;
    }
    let log = process::logging::init(&config.log);
    let needs_api = objects_mode || config.source.needs_api();
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
    let pod_namespace = non_empty_env("POD_NAMESPACE");
    let opts = RunOptions {
        config_path: (!objects_mode).then(|| args.config.clone()),
        final_stop: args.final_stop,
        ready_peer_grace: Duration::from_secs(args.ready_peer_grace),
        config_poll: Duration::from_secs(args.config_poll_seconds.max(1)),
        file_poll: Duration::from_millis(args.file_poll_ms.max(1)),
        node_name_fallback: fallback,
        log: Some(log),
        metrics_listen: args.metrics_listen,
        admin_listen: args.admin_listen,
        objects: objects_mode.then(|| ObjectSettings {
            secret_namespace: args
                .secret_namespace
                .clone()
                .or_else(|| pod_namespace.clone())
                .unwrap_or_else(|| DEFAULT_SECRET_NAMESPACE.to_owned()),
            key_dir: args.key_dir.clone(),
            state_dir: args.state_dir.clone(),
        }),
        lease_namespace: args.lease_namespace.clone(),
        pod_name: non_empty_env("POD_NAME"),
        state_dir: args.state_dir.clone(),
        termination_grace: args.termination_grace.map(Duration::from_secs),
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

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[cfg(test)]
mod termination_grace_tests {
    use std::time::Duration;

    use podcidr_config::Config;

    use super::fit_graceful_shutdown_wait;

    fn with_wait(secs: u64) -> Config {
        let mut c = Config::unconfigured();
        c.graceful_shutdown.wait = Duration::from_secs(secs);
        c
    }

    /// Issue 30 item 8: the Cease of a departure must go out before the kubelet's SIGKILL.
    #[test]
    fn a_graceful_shutdown_wait_ends_five_seconds_before_the_termination_grace_rfc8326() {
        // (wait, grace) → wait used
        for (wait, grace, used) in [
            (5, 30, 5),
            (25, 30, 25),
            (26, 30, 25),
            (300, 30, 25),
            (15, 10, 5),
            (5, 3, 0),
        ] {
            let mut c = with_wait(wait);
            fit_graceful_shutdown_wait(&mut c, Duration::from_secs(grace));
            assert_eq!(
                c.graceful_shutdown.wait,
                Duration::from_secs(used),
                "wait {wait}, grace {grace}"
            );
        }
    }
}
