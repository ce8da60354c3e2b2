//! `tracing` output: text or JSON, level from the config (RUST_LOG overrides).

use podcidr_config::{LogConfig, LogFormat};
use tracing_subscriber::EnvFilter;

pub fn init(cfg: &LogConfig) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(cfg.level.as_str()));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second init (tests, demo) keeps the first subscriber.
    let _ = match cfg.format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
