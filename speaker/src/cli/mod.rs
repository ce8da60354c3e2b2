//! Admin commands: `diff`, `peers`, `routes`. They read the cluster through a kubeconfig (or
//! one speaker's admin endpoint), so they run from a laptop.
//!
//! Entry points for other commands (e.g. `demo`): [`diff_cluster`] (load + compare),
//! [`render::render_table`] / [`render::render_json`] (to a `String`).
//!
//! Exit status of `diff`: 0 every row ok, 1 drift found, 2 could not run (reason on stderr).
//! `diff --services` compares Service routes instead (`services.rs`), with the same exits.

mod admin_client;
pub mod diff;
pub mod liveness;
pub mod load;
mod peers;
pub mod render;
pub mod services;

use std::io::IsTerminal;
use std::process::ExitCode;

use ipam_watch::source::SourceKind;
use kube::Client;

pub use diff::{DEFAULT_STALE_AFTER_SECS, DiffRow, Summary};
pub use load::{KubeArgs, LoadError};
pub use peers::{PeersArgs, RoutesArgs, run_peers, run_routes};
pub use render::TableStyle;

/// Output format (`-o`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Aligned columns for humans.
    #[default]
    Table,
    /// The table with more columns.
    Wide,
    /// One JSON document.
    Json,
    /// The same document as YAML.
    Yaml,
}

impl Output {
    /// JSON or YAML: one document for scripts.
    pub fn is_document(self) -> bool {
        matches!(self, Output::Json | Output::Yaml)
    }

    /// A document rendered as JSON (`json_text`) in this format.
    pub fn document(self, json_text: String) -> String {
        if self != Output::Yaml {
            return json_text;
        }
        let doc: serde_json::Value = match serde_json::from_str(&json_text) {
            Ok(v) => v,
            Err(_) => return json_text,
        };
        serde_saphyr::to_string(&doc).unwrap_or(json_text)
    }
}

/// Where `diff` reads IPAM allocations from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum DiffSource {
    /// `NodePodCIDR.spec.podCIDRs` (podcidr-bgp's allocator).
    #[default]
    IpamCrd,
    /// The Nodes' own `spec.podCIDRs` (host-scope IPAM).
    NodeSpec,
    /// `CiliumNode.spec.ipam.podCIDRs` (Cilium cluster-pool IPAM).
    CiliumNode,
}

impl From<DiffSource> for SourceKind {
    fn from(s: DiffSource) -> Self {
        match s {
            DiffSource::IpamCrd => SourceKind::IpamCrd,
            DiffSource::NodeSpec => SourceKind::NodeSpec,
            DiffSource::CiliumNode => SourceKind::CiliumNode,
        }
    }
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Verdicts: ok, not-announced, announced-not-allocated, source-mismatch, \
conflict, stale-status, no-speaker, speaker-dead (see docs/operator-guide.md).\n\
Exit status: 0 every row ok, 1 drift found, 2 could not run."
)]
pub struct DiffArgs {
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Where IPAM allocations are read from.
    #[arg(long, value_enum, default_value_t = DiffSource::IpamCrd)]
    pub source: DiffSource,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Only this node (conflicts are still checked against every node).
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// Leave out `ok` rows (the summary and the exit status still count them).
    #[arg(long)]
    pub only_problems: bool,
    /// A speaker whose Lease is current but whose status is older than this is
    /// `stale-status` (e.g. `300`, `90s`, `5m`, `2h`). Speakers re-write an unchanged status
    /// hourly; whether one runs at all comes from its Lease.
    #[arg(long, value_name = "DURATION", default_value = "2h", value_parser = parse_duration)]
    pub stale_after: u64,
    /// Read speaker Leases (label podcidr.io/speaker-lease) from this namespace, and from no
    /// other: a Lease elsewhere could be written by any controller that may write Leases
    /// there and fake a node's liveness. The speakers' `--lease-namespace`.
    #[arg(long, value_name = "NAMESPACE", default_value = crate::install::SPEAKER_LEASE_NAMESPACE)]
    pub lease_namespace: String,
    /// Service routes instead of pod CIDRs: per Service address and node, what should be
    /// announced, what is announced to which peer, and why not.
    #[arg(long)]
    pub services: bool,
}

pub use crate::flags::{parse_duration, parse_millis};

/// What `diff` reads and concludes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffOptions {
    pub source: SourceKind,
    pub stale_after_secs: u64,
    /// Where speaker Leases are read (and nowhere else).
    pub lease_namespace: String,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            source: SourceKind::IpamCrd,
            stale_after_secs: DEFAULT_STALE_AFTER_SECS,
            lease_namespace: crate::install::SPEAKER_LEASE_NAMESPACE.to_owned(),
        }
    }
}

/// The result of one `diff` run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffReport {
    pub source: SourceKind,
    /// Unix seconds the comparison was made at.
    pub now: i64,
    pub stale_after_secs: u64,
    /// Every node name seen (Node, IPAM object or status), sorted.
    pub nodes: Vec<String>,
    pub rows: Vec<DiffRow>,
}

impl DiffReport {
    pub fn summary(&self) -> Summary {
        diff::summarize(&self.rows)
    }

    /// Keeps only `node`'s rows.
    pub fn retain_node(&mut self, node: &str) {
        self.rows.retain(|r| r.node == node);
    }
}

/// Now, as the API's timestamps count (signed seconds).
pub fn unix_now() -> i64 {
    i64::try_from(crate::time::unix_now()).unwrap_or(i64::MAX)
}

pub fn rfc3339(unix: i64) -> String {
    crate::text::rfc3339(u64::try_from(unix).unwrap_or(0))
}

/// Lists everything `diff` needs through `client` and compares it now.
pub async fn diff_cluster(client: &Client, options: &DiffOptions) -> Result<DiffReport, LoadError> {
    let now = unix_now();
    let input = load::load_input(client, options, now).await?;
    let nodes = input.nodes.iter().map(|n| n.name.clone()).collect();
    Ok(DiffReport {
        source: options.source,
        now,
        stale_after_secs: options.stale_after_secs,
        nodes,
        rows: diff::diff(&input),
    })
}

/// Colour only for a terminal, and never with `NO_COLOR` set.
pub fn use_color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn fail(cmd: &str, e: impl std::fmt::Display) -> ExitCode {
    eprintln!("podcidr-bgp {cmd}: {e}");
    ExitCode::from(2)
}

pub async fn run_diff(args: DiffArgs) -> ExitCode {
    let (client, url) = match args.kube.client().await {
        Ok(c) => c,
        Err(e) => return fail("diff", e),
    };
    if args.services {
        return run_diff_services(&args, &client, &url).await;
    }
    let options = DiffOptions {
        source: args.source.into(),
        stale_after_secs: args.stale_after,
        lease_namespace: args.lease_namespace.clone(),
    };
    let limit = args.kube.timeout();
    let mut report = match tokio::time::timeout(limit, diff_cluster(&client, &options)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return fail("diff", e.at(&url)),
        Err(_) => return fail("diff", LoadError::Timeout(limit)),
    };
    if let Some(node) = &args.node {
        if !report.nodes.contains(node) {
            return fail(
                "diff",
                format!("node {node:?} not found (no Node, allocation, NodeBGPStatus or Lease)"),
            );
        }
        report.retain_node(node);
    }
    let out = match args.output {
        Output::Json => {
            // Straight to stdout: the document of a large cluster is megabytes.
            let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
            let written = render::write_json(&report, args.only_problems, &mut stdout)
                .and_then(|()| std::io::Write::flush(&mut stdout));
            if let Err(e) = written {
                return fail("diff", format!("writing the output: {e}"));
            }
            String::new()
        }
        Output::Yaml => args
            .output
            .document(render::render_json(&report, args.only_problems)),
        Output::Table | Output::Wide => render::render_table(
            &report,
            TableStyle {
                wide: args.output == Output::Wide,
                color: use_color(),
                only_problems: args.only_problems,
            },
        ),
    };
    print!("{out}");
    if report.summary().problems == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

async fn run_diff_services(args: &DiffArgs, client: &Client, url: &str) -> ExitCode {
    let limit = args.kube.timeout();
    let input = match tokio::time::timeout(limit, load::load_services(client)).await {
        Ok(Ok(i)) => i,
        Ok(Err(e)) => return fail("diff", e.at(url)),
        Err(_) => return fail("diff", LoadError::Timeout(limit)),
    };
    let mut report = services::services_diff(&input);
    if let Some(node) = &args.node {
        if !input
            .nodes
            .iter()
            .any(|n| n.metadata.name.as_deref() == Some(node))
        {
            return fail("diff", format!("node {node:?} not found"));
        }
        report.rows.retain(|r| &r.node == node);
    }
    if args.only_problems {
        report
            .rows
            .retain(|r| r.verdict != services::ServiceVerdict::Ok);
    }
    let out = match args.output {
        Output::Json | Output::Yaml => {
            let json = serde_json::to_string_pretty(&report).unwrap_or_default();
            args.output.document(json) + "\n"
        }
        Output::Table | Output::Wide => services::render_table(&report, args.only_problems),
    };
    print!("{out}");
    if report.problems() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
