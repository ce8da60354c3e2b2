//! The UDP transport of single-hop BFD (RFC 5881): receive on port 3784 with the TTL /
//! hop limit of each datagram (`IP_RECVTTL` / `IPV6_RECVHOPLIMIT`), send from a source
//! port in 49152–65535 with TTL 255.
//!
//! The control port of a local address is shared by every session on it: one receive
//! task per port hands each datagram to the session of its source address, and only if it
//! came with TTL 255 (RFC 5881 §5) through the interface this node reaches that peer
//! through (`IP_PKTINFO` / `IPV6_RECVPKTINFO`): a pod that forges the peer's address
//! reaches us through its own veth, whatever rp_filter says. A process on the node reaches
//! us through the loopback, which IP_PKTINFO does not show (the kernel reports the
//! interface of the local address for looped packets), so a socket filter drops every
//! datagram that arrived on `lo` in the kernel ([`loopback_filter`]), before it takes room
//! in the socket's buffer; the kernel counts those (`SO_RXQ_OVFL`). Everything else is
//! dropped before it is queued, so a flood cannot crowd the peer's packets out of the
//! session's queue; drops are counted by reason ([`super::drops`]).

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::{Arc, Mutex};

use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use super::driver::{BfdTransport, Datagram};
use crate::transport::dscp;
use crate::transport::sys::setsockopt;
use bgp_proto::bfd::packet::{CONTROL_PORT, SINGLE_HOP_TTL, SOURCE_PORTS};

/// Attempts at a free random source port before giving up.
const SOURCE_PORT_ATTEMPTS: usize = 64;

/// Which source port a session's packets leave from. RFC 5881 §4: one port for the life of
/// a session, so a session that continues across a restart needs the port it had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourcePort {
    /// Any free port of the range.
    Any,
    /// This port if free, else any.
    Prefer(u16),
    /// This port or an error (`AddrInUse`).
    Exactly(u16),
}

/// The source port a session named by `key` (its addresses and interface) starts with: the
/// same in every process and every build (FNV-1a, not the std hasher), so the next process
/// after a planned restart can send from the port the peer knows without stored state.
pub fn stable_source_port(key: &str) -> u16 {
    let mut h: u32 = 0x811c_9dc5;
    for b in key.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    let (start, end) = (*SOURCE_PORTS.start(), *SOURCE_PORTS.end());
    let span = u32::from(end - start) + 1;
    start + u16::try_from(h % span).unwrap_or(0)
}

/// Per source address and its scope (the interface index of a link-local address, else 0:
/// one link-local address may be a different neighbour on each uplink), where that peer's
/// datagrams go and from which interface they must arrive.
type Sessions = Arc<Mutex<HashMap<Scoped, Registered>>>;

#[derive(Debug)]
struct Registered {
    to: mpsc::Sender<Datagram>,
    arrival: Arrival,
}

/// The interface a peer's packets must arrive on.
#[derive(Debug)]
enum Arrival {
    /// A link-local peer: the configured interface (RFC 4007 scope).
    Scope(u32),
    /// An address: the interface of the route to it (`ip route get`), looked up when the
    /// session starts and again, at most once per [`ROUTE_RECHECK`], when a packet from
    /// the peer's address arrives elsewhere; so a route that moves is followed within a
    /// second, and a flood on the wrong interface costs one lookup a second.
    Route {
        ifindex: Option<u32>,
        checked: std::time::Instant,
    },
}

/// How often a mismatching arrival may look the route up again.
const ROUTE_RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// The loopback interface: index 1 in every network namespace (`LOOPBACK_IFINDEX`).
const LOOPBACK_IFINDEX: u32 = 1;

impl Arrival {
    fn for_peer(peer: Scoped) -> Self {
        match peer {
            (IpAddr::V6(v6), scope) if v6.is_unicast_link_local() => Self::Scope(scope),
            (ip, _) => Self::Route {
                ifindex: super::route::route_interface(ip).ok(),
                checked: std::time::Instant::now(),
            },
        }
    }

    /// Whether a packet from `peer` that arrived on `ifindex` came the way the node
    /// reaches the peer.
    fn accepts(&mut self, peer: IpAddr, ifindex: u32) -> bool {
        match self {
            Self::Scope(scope) => *scope == ifindex,
            Self::Route { ifindex: want, .. } if *want == Some(ifindex) => true,
            Self::Route {
                ifindex: want,
                checked,
            } => {
                let now = std::time::Instant::now();
                if now.duration_since(*checked) < ROUTE_RECHECK {
                    return false;
                }
                *checked = now;
                *want = super::route::route_interface(peer).ok();
                *want == Some(ifindex)
            }
        }
    }
}

type Scoped = (IpAddr, u32);

/// The scope that tells `ip` apart: the interface for an IPv6 link-local address (RFC 4007).
fn scoped(ip: IpAddr, scope_id: u32) -> Scoped {
    match ip {
        IpAddr::V6(v6) if v6.is_unicast_link_local() => (ip, scope_id),
        _ => (ip, 0),
    }
}

/// Datagrams queued per session before more are dropped (a session reads them at once).
const SESSION_QUEUE: usize = 64;

/// Control ports opened by this process, by local address. Kept for the process's life
/// (there are few local addresses), so closing one session and opening the next never
/// races the socket's close. Their receive tasks run on the runtime that opened them: the
/// BFD runtime in the speaker (`super::runtime`), or distinct addresses per test runtime.
static CONTROL_PORTS: Mutex<BTreeMap<SocketAddr, Sessions>> = Mutex::new(BTreeMap::new());

#[derive(Debug)]
pub struct UdpTransport {
    rx: mpsc::Receiver<Datagram>,
    tx: UdpSocket,
    peer: Scoped,
    sessions: Sessions,
}

impl Drop for UdpTransport {
    fn drop(&mut self) {
        unregister(&self.sessions, self.peer);
    }
}

fn unregister(sessions: &Sessions, peer: Scoped) {
    if let Ok(mut s) = sessions.lock() {
        s.remove(&peer);
    }
}

/// The sessions table of the control port on `local`, opening the port the first time.
fn control_port(local: SocketAddr, v6: bool) -> io::Result<Sessions> {
    let mut ports = CONTROL_PORTS
        .lock()
        .map_err(|_| io::Error::other("BFD control port table poisoned"))?;
    if let Some(s) = ports.get(&local) {
        return Ok(Arc::clone(s));
    }
    let rx = bind_udp(local)
        .map_err(|e| io::Error::new(e.kind(), format!("BFD control port {local}: {e}")))?;
    ttl_options(&rx, v6)?;
    pktinfo_option(&rx, v6)?;
    loopback_filter(&rx, v6)?;
    rx.set_nonblocking(true)?;
    let rx = UdpSocket::from_std(rx)?;
    let sessions: Sessions = Arc::default();
    tokio::spawn(dispatch(rx, Arc::clone(&sessions)));
    ports.insert(local, Arc::clone(&sessions));
    Ok(sessions)
}

async fn dispatch(rx: UdpSocket, sessions: Sessions) {
    let mut kernel_drops = 0u32;
    loop {
        let Ok(r) = rx.async_io(Interest::READABLE, || recv_with_ttl(&rx)).await else {
            // Errors (ICMP errors reported on the socket, say) belong to no one session.
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        // The socket's drop counter, as of this datagram (present once non-zero).
        if let Some(total) = r.kernel_drops {
            let new = total.wrapping_sub(kernel_drops);
            kernel_drops = total;
            if new > 0 {
                dropped_in_kernel(new, r.datagram.from);
            }
        }
        if let Err(reason) = admit(&sessions, r) {
            dropped(reason);
        }
    }
}

/// Why the control port drops a datagram before any session sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// TTL / hop limit other than 255 (RFC 5881 §5): not from a neighbour on the link.
    Ttl { ttl: Option<u8>, from: IpAddr },
    /// The peer's address through the loopback: sent by this node (RFC 5881 §5 assumes
    /// a router's own processes cannot forge; a pod's or any local process can).
    Local { from: IpAddr },
    /// The peer's address through an interface that is not the peer's.
    Interface { from: IpAddr, ifindex: u32 },
    /// No session with this source (and scope).
    UnknownSource { from: IpAddr },
    /// The session is [`SESSION_QUEUE`] packets behind.
    QueueFull { from: IpAddr },
}

impl Refused {
    /// The `reason` label.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Ttl { .. } => "ttl",
            Self::Local { .. } => "local",
            Self::Interface { .. } => "interface",
            Self::UnknownSource { .. } => "unknown_source",
            Self::QueueFull { .. } => "queue_full",
        }
    }
}

/// Datagrams the kernel dropped before the socket (the socket's `sk_drops`): through the
/// loopback ([`loopback_filter`]), or the receive buffer full.
fn dropped_in_kernel(n: u32, next: IpAddr) {
    if let Some(logged) = super::drops::count_n("kernel", u64::from(n)) {
        tracing::warn!(
            reason = "kernel",
            dropped = logged,
            next_accepted_from = %next,
            "BFD packets dropped by the kernel before the control port: sent by this node (through the loopback) from an address not its own, or the socket's buffer full; logged at most every 10 s"
        );
    }
}

fn dropped(reason: Refused) {
    if let Some(n) = super::drops::count(reason.kind()) {
        let detail = match reason {
            Refused::Ttl { ttl, from } => format!("from {from} with TTL {ttl:?}"),
            Refused::Local { from } => format!("from {from} through the loopback"),
            Refused::Interface { from, ifindex } => {
                format!("from {from} through interface index {ifindex}")
            }
            Refused::UnknownSource { from } | Refused::QueueFull { from } => {
                format!("from {from}")
            }
        };
        tracing::warn!(
            reason = reason.kind(),
            dropped = n,
            last = %detail,
            "BFD packets dropped before their session (RFC 5881 §5: TTL 255 through the peer's interface); logged at most every 10 s per reason"
        );
    }
}

/// The single-hop checks of one datagram, in order, and its queueing.
fn admit(sessions: &Sessions, r: Received) -> Result<(), Refused> {
    let from = r.datagram.from;
    if r.datagram.ttl != Some(SINGLE_HOP_TTL) {
        return Err(Refused::Ttl {
            ttl: r.datagram.ttl,
            from,
        });
    }
    let key = scoped(from, r.scope);
    let mut all = sessions
        .lock()
        .map_err(|_| Refused::UnknownSource { from })?;
    let s = all.get_mut(&key).ok_or(Refused::UnknownSource { from })?;
    // Without IP_PKTINFO (never on Linux) there is nothing to check against: refuse.
    let ifindex = r.ifindex.unwrap_or(0);
    if !s.arrival.accepts(from, ifindex) {
        return Err(if ifindex == LOOPBACK_IFINDEX {
            Refused::Local { from }
        } else {
            Refused::Interface { from, ifindex }
        });
    }
    // Full: the session is SESSION_QUEUE packets behind; drop, as a congested link would.
    s.to.try_send(r.datagram)
        .map_err(|_| Refused::QueueFull { from })
}

/// A UDP socket bound to `addr`. IPv6 sockets are IPv6-only: without `IPV6_V6ONLY`,
/// `[::]:3784` also claims `0.0.0.0:3784`, so a v4 and a v6 session without a local
/// address could not both run (EADDRINUSE on the second family).
fn bind_udp(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    if addr.is_ipv6() {
        sock.set_only_v6(true)?;
    }
    sock.bind(&addr.into())?;
    Ok(sock.into())
}

fn unspecified(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

/// TTL 255 and its check (RFC 5881 §5), and DSCP CS6 like BGP's.
fn ttl_options(sock: &std::net::UdpSocket, v6: bool) -> io::Result<()> {
    dscp::apply(sock.as_fd(), v6)
        .map_err(|(name, e)| io::Error::new(e.kind(), format!("{name}: {e}")))?;
    let ttl = libc::c_int::from(SINGLE_HOP_TTL);
    let on: libc::c_int = 1;
    if v6 {
        setsockopt(
            sock.as_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_UNICAST_HOPS,
            &ttl,
        )?;
        setsockopt(
            sock.as_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_RECVHOPLIMIT,
            &on,
        )
    } else {
        setsockopt(sock.as_fd(), libc::IPPROTO_IP, libc::IP_TTL, &ttl)?;
        setsockopt(sock.as_fd(), libc::IPPROTO_IP, libc::IP_RECVTTL, &on)
    }
}

impl UdpTransport {
    /// Binds the control port on `local` (or the wildcard of the peer's family) and a
    /// random source port, and connects the sending socket to the peer's control port.
    pub fn bind(local: Option<IpAddr>, peer: IpAddr) -> io::Result<Self> {
        Self::bind_with(local, peer, 0, SourcePort::Any)
    }

    /// [`UdpTransport::bind`] with the source port chosen as `source` says. `scope_id`: for
    /// an IPv6 link-local peer, the index of the interface it is on (RFC 4007); packets go
    /// out there and only that interface's packets from the peer are taken. Else ignored.
    pub fn bind_with(
        local: Option<IpAddr>,
        peer: IpAddr,
        scope_id: u32,
        source: SourcePort,
    ) -> io::Result<Self> {
        let key = scoped(peer, scope_id);
        if let (IpAddr::V6(v6), 0) = key
            && v6.is_unicast_link_local()
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("BFD with link-local {peer} needs its interface"),
            ));
        }
        let local = local.unwrap_or_else(|| unspecified(peer));
        if local.is_ipv4() != peer.is_ipv4() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("BFD local address {local} and peer {peer} differ in family"),
            ));
        }
        let v6 = peer.is_ipv6();
        let sessions = control_port(SocketAddr::new(local, CONTROL_PORT), v6)?;
        let (to_session, rx) = mpsc::channel(SESSION_QUEUE);
        {
            let mut s = sessions
                .lock()
                .map_err(|_| io::Error::other("BFD session table poisoned"))?;
            if s.contains_key(&key) {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("a BFD session with {peer} on {local} already runs"),
                ));
            }
            s.insert(
                key,
                Registered {
                    to: to_session,
                    arrival: Arrival::for_peer(key),
                },
            );
        }
        // From here on the transport owns the registration (its Drop removes it).
        let setup = |sessions: Sessions| -> io::Result<Self> {
            let mut last = None;
            let mut tx = None;
            let first = match source {
                SourcePort::Any => None,
                SourcePort::Prefer(p) | SourcePort::Exactly(p) => Some(p),
            };
            let random = match source {
                SourcePort::Exactly(_) => 0,
                _ => SOURCE_PORT_ATTEMPTS,
            };
            let ports = first
                .into_iter()
                .chain(std::iter::repeat_with(|| fastrand::u16(SOURCE_PORTS)).take(random));
            for port in ports {
                match bind_udp(SocketAddr::new(local, port)) {
                    Ok(s) => {
                        tx = Some(s);
                        break;
                    }
                    Err(e) => last = Some((port, e)),
                }
            }
            let Some(tx) = tx else {
                unregister(&sessions, key);
                return Err(match last {
                    Some((port, e)) => {
                        io::Error::new(e.kind(), format!("BFD source port {port} on {local}: {e}"))
                    }
                    None => io::Error::from(io::ErrorKind::AddrInUse),
                });
            };
            let tx = (|| {
                ttl_options(&tx, v6)?;
                tx.connect(match peer {
                    IpAddr::V6(v6) => SocketAddrV6::new(v6, CONTROL_PORT, 0, key.1).into(),
                    IpAddr::V4(_) => SocketAddr::new(peer, CONTROL_PORT),
                })?;
                tx.set_nonblocking(true)?;
                UdpSocket::from_std(tx)
            })();
            match tx {
                Ok(tx) => Ok(Self {
                    rx,
                    tx,
                    peer: key,
                    sessions,
                }),
                Err(e) => {
                    unregister(&sessions, key);
                    Err(e)
                }
            }
        };
        setup(sessions)
    }

    pub fn source_port(&self) -> io::Result<u16> {
        Ok(self.tx.local_addr()?.port())
    }

    /// The TOS byte / traffic class the session's packets are sent with.
    pub fn traffic_class(&self) -> io::Result<u8> {
        crate::transport::traffic_class(&self.tx)
    }
}

impl BfdTransport for UdpTransport {
    fn send<'a>(
        &'a mut self,
        packet: &'a [u8],
    ) -> std::pin::Pin<Box<dyn Future<Output = io::Result<()>> + Send + 'a>> {
        Box::pin(async move { self.tx.send(packet).await.map(|_| ()) })
    }

    fn recv(
        &mut self,
    ) -> std::pin::Pin<Box<dyn Future<Output = io::Result<Datagram>> + Send + '_>> {
        Box::pin(async move {
            match self.rx.recv().await {
                Some(d) => Ok(d),
                // The dispatch task never ends; were it gone, the detection timer decides.
                None => std::future::pending().await,
            }
        })
    }
}

/// The arrival interface of each datagram (`IP_PKTINFO` / `IPV6_RECVPKTINFO`).
fn pktinfo_option(sock: &std::net::UdpSocket, v6: bool) -> io::Result<()> {
    let on: libc::c_int = 1;
    if v6 {
        setsockopt(
            sock.as_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_RECVPKTINFO,
            &on,
        )
    } else {
        setsockopt(sock.as_fd(), libc::IPPROTO_IP, libc::IP_PKTINFO, &on)
    }
}

/// A classic BPF socket filter on the control port, run by the kernel on each datagram
/// before it is queued on the socket. It sees the device the datagram really came in on
/// (`skb->dev`), which IP_PKTINFO hides for looped packets, and drops those through the
/// loopback (`LOOPBACK_IFINDEX`: sent by a process on this node, whatever source address it
/// forged) unless their source is a loopback address (a peer on this node: tests, a local
/// router), so a local flood takes no room in the socket's buffer; the kernel counts them
/// in the socket's drops (`SO_RXQ_OVFL`).
fn loopback_filter(sock: &std::net::UdpSocket, v6: bool) -> io::Result<()> {
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS (with SKF_*_OFF: see below)
    const AND_K: u16 = 0x54; // BPF_ALU | BPF_AND | BPF_K
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K: keep this many bytes (0: drop)
    // Ancillary data: skb->dev->ifindex; and the IP header (the filter of a UDP socket
    // starts at the UDP header).
    let ifindex = (libc::SKF_AD_OFF + libc::SKF_AD_IFINDEX) as u32;
    let net = |at: i32| (libc::SKF_NET_OFF + at) as u32;
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let (drop, accept) = (op(RET_K, 0, 0, 0), op(RET_K, 0, 0, u32::MAX));
    let prog: Vec<libc::sock_filter> = if v6 {
        vec![
            op(LD_W_ABS, 0, 0, ifindex),
            op(JEQ_K, 0, 9, LOOPBACK_IFINDEX), // not the loopback: accept
            // Source ::1 (bytes 8..24 of the IPv6 header): accept, else drop.
            op(LD_W_ABS, 0, 0, net(8)),
            op(JEQ_K, 0, 6, 0),
            op(LD_W_ABS, 0, 0, net(12)),
            op(JEQ_K, 0, 4, 0),
            op(LD_W_ABS, 0, 0, net(16)),
            op(JEQ_K, 0, 2, 0),
            op(LD_W_ABS, 0, 0, net(20)),
            op(JEQ_K, 1, 0, 1),
            drop,
            accept,
        ]
    } else {
        vec![
            op(LD_W_ABS, 0, 0, ifindex),
            op(JEQ_K, 0, 4, LOOPBACK_IFINDEX), // not the loopback: accept
            // Source in 127.0.0.0/8 (bytes 12..16 of the IPv4 header): accept, else drop.
            op(LD_W_ABS, 0, 0, net(12)),
            op(AND_K, 0, 0, 0xff00_0000),
            op(JEQ_K, 1, 0, 0x7f00_0000),
            drop,
            accept,
        ]
    };
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr().cast_mut(),
    };
    setsockopt(
        sock.as_fd(),
        libc::SOL_SOCKET,
        libc::SO_ATTACH_FILTER,
        &fprog,
    )?;
    let on: libc::c_int = 1;
    setsockopt(sock.as_fd(), libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &on)
}

/// One datagram as the control port read it.
#[derive(Debug)]
struct Received {
    datagram: Datagram,
    /// The source's scope id (link-local).
    scope: u32,
    /// The interface it arrived on.
    ifindex: Option<u32>,
    /// The socket's drops so far (`SO_RXQ_OVFL`), once there are any.
    kernel_drops: Option<u32>,
}

/// `recvmsg` with the TTL / hop-limit and packet-info control messages; also the source's
/// scope id.
fn recv_with_ttl(sock: &UdpSocket) -> io::Result<Received> {
    let mut buf = [0u8; 128];
    let mut name = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    // u64 elements: cmsg headers need pointer alignment.
    let mut control = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is valid (null pointers, zero lengths); the fields set
    // below point at live locals that outlive the recvmsg call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = name.as_mut_ptr().cast();
    msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of_val(&control);
    // SAFETY: every pointer in `msg` refers to a buffer of the stated length that lives
    // for the call; the kernel writes at most those lengths.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let len = usize::try_from(n).unwrap_or(0).min(buf.len());
    let mut ttl = None;
    let mut ifindex = None;
    let mut kernel_drops = None;
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, bounded by
    // msg_controllen; each data read is of one c_int or one in(6)_pktinfo inside its cmsg.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            let c = &*cmsg;
            let is_ttl = (c.cmsg_level == libc::IPPROTO_IP && c.cmsg_type == libc::IP_TTL)
                || (c.cmsg_level == libc::IPPROTO_IPV6 && c.cmsg_type == libc::IPV6_HOPLIMIT);
            if is_ttl {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                ttl = u8::try_from(v).ok();
            }
            if c.cmsg_level == libc::SOL_SOCKET && c.cmsg_type == libc::SO_RXQ_OVFL {
                kernel_drops = Some(std::ptr::read_unaligned(
                    libc::CMSG_DATA(cmsg).cast::<u32>(),
                ));
            }
            if c.cmsg_level == libc::IPPROTO_IP && c.cmsg_type == libc::IP_PKTINFO {
                let info =
                    std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::in_pktinfo>());
                ifindex = u32::try_from(info.ipi_ifindex).ok();
            }
            if c.cmsg_level == libc::IPPROTO_IPV6 && c.cmsg_type == libc::IPV6_PKTINFO {
                let info =
                    std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::in6_pktinfo>());
                ifindex = Some(info.ipi6_ifindex);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    // SAFETY: recvmsg succeeded, so the kernel wrote a sockaddr of the socket's family
    // (msg_namelen bytes) into `name`, which was zeroed beforehand.
    let (from, scope) = unsafe { sockaddr_ip(name.assume_init_ref()) }
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no source address"))?;
    let datagram = Datagram {
        payload: buf.get(..len).unwrap_or_default().to_vec(),
        from,
        ttl,
    };
    Ok(Received {
        datagram,
        scope,
        ifindex,
        kernel_drops,
    })
}

/// # Safety
/// `ss` must hold a valid `sockaddr_in` or `sockaddr_in6` as its family says.
unsafe fn sockaddr_ip(ss: &libc::sockaddr_storage) -> Option<(IpAddr, u32)> {
    match libc::c_int::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: family AF_INET: the storage holds a sockaddr_in.
            let sin = unsafe { &*std::ptr::from_ref(ss).cast::<libc::sockaddr_in>() };
            let a = SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            );
            Some((IpAddr::V4(*a.ip()), 0))
        }
        libc::AF_INET6 => {
            // SAFETY: family AF_INET6: the storage holds a sockaddr_in6.
            let sin6 = unsafe { &*std::ptr::from_ref(ss).cast::<libc::sockaddr_in6>() };
            let a = SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                0,
                sin6.sin6_scope_id,
            );
            Some((IpAddr::V6(*a.ip()), a.scope_id()))
        }
        _ => None,
    }
}
