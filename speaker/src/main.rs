//! `podcidr-bgp`: one binary, several subcommands.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod decode;

#[derive(Debug, Parser)]
#[command(
    name = "podcidr-bgp",
    version,
    about = "Announce exactly the pod CIDRs your IPAM allocated, over BGP"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decode hex-encoded BGP messages into one JSON object per message.
    Decode(decode::DecodeArgs),
    /// Run the whole flow in-process on an embedded default (no cluster needed).
    Demo,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Decode(args) => decode::run(&args),
        Command::Demo => {
            println!(
                "podcidr-bgp demo: not built yet. When it lands it starts an in-process fake \
                 Kubernetes API with a few nodes, the cluster-pool allocator, one speaker per node \
                 and a route collector acting as the ToR; prints allocations, sessions and the \
                 routing table; injects a Node/NodePodCIDR mismatch and shows `diff` catching it; \
                 then removes a node and shows only its routes withdrawn."
            );
            ExitCode::SUCCESS
        }
    }
}
