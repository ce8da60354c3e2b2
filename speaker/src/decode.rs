//! `podcidr-bgp decode`: hex in, one JSON object per BGP message out.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct DecodeArgs {
    /// One or more concatenated BGP messages in hex (whitespace, ':' and a 0x prefix tolerated).
    #[arg(long)]
    hex: Vec<String>,
    /// Decode AS numbers as 2-octet (the session did not negotiate 4-octet AS).
    #[arg(long)]
    two_octet_as: bool,
}

pub fn run(_args: &DecodeArgs) -> ExitCode {
    ExitCode::from(2)
}
