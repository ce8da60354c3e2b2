//! Writes the node's conflist: atomically (temp file, fsync, rename, fsync of the dir) and
//! only when its content changes. A container runtime reads the dir at any moment; it must
//! never see a half-written file, and a file it already read must not churn.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::Path;

/// An existing file larger than this is not ours to compare: it is replaced.
const MAX_EXISTING_BYTES: u64 = 1 << 20;

pub use crate::daemon::core::errors::CniWriteError;

/// Makes `path` hold `content`. `Ok(true)`: written; `Ok(false)`: it already did.
pub fn write_conflist(path: &Path, content: &str) -> Result<bool, CniWriteError> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(CniWriteError::NotADir {
                dir: dir.to_owned(),
            });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(CniWriteError::NoDir {
                dir: dir.to_owned(),
            });
        }
        Err(source) => {
            return Err(CniWriteError::Write {
                path: path.to_owned(),
                source,
            });
        }
    }
    if existing(path).as_deref() == Some(content) {
        return Ok(false);
    }
    // Hidden and not *.conf/*.conflist/*.json: runtimes never load the temp file.
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let write = || -> io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(content.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    };
    write().map_err(|source| {
        let _ = fs::remove_file(&tmp);
        CniWriteError::Write {
            path: path.to_owned(),
            source,
        }
    })?;
    Ok(true)
}

fn existing(path: &Path) -> Option<String> {
    let mut text = String::new();
    File::open(path)
        .ok()?
        .take(MAX_EXISTING_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}
