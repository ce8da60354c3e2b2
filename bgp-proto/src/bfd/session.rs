//! The BFD session state machine (RFC 5880 §6.8), asynchronous mode only, without echo
//! and without demand mode. Pure: timers are outputs ("arm Detect in 300 ms") and inputs
//! ("Detect fired"); jitter comes from a seeded generator.

use std::time::Duration;

use super::auth::{self, AuthError, BfdAuthKey};
use super::packet::{BfdState, ControlPacket, Diag};

/// RFC 5880 §6.8.3: while the session is not Up, we transmit at most once per second.
pub const SLOW_TX: Duration = Duration::from_secs(1);

/// Session parameters (RFC 5880 §6.8.1 `bfd.*` variables we choose).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BfdSessionConfig {
    /// `bfd.LocalDiscr`: non-zero, unique per session on this system.
    pub my_discriminator: u32,
    /// `bfd.DesiredMinTxInterval` once Up.
    pub desired_min_tx: Duration,
    /// `bfd.RequiredMinRxInterval`.
    pub required_min_rx: Duration,
    /// `bfd.DetectMult`.
    pub detect_mult: u8,
    /// Seed of the transmit jitter (§6.8.7).
    pub jitter_seed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BfdTimer {
    /// Next periodic Control packet.
    Transmit,
    /// Detection time: no valid packet for this long means the path is down.
    Detect,
    /// A resumed session's silence ends: the peer's detection time of the session our
    /// previous process handed over has passed (see [`BfdSession::resuming`]).
    HandoverWindow,
    /// The peer's session went Down without claiming a path failure and a new one of its
    /// may replace it; when this fires the Down counts (see [`BfdOutput::PeerReplaced`]).
    Replacement,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BfdInput {
    /// Begin transmitting (the session starts in Down).
    Start,
    /// A packet that passed [`ControlPacket::decode`] and the driver's TTL check.
    Received(ControlPacket),
    TimerFired(BfdTimer),
    /// Local administrative down (§6.8.16), e.g. a planned restart.
    AdminDown,
    /// Leave AdminDown: back to Down.
    AdminUp,
    /// New timer parameters; while Up they go through a Poll Sequence (§6.8.3).
    SetIntervals {
        desired_min_tx: Duration,
        required_min_rx: Duration,
        detect_mult: u8,
    },
    /// The lowest `bfd.XmitAuthSeq` may be from now on (circular): the driver derives it
    /// from the wall clock so that the next process continues the sequence after a planned
    /// restart (docs/bgp.md, "BFD authentication"). Ignored without authentication.
    AuthSequenceFloor(u32),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BfdOutput {
    Send(ControlPacket),
    ArmTimer(BfdTimer, Duration),
    StopTimer(BfdTimer),
    StateChanged {
        from: BfdState,
        to: BfdState,
        /// Our `bfd.LocalDiag` after the change: why we went down.
        diag: Diag,
        /// The peer's state as last heard: `AdminDown` tells a peer that went down on
        /// purpose (RFC 5882 §3.2: not a path failure) from one we lost.
        remote_state: BfdState,
    },
    /// A packet that is not for this session (§6.8.6, Your Discriminator mismatch).
    Ignored(&'static str),
    /// The peer replaced its session (discriminator `old`) by a new one (`new`) that came
    /// Up within the grace ([`replacement_grace`]): our session went Down and Up again on
    /// the wire, but the path never failed, so no state change was reported for it.
    PeerReplaced {
        old: u32,
        new: u32,
    },
    /// A packet discarded by the authentication rules (§6.7, §6.8.6).
    AuthFailed(AuthError),
}

/// How long a peer's Down that claims no path failure waits for the peer's replacement
/// session to come Up before it counts: the old session's detection time, plus two packets
/// at the not-Up rate (§6.8.3: a new session sends its first packet within a second, then
/// one exchange to Up).
pub fn replacement_grace(detection_time: Duration) -> Duration {
    detection_time + SLOW_TX * 2
}

/// A peer Down held back from the client while the peer may be replacing its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Replacement {
    /// The peer's discriminator when it went Down.
    old: u32,
    /// The replacing session's discriminator, once heard.
    new: Option<u32>,
    /// What the client hears if the Down counts after all.
    diag: Diag,
    remote_state: BfdState,
}

/// `bfd.AuthType` and friends (§6.8.1) of an authenticated session.
#[derive(Debug, Clone, Copy)]
struct AuthState {
    key: BfdAuthKey,
    /// `bfd.XmitAuthSeq`: the sequence number of the last packet sent.
    xmit_seq: u32,
    /// `bfd.RcvAuthSeq` while `bfd.AuthSeqKnown`.
    rcv_seq: Option<u32>,
}

/// A Poll Sequence in progress (§6.6): values announced, not yet all in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Poll {
    /// Another change arrived during this poll: poll again when it ends.
    again: bool,
}

#[derive(Debug)]
pub struct BfdSession {
    cfg: BfdSessionConfig,
    state: BfdState,
    remote_state: BfdState,
    remote_discr: u32,
    local_diag: Diag,
    /// Microseconds, as on the wire. `*_in_use` lag the announced values during a poll.
    tx_in_use: u32,
    rx_in_use: u32,
    remote_min_rx: u32,
    remote_desired_tx: u32,
    remote_detect_mult: u8,
    remote_demand: bool,
    poll: Option<Poll>,
    started: bool,
    /// Continue the session a previous process of ours ran (see [`BfdSession::resuming`]).
    adopt: bool,
    /// Resumed and nothing heard yet: send nothing, for at most this window.
    listen: Option<Duration>,
    replacement: Option<Replacement>,
    auth: Option<AuthState>,
    rng: fastrand::Rng,
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

impl BfdSession {
    pub fn new(cfg: BfdSessionConfig) -> Self {
        let mut s = Self {
            cfg,
            state: BfdState::Down,
            remote_state: BfdState::Down,
            remote_discr: 0,
            local_diag: Diag::None,
            tx_in_use: 0,
            rx_in_use: micros(cfg.required_min_rx),
            // §6.8.1: initialised to 1 µs.
            remote_min_rx: 1,
            remote_desired_tx: 0,
            remote_detect_mult: 0,
            remote_demand: false,
            poll: None,
            started: false,
            adopt: false,
            listen: None,
            replacement: None,
            auth: None,
            rng: fastrand::Rng::with_seed(cfg.jitter_seed),
        };
        s.tx_in_use = s.announced_tx();
        s
    }

    /// A session that may continue the one our previous process ran before a planned
    /// restart (docs/bgp.md, "BFD and graceful restart"): if the first packet from the peer
    /// is Up and addressed to a discriminator that is not ours, we take that discriminator
    /// and go Up at once instead of discarding it (§6.8.6), so the peer's session never
    /// sees Down. Any other first packet starts the usual three-way handshake.
    ///
    /// Until that first packet it sends nothing: our first packet would be Down with Your
    /// Discriminator 0, which takes the peer's still-Up session down (§6.8.6), and the peer
    /// may send to us slower than any interval of ours. `window` is the peer's detection
    /// time of the handed-over session (what the previous process announced): once it has
    /// passed, that session is gone at the peer and the session starts as a new one would.
    pub fn resuming(cfg: BfdSessionConfig, window: Duration) -> Self {
        let mut s = Self::new(cfg);
        s.adopt = true;
        s.listen = Some(window);
        s
    }

    /// Authenticate every packet with `key` (RFC 5880 §6.7.4), the first sent with
    /// sequence number `first_sequence` (Meticulous: one more for each packet after it).
    pub fn with_auth(mut self, key: BfdAuthKey, first_sequence: u32) -> Self {
        self.auth = Some(AuthState {
            key,
            // Incremented before each packet (meticulous) or raised by the floor.
            xmit_seq: if key.meticulous {
                first_sequence.wrapping_sub(1)
            } else {
                first_sequence
            },
            rcv_seq: None,
        });
        self
    }

    /// `bfd.XmitAuthSeq` of the last packet sent (`None` without authentication).
    pub fn xmit_auth_seq(&self) -> Option<u32> {
        self.auth.map(|a| a.xmit_seq)
    }

    pub fn state(&self) -> BfdState {
        self.state
    }
    pub fn remote_state(&self) -> BfdState {
        self.remote_state
    }
    pub fn local_diag(&self) -> Diag {
        self.local_diag
    }
    pub fn remote_discriminator(&self) -> u32 {
        self.remote_discr
    }
    pub fn config(&self) -> &BfdSessionConfig {
        &self.cfg
    }
    /// The peer's last announced Required Min RX (1 µs before it is heard, §6.8.1).
    pub fn remote_min_rx(&self) -> Duration {
        Duration::from_micros(u64::from(self.remote_min_rx))
    }
    pub fn poll_active(&self) -> bool {
        self.poll.is_some()
    }

    /// `bfd.DesiredMinTxInterval` as we announce it: at least 1 s while not Up (§6.8.3).
    fn announced_tx(&self) -> u32 {
        let cfg = micros(self.cfg.desired_min_tx);
        if self.state == BfdState::Up {
            cfg
        } else {
            cfg.max(micros(SLOW_TX))
        }
    }

    /// The agreed transmit interval before jitter: the slower of what we want to send and
    /// what the peer wants to receive (§6.8.7).
    pub fn tx_interval(&self) -> Duration {
        Duration::from_micros(u64::from(self.tx_in_use.max(self.remote_min_rx)))
    }

    /// Asynchronous-mode detection time (§6.8.4): the remote multiplier times the slower
    /// of our required receive interval and the peer's last announced transmit interval.
    /// `None` until the peer has been heard.
    pub fn detection_time(&self) -> Option<Duration> {
        if self.remote_detect_mult == 0 {
            return None;
        }
        let agreed = u64::from(self.rx_in_use.max(self.remote_desired_tx));
        Some(Duration::from_micros(
            agreed * u64::from(self.remote_detect_mult),
        ))
    }

    /// The next periodic interval, reduced by 0–25 % (§6.8.7); with a multiplier of 1,
    /// between 75 % and 90 %.
    fn jittered(&mut self) -> Duration {
        let base = self.tx_interval().as_micros() as u64;
        let max_pct = if self.cfg.detect_mult == 1 { 90 } else { 100 };
        let pct = self.rng.u64(75..=max_pct);
        Duration::from_micros(base * pct / 100)
    }

    fn packet(&self, final_: bool) -> ControlPacket {
        ControlPacket {
            diag: self.local_diag,
            state: self.state,
            poll: !final_ && self.poll.is_some(),
            final_,
            control_plane_independent: false,
            demand: false,
            detect_mult: self.cfg.detect_mult,
            my_discriminator: self.cfg.my_discriminator,
            your_discriminator: self.remote_discr,
            desired_min_tx: self.announced_tx(),
            required_min_rx: micros(self.cfg.required_min_rx),
            required_min_echo_rx: 0,
            auth: None,
        }
    }

    fn send(&mut self, out: &mut Vec<BfdOutput>, final_: bool) {
        // Resumed and not heard yet: never a Down towards the handed-over session.
        if self.listen.is_some() {
            return;
        }
        // §6.8.7: nothing while the peer asks for no packets (RemoteMinRxInterval 0).
        if self.remote_min_rx != 0 || final_ {
            let p = self.packet(final_);
            let p = match &mut self.auth {
                None => p,
                Some(a) => {
                    // §6.7.4: Meticulous increments for every packet; Keyed may keep it.
                    if a.key.meticulous {
                        a.xmit_seq = a.xmit_seq.wrapping_add(1);
                    }
                    // Our packets never carry Poll and Final both, so signing succeeds.
                    auth::sign(p, &a.key, a.xmit_seq).unwrap_or(p)
                }
            };
            out.push(BfdOutput::Send(p));
        }
    }

    pub fn handle(&mut self, input: BfdInput) -> Vec<BfdOutput> {
        let mut out = Vec::new();
        match input {
            BfdInput::Start => {
                if !self.started {
                    self.started = true;
                    match self.listen {
                        // Resuming: listen first, for at most the handover window.
                        Some(window) => {
                            out.push(BfdOutput::ArmTimer(BfdTimer::HandoverWindow, window));
                        }
                        None => {
                            self.send(&mut out, false);
                            let next = self.jittered();
                            out.push(BfdOutput::ArmTimer(BfdTimer::Transmit, next));
                        }
                    }
                }
            }
            BfdInput::TimerFired(BfdTimer::Transmit) => {
                if self.started && self.listen.is_none() {
                    self.send(&mut out, false);
                    let next = self.jittered();
                    out.push(BfdOutput::ArmTimer(BfdTimer::Transmit, next));
                }
            }
            BfdInput::TimerFired(BfdTimer::HandoverWindow) => {
                // The handed-over session is gone at the peer: start as a new session.
                if self.listen.take().is_some() && self.started {
                    self.send(&mut out, false);
                    let next = self.jittered();
                    out.push(BfdOutput::ArmTimer(BfdTimer::Transmit, next));
                }
            }
            BfdInput::TimerFired(BfdTimer::Replacement) => {
                if self.replacement.is_some() {
                    self.replacement_failed(&mut out);
                }
            }
            BfdInput::TimerFired(BfdTimer::Detect) => self.detect_expired(&mut out),
            BfdInput::Received(p) => self.received(&mut out, p),
            BfdInput::AdminDown => {
                if self.state != BfdState::AdminDown {
                    // A stop on purpose is said even before the peer was heard (it is not
                    // a Down), and ends any wait for a replacement without a verdict.
                    if self.listen.take().is_some() {
                        out.push(BfdOutput::StopTimer(BfdTimer::HandoverWindow));
                    }
                    if self.replacement.take().is_some() {
                        out.push(BfdOutput::StopTimer(BfdTimer::Replacement));
                    }
                    self.poll = None;
                    self.enter(&mut out, BfdState::AdminDown, Diag::AdministrativelyDown);
                    out.push(BfdOutput::StopTimer(BfdTimer::Detect));
                    self.send(&mut out, false);
                }
            }
            BfdInput::AdminUp => {
                if self.state == BfdState::AdminDown {
                    self.enter(&mut out, BfdState::Down, Diag::None);
                }
            }
            BfdInput::SetIntervals {
                desired_min_tx,
                required_min_rx,
                detect_mult,
            } => self.set_intervals(&mut out, desired_min_tx, required_min_rx, detect_mult),
            BfdInput::AuthSequenceFloor(floor) => {
                if let Some(a) = &mut self.auth
                    && (floor.wrapping_sub(a.xmit_seq) as i32) > 0
                {
                    a.xmit_seq = floor;
                }
            }
        }
        out
    }

    fn set_intervals(&mut self, out: &mut Vec<BfdOutput>, tx: Duration, rx: Duration, mult: u8) {
        let changed = tx != self.cfg.desired_min_tx || rx != self.cfg.required_min_rx;
        let mult_changed = mult != 0 && mult != self.cfg.detect_mult;
        self.cfg.desired_min_tx = tx;
        self.cfg.required_min_rx = rx;
        if mult_changed {
            self.cfg.detect_mult = mult;
        }
        if !changed {
            // The multiplier needs no poll (§6.8.3 is about intervals); tell the peer now.
            if mult_changed && self.started {
                self.send(out, false);
            }
            return;
        }
        if self.state == BfdState::Up && self.remote_discr != 0 {
            // §6.8.3: a slower transmit rate and a faster receive rate wait for the poll's
            // Final; the opposite directions are safe at once.
            self.tx_in_use = self.tx_in_use.min(self.announced_tx());
            self.rx_in_use = self.rx_in_use.max(micros(rx));
            self.start_poll(out);
        } else {
            self.tx_in_use = self.announced_tx();
            self.rx_in_use = micros(rx);
        }
    }

    fn start_poll(&mut self, out: &mut Vec<BfdOutput>) {
        match &mut self.poll {
            Some(p) => p.again = true,
            None => {
                self.poll = Some(Poll { again: false });
                // Start the sequence now rather than at the next periodic packet.
                self.send(out, false);
            }
        }
    }

    fn terminate_poll(&mut self, out: &mut Vec<BfdOutput>) {
        let again = self.poll.take().is_some_and(|p| p.again);
        self.tx_in_use = self.announced_tx();
        self.rx_in_use = micros(self.cfg.required_min_rx);
        if again {
            self.start_poll(out);
        }
    }

    fn enter(&mut self, out: &mut Vec<BfdOutput>, to: BfdState, diag: Diag) {
        let from = self.state;
        if from == to {
            return;
        }
        self.state = to;
        self.local_diag = diag;
        let before = self.tx_in_use;
        if to == BfdState::Up {
            // Faster than the 1 s we used while not Up: safe at once, announced by a poll.
            self.tx_in_use = self.tx_in_use.min(self.announced_tx());
            match self.replacement.take() {
                // The replacing session is Up: the client, which never heard of the
                // Down, hears that the peer replaced its session.
                Some(r) => {
                    out.push(BfdOutput::StopTimer(BfdTimer::Replacement));
                    out.push(BfdOutput::PeerReplaced {
                        old: r.old,
                        new: self.remote_discr,
                    });
                }
                None => out.push(BfdOutput::StateChanged {
                    from,
                    to,
                    diag,
                    remote_state: self.remote_state,
                }),
            }
            if self.remote_discr != 0 {
                self.start_poll(out);
            }
        } else {
            self.poll = None;
            self.tx_in_use = self.announced_tx();
            // Held back while the peer may be replacing its session.
            if self.replacement.is_none() {
                out.push(BfdOutput::StateChanged {
                    from,
                    to,
                    diag,
                    remote_state: self.remote_state,
                });
            }
            // Tell the peer at once instead of at the next periodic packet.
            if to != BfdState::AdminDown {
                self.send(out, false);
            }
        }
        if self.started && self.tx_in_use != before {
            let next = self.jittered();
            out.push(BfdOutput::ArmTimer(BfdTimer::Transmit, next));
        }
    }

    /// The held-back Down counts after all: the client hears it (Up → Down with the diag
    /// of then), and where the session has moved on since, that move too.
    fn replacement_failed(&mut self, out: &mut Vec<BfdOutput>) {
        let Some(r) = self.replacement.take() else {
            return;
        };
        out.push(BfdOutput::StopTimer(BfdTimer::Replacement));
        out.push(BfdOutput::StateChanged {
            from: BfdState::Up,
            to: BfdState::Down,
            diag: r.diag,
            remote_state: r.remote_state,
        });
        if self.state != BfdState::Down {
            out.push(BfdOutput::StateChanged {
                from: BfdState::Down,
                to: self.state,
                diag: self.local_diag,
                remote_state: self.remote_state,
            });
        }
    }

    /// An Up session hears Down from the peer. RFC 5882 §3.2 makes that a path failure for
    /// the client, but a peer that replaces its session (FRR's bfdd does when BGP reaches
    /// Established: the old session's last packet is Down with diag 3, then a new
    /// discriminator starts with Down) has not seen the path fail. So a Down that claims
    /// no failure of the path (diag 0, or diag 3 "neighbor signaled down", which we did
    /// not), or one from a new discriminator (the replacing session itself), is held back
    /// from the client for [`replacement_grace`]: if a new session of the peer comes Up
    /// within it, the peer replaced its session ([`BfdOutput::PeerReplaced`]); otherwise
    /// the Down counts when the grace ends. Every other Down (the peer's detection time
    /// expired, a path down) counts at once, as does our own detection timeout.
    fn replacement_begins(&mut self, out: &mut Vec<BfdOutput>, p: &ControlPacket) -> bool {
        let new_session = self.remote_discr != 0 && p.my_discriminator != self.remote_discr;
        let claims_no_failure = matches!(p.diag, Diag::None | Diag::NeighborSignaledSessionDown);
        if self.state != BfdState::Up || p.state != BfdState::Down {
            return false;
        }
        if !(new_session || claims_no_failure) {
            return false;
        }
        let Some(detection) = self.detection_time() else {
            return false;
        };
        self.replacement = Some(Replacement {
            old: self.remote_discr,
            new: new_session.then_some(p.my_discriminator),
            diag: Diag::NeighborSignaledSessionDown,
            remote_state: p.state,
        });
        out.push(BfdOutput::ArmTimer(
            BfdTimer::Replacement,
            replacement_grace(detection),
        ));
        true
    }

    fn detect_expired(&mut self, out: &mut Vec<BfdOutput>) {
        // The replacing session went silent half-way: the Down counts. (In Down the old
        // session's time ran out, which is what the grace waits through.)
        if self.state != BfdState::Down {
            self.replacement_failed(out);
        }
        // §6.8.1: RemoteDiscr is reset when a detection time passes without packets;
        // §6.8.4: Init or Up go Down with diag 1.
        self.remote_discr = 0;
        self.remote_state = BfdState::Down;
        self.remote_min_rx = 1;
        self.remote_desired_tx = 0;
        self.remote_detect_mult = 0;
        self.remote_demand = false;
        // §6.8.1 asks for this after two detection times without packets; BIRD does it at
        // one, as we do: the session is Down by then either way.
        if let Some(a) = &mut self.auth {
            a.rcv_seq = None;
        }
        if matches!(self.state, BfdState::Init | BfdState::Up) {
            self.enter(out, BfdState::Down, Diag::ControlDetectionTimeExpired);
        }
    }

    /// §6.7, §6.8.6: an authenticated session takes only packets with the right type, key,
    /// sequence and digest; a session without authentication takes none with the A bit.
    /// Returns the sequence number to remember once the packet is accepted.
    fn authenticate(&self, p: &ControlPacket) -> Result<Option<u32>, AuthError> {
        match &self.auth {
            None if p.auth.is_some() => Err(AuthError::Unexpected),
            None => Ok(None),
            Some(a) => auth::check(p, &a.key, a.rcv_seq, self.cfg.detect_mult).map(Some),
        }
    }

    fn received(&mut self, out: &mut Vec<BfdOutput>, p: ControlPacket) {
        let seq = match self.authenticate(&p) {
            Ok(seq) => seq,
            Err(e) => {
                out.push(BfdOutput::AuthFailed(e));
                return;
            }
        };
        // Resumed: the peer is heard, so what we say is an answer to what it runs now.
        let heard_first = self.listen.take().is_some();
        if heard_first {
            out.push(BfdOutput::StopTimer(BfdTimer::HandoverWindow));
        }
        let adopted = std::mem::take(&mut self.adopt)
            && self.state == BfdState::Down
            && p.state == BfdState::Up
            && p.your_discriminator != 0;
        if adopted {
            self.cfg.my_discriminator = p.your_discriminator;
        }
        // §6.8.6: a non-zero Your Discriminator must be ours.
        if p.your_discriminator != 0 && p.your_discriminator != self.cfg.my_discriminator {
            out.push(BfdOutput::Ignored("your discriminator does not match"));
            return;
        }
        if let Some(r) = self.replacement {
            if p.my_discriminator == r.old {
                if r.new.is_some() {
                    // The replaced session's leftovers: not for this session any more.
                    out.push(BfdOutput::Ignored("from the peer's replaced session"));
                    return;
                }
                // The same session carries on: it was not replaced, the Down counts.
                self.replacement_failed(out);
            } else if r.new.is_none() {
                self.replacement = Some(Replacement {
                    new: Some(p.my_discriminator),
                    ..r
                });
            }
        }
        if let (Some(a), Some(seq)) = (&mut self.auth, seq) {
            a.rcv_seq = Some(seq);
        }
        let old_interval = self.tx_interval();
        // Before the peer's new values replace the old session's.
        let replacing = self.replacement_begins(out, &p);
        self.remote_discr = p.my_discriminator;
        self.remote_state = p.state;
        self.remote_demand = p.demand;
        self.remote_min_rx = p.required_min_rx;
        self.remote_desired_tx = p.desired_min_tx;
        self.remote_detect_mult = p.detect_mult;
        if p.final_ && self.poll.is_some() {
            self.terminate_poll(out);
        }
        if let Some(t) = self.detection_time() {
            out.push(BfdOutput::ArmTimer(BfdTimer::Detect, t));
        }
        if self.state == BfdState::AdminDown {
            return;
        }
        match (self.state, p.state) {
            _ if replacing => self.enter(out, BfdState::Down, Diag::NeighborSignaledSessionDown),
            _ if adopted => self.enter(out, BfdState::Up, Diag::None),
            (_, BfdState::AdminDown) if self.state != BfdState::Down => {
                self.enter(out, BfdState::Down, Diag::NeighborSignaledSessionDown);
            }
            (BfdState::Down, BfdState::Down) => self.enter(out, BfdState::Init, Diag::None),
            (BfdState::Down, BfdState::Init) => self.enter(out, BfdState::Up, Diag::None),
            (BfdState::Init, BfdState::Init | BfdState::Up) => {
                self.enter(out, BfdState::Up, Diag::None);
            }
            (BfdState::Up, BfdState::Down) => {
                self.enter(out, BfdState::Down, Diag::NeighborSignaledSessionDown);
            }
            _ => {}
        }
        // §6.8.6: answer a Poll with a Final at once.
        if p.poll {
            self.send(out, true);
        }
        if self.started && (heard_first || self.tx_interval() < old_interval) {
            let next = self.jittered();
            out.push(BfdOutput::ArmTimer(BfdTimer::Transmit, next));
        }
    }
}
