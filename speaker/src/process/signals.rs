//! SIGTERM/SIGINT ("shutdown") and SIGHUP ("reload") as futures and streams.
//!
//! Install the handlers early (before anything that should be stopped cleanly starts): from
//! then on the signal no longer kills the process, it is delivered here. Tokio keeps a
//! handler installed for the rest of the process once any [`tokio::signal::unix::Signal`] for
//! it existed.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::ProcessError;

/// Which signal asked the process to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// SIGTERM: the kubelet (pod deletion, rolling update) or `kill`.
    Terminate,
    /// SIGINT: Ctrl-C.
    Interrupt,
}

impl fmt::Display for Shutdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Shutdown::Terminate => "SIGTERM",
            Shutdown::Interrupt => "SIGINT",
        })
    }
}

fn install(kind: SignalKind, name: &'static str) -> Result<Signal, ProcessError> {
    signal(kind).map_err(|source| ProcessError::Signal {
        signal: name,
        source,
    })
}

/// Installs the SIGTERM and SIGINT handlers.
pub fn shutdown() -> Result<ShutdownSignal, ProcessError> {
    Ok(ShutdownSignal {
        term: install(SignalKind::terminate(), "SIGTERM")?,
        int: install(SignalKind::interrupt(), "SIGINT")?,
    })
}

/// Installs the SIGHUP handler.
pub fn reload() -> Result<ReloadSignal, ProcessError> {
    Ok(ReloadSignal {
        hup: install(SignalKind::hangup(), "SIGHUP")?,
    })
}

/// All three handlers in one value, installed at once: what a daemon's `main` holds.
#[derive(Debug)]
pub struct Signals {
    shutdown: ShutdownSignal,
    reload: ReloadSignal,
}

#[allow(dead_code)] // Parts used by the speaker; the rest completes the API.
impl Signals {
    /// Installs the SIGTERM, SIGINT and SIGHUP handlers (SIGHUP's default action would
    /// otherwise kill the process).
    pub fn install() -> Result<Signals, ProcessError> {
        Ok(Signals {
            shutdown: shutdown()?,
            reload: reload()?,
        })
    }

    /// The next SIGTERM or SIGINT (logged at info). Cancel-safe.
    pub async fn shutdown(&mut self) {
        let signal = self.shutdown.recv().await;
        tracing::info!(%signal, "shutdown requested");
    }

    /// The next SIGHUP. Cancel-safe.
    pub async fn reload(&mut self) {
        self.reload.recv().await;
    }

    /// The two halves, e.g. to move the shutdown future into another task.
    pub fn into_parts(self) -> (ShutdownSignal, ReloadSignal) {
        (self.shutdown, self.reload)
    }
}

/// A bare SIGHUP [`Signal`] (for loops that already `select!` on `Signal::recv`).
#[allow(dead_code)] // The speaker's loop uses it.
pub fn sighup() -> Result<Signal, ProcessError> {
    install(SignalKind::hangup(), "SIGHUP")
}

/// SIGTERM or SIGINT. A [`Stream`] of [`Shutdown`] (a second signal during a slow stop is a
/// second item); [`ShutdownSignal::recv`] / [`ShutdownSignal::wait`] for the first.
#[derive(Debug)]
pub struct ShutdownSignal {
    term: Signal,
    int: Signal,
}

impl ShutdownSignal {
    /// The next SIGTERM or SIGINT. Cancel-safe.
    pub async fn recv(&mut self) -> Shutdown {
        std::future::poll_fn(|cx| self.poll_signal(cx)).await
    }

    /// Consumes the handle: a future for `select!` or for an API taking
    /// `impl Future<Output = ()>` (`async { sig.wait().await; }`).
    pub async fn wait(mut self) -> Shutdown {
        self.recv().await
    }

    fn poll_signal(&mut self, cx: &mut Context<'_>) -> Poll<Shutdown> {
        // A closed signal stream cannot happen while we own the `Signal`; treat it like
        // "not yet" rather than as a shutdown.
        if let Poll::Ready(Some(())) = self.term.poll_recv(cx) {
            return Poll::Ready(Shutdown::Terminate);
        }
        if let Poll::Ready(Some(())) = self.int.poll_recv(cx) {
            return Poll::Ready(Shutdown::Interrupt);
        }
        Poll::Pending
    }
}

impl Stream for ShutdownSignal {
    type Item = Shutdown;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Shutdown>> {
        self.get_mut().poll_signal(cx).map(Some)
    }
}

/// SIGHUP: "re-read the config now". Signals that arrive while one is pending coalesce into
/// one item.
#[derive(Debug)]
pub struct ReloadSignal {
    hup: Signal,
}

impl ReloadSignal {
    /// The next SIGHUP. Cancel-safe.
    pub async fn recv(&mut self) {
        std::future::poll_fn(|cx| self.poll_signal(cx)).await;
    }

    fn poll_signal(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self.hup.poll_recv(cx) {
            Poll::Ready(Some(())) => Poll::Ready(()),
            _ => Poll::Pending,
        }
    }
}

impl Stream for ReloadSignal {
    type Item = ();

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<()>> {
        self.get_mut().poll_signal(cx).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt;

    use super::*;

    fn raise(sig: libc::c_int) {
        // SAFETY: raise(3) with a signal whose handler tokio has installed.
        let rc = unsafe { libc::raise(sig) };
        assert_eq!(rc, 0);
    }

    #[tokio::test]
    async fn sighup_is_a_reload_and_sigterm_a_shutdown() {
        // Handlers first: raising before they exist would kill the test binary.
        let mut hup = reload().unwrap();
        let mut stop = shutdown().unwrap();
        raise(libc::SIGHUP);
        tokio::time::timeout(Duration::from_secs(10), hup.next())
            .await
            .expect("SIGHUP delivered")
            .expect("stream never ends");
        raise(libc::SIGTERM);
        let got = tokio::time::timeout(Duration::from_secs(10), stop.recv())
            .await
            .expect("SIGTERM delivered");
        assert_eq!(got, Shutdown::Terminate);
        assert_eq!(got.to_string(), "SIGTERM");
        raise(libc::SIGINT);
        let got = tokio::time::timeout(Duration::from_secs(10), stop.wait())
            .await
            .expect("SIGINT delivered");
        assert_eq!(got, Shutdown::Interrupt);
    }

    #[tokio::test]
    async fn signals_bundle_delivers_both() {
        let mut signals = Signals::install().unwrap();
        let mut hup = sighup().unwrap();
        raise(libc::SIGHUP);
        tokio::time::timeout(Duration::from_secs(10), signals.reload())
            .await
            .expect("SIGHUP delivered");
        tokio::time::timeout(Duration::from_secs(10), hup.recv())
            .await
            .expect("SIGHUP delivered to every listener");
        raise(libc::SIGTERM);
        tokio::time::timeout(Duration::from_secs(10), signals.shutdown())
            .await
            .expect("SIGTERM delivered");
    }

    #[test]
    fn signal_errors_name_the_signal() {
        let e = ProcessError::Signal {
            signal: "SIGHUP",
            source: std::io::Error::other("no"),
        };
        assert_eq!(e.to_string(), "cannot install the SIGHUP handler: no");
    }
}
