//! Wake-ups for the `file` source: an inotify watch on the file's directory.
//!
//! Only a hint to look again: the source still compares the file's stamp, and still polls, so
//! a lost event, a full inotify queue or a kernel without inotify costs latency, never a
//! change. Watching the directory (not the file) sees what replaces the file: a rename by an
//! editor or by `mv`, and a ConfigMap volume swapping its `..data` symlink.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// An inotify instance with one watch on a directory.
#[derive(Debug)]
pub struct DirWatch {
    fd: AsyncFd<OwnedFd>,
}

impl DirWatch {
    /// Watches the directory holding `file` (the current directory for a bare name).
    pub fn new(file: &Path) -> io::Result<DirWatch> {
        let dir = match file.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let dir = CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in the path"))?;
        // SAFETY: inotify_init1 takes flags only and returns a new descriptor or -1.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor we just opened and own from here on.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mask = libc::IN_CREATE
            | libc::IN_MOVED_TO
            | libc::IN_MOVED_FROM
            | libc::IN_CLOSE_WRITE
            | libc::IN_MODIFY
            | libc::IN_DELETE
            | libc::IN_ATTRIB;
        // SAFETY: a valid inotify descriptor and a NUL-terminated path that outlives the call.
        if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), dir.as_ptr(), mask) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `OwnedFd` keeps the descriptor open and unchanged for as long as the
        // `AsyncFd` owns it.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(DirWatch { fd })
    }

    /// Waits for events in the directory and consumes all that are queued. An error means
    /// the watch is unusable; the caller falls back to polling alone.
    pub async fn changed(&mut self) -> io::Result<()> {
        loop {
            let mut guard = self.fd.readable().await?;
            let mut buf = [0u8; 4096];
            let mut got = false;
            loop {
                // SAFETY: reads at most `buf.len()` bytes into `buf` from our descriptor.
                let n = unsafe {
                    libc::read(
                        guard.get_inner().as_raw_fd(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                    )
                };
                if n > 0 {
                    got = true;
                    continue;
                }
                let err = io::Error::last_os_error();
                if n < 0 && err.kind() == io::ErrorKind::WouldBlock {
                    guard.clear_ready();
                    break;
                }
                if n < 0 && err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(if n == 0 {
                    io::Error::new(io::ErrorKind::UnexpectedEof, "inotify closed")
                } else {
                    err
                });
            }
            if got {
                return Ok(());
            }
        }
    }
}
