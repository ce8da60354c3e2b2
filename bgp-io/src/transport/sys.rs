//! The only `unsafe` in the transport: raw `setsockopt`/`getsockopt` calls and
//! `if_nametoindex`.
//!
//! Values are restricted to [`SockOptValue`] types (plain `#[repr(C)]` data without padding),
//! so the byte length handed to the kernel always matches an initialised Rust value.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use libc::{c_int, socklen_t};

/// `struct __kernel_sockaddr_storage` from linux/socket.h: 128 bytes, pointer aligned.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy)]
pub(super) struct KernelSockaddrStorage {
    pub(super) family: libc::sa_family_t,
    pub(super) data: [u8; 126],
}

/// `struct tcp_md5sig` from linux/tcp.h (not exposed by the `libc` crate).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(super) struct TcpMd5Sig {
    pub(super) addr: KernelSockaddrStorage,
    /// Extension flags; only read with `TCP_MD5SIG_EXT`, which we do not use.
    pub(super) flags: u8,
    pub(super) prefixlen: u8,
    pub(super) keylen: u16,
    pub(super) ifindex: c_int,
    pub(super) key: [u8; libc::TCP_MD5SIG_MAXKEYLEN],
}

// Layout guards: linux/tcp.h gives 216 bytes, key at offset 136, no padding anywhere.
const _: () = assert!(size_of::<KernelSockaddrStorage>() == 128);
const _: () = assert!(size_of::<TcpMd5Sig>() == 216);
const _: () = assert!(std::mem::offset_of!(TcpMd5Sig, key) == 136);
const _: () = assert!(std::mem::offset_of!(TcpMd5Sig, ifindex) == 132);

/// Marker for values that may be passed to `setsockopt` byte for byte.
pub(crate) trait SockOptValue: Copy {}
impl SockOptValue for c_int {}
impl SockOptValue for TcpMd5Sig {}
impl SockOptValue for libc::timeval {}
impl SockOptValue for libc::sock_fprog {}

/// `setsockopt(fd, level, name, &value, sizeof value)`.
pub(crate) fn setsockopt<T: SockOptValue>(
    fd: BorrowedFd<'_>,
    level: c_int,
    name: c_int,
    value: &T,
) -> io::Result<()> {
    let len = socklen_t::try_from(size_of::<T>())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `fd` is a borrowed, open descriptor for the duration of the call. `value` is a
    // live reference to a `SockOptValue` (padding-free `#[repr(C)]` data), and `len` is exactly
    // its size, so the kernel only reads initialised memory we own; it does not keep the pointer.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            std::ptr::from_ref(value).cast(),
            len,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `getsockopt(fd, level, name)` for an `int`-valued option.
pub(super) fn getsockopt_int(fd: BorrowedFd<'_>, level: c_int, name: c_int) -> io::Result<c_int> {
    let mut value: c_int = 0;
    let mut len = socklen_t::try_from(size_of::<c_int>())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `fd` is borrowed and open; `value` and `len` are live locals, and `len` tells the
    // kernel the buffer holds exactly one `c_int`, so it cannot write past `value`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            std::ptr::from_mut(&mut value).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The index of the interface called `name`: the scope id of a link-local socket address
/// (RFC 4007 §6). `ENODEV` when there is no such interface.
pub fn interface_index(name: &str) -> io::Result<u32> {
    let c_name = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name contains NUL"))?;
    // SAFETY: `c_name` is NUL-terminated and outlives the call, which only reads it.
    let index = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
    if index == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(index)
}

#[cfg(test)]
mod interface_tests {
    use super::*;

    #[test]
    fn loopback_has_an_index_and_a_missing_interface_is_an_error() {
        assert!(interface_index("lo").unwrap() > 0);
        let missing = interface_index("podcidr-none0").unwrap_err();
        assert_eq!(missing.raw_os_error(), Some(libc::ENODEV));
        assert_eq!(
            interface_index("a\0b").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
