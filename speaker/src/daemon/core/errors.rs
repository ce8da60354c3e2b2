//! Why something the core asked for did not happen, typed, so a status condition and a metric
//! can say why and not just that. Shared (`Arc`) where an event carries them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// An error carried by an event or a notice, shared; equal when it is the same one.
#[derive(Debug)]
pub struct Shared<E>(pub Arc<E>);

impl<E> Shared<E> {
    pub fn new(e: E) -> Self {
        Shared(Arc::new(e))
    }
}

impl<E> Clone for Shared<E> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<E> PartialEq for Shared<E> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<E> Eq for Shared<E> {}

impl<E> std::ops::Deref for Shared<E> {
    type Target = E;
    fn deref(&self) -> &E {
        &self.0
    }
}

impl<E: std::fmt::Display> std::fmt::Display for Shared<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Why a reloaded config is not applied; the running config stays.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}")]
    Invalid(#[from] podcidr_config::ConfigErrors),
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error(transparent)]
    SourceNeedsApi(podcidr_config::SourceNeedsApi),
    #[error(transparent)]
    NodeName(podcidr_config::ConfigError),
}

impl ConfigError {
    /// The `ConfigValid` condition's reason and the rejection metric's label.
    pub fn reason(&self) -> &'static str {
        match self {
            ConfigError::Invalid(_) => "Invalid",
            ConfigError::Key(_) => "KeyFile",
            ConfigError::SourceNeedsApi(_) => "SourceNeedsApi",
            ConfigError::NodeName(_) => "NodeName",
        }
    }
}

/// Why a peer's MD5 or BFD key cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("peers[{peer}].{field}: {problem}")]
pub struct KeyError {
    pub peer: String,
    /// `passwordFile` or `bfd.authentication.secretFile`.
    pub field: &'static str,
    #[source]
    pub problem: KeyProblem,
}

/// What is wrong with a key file.
#[derive(Debug, thiserror::Error)]
pub enum KeyProblem {
    /// Unreadable, too large, or empty (see `podcidr_config::load_md5_key`).
    #[error(transparent)]
    Read(#[from] podcidr_config::Md5KeyError),
    /// Read, but not a key TCP MD5 accepts (RFC 2385: 1 to 80 bytes).
    #[error(transparent)]
    Invalid(#[from] bgp_io::transport::TransportError),
    /// The BFD key file: unreadable, empty or over 20 bytes.
    #[error(transparent)]
    Bfd(podcidr_config::BfdKeyError),
}

/// Why the node's conflist was not written.
#[derive(Debug, thiserror::Error)]
pub enum CniWriteError {
    #[error(
        "cni.confDir {dir} does not exist (is the host's CNI config dir mounted into the pod?)"
    )]
    NoDir { dir: PathBuf },
    #[error("cni.confDir {dir} is not a directory")]
    NotADir { dir: PathBuf },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The write task itself failed (panicked or was cancelled).
    #[error("the write did not finish: {0}")]
    Aborted(String),
}

/// Why a write to the Kubernetes API (the status, the Lease) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiWriteError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The API server answered with an error status.
    #[error("{reason} ({code}): {message}")]
    Api {
        code: u16,
        reason: String,
        message: String,
    },
    /// No answer (connection, TLS, a client-side error).
    #[error("{0}")]
    Unreachable(String),
}

impl ApiWriteError {
    /// A short, stable label: the API's reason (`Forbidden`, `Conflict`, …), `Timeout` or
    /// `Unreachable`.
    pub fn reason(&self) -> &str {
        match self {
            ApiWriteError::Timeout(_) => "Timeout",
            ApiWriteError::Api { reason, .. } if !reason.is_empty() => reason,
            ApiWriteError::Api { .. } => "Error",
            ApiWriteError::Unreachable(_) => "Unreachable",
        }
    }
}
