//! rtnetlink framing shared by the route and neighbor dumps (`netlink_route.rs`,
//! `neighbors.rs`): checked reads, the dump request, the walk over one `recv` buffer (pure),
//! and the one bounded dump over a NETLINK_ROUTE socket.

pub mod egress;
pub mod monitor;
pub mod neigh;
pub mod route;

use std::fmt;
use std::io;

/// linux/netlink.h.
pub(super) const NLMSG_HDRLEN: usize = 16;
pub(super) const NLMSG_ERROR: u16 = 2;
pub(super) const NLMSG_DONE: u16 = 3;
pub(super) const NLM_F_REQUEST: u16 = 0x1;
pub(super) const NLM_F_DUMP: u16 = 0x300;
/// Bounds on one dump: replies read, and how long one read may wait.
const MAX_READS: usize = 10_000;
const READ_TIMEOUT_SECS: libc::time_t = 1;

pub(super) fn align4(n: usize) -> usize {
    n.saturating_add(3) & !3
}

pub(super) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

pub(super) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// A dump request of `kind` whose family-specific header (`rtmsg`, `ndmsg`: `body_len`
/// bytes) holds only `family`.
pub(super) fn dump_request(kind: u16, family: u8, body_len: usize, seq: u32) -> Vec<u8> {
    let len = NLMSG_HDRLEN + body_len;
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.push(family);
    m.resize(len, 0);
    m
}

/// Why a reply could not be walked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum WalkError {
    /// NLMSG_ERROR with this (negative) errno.
    Kernel(i32),
    Malformed(String),
}

impl fmt::Display for WalkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WalkError::Kernel(errno) => write!(f, "netlink error {errno}"),
            WalkError::Malformed(what) => f.write_str(what),
        }
    }
}

impl From<WalkError> for io::Error {
    fn from(e: WalkError) -> Self {
        match e {
            WalkError::Kernel(errno) => io::Error::from_raw_os_error(errno.saturating_neg()),
            WalkError::Malformed(what) => io::Error::new(io::ErrorKind::InvalidData, what),
        }
    }
}

/// `(type, payload)` of each route attribute in `b`; stops at the first malformed one.
pub(super) fn attributes(b: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while let (Some(len), Some(kind)) = (u16_at(b, at), u16_at(b, at + 2)) {
        let len = usize::from(len);
        let Some(data) = b.get(at + 4..at + len.max(4)).filter(|_| len >= 4) else {
            break;
        };
        out.push((kind, data));
        at += align4(len);
    }
    out
}

/// The messages of type `kind` in one `recv` buffer, each parsed by `parse`, and whether the
/// dump ended there (the tests' and the fuzzer's view of [`dump_parsed`]).
pub(super) fn walk_parsed<T, I: IntoIterator<Item = T>>(
    buf: &[u8],
    kind: u16,
    parse: impl Fn(&[u8]) -> I,
) -> Result<(Vec<T>, bool), WalkError> {
    let mut out = Vec::new();
    let done = walk(buf, |k, body| {
        if k == kind {
            out.extend(parse(body));
        }
    })?;
    Ok((out, done))
}

/// Every message of type `kind` of a whole dump, each parsed by `parse`.
pub(super) fn dump_parsed<T, I: IntoIterator<Item = T>>(
    request: &[u8],
    kind: u16,
    parse: impl Fn(&[u8]) -> I,
) -> io::Result<Vec<T>> {
    let mut out = Vec::new();
    dump(request, |k, body| {
        if k == kind {
            out.extend(parse(body));
        }
    })?;
    Ok(out)
}

/// Walks one `recv` buffer of a dump reply (host byte order, as the kernel writes it):
/// `on_message(type, body)` for each message before NLMSG_DONE; `Ok(true)` once NLMSG_DONE
/// is seen. An acknowledgement (NLMSG_ERROR with errno 0) is skipped.
pub(super) fn walk(buf: &[u8], mut on_message: impl FnMut(u16, &[u8])) -> Result<bool, WalkError> {
    let mut at = 0;
    while at < buf.len() {
        let (Some(len), Some(kind)) = (u32_at(buf, at), u16_at(buf, at + 4)) else {
            return Err(WalkError::Malformed(format!(
                "truncated netlink header at byte {at}"
            )));
        };
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        let Some(body) = buf
            .get(at + NLMSG_HDRLEN..at.saturating_add(len))
            .filter(|_| len >= NLMSG_HDRLEN)
        else {
            return Err(WalkError::Malformed(format!(
                "netlink message of {len} bytes at byte {at} is truncated"
            )));
        };
        match kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let errno = u32_at(body, 0)
                    .map(|e| e as i32)
                    .ok_or_else(|| WalkError::Malformed("truncated netlink error".into()))?;
                if errno != 0 {
                    return Err(WalkError::Kernel(errno));
                }
            }
            _ => on_message(kind, body),
        }
        at = at.saturating_add(align4(len));
    }
    Ok(false)
}

/// Sends `request` on a fresh NETLINK_ROUTE socket and walks the replies until NLMSG_DONE
/// (each read waits at most 1 s, at most [`MAX_READS`] reads).
pub(super) fn dump(request: &[u8], mut on_message: impl FnMut(u16, &[u8])) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = send_request(request)?;
    let mut buf = vec![0u8; 64 * 1024];
    for _ in 0..MAX_READS {
        // SAFETY: recv(2) into a live buffer of the given length on our fd.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
        if walk(buf.get(..n).unwrap_or_default(), &mut on_message)? || n == 0 {
            return Ok(());
        }
    }
    Err(io::Error::other("netlink dump did not finish"))
}

/// Sends one request that asks for an acknowledgement (`NLM_F_ACK`) and waits at most 1 s
/// for it: `Ok` when the kernel acknowledged, its errno otherwise.
pub(super) fn request(request: &[u8]) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = send_request(request)?;
    let mut buf = vec![0u8; 8 * 1024];
    // SAFETY: recv(2) into a live buffer of the given length on our fd.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
    let mut acked = false;
    walk(buf.get(..n).unwrap_or_default(), |_, _| {})
        .map(|_| acked = true)
        .map_err(io::Error::from)?;
    if acked && n > 0 {
        Ok(())
    } else {
        Err(io::Error::other("no netlink acknowledgement"))
    }
}

/// A fresh NETLINK_ROUTE socket (reads time out after 1 s) with `request` sent on it.
fn send_request(request: &[u8]) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: socket(2) with constant arguments; the fd is owned (closed on drop) below.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh, valid fd that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let timeout = libc::timeval {
        tv_sec: READ_TIMEOUT_SECS,
        tv_usec: 0,
    };
    // SAFETY: setsockopt(2) on our fd with a pointer to a live timeval of the given size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&raw const timeout).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: send(2) of a live buffer of the given length on our fd (to the kernel).
    let sent = unsafe { libc::send(fd.as_raw_fd(), request.as_ptr().cast(), request.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}
