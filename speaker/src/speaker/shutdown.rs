//! Stopping: the signals (a second SIGTERM ends an RFC 8326 graceful shutdown wait early)
//! and the wait itself, during which the sessions keep running.

use std::time::Duration;

use super::{Event, Speaker};
use crate::process::Signals;

impl Speaker {
    pub(super) async fn run_with_signals(mut self, mut signals: Signals) {
        let (first_tx, first) = tokio::sync::oneshot::channel::<()>();
        let (again_tx, again) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            signals.shutdown().await;
            let _ = first_tx.send(());
            signals.shutdown().await;
            let _ = again_tx.send(());
        });
        self.run_until(
            async move {
                let _ = first.await;
            },
            async move {
                let _ = again.await;
            },
        )
        .await;
        task.abort();
    }

    /// RFC 8326: sessions keep running (their events handled) while the fabric moves
    /// traffic away; bounded by `wait`, cut short by `again`.
    pub(super) async fn graceful_shutdown_wait(
        &mut self,
        wait: Duration,
        again: impl std::future::Future<Output = ()>,
    ) {
        tracing::info!(
            wait_seconds = wait.as_secs(),
            "graceful shutdown (RFC 8326): routes carry GRACEFUL_SHUTDOWN 65535:0 until the Cease"
        );
        let deadline = tokio::time::sleep(wait);
        tokio::pin!(deadline, again);
        loop {
            tokio::select! {
                () = &mut deadline => break,
                () = &mut again => {
                    tracing::info!("second shutdown signal: sending the Cease now");
                    break;
                }
                Some((peer, ev)) = self.events.recv() => {
                    self.handle(Event::Session(peer, ev)).await;
                }
            }
        }
    }
}
