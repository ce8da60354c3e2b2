//! The thin tokio driver around [`BfdSession`]: one task per session, generic over a
//! datagram transport ([`BfdTransport`]) so tests run over in-memory channels with paused
//! time. The driver enforces the single-hop checks the session cannot see: the packet must
//! come from the peer's address with TTL / hop limit 255 (RFC 5881 §5, GTSM).

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::{Instant, sleep_until};

use bgp_proto::bfd::packet::{BfdState, ControlPacket, Diag, SINGLE_HOP_TTL};
use bgp_proto::bfd::session::{BfdInput, BfdOutput, BfdSession, BfdTimer};
pub use bgp_proto::bfd::{BfdEvent, StopMode};
use bgp_proto::bfd::{auth, timers};

/// Upper bound on how long a planned stop repeats AdminDown (RFC 5880 §6.8.16 asks for a
/// Detection Time's worth, which a large multiplier makes minutes long).
pub const ADMIN_DOWN_LIMIT: Duration = Duration::from_secs(3);

/// Copies of a handover's Poll: one lost packet must not decide.
pub const HANDOVER_PACKETS: usize = 3;

/// One received datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    pub payload: Vec<u8>,
    pub from: IpAddr,
    /// TTL / hop limit from the IP header; `None` if the kernel did not report it.
    pub ttl: Option<u8>,
}

type IoFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// Sends to the peer's control port and receives what arrives on ours.
pub trait BfdTransport: Send + 'static {
    fn send<'a>(&'a mut self, packet: &'a [u8]) -> IoFuture<'a, ()>;
    /// Must be cancel safe (it runs in a `select!`).
    fn recv(&mut self) -> IoFuture<'_, Datagram>;
}

/// What the owner sees at any time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BfdStatus {
    pub state: BfdState,
    pub remote_state: BfdState,
    pub diag: Diag,
    pub my_discriminator: u32,
    pub remote_discriminator: u32,
    pub detection_time: Option<Duration>,
    pub tx_interval: Duration,
}

#[derive(Debug)]
enum Control {
    Stop(StopMode),
    SetIntervals {
        desired_min_tx: Duration,
        required_min_rx: Duration,
        detect_mult: u8,
    },
}

#[derive(Debug)]
pub struct BfdTask {
    pub status: watch::Receiver<BfdStatus>,
    pub events: broadcast::Sender<BfdEvent>,
    control: mpsc::UnboundedSender<Control>,
    join: tokio::task::JoinHandle<()>,
}

impl BfdTask {
    /// Ends the session the way `mode` says.
    pub fn stop(&self, mode: StopMode) {
        let _ = self.control.send(Control::Stop(mode));
    }

    /// New timers for the running session: while Up they take effect through a Poll
    /// Sequence (RFC 5880 §6.8.3), so the session stays Up.
    pub fn set_intervals(&self, desired_min_tx: Duration, required_min_rx: Duration, mult: u8) {
        let _ = self.control.send(Control::SetIntervals {
            desired_min_tx,
            required_min_rx,
            detect_mult: mult,
        });
    }

    pub async fn wait(self) {
        let _ = self.join.await;
    }

    pub fn is_finished(&self) -> bool {
        self.join.is_finished()
    }
}

fn status_of(s: &BfdSession) -> BfdStatus {
    BfdStatus {
        state: s.state(),
        remote_state: s.remote_state(),
        diag: s.local_diag(),
        my_discriminator: s.config().my_discriminator,
        remote_discriminator: s.remote_discriminator(),
        detection_time: s.detection_time(),
        tx_interval: s.tx_interval(),
    }
}

/// Starts the session task on the current runtime; `events` should be subscribed to before
/// the call.
pub fn spawn<T: BfdTransport>(
    session: BfdSession,
    peer: IpAddr,
    transport: T,
    events: broadcast::Sender<BfdEvent>,
) -> BfdTask {
    spawn_on(
        &tokio::runtime::Handle::current(),
        session,
        peer,
        transport,
        events,
    )
}

/// [`spawn`] on `runtime`: the speaker's is [`super::runtime::handle`], so other work cannot
/// delay the session's timers.
pub fn spawn_on<T: BfdTransport>(
    runtime: &tokio::runtime::Handle,
    session: BfdSession,
    peer: IpAddr,
    transport: T,
    events: broadcast::Sender<BfdEvent>,
) -> BfdTask {
    let (status_tx, status) = watch::channel(status_of(&session));
    let (control, control_rx) = mpsc::unbounded_channel();
    let driver = Driver {
        session,
        peer,
        transport,
        status: status_tx,
        events: events.clone(),
        timers: BTreeMap::new(),
    };
    let join = runtime.spawn(driver.run(control_rx));
    BfdTask {
        status,
        events,
        control,
        join,
    }
}

struct Driver<T> {
    session: BfdSession,
    peer: IpAddr,
    transport: T,
    status: watch::Sender<BfdStatus>,
    events: broadcast::Sender<BfdEvent>,
    /// The session's armed timers and when they fire.
    timers: BTreeMap<BfdTimer, Instant>,
}

impl<T: BfdTransport> Driver<T> {
    /// The timer that fires first (never, while none is armed).
    fn next_timer(&self) -> impl Future<Output = BfdTimer> + use<T> {
        let first = self
            .timers
            .iter()
            .min_by_key(|(_, at)| **at)
            .map(|(t, at)| (*t, *at));
        async move {
            match first {
                Some((timer, at)) => {
                    sleep_until(at).await;
                    timer
                }
                None => std::future::pending().await,
            }
        }
    }

    async fn run(mut self, mut control: mpsc::UnboundedReceiver<Control>) {
        self.process(BfdInput::Start).await;
        let mode = loop {
            tokio::select! {
                timer = self.next_timer() => {
                    self.timers.remove(&timer);
                    if timer == BfdTimer::Transmit {
                        self.auth_clock().await;
                    }
                    self.process(BfdInput::TimerFired(timer)).await;
                }
                got = self.transport.recv() => match got {
                    Ok(d) => self.on_datagram(d).await,
                    Err(e) => {
                        self.event(BfdEvent::Dropped { kind: "recv_error", detail: e.to_string() });
                        // A failing socket must not spin the loop.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                },
                c = control.recv() => match c {
                    Some(Control::Stop(mode)) => break mode,
                    Some(Control::SetIntervals { desired_min_tx, required_min_rx, detect_mult }) => {
                        self.process(BfdInput::SetIntervals {
                            desired_min_tx,
                            required_min_rx,
                            detect_mult,
                        })
                        .await;
                    }
                    None => break StopMode::Silent,
                },
            }
        };
        // At the interval the peer agreed to while we were Up, not the idle 1 s, so a
        // planned stop takes at most a detection time.
        let spacing = self.session.tx_interval();
        let packets = match mode {
            StopMode::Silent => return,
            StopMode::AdminDown => {
                self.process(BfdInput::AdminDown).await;
                let mult = self.session.config().detect_mult;
                timers::admin_down_packets(spacing, mult, ADMIN_DOWN_LIMIT)
            }
            StopMode::Handover(window) => {
                let cfg = *self.session.config();
                // The peer's detection time of us: our multiplier × the slower of our
                // Desired Min TX and its Required Min RX (RFC 5880 §6.8.4).
                let floor = cfg.desired_min_tx.max(self.session.remote_min_rx());
                let (tx, mult) = timers::handover_timers(window, floor, cfg.detect_mult);
                let tx = if tx == floor { cfg.desired_min_tx } else { tx };
                self.process(BfdInput::SetIntervals {
                    desired_min_tx: tx,
                    required_min_rx: cfg.required_min_rx,
                    detect_mult: mult,
                })
                .await;
                HANDOVER_PACKETS
            }
        };
        for _ in 1..packets {
            tokio::time::sleep(spacing).await;
            self.process(BfdInput::TimerFired(BfdTimer::Transmit)).await;
        }
    }

    async fn on_datagram(&mut self, d: Datagram) {
        if d.from != self.peer {
            self.event(BfdEvent::Dropped {
                kind: "unknown_source",
                detail: format!("from {}, the peer is {}", d.from, self.peer),
            });
            return;
        }
        if d.ttl != Some(SINGLE_HOP_TTL) {
            self.event(BfdEvent::Dropped {
                kind: "ttl",
                detail: format!("TTL {:?}, single hop requires 255", d.ttl),
            });
            return;
        }
        match ControlPacket::decode(&d.payload) {
            Ok(p) => self.process(BfdInput::Received(p)).await,
            Err(e) => self.event(BfdEvent::Dropped {
                kind: e.kind(),
                detail: e.to_string(),
            }),
        }
    }

    /// Keeps `bfd.XmitAuthSeq` at or above the wall clock's floor (a no-op without
    /// authentication; see `auth::sequence_floor`).
    async fn auth_clock(&mut self) {
        if self.session.xmit_auth_seq().is_some() {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            self.process(BfdInput::AuthSequenceFloor(auth::sequence_floor(now)))
                .await;
        }
    }

    fn event(&self, ev: BfdEvent) {
        if let BfdEvent::Dropped { kind, .. } = &ev {
            let _ = super::drops::count(kind);
        }
        let _ = self.events.send(ev);
    }

    async fn process(&mut self, input: BfdInput) {
        for out in self.session.handle(input) {
            match out {
                BfdOutput::Send(p) => match p.encode() {
                    Ok(bytes) => {
                        if let Err(e) = self.transport.send(&bytes).await {
                            self.event(BfdEvent::SendFailed(e.to_string()));
                        }
                    }
                    Err(e) => self.event(BfdEvent::SendFailed(e.to_string())),
                },
                BfdOutput::ArmTimer(timer, d) => {
                    self.timers.insert(timer, Instant::now() + d);
                }
                BfdOutput::StopTimer(timer) => {
                    self.timers.remove(&timer);
                }
                BfdOutput::StateChanged {
                    from,
                    to,
                    diag,
                    remote_state,
                } => self.event(BfdEvent::StateChanged {
                    from,
                    to,
                    diag,
                    remote_state,
                }),
                BfdOutput::Ignored(why) => self.event(BfdEvent::Dropped {
                    kind: "discriminator",
                    detail: why.to_string(),
                }),
                BfdOutput::PeerReplaced { old, new } => {
                    self.event(BfdEvent::PeerReplaced { old, new });
                }
                BfdOutput::AuthFailed(e) => self.event(BfdEvent::Dropped {
                    kind: e.kind(),
                    detail: e.to_string(),
                }),
            }
        }
        let now = status_of(&self.session);
        self.status.send_if_modified(|s| {
            let changed = *s != now;
            *s = now;
            changed
        });
    }
}
