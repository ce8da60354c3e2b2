//! What every long-running subcommand (`speaker`, `allocator`) needs from the process around
//! it, with plain parameters and typed errors: a Kubernetes client, logging with a reloadable
//! level, shutdown/reload signals, and one hardened HTTP server for the admin endpoints.
//!
//! - [`kube_client`] / [`kube_client_in_context`]: kubeconfig file, else `$KUBECONFIG`,
//!   `~/.kube/config`, in-cluster.
//! - [`logging::init`] → [`logging::LogHandle`]; `LogHandle::apply` changes the level in place.
//! - [`signals::shutdown`] (SIGTERM/SIGINT), [`signals::reload`] (SIGHUP), or all three as
//!   [`Signals`]; [`sighup`] for a bare tokio `Signal`.
//! - [`http::serve`]: header-read timeout, idle bound, connection cap, accept back-off.

pub mod http;
pub mod logging;
pub mod signals;

pub use signals::{Signals, sighup};

use std::path::{Path, PathBuf};

use kube::config::{InferConfigError, KubeConfigOptions, Kubeconfig, KubeconfigError};

/// Why the process could not set itself up. Each message names the file, context or signal
/// and the cause.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// `--kubeconfig FILE` could not be read, parsed or turned into a client config.
    #[error("kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: Box<KubeconfigError>,
    },
    /// `--context NAME` without a file: the default kubeconfig has no usable such context.
    #[error("kubeconfig context {context:?}: {source}")]
    KubeContext {
        context: String,
        #[source]
        source: Box<KubeconfigError>,
    },
    /// Neither a kubeconfig nor an in-cluster service account.
    #[error(
        "no Kubernetes API configuration (no --kubeconfig, $KUBECONFIG, ~/.kube/config or \
         in-cluster service account): {source}"
    )]
    NoKubeConfig {
        #[source]
        source: Box<InferConfigError>,
    },
    /// The config was found but a client could not be built from it (TLS, proxy, …).
    #[error("Kubernetes client for {cluster_url}: {source}")]
    KubeClient {
        cluster_url: String,
        #[source]
        source: Box<kube::Error>,
    },
    /// A signal handler could not be installed.
    #[error("cannot install the {signal} handler: {source}")]
    Signal {
        signal: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// A Kubernetes client: from `kubeconfig` when given, else inferred (`$KUBECONFIG`,
/// `~/.kube/config`, then the in-cluster service account).
pub async fn kube_client(kubeconfig: Option<&Path>) -> Result<kube::Client, ProcessError> {
    kube_client_in_context(kubeconfig, None).await
}

/// Like [`kube_client`], kubectl style: `context` picks a context of the kubeconfig (the given
/// file, else the default one) instead of its current context.
pub async fn kube_client_in_context(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<kube::Client, ProcessError> {
    let config = kube_config_in_context(kubeconfig, context).await?;
    let cluster_url = config.cluster_url.to_string();
    kube::Client::try_from(config).map_err(|e| ProcessError::KubeClient {
        cluster_url,
        source: Box::new(e),
    })
}

/// The client configuration [`kube_client_in_context`] builds on (for callers that also
/// want the server URL).
pub async fn kube_config_in_context(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<kube::Config, ProcessError> {
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    let config = match (kubeconfig, context) {
        (Some(path), _) => {
            let file_err = |e: KubeconfigError| ProcessError::Kubeconfig {
                path: path.to_owned(),
                source: Box::new(e),
            };
            let kc = Kubeconfig::read_from(path).map_err(file_err)?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(file_err)?
        }
        (None, Some(ctx)) => kube::Config::from_kubeconfig(&options).await.map_err(|e| {
            ProcessError::KubeContext {
                context: ctx.to_owned(),
                source: Box::new(e),
            }
        })?,
        (None, None) => kube::Config::infer()
            .await
            .map_err(|e| ProcessError::NoKubeConfig {
                source: Box::new(e),
            })?,
    };
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(r: Result<kube::Client, ProcessError>) -> ProcessError {
        match r {
            Ok(_) => panic!("expected an error, got a client"),
            Err(e) => e,
        }
    }

    #[tokio::test]
    async fn kubeconfig_errors_name_the_file() {
        let path = std::env::temp_dir().join(format!(
            "podcidr-process-missing-{}/kubeconfig",
            std::process::id()
        ));
        let e = err(kube_client(Some(&path)).await);
        assert!(matches!(e, ProcessError::Kubeconfig { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");

        let dir = std::env::temp_dir().join(format!("podcidr-process-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("kubeconfig");
        std::fs::write(&bad, "clusters: [not, a, kubeconfig").unwrap();
        let e = err(kube_client_in_context(Some(&bad), Some("nope")).await);
        assert!(e.to_string().contains(&bad.display().to_string()), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_valid_kubeconfig_gives_a_client() {
        let dir = std::env::temp_dir().join(format!("podcidr-process-ok-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n\
             contexts: [{name: c, context: {cluster: k, user: u}}, {name: d, context: {cluster: k, user: u}}]\n\
             users: [{name: u, user: {}}]\n",
        )
        .unwrap();
        assert!(kube_client(Some(&path)).await.is_ok());
        assert!(kube_client_in_context(Some(&path), Some("d")).await.is_ok());
        let e = err(kube_client_in_context(Some(&path), Some("missing")).await);
        assert!(e.to_string().contains("kubeconfig"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
