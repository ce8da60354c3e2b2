//! `tracing` output on stderr: text or JSON, level from the config, `RUST_LOG` overrides.
//!
//! The level sits behind a [`tracing_subscriber::reload`] layer, so a config reload changes
//! it in place ([`LogHandle::apply`]). The format is fixed for the life of the process: a
//! changed `log.format` is reported as taking effect after a restart.
//!
//! One subscriber per process: the first [`init`] installs it, later calls (tests, the demo
//! running several speakers in one process) keep it, and every [`LogHandle`] controls that one
//! subscriber.

use std::sync::{Mutex, OnceLock};

use podcidr_config::{LogConfig, LogFormat, LogLevel};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry, reload};

/// The one subscriber [`init`] installed.
#[derive(Debug)]
struct Installed {
    reload: reload::Handle<EnvFilter, Registry>,
    format: LogFormat,
    /// `RUST_LOG`'s value when it decided the filter.
    rust_log: Option<String>,
    /// The config's level as last applied (or asked for, when `RUST_LOG` pins it).
    level: Mutex<LogLevel>,
}

static INSTALLED: OnceLock<Installed> = OnceLock::new();

/// Changes the running logger. Cheap to clone; every handle controls the same subscriber.
#[derive(Debug, Clone, Copy)]
pub struct LogHandle {
    installed: Option<&'static Installed>,
}

/// Why [`LogHandle::apply`] did not (fully) apply a log config.
#[derive(Debug, thiserror::Error)]
pub enum LogReloadError {
    /// The format is chosen once, when the process starts. The level part of the same
    /// config was applied.
    #[error(
        "log.format {requested} takes effect after a restart (logging stays {running} until \
         then)"
    )]
    FormatNeedsRestart {
        running: &'static str,
        requested: &'static str,
    },
    /// `RUST_LOG` was set when the process started and decides the filter.
    #[error("log.level {requested} not applied: the level is pinned by RUST_LOG={rust_log:?}")]
    PinnedByRustLog {
        requested: LogLevel,
        rust_log: String,
    },
    /// Another `tracing` subscriber was installed before ours (embedding, tests).
    #[error("log settings cannot be changed: another tracing subscriber was installed first")]
    NotInstalled,
    /// The subscriber is gone (cannot happen for the global one; kept for completeness).
    #[error("cannot change the log level: {0}")]
    Reload(#[from] reload::Error),
}

fn format_name(f: LogFormat) -> &'static str {
    match f {
        LogFormat::Text => "text",
        LogFormat::Json => "json",
    }
}

/// Installs the process's subscriber (once; later calls keep the first one) and returns a
/// handle to change its level.
pub fn init(cfg: &LogConfig) -> LogHandle {
    if let Some(installed) = INSTALLED.get() {
        return LogHandle {
            installed: Some(installed),
        };
    }
    let rust_log = std::env::var(EnvFilter::DEFAULT_ENV).ok();
    let (filter, rust_log) = match EnvFilter::try_from_default_env() {
        Ok(f) => (f, rust_log),
        Err(_) => (EnvFilter::new(cfg.level.as_str()), None),
    };
    let (filter, reload) = reload::Layer::new(filter);
    // Colour only for a person at a terminal: a redirected log (a file, a container runtime's
    // log pipe) gets plain text. NO_COLOR (no-color.org) turns it off everywhere.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let fmt = match cfg.format {
        // Event fields at the top level (`{"level":..,"message":..,"peer":..}`), as log
        // pipelines index them, instead of nested under "fields".
        LogFormat::Json => fmt.json().flatten_event(true).boxed(),
        LogFormat::Text => fmt.boxed(),
    };
    let installed = Registry::default()
        .with(filter)
        .with(fmt)
        .try_init()
        .is_ok();
    if !installed {
        return LogHandle { installed: None };
    }
    let installed = INSTALLED.get_or_init(|| Installed {
        reload,
        format: cfg.format,
        rust_log,
        level: Mutex::new(cfg.level),
    });
    LogHandle {
        installed: Some(installed),
    }
}

impl LogHandle {
    /// Applies `cfg.level` in place. An unchanged config is `Ok` (so every config reload can
    /// call this). Errors: a changed `log.format` (after applying the level), a changed level
    /// while `RUST_LOG` decides the filter, or a subscriber that is not ours.
    pub fn apply(&self, cfg: &LogConfig) -> Result<(), LogReloadError> {
        let installed = self.installed.ok_or(LogReloadError::NotInstalled)?;
        let mut level = installed
            .level
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *level != cfg.level {
            *level = cfg.level;
            match &installed.rust_log {
                Some(rust_log) => {
                    return Err(LogReloadError::PinnedByRustLog {
                        requested: cfg.level,
                        rust_log: rust_log.clone(),
                    });
                }
                None => installed
                    .reload
                    .reload(EnvFilter::new(cfg.level.as_str()))?,
            }
        }
        if installed.format != cfg.format {
            return Err(LogReloadError::FormatNeedsRestart {
                running: format_name(installed.format),
                requested: format_name(cfg.format),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(format: LogFormat, level: LogLevel) -> LogConfig {
        LogConfig { format, level }
    }

    /// One test, because the subscriber is process-wide: whichever test of this binary inits
    /// first wins, so this one only asserts what holds either way.
    #[test]
    fn level_reloads_in_place_and_format_waits_for_a_restart() {
        let first = init(&cfg(LogFormat::Text, LogLevel::Info));
        let second = init(&cfg(LogFormat::Json, LogLevel::Debug));
        let Some(installed) = first.installed else {
            // Another subscriber came first (not ours): nothing can be changed, and we say so.
            assert!(matches!(
                first.apply(&cfg(LogFormat::Text, LogLevel::Warn)),
                Err(LogReloadError::NotInstalled)
            ));
            return;
        };
        // A second init keeps the first subscriber, and its handle controls it too.
        assert!(std::ptr::eq(installed, second.installed.unwrap()));
        let running = installed.format;
        let other = match running {
            LogFormat::Text => LogFormat::Json,
            LogFormat::Json => LogFormat::Text,
        };
        let current = *installed.level.lock().unwrap();
        assert!(first.apply(&cfg(running, current)).is_ok(), "no change");
        // Quieter levels only: the subscriber writes to the real stderr of the test binary.
        let target = if current == LogLevel::Warn {
            LogLevel::Error
        } else {
            LogLevel::Warn
        };
        let r = second.apply(&cfg(running, target));
        match &installed.rust_log {
            None => {
                r.unwrap();
                let want = tracing::level_filters::LevelFilter::from(target_level(target));
                assert_eq!(tracing::level_filters::LevelFilter::current(), want);
            }
            Some(v) => {
                let e = r.unwrap_err();
                assert!(matches!(e, LogReloadError::PinnedByRustLog { .. }), "{e}");
                assert!(e.to_string().contains("pinned by RUST_LOG"), "{e}");
                assert!(e.to_string().contains(v.as_str()), "{e}");
            }
        }
        // Asking again for what was asked last is not an error.
        assert!(first.apply(&cfg(running, target)).is_ok());
        let e = first.apply(&cfg(other, target)).unwrap_err();
        assert!(matches!(e, LogReloadError::FormatNeedsRestart { .. }));
        assert!(e.to_string().contains("after a restart"), "{e}");
        // Back to the starting level for the other tests of this binary.
        let _ = first.apply(&cfg(running, current));
    }

    fn target_level(l: LogLevel) -> tracing::Level {
        match l {
            LogLevel::Trace => tracing::Level::TRACE,
            LogLevel::Debug => tracing::Level::DEBUG,
            LogLevel::Info => tracing::Level::INFO,
            LogLevel::Warn => tracing::Level::WARN,
            LogLevel::Error => tracing::Level::ERROR,
        }
    }

    #[test]
    fn messages_name_the_setting() {
        let e = LogReloadError::PinnedByRustLog {
            requested: LogLevel::Debug,
            rust_log: "warn".into(),
        };
        assert_eq!(
            e.to_string(),
            "log.level debug not applied: the level is pinned by RUST_LOG=\"warn\""
        );
        let e = LogReloadError::FormatNeedsRestart {
            running: "text",
            requested: "json",
        };
        assert_eq!(
            e.to_string(),
            "log.format json takes effect after a restart (logging stays text until then)"
        );
    }
}
