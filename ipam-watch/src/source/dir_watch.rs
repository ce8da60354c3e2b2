//! Wake-ups for the `file` source: an inotify watch on the file's directory (the `inotify`
//! crate's tokio event stream).
//!
//! Only a hint to look again: the source still compares the file's stamp, and still polls, so
//! a lost event, a full inotify queue or a kernel without inotify costs latency, never a
//! change. Watching the directory (not the file) sees what replaces the file: a rename by an
//! editor or by `mv`, and a ConfigMap volume swapping its `..data` symlink.

use std::io;
use std::path::Path;

use futures::{FutureExt, StreamExt};
use inotify::{EventStream, Inotify, WatchMask};

/// Room for a few events at once; one event with the longest name (255 bytes) takes 272.
type Buffer = [u8; 4096];

/// An inotify instance with one watch on a directory.
#[derive(Debug)]
pub struct DirWatch {
    events: EventStream<Buffer>,
}

impl DirWatch {
    /// Watches the directory holding `file` (the current directory for a bare name). Needs a
    /// tokio runtime (the descriptor is registered with its reactor).
    pub fn new(file: &Path) -> io::Result<DirWatch> {
        let dir = match file.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let inotify = Inotify::init()?;
        inotify.watches().add(
            dir,
            WatchMask::CREATE
                | WatchMask::MOVED_TO
                | WatchMask::MOVED_FROM
                | WatchMask::CLOSE_WRITE
                | WatchMask::MODIFY
                | WatchMask::DELETE
                | WatchMask::ATTRIB,
        )?;
        let events = inotify.into_event_stream([0; 4096])?;
        Ok(DirWatch { events })
    }

    /// Waits for events in the directory and consumes all that are queued, so a burst (an
    /// editor's write, rename and chmod) is one wake-up. An error means the watch is unusable;
    /// the caller falls back to polling alone.
    pub async fn changed(&mut self) -> io::Result<()> {
        next(self.events.next().await)?;
        // Drain what is already queued without waiting for more.
        while let Some(event) = self.events.next().now_or_never() {
            next(event)?;
        }
        Ok(())
    }
}

/// One item of the event stream: an event (which one does not matter), a read error, or
/// the end of the stream.
fn next<E>(item: Option<io::Result<E>>) -> io::Result<()> {
    match item {
        Some(Ok(_)) => Ok(()),
        Some(Err(e)) => Err(e),
        None => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "inotify closed",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const WAIT: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn a_change_in_the_directory_wakes_once_per_burst() {
        let dir = std::env::temp_dir().join(format!("dir-watch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut watch = DirWatch::new(&dir.join("cidrs.yaml")).unwrap();
        // A burst, all queued before the wake-up: create, write, close, rename.
        std::fs::write(dir.join("cidrs.yaml.tmp"), "nodes: {}\n").unwrap();
        std::fs::rename(dir.join("cidrs.yaml.tmp"), dir.join("cidrs.yaml")).unwrap();
        tokio::time::timeout(WAIT, watch.changed())
            .await
            .expect("no wake-up")
            .unwrap();
        // The burst was consumed whole: nothing is left queued.
        assert!(watch.events.next().now_or_never().is_none());
        std::fs::remove_file(dir.join("cidrs.yaml")).unwrap();
        tokio::time::timeout(WAIT, watch.changed())
            .await
            .expect("no wake-up for the removal")
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_missing_directory_is_an_error() {
        let missing = std::env::temp_dir().join(format!("dir-watch-none-{}/f", std::process::id()));
        assert!(DirWatch::new(&missing).is_err());
    }
}
