//! `podcidr-bgp config convert --config FILE [--name NAME]`: prints the objects equivalent to
//! a config file, so an install moves to `--config-source kubernetes` in one command.

use std::path::PathBuf;
use std::process::ExitCode;

use podcidr_config::Config;

use crate::objects::convert;

#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print a config file as BGPSpeakerConfig and BGPPeer objects (YAML, for `kubectl
    /// apply -f -`); what no object holds is named on stderr with the flag that replaces it.
    Convert(ConvertArgs),
}

#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    /// The speaker config file (YAML), validated as `speaker --config FILE` validates it (MD5
    /// key files are not read: they go into a Secret).
    #[arg(long)]
    pub config: PathBuf,
    /// The BGPSpeakerConfig's name.
    #[arg(long, default_value = "default")]
    pub name: String,
}

pub fn run(command: &ConfigCommand) -> ExitCode {
    match command {
        ConfigCommand::Convert(args) => run_convert(args),
    }
}

fn run_convert(args: &ConvertArgs) -> ExitCode {
    let path = &args.config;
    if !is_dns_subdomain(&args.name) {
        eprintln!(
            "podcidr-bgp config convert: --name {:?} is not an object name (a DNS subdomain: lowercase a-z, 0-9, '-' and '.', up to 253)",
            args.name
        );
        return ExitCode::from(2);
    }
    // The speaker's own validation: a file it would refuse is not converted.
    if let Err(e) = Config::load(path) {
        eprintln!("{}: invalid config:\n{e}", path.display());
        return ExitCode::from(2);
    }
    let doc = std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_saphyr::from_str::<serde_json::Value>(&t).map_err(|e| e.to_string()));
    let doc = match doc {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    let converted = match convert::convert(&doc, &args.name) {
        Ok(c) => c,
        Err(errors) => {
            eprintln!("{}: cannot convert:\n{}", path.display(), errors.join("\n"));
            return ExitCode::from(2);
        }
    };
    let yaml = match convert::to_yaml(&converted, &path.display().to_string()) {
        Ok(y) => y,
        Err(e) => {
            eprintln!("podcidr-bgp config convert: {e}");
            return ExitCode::from(2);
        }
    };
    for line in convert::notes(&converted) {
        eprintln!("note: {line}");
    }
    print!("{yaml}");
    ExitCode::SUCCESS
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}
