//! The HTTP/1.1 listener and the state shared by every connection.

use std::sync::Arc;

use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::router;
use crate::shared::{Body, Shared};

/// Serves one connection: HTTP/1.1, or with the `http2` feature HTTP/2 too.
async fn serve_connection<S>(
    stream: tokio::net::TcpStream,
    svc: S,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
where
    S: hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = hyper::Response<Body>,
        > + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    #[cfg(feature = "http2")]
    {
        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
            .serve_connection(TokioIo::new(stream), svc)
            .await
    }
    #[cfg(not(feature = "http2"))]
    {
        hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), svc)
            .await
            .map_err(Into::into)
    }
}

/// Accepts connections until `shutdown` flips (or its sender is dropped); then every
/// connection, open watches included, is aborted.
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => break,
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(err) => {
                        tracing::warn!(%err, "fake-kube: accept failed");
                        continue;
                    }
                };
                let shared = shared.clone();
                conns.spawn(async move {
                    let svc = service_fn(move |req| router::handle(shared.clone(), req));
                    if let Err(err) = serve_connection(stream, svc).await {
                        tracing::debug!(%err, "fake-kube: connection ended with an error");
                    }
                });
            }
        }
        while conns.try_join_next().is_some() {}
    }
    conns.shutdown().await;
}
