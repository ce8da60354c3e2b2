//! `podcidr-bgp`: one binary, several subcommands.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[cfg(feature = "demo")]
use podcidr_bgp::demo;
use podcidr_bgp::{allocator_cmd, cli, config_cmd, daemon, decode};

/// `podcidr-bgp --version`: version, git commit, build date.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("PODCIDR_GIT_COMMIT"),
    ", built ",
    env!("PODCIDR_BUILD_DATE"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "podcidr-bgp",
    version = VERSION,
    about = "Announce exactly the pod CIDRs your IPAM allocated, over BGP"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the per-node BGP speaker (a DaemonSet next to the CNI).
    Speaker(daemon::SpeakerArgs),
    /// Run the cluster-pool allocator (a Deployment with leader election).
    Allocator(allocator_cmd::AllocatorArgs),
    /// Decode hex-encoded BGP messages into one JSON object per message.
    Decode(decode::DecodeArgs),
    /// Compare what IPAM allocated, what the Nodes say and what each speaker announces.
    Diff(cli::DiffArgs),
    /// BGP sessions of each node's speaker: state, uptime, hold time, families, prefixes sent.
    Peers(cli::PeersArgs),
    /// Routes each node's speaker advertises, per peer, with next hop and attributes.
    Routes(cli::RoutesArgs),
    /// Print the CustomResourceDefinitions (YAML) for `kubectl apply -f -`.
    Crds,
    /// Work with speaker config files: `convert` prints one as BGPSpeakerConfig and BGPPeer
    /// objects.
    Config {
        #[command(subcommand)]
        command: config_cmd::ConfigCommand,
    },
    /// Run the whole flow in-process on an embedded default (no cluster needed).
    #[cfg(feature = "demo")]
    Demo(demo::DemoArgs),
    /// Print a shell completion script, e.g. `podcidr-bgp completion bash > /etc/bash_completion.d/podcidr-bgp`.
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("podcidr-bgp: cannot start the async runtime: {e}");
            std::process::exit(2);
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Speaker(args) => runtime().block_on(daemon::run(args)),
        Command::Allocator(args) => runtime().block_on(allocator_cmd::run(args)),
        Command::Decode(args) => decode::run(&args),
        Command::Diff(args) => runtime().block_on(cli::run_diff(args)),
        Command::Peers(args) => runtime().block_on(cli::run_peers(args)),
        Command::Routes(args) => runtime().block_on(cli::run_routes(args)),
        Command::Crds => match podcidr_api::crds_yaml() {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("podcidr-bgp crds: {e}");
                ExitCode::from(2)
            }
        },
        Command::Config { command } => config_cmd::run(&command),
        #[cfg(feature = "demo")]
        Command::Demo(args) => runtime().block_on(demo::run(args)),
        Command::Completion { shell } => {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "podcidr-bgp", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
    }
}
