//! The thin tokio driver around [`Session`]: one task per peer, generic over the transport
//! (`AsyncRead + AsyncWrite`), so tests run over `tokio::io::duplex` with paused time.
//!
//! Reads happen in the session task; writes go to a writer task through a queue, so a peer
//! that stops reading cannot stop us from reading (and noticing its NOTIFICATION or its hold
//! timer). The writer enforces the RFC 9687 send hold timer. Messages produced by one input
//! are encoded into one buffer and written with one call (write coalescing). The queue is
//! bounded in bytes (`SessionConfig::send_queue_limit`): passing the bound counts as send
//! hold timer expiry.

mod second_conn;
mod update_window;

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::sync::{Notify, broadcast, mpsc, watch};
use tokio::time::Instant;
use tokio_util::codec::FramedRead;

use crate::codec::BgpCodec;
use bgp_proto::codec::CodecError;
use bgp_proto::error::DecodeError;
use bgp_proto::message::{Message, WireOptions};
use bgp_proto::types::Family;

use bgp_proto::session::rib_out::RouteSet;
use bgp_proto::session::{BfdInput, Input, Output, Session, State, StopReason, Timer};
use bgp_proto::session::{NotificationRecord, SessionStatus};
use second_conn::{SecondConnection, SecondEvent, close_second, second_event};
pub use update_window::UPDATE_ERROR_EVENT_INTERVAL;
use update_window::{Summary, UpdateErrorWindow};

/// Opens the TCP (or test) connection for active sessions.
pub trait Connector: Send + 'static {
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn connect(&mut self) -> Pin<Box<dyn Future<Output = io::Result<Self::Stream>> + Send>>;

    /// Why an attempt that got no answer within `after` failed, in operator terms. Called
    /// when the ConnectRetry timer abandons an attempt still in flight.
    fn no_response(&self, after: Duration) -> String {
        format!("no response from the peer within {after:?}")
    }
}

pub use bgp_proto::session::SessionEvent;

/// What the owner of a [`SessionTask`] asks of it.
#[derive(Debug)]
enum Control {
    Stop(StopReason),
    Bfd(BfdInput),
    SetConnectRetry { base: Duration, max: Duration },
}

/// Handle to a running session task.
#[derive(Debug)]
pub struct SessionTask {
    pub status: watch::Receiver<SessionStatus>,
    pub events: broadcast::Sender<SessionEvent>,
    control: mpsc::UnboundedSender<Control>,
    join: tokio::task::JoinHandle<()>,
}

impl SessionTask {
    /// Stops the session (NOTIFICATION per reason) and ends the task.
    pub fn stop(&self, reason: StopReason) {
        let _ = self.control.send(Control::Stop(reason));
    }

    /// What the BFD session beside this one says (see [`BfdInput`]).
    pub fn bfd(&self, input: BfdInput) {
        let _ = self.control.send(Control::Bfd(input));
    }

    /// New ConnectRetry backoff bounds, used from the next retry on; the session is not
    /// reset.
    pub fn set_connect_retry(&self, base: Duration, max: Duration) {
        let _ = self.control.send(Control::SetConnectRetry { base, max });
    }

    /// Waits for the task to end (after [`SessionTask::stop`]).
    pub async fn wait(self) {
        let _ = self.join.await;
    }

    pub fn is_finished(&self) -> bool {
        self.join.is_finished()
    }
}

/// Starts the session task. Passive sessions get their connections through `incoming`.
///
/// `routes` is `None` until the route source is ready: until then the session announces
/// nothing and sends no End-of-RIB, so a graceful-restart peer keeps our stale routes. A
/// `None` after a route set keeps that set.
pub fn spawn<C: Connector>(
    session: Session,
    connector: C,
    incoming: Option<mpsc::Receiver<C::Stream>>,
    routes: watch::Receiver<Option<Arc<RouteSet>>>,
) -> SessionTask {
    spawn_with_events(
        session,
        connector,
        incoming,
        routes,
        broadcast::channel(256).0,
    )
}

/// [`spawn`] with the caller's event channel: subscribe before calling, or the first
/// transitions (all of them, on a fast link and a busy machine) happen before anyone
/// listens and are lost.
pub fn spawn_with_events<C: Connector>(
    session: Session,
    connector: C,
    incoming: Option<mpsc::Receiver<C::Stream>>,
    routes: watch::Receiver<Option<Arc<RouteSet>>>,
    events: broadcast::Sender<SessionEvent>,
) -> SessionTask {
    let (status_tx, status) = watch::channel(SessionStatus::new(unix_now()));
    let (control, control_rx) = mpsc::unbounded_channel();
    let driver = Driver {
        session,
        connector,
        incoming,
        routes,
        control: control_rx,
        status: status_tx,
        events: events.clone(),
        timers: BTreeMap::new(),
        conn: None,
        second: None,
        connecting: None,
        connect_started: Instant::now(),
        wire: WireOptions::default(),
        stopping: false,
        closing: tokio::task::JoinSet::new(),
        send_queue_full: false,
        update_errors: UpdateErrorWindow::default(),
    };
    let join = tokio::spawn(driver.run());
    SessionTask {
        status,
        events,
        control,
        join,
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

enum WriterCmd {
    Write(Bytes),
    Close,
}

enum WriterEvent {
    SendHoldExpired,
    Failed(String),
}

struct Connection<S> {
    reader: FramedRead<ReadHalf<S>, BgpCodec>,
    writer: mpsc::UnboundedSender<WriterCmd>,
    writer_events: mpsc::UnboundedReceiver<WriterEvent>,
    writer_task: tokio::task::JoinHandle<()>,
    /// Bytes handed to the writer and not yet written; the writer decrements it.
    queued: Arc<AtomicUsize>,
    /// Signalled by the writer when `queued` drops to zero.
    drained: Arc<Notify>,
    /// The session asked for `Input::SendQueueDrained` (`Output::NotifyWhenDrained`).
    drain_wanted: bool,
}

type Connecting<S> = Pin<Box<dyn Future<Output = io::Result<S>> + Send>>;

struct Driver<C: Connector> {
    session: Session,
    connector: C,
    incoming: Option<mpsc::Receiver<C::Stream>>,
    routes: watch::Receiver<Option<Arc<RouteSet>>>,
    control: mpsc::UnboundedReceiver<Control>,
    status: watch::Sender<SessionStatus>,
    events: broadcast::Sender<SessionEvent>,
    timers: BTreeMap<Timer, Instant>,
    conn: Option<Connection<C::Stream>>,
    /// A second connection from the peer, until its OPEN settles the collision.
    second: Option<SecondConnection<C::Stream>>,
    connecting: Option<Connecting<C::Stream>>,
    connect_started: Instant,
    wire: WireOptions,
    stopping: bool,
    /// Connections being closed (see `linger`); awaited before `run` returns.
    closing: tokio::task::JoinSet<()>,
    /// A write passed `send_queue_limit` during the current `process`.
    send_queue_full: bool,
    update_errors: UpdateErrorWindow,
}

async fn write_loop<S: AsyncWrite>(
    mut wr: WriteHalf<S>,
    mut cmds: mpsc::UnboundedReceiver<WriterCmd>,
    events: mpsc::UnboundedSender<WriterEvent>,
    send_hold: Duration,
    queued: Arc<AtomicUsize>,
    drained: Arc<Notify>,
) {
    while let Some(cmd) = cmds.recv().await {
        match cmd {
            WriterCmd::Write(buf) => {
                match tokio::time::timeout(send_hold, wr.write_all(&buf)).await {
                    Ok(Ok(())) => {
                        if queued.fetch_sub(buf.len(), Ordering::AcqRel) == buf.len() {
                            drained.notify_one();
                        }
                    }
                    Ok(Err(e)) => {
                        let _ = events.send(WriterEvent::Failed(e.to_string()));
                        return;
                    }
                    Err(_) => {
                        let _ = events.send(WriterEvent::SendHoldExpired);
                        return;
                    }
                }
            }
            WriterCmd::Close => {
                // Bounded so a peer that stopped reading cannot hold the close open.
                let _ = tokio::time::timeout(Duration::from_secs(5), wr.shutdown()).await;
                return;
            }
        }
    }
}

impl<C: Connector> Driver<C> {
    async fn run(mut self) {
        self.process(Input::Start);
        let initial = self.routes.borrow_and_update().clone();
        if let Some(initial) = initial {
            self.process(Input::SetRoutes(initial));
        }
        loop {
            if self.stopping && self.session.state() == State::Idle {
                break;
            }
            // Checked here as well as on the writer's signal, so no wake-up can be missed.
            if let Some(conn) = &mut self.conn
                && conn.drain_wanted
                && conn.queued.load(Ordering::Acquire) == 0
            {
                conn.drain_wanted = false;
                self.process(Input::SendQueueDrained);
                continue;
            }
            let next_timer = self
                .timers
                .iter()
                .min_by_key(|(_, at)| **at)
                .map(|(t, at)| (*t, *at));
            let errors_deadline = self.update_errors.deadline();
            tokio::select! {
                // Timers are outputs of the FSM; the driver only keeps the deadlines.
                _ = sleep_until(next_timer.map(|(_, at)| at)), if next_timer.is_some() => {
                    if let Some((t, _)) = next_timer {
                        self.timers.remove(&t);
                        self.process(Input::TimerFired(t));
                    }
                }
                res = poll_connect(&mut self.connecting), if self.connecting.is_some() => {
                    self.connecting = None;
                    match res {
                        Ok(stream) => self.attach(stream, Input::TcpConnected),
                        Err(e) => self.process(Input::TcpFailed(e.to_string())),
                    }
                }
                Some(stream) = recv_incoming(&mut self.incoming), if self.incoming.is_some() => {
                    self.accept(stream);
                }
                ev = second_event(&mut self.second), if self.second.is_some() => {
                    self.on_second(ev);
                }
                ev = conn_event(&mut self.conn), if self.conn.is_some() => match ev {
                    ConnEvent::Frame(frame) => self.on_frame(frame),
                    // The loop's head checks whether the queue is empty.
                    ConnEvent::Drained => {}
                    ConnEvent::Writer(ev) => {
                        self.detach();
                        match ev {
                            Some(WriterEvent::SendHoldExpired) => self.process(Input::TimerFired(Timer::SendHold)),
                            Some(WriterEvent::Failed(e)) => self.process(Input::TcpFailed(e)),
                            None => self.process(Input::TcpFailed("writer stopped".into())),
                        }
                    }
                },
                changed = self.routes.changed(), if !self.stopping => {
                    if changed.is_ok() {
                        let routes = self.routes.borrow_and_update().clone();
                        if let Some(routes) = routes {
                            self.process(Input::SetRoutes(routes));
                        }
                    } else {
                        // The route source is gone: the speaker is shutting down. A stop it
                        // sent just before (graceful restart, say) wins over the default.
                        self.stopping = true;
                        let reason = match self.control.try_recv() {
                            Ok(Control::Stop(reason)) => reason,
                            _ => StopReason::Shutdown("speaker stopping".into()),
                        };
                        self.process(Input::Stop(reason));
                    }
                }
                _ = sleep_until(errors_deadline), if errors_deadline.is_some() => {
                    if let Some(summary) = self.update_errors.expire(Instant::now()) {
                        self.report_update_errors(summary);
                    }
                }
                Some(_) = self.closing.join_next(), if !self.closing.is_empty() => {}
                Some(control) = self.control.recv(), if !self.stopping => match control {
                    Control::Stop(reason) => {
                        self.stopping = true;
                        self.process(Input::Stop(reason));
                    }
                    Control::Bfd(input) => self.process(Input::Bfd(input)),
                    Control::SetConnectRetry { base, max } => {
                        self.process(Input::SetConnectRetry { base, max });
                    }
                },
            }
        }
        if let Some(summary) = self.update_errors.expire(Instant::now()) {
            self.report_update_errors(summary);
        }
        // Let the writers deliver the final NOTIFICATION, bounded by their own timeouts.
        self.detach();
        if let Some(second) = self.second.take() {
            self.closing.spawn(close_second(second, None));
        }
        while self.closing.join_next().await.is_some() {}
    }

    fn attach(&mut self, stream: C::Stream, input: Input) {
        let (rd, wr) = tokio::io::split(stream);
        self.wire = WireOptions::default();
        self.attach_halves(FramedRead::new(rd, BgpCodec::new(self.wire)), wr);
        self.process(input);
    }

    /// Makes a connection the session's: its writer task starts here.
    fn attach_halves(
        &mut self,
        reader: FramedRead<ReadHalf<C::Stream>, BgpCodec>,
        wr: WriteHalf<C::Stream>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (ev_tx, ev_rx) = mpsc::unbounded_channel();
        let send_hold = self.session.config().send_hold_time();
        let queued = Arc::new(AtomicUsize::new(0));
        let drained = Arc::new(Notify::new());
        let writer_task = tokio::spawn(write_loop(
            wr,
            rx,
            ev_tx,
            send_hold,
            Arc::clone(&queued),
            Arc::clone(&drained),
        ));
        self.conn = Some(Connection {
            reader,
            writer: tx,
            writer_events: ev_rx,
            writer_task,
            queued,
            drained,
            drain_wanted: false,
        });
    }

    /// A connection the peer opened. With none of our own it is the session's at once (our
    /// connect in flight, if any, is abandoned); otherwise it waits for its OPEN, and the
    /// session settles the collision (RFC 4271 §6.8). A newer second connection replaces an
    /// older one still waiting.
    fn accept(&mut self, stream: C::Stream) {
        if self.stopping {
            return;
        }
        if self.conn.is_some() {
            if let Some(old) = self.second.replace(SecondConnection::new(stream)) {
                self.closing.spawn(close_second(old, None));
            }
            return;
        }
        // A second connection still waiting is older than this one: the peer gave it up.
        if let Some(old) = self.second.take() {
            self.closing.spawn(close_second(old, None));
        }
        self.attach(stream, Input::TcpAccepted);
        if self.session.state() == State::OpenSent {
            self.connecting = None;
        } else {
            self.detach();
        }
    }

    fn on_second(&mut self, ev: SecondEvent) {
        let Some(second) = self.second.take() else {
            return;
        };
        match ev {
            SecondEvent::Frame(decoded) => {
                let (msg, len) = (decoded.message.clone(), decoded.length);
                self.status.send_modify(|s| s.received.record(&msg, len));
                if let Message::Notification(n) = &msg {
                    let _ = self
                        .events
                        .send(SessionEvent::NotificationReceived(n.clone()));
                }
                self.second = Some(second);
                self.process(Input::SecondConnectionOpen(decoded));
            }
            SecondEvent::Malformed(nt) => {
                let _ = self.events.send(SessionEvent::NotificationSent(nt.clone()));
                self.closing.spawn(close_second(second, Some(nt)));
            }
            SecondEvent::Gone => {
                self.closing.spawn(close_second(second, None));
            }
        }
    }

    fn detach(&mut self) {
        if let Some(conn) = self.conn.take() {
            let _ = conn.writer.send(WriterCmd::Close);
            self.closing.spawn(linger(conn));
        }
    }

    fn on_frame(&mut self, frame: Option<Result<bgp_proto::message::Decoded, CodecError>>) {
        match frame {
            Some(Ok(decoded)) => {
                let len = decoded.length;
                let msg = decoded.message.clone();
                self.status.send_modify(|s| s.received.record(&msg, len));
                if let Message::Notification(n) = &msg {
                    let _ = self
                        .events
                        .send(SessionEvent::NotificationReceived(n.clone()));
                }
                self.process(Input::Received(decoded));
            }
            Some(Err(CodecError::Decode(e))) => self.process(Input::DecodeFailed(e)),
            Some(Err(e)) => {
                self.detach();
                self.process(Input::TcpFailed(e.to_string()));
            }
            None => {
                self.detach();
                self.process(Input::TcpFailed("connection closed by peer".into()));
            }
        }
    }

    fn process(&mut self, input: Input) {
        let outputs = self.session.handle(input);
        let mut batch = BytesMut::new();
        let mut updates = 0usize;
        for o in outputs {
            match o {
                Output::Connect => {
                    self.status.send_modify(|s| s.connect_attempts += 1);
                    self.connecting = Some(self.connector.connect());
                    self.connect_started = Instant::now();
                }
                Output::Send(msg) => {
                    let start = batch.len();
                    // Encoding our own messages only fails on a bug in the planner's limits.
                    if msg.encode(&self.wire, &mut batch).is_ok() {
                        let len = batch.len() - start;
                        self.status.send_modify(|s| s.sent.record(&msg, len));
                        match &msg {
                            Message::Update(_) => updates += 1,
                            Message::Notification(n) => {
                                let _ = self.events.send(SessionEvent::NotificationSent(n.clone()));
                            }
                            _ => {}
                        }
                    }
                }
                Output::Disconnect => {
                    self.flush(&mut batch);
                    if self.connecting.take().is_some() {
                        // A silent peer (filtered SYNs, MD5 or GTSM mismatch) never fails the
                        // connect by itself: say so instead of retrying quietly.
                        let why = self.connector.no_response(self.connect_started.elapsed());
                        self.status.send_modify(|s| s.last_error = Some(why));
                    }
                    self.detach();
                }
                Output::ArmTimer(t, d) => {
                    self.timers.insert(t, Instant::now() + d);
                }
                Output::StopTimer(t) => {
                    self.timers.remove(&t);
                }
                Output::Negotiated(neg) => {
                    self.wire = WireOptions {
                        four_octet_as: neg.four_octet_as,
                        extended_message: neg.extended_message,
                    };
                    if let Some(conn) = &mut self.conn {
                        conn.reader.decoder_mut().set_options(self.wire);
                    }
                }
                Output::StateChanged { from, to, reason } => {
                    let now = unix_now();
                    let text = reason.as_ref().map(ToString::to_string);
                    self.status.send_modify(|s| {
                        s.state = to;
                        s.since = now;
                        if from == State::Established {
                            s.flaps += 1;
                        }
                        if let Some(t) = &text {
                            s.last_error = Some(t.clone());
                        }
                    });
                    let _ = self
                        .events
                        .send(SessionEvent::StateChanged { from, to, reason });
                }
                Output::UpdateErrors(errors) => self.on_update_errors(&errors),
                Output::Refused(r) => {
                    let _ = self.events.send(SessionEvent::Refused(r));
                }
                Output::NotifyWhenDrained => {
                    if let Some(conn) = &mut self.conn {
                        conn.drain_wanted = true;
                    }
                }
                Output::CloseSecondConnection(nt) => {
                    if let Some(second) = self.second.take() {
                        if let Some(nt) = &nt {
                            let _ = self.events.send(SessionEvent::NotificationSent(nt.clone()));
                        }
                        self.closing.spawn(close_second(second, nt));
                    }
                }
                Output::AdoptSecondConnection => {
                    self.flush(&mut batch);
                    self.connecting = None;
                    self.detach();
                    if let Some(second) = self.second.take() {
                        self.wire = WireOptions::default();
                        self.attach_halves(second.reader, second.writer);
                    }
                }
            }
        }
        self.flush(&mut batch);
        if updates > 0 {
            let _ = self
                .events
                .send(SessionEvent::UpdatesSent { messages: updates });
        }
        self.publish();
        if std::mem::take(&mut self.send_queue_full) {
            // A peer that lets this much pile up is not reading: RFC 9687 send hold expiry.
            self.process(Input::TimerFired(Timer::SendHold));
        }
    }

    /// Hands a batch to the writer, unless it would pass `send_queue_limit`: then the
    /// connection is dropped at once (its queue with it) and `process` feeds send hold
    /// expiry.
    fn flush(&mut self, batch: &mut BytesMut) {
        if batch.is_empty() {
            return;
        }
        let bytes = batch.split().freeze();
        let Some(conn) = &self.conn else {
            return;
        };
        let len = bytes.len();
        let queued = conn.queued.load(Ordering::Acquire);
        if queued > 0 && queued.saturating_add(len) > self.session.config().send_queue_limit {
            if let Some(conn) = self.conn.take() {
                // No linger: the queue is what must go, and the peer is not reading anyway.
                conn.writer_task.abort();
            }
            self.send_queue_full = true;
            return;
        }
        let now_queued = conn
            .queued
            .fetch_add(len, Ordering::AcqRel)
            .saturating_add(len);
        let _ = conn.writer.send(WriterCmd::Write(bytes));
        self.status.send_if_modified(|s| {
            let higher = now_queued > s.send_queue_high_water;
            if higher {
                s.send_queue_high_water = now_queued;
            }
            higher
        });
    }

    fn on_update_errors(&mut self, errors: &[DecodeError]) {
        self.status.send_modify(|s| {
            for e in errors {
                *s.update_errors.entry(e.kind()).or_default() += 1;
            }
        });
        if let Some(summary) = self.update_errors.record(errors, Instant::now()) {
            self.report_update_errors(summary);
        }
    }

    fn report_update_errors(&self, Summary { counts, example }: Summary) {
        let _ = self
            .events
            .send(SessionEvent::UpdateErrors { counts, example });
    }

    fn publish(&mut self) {
        let s = &self.session;
        let advertised: BTreeMap<String, usize> = [Family::IPV4_UNICAST, Family::IPV6_UNICAST]
            .into_iter()
            .map(|f| (f.name(), s.adj_rib_out().count(f)))
            .collect();
        let negotiated = s.negotiated().cloned();
        let sent = s.last_notification_sent().cloned();
        let received = s.last_notification_received().cloned();
        let rib = s.adj_rib_out();
        let (waiting, peer_strict) = (s.waiting_for_bfd(), s.peer_bfd_strict());
        let strict = s.config().bfd_strict;
        let mut events = Vec::new();
        self.status.send_if_modified(|st| {
            let before = st.clone();
            if waiting != st.waiting_for_bfd_since.is_some() {
                st.waiting_for_bfd_since = waiting.then(unix_now);
                events.push(SessionEvent::WaitingForBfd(waiting));
            }
            if strict && peer_strict.is_some() && peer_strict != st.peer_bfd_strict {
                events.push(SessionEvent::BfdStrict {
                    negotiated: peer_strict == Some(true),
                });
            }
            st.peer_bfd_strict = peer_strict;
            if !st.adj_rib_out.0.same_snapshot(rib) {
                st.adj_rib_out = bgp_proto::session::RibSnapshot(rib.clone());
            }
            st.advertised = advertised;
            st.negotiated = negotiated;
            if let Some(n) = &sent
                && st
                    .last_notification_sent
                    .as_ref()
                    .is_none_or(|r| r.code != u8::from(n.code) || r.subcode != n.subcode)
            {
                st.last_notification_sent = Some(NotificationRecord::new(n, unix_now()));
            }
            if let Some(n) = &received
                && st
                    .last_notification_received
                    .as_ref()
                    .is_none_or(|r| r.code != u8::from(n.code) || r.subcode != n.subcode)
            {
                st.last_notification_received = Some(NotificationRecord::new(n, unix_now()));
            }
            *st != before
        });
        for ev in events {
            let _ = self.events.send(ev);
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn poll_connect<S>(c: &mut Option<Connecting<S>>) -> io::Result<S> {
    match c {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

async fn recv_incoming<S>(rx: &mut Option<mpsc::Receiver<S>>) -> Option<S> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

enum ConnEvent {
    Frame(Option<Result<bgp_proto::message::Decoded, CodecError>>),
    Writer(Option<WriterEvent>),
    Drained,
}

/// How long a closed connection keeps reading for the peer's close.
const LINGER: Duration = Duration::from_secs(2);

/// Closes a connection without losing what we sent last. Closing a socket with unread data
/// sends a RST, and a RST makes the peer's kernel drop what its application has not read
/// yet: our NOTIFICATION. So: let the writer finish (NOTIFICATION, then FIN), then read and
/// discard until the peer closes too, or `LINGER` passes.
async fn linger<S: AsyncRead + AsyncWrite>(conn: Connection<S>) {
    let Connection {
        reader,
        writer,
        writer_task,
        ..
    } = conn;
    drop(writer);
    let _ = writer_task.await;
    let mut rd = reader.into_inner();
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(LINGER, async {
        while let Ok(n) = rd.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

async fn conn_event<S: AsyncRead + AsyncWrite>(conn: &mut Option<Connection<S>>) -> ConnEvent {
    match conn {
        Some(c) => tokio::select! {
            f = c.reader.next() => ConnEvent::Frame(f),
            w = c.writer_events.recv() => ConnEvent::Writer(w),
            () = c.drained.notified(), if c.drain_wanted => ConnEvent::Drained,
        },
        None => std::future::pending().await,
    }
}

/// Active TCP connections with the session's socket options (source address, MD5, TTL).
#[derive(Debug, Clone)]
pub struct TcpConnector {
    pub peer: std::net::SocketAddr,
    pub options: crate::transport::ConnectOptions,
}

impl Connector for TcpConnector {
    type Stream = tokio::net::TcpStream;

    fn no_response(&self, after: Duration) -> String {
        crate::transport::TransportError::no_response(
            self.peer,
            after,
            self.options.md5.is_some(),
            self.options.ttl.is_gtsm(),
        )
        .to_string()
    }

    fn connect(&mut self) -> Pin<Box<dyn Future<Output = io::Result<Self::Stream>> + Send>> {
        let peer = self.peer;
        let options = self.options.clone();
        Box::pin(async move {
            // The transport error's text ("no response …; check the MD5 password") is what
            // operators see in the session's last error.
            crate::transport::connect(peer, &options)
                .await
                .map_err(|e| io::Error::other(e.to_string()))
        })
    }
}
