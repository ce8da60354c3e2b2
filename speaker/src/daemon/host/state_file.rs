//! What a speaker keeps for the next process on its node (`--state-dir`, a hostPath in the
//! DaemonSet): JSON files written whole (temp file, fsync, rename) so a crash leaves the
//! old file or the new one, never half of one. Each file names the node it was written
//! for: a directory that moved to another node (a reused disk image) is not believed.
//! Reading never fails the speaker: a missing, unreadable or foreign file is "nothing kept".

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The largest state file read: last good objects are bounded by the API's own object size
/// limits (1.5 MiB each, a handful per node); anything far larger is not ours.
const MAX_STATE_BYTES: u64 = 16 * 1024 * 1024;

/// The layout version: a file of another version is ignored, not misread.
const VERSION: u32 = 1;

#[derive(Serialize, serde::Deserialize)]
struct Envelope<T> {
    version: u32,
    node: String,
    #[serde(flatten)]
    body: T,
}

/// One state file of one node.
#[derive(Debug, Clone)]
pub struct StateFile {
    path: PathBuf,
    node: String,
    /// The bytes last written (or read): an unchanged state is not rewritten.
    last: Option<Vec<u8>>,
}

impl StateFile {
    pub fn new(dir: &Path, name: &str, node: &str) -> Self {
        StateFile {
            path: dir.join(name),
            node: node.to_owned(),
            last: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the previous process kept, or why nothing is used (`Ok(None)`: no file).
    /// Messages name the file and what is wrong with it, never its content.
    pub fn load<T: DeserializeOwned>(&mut self) -> Result<Option<T>, String> {
        let shown = self.path.display();
        let file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read {shown}: {e}")),
        };
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(file, MAX_STATE_BYTES + 1),
            &mut bytes,
        )
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
        if bytes.len() as u64 > MAX_STATE_BYTES {
            return Err(format!(
                "{shown} is larger than {MAX_STATE_BYTES} bytes: not a state file of ours"
            ));
        }
        let env: Envelope<serde_json::Value> = serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "{shown} is not a state file (line {}, column {}: {:?})",
                e.line(),
                e.column(),
                e.classify()
            )
        })?;
        if env.version != VERSION {
            return Err(format!(
                "{shown} has layout version {}, this speaker reads {VERSION}",
                env.version
            ));
        }
        if env.node != self.node {
            return Err(format!(
                "{shown} was written for node {:?}, this is {:?}",
                env.node, self.node
            ));
        }
        let body = serde_json::from_value(env.body).map_err(|e| {
            format!(
                "{shown} does not hold what this speaker keeps ({:?})",
                e.classify()
            )
        })?;
        self.last = Some(bytes);
        Ok(Some(body))
    }

    /// Writes `body` unless the file already holds it. Mode 0600: what a node ran is its
    /// own business (no keys are kept; MD5 keys live in the in-memory key directory).
    pub fn save<T: Serialize>(&mut self, body: &T) -> std::io::Result<()> {
        let env = Envelope {
            version: VERSION,
            node: self.node.clone(),
            body,
        };
        let bytes = serde_json::to_vec(&env).map_err(std::io::Error::other)?;
        if self.last.as_deref() == Some(&bytes[..]) {
            return Ok(());
        }
        write_whole(&self.path, &bytes, 0o600)?;
        self.last = Some(bytes);
        Ok(())
    }
}

/// Writes `bytes` to `path` whole: a temp file of `mode` beside it, synced, then renamed over
/// it, so a reader (a session reading its key, the next process reading its state) sees the
/// old file or the new one, never half of one. The temp file is created with `mode`, never
/// readable by others, not even for a moment; a leftover one (a crash between write and
/// rename) may be 0400, which even its owner cannot reopen for writing without
/// CAP_DAC_OVERRIDE, so it is removed first.
pub fn write_whole(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::StateFile;

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("podcidr-state-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Body {
        peers: BTreeSet<String>,
    }

    #[test]
    fn state_written_by_one_process_is_read_by_the_next_on_the_same_node() {
        let d = dir("roundtrip");
        let body = Body {
            peers: ["tor1".to_owned()].into(),
        };
        StateFile::new(&d, "s.json", "node-a").save(&body).unwrap();
        let mut next = StateFile::new(&d, "s.json", "node-a");
        assert_eq!(next.load::<Body>().unwrap(), Some(body));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_state_file_of_another_node_is_not_believed() {
        let d = dir("foreign");
        let body = Body {
            peers: BTreeSet::new(),
        };
        StateFile::new(&d, "s.json", "node-a").save(&body).unwrap();
        let err = StateFile::new(&d, "s.json", "node-b")
            .load::<Body>()
            .unwrap_err();
        assert!(err.contains("written for node \"node-a\""), "{err}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_missing_file_is_nothing_kept_and_garbage_is_an_error_that_does_not_echo_it() {
        let d = dir("garbage");
        assert_eq!(
            StateFile::new(&d, "s.json", "n").load::<Body>().unwrap(),
            None
        );
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("s.json"), "secret-key-material: hunter2\n").unwrap();
        let err = StateFile::new(&d, "s.json", "n")
            .load::<Body>()
            .unwrap_err();
        assert!(err.contains("is not a state file"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
