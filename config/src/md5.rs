//! Reading a TCP MD5 (RFC 2385) key from the file named by `passwordFile`.
//!
//! The file is read through a bounded reader: at most [`MD5_KEY_FILE_MAX_LEN`] + 1 bytes
//! are ever read or allocated, so a wrong path (a log file, `/dev/zero`, a huge sparse file)
//! fails fast with [`Md5KeyError::FileTooLarge`] instead of being read whole.

use std::io::Read;
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
    #[error(
        "{}: TCP MD5 key file is larger than {limit} bytes (a key of at most {MD5_KEY_MAX_LEN} \
         bytes plus an optional CRLF); not reading further",
        path.display()
    )]
    FileTooLarge { path: PathBuf, limit: usize },
}

/// Largest key file accepted: an 80-byte key plus `\r\n`.
pub const MD5_KEY_FILE_MAX_LEN: usize = MD5_KEY_MAX_LEN + 2;

/// Reads at most `MD5_KEY_FILE_MAX_LEN + 1` bytes into a fixed buffer; `None` if the file
/// has more than `MD5_KEY_FILE_MAX_LEN`.
fn read_bounded(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    let mut buf = [0u8; MD5_KEY_FILE_MAX_LEN + 1];
    let mut reader = std::fs::File::open(path)?.take(buf.len() as u64);
    let mut len = 0;
    while len < buf.len() {
        match reader.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((len <= MD5_KEY_FILE_MAX_LEN).then(|| buf[..len].to_vec()))
}

/// Why key bytes (a file's, a Secret's) are not a usable key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Md5KeyBytesError {
    #[error("TCP MD5 key is empty")]
    Empty,
    #[error("TCP MD5 key is {0} bytes, the limit is {MD5_KEY_MAX_LEN} (TCP_MD5SIG_MAXKEYLEN)")]
    TooLong(usize),
}

/// The key in `key`, less one trailing newline (`\n` or `\r\n`) as editors and `echo` add.
/// Everything else, including inner or other trailing whitespace, is part of the key.
pub fn md5_key_from_bytes(mut key: Vec<u8>) -> Result<Vec<u8>, Md5KeyBytesError> {
    if key.ends_with(b"\r\n") {
        key.truncate(key.len() - 2);
    } else if key.ends_with(b"\n") {
        key.truncate(key.len() - 1);
    }
    match key.len() {
        0 => Err(Md5KeyBytesError::Empty),
        len if len > MD5_KEY_MAX_LEN => Err(Md5KeyBytesError::TooLong(len)),
        _ => Ok(key),
    }
}

/// The key in the file at `path` (see [`md5_key_from_bytes`]).
pub fn load_md5_key(path: impl AsRef<Path>) -> Result<Vec<u8>, Md5KeyError> {
    let path = path.as_ref();
    let key = read_bounded(path)
        .map_err(|source| Md5KeyError::Read {
            path: path.to_owned(),
            source,
        })?
        .ok_or_else(|| Md5KeyError::FileTooLarge {
            path: path.to_owned(),
            limit: MD5_KEY_FILE_MAX_LEN,
        })?;
    md5_key_from_bytes(key).map_err(|e| match e {
        Md5KeyBytesError::Empty => Md5KeyError::Empty {
            path: path.to_owned(),
        },
        Md5KeyBytesError::TooLong(len) => Md5KeyError::TooLong {
            path: path.to_owned(),
            len,
        },
    })
}

/// Why a BFD authentication key file (`bfd.authentication.secretFile`) is unusable. Never
/// shows the key.
#[derive(Debug, thiserror::Error)]
pub enum BfdKeyError {
    #[error("{}: cannot read BFD key: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: BFD key is empty", path.display())]
    Empty { path: PathBuf },
    #[error(
        "{}: BFD key is {len} bytes, the limit is {BFD_KEY_MAX_LEN} (a SHA1 Auth Key, RFC 5880 §4.4)",
        path.display()
    )]
    TooLong { path: PathBuf, len: usize },
}

/// A SHA1 Auth Key is at most 20 bytes (RFC 5880 §4.4).
pub const BFD_KEY_MAX_LEN: usize = 20;

/// Why key bytes (a file's, a Secret's) are not a usable BFD key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BfdKeyBytesError {
    #[error("BFD key is empty")]
    Empty,
    #[error(
        "BFD key is {0} bytes, the limit is {BFD_KEY_MAX_LEN} (a SHA1 Auth Key, RFC 5880 §4.4)"
    )]
    TooLong(usize),
}

/// The BFD key in `key`, less one trailing newline (as [`md5_key_from_bytes`]).
pub fn bfd_key_from_bytes(mut key: Vec<u8>) -> Result<Vec<u8>, BfdKeyBytesError> {
    if key.ends_with(b"\r\n") {
        key.truncate(key.len() - 2);
    } else if key.ends_with(b"\n") {
        key.truncate(key.len() - 1);
    }
    match key.len() {
        0 => Err(BfdKeyBytesError::Empty),
        len if len > BFD_KEY_MAX_LEN => Err(BfdKeyBytesError::TooLong(len)),
        _ => Ok(key),
    }
}

/// The BFD key in the file at `path`, less one trailing newline (as [`load_md5_key`]).
pub fn load_bfd_key(path: impl AsRef<Path>) -> Result<Vec<u8>, BfdKeyError> {
    let path = path.as_ref();
    let read = |source| BfdKeyError::Read {
        path: path.to_owned(),
        source,
    };
    let key = read_bounded(path)
        .map_err(read)?
        .ok_or_else(|| BfdKeyError::TooLong {
            path: path.to_owned(),
            len: MD5_KEY_FILE_MAX_LEN + 1,
        })?;
    bfd_key_from_bytes(key).map_err(|e| match e {
        BfdKeyBytesError::Empty => BfdKeyError::Empty {
            path: path.to_owned(),
        },
        BfdKeyBytesError::TooLong(len) => BfdKeyError::TooLong {
            path: path.to_owned(),
            len,
        },
    })
}
