//! Reading a TCP MD5 (RFC 2385) key from the file named by `passwordFile`.

use std::path::{Path, PathBuf};

use crate::model::MD5_KEY_MAX_LEN;

#[derive(Debug, thiserror::Error)]
pub enum Md5KeyError {
    #[error("{}: cannot read TCP MD5 key: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: TCP MD5 key is empty", path.display())]
    Empty { path: PathBuf },
    #[error(
        "{}: TCP MD5 key is {len} bytes, the limit is {MD5_KEY_MAX_LEN} (TCP_MD5SIG_MAXKEYLEN)",
        path.display()
    )]
    TooLong { path: PathBuf, len: usize },
}

/// The key bytes, less one trailing newline (`\n` or `\r\n`) as editors and `echo` add.
/// Everything else, including inner or other trailing whitespace, is part of the key.
pub fn load_md5_key(path: impl AsRef<Path>) -> Result<Vec<u8>, Md5KeyError> {
    let path = path.as_ref();
    let mut key = std::fs::read(path).map_err(|source| Md5KeyError::Read {
        path: path.to_owned(),
        source,
    })?;
    if key.ends_with(b"\r\n") {
        key.truncate(key.len() - 2);
    } else if key.ends_with(b"\n") {
        key.truncate(key.len() - 1);
    }
    match key.len() {
        0 => Err(Md5KeyError::Empty {
            path: path.to_owned(),
        }),
        len if len > MD5_KEY_MAX_LEN => Err(Md5KeyError::TooLong {
            path: path.to_owned(),
            len,
        }),
        _ => Ok(key),
    }
}
