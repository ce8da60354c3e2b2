//! `load_md5_key`: the TCP MD5 key file.

use std::path::PathBuf;

use podcidr_config::{Md5KeyError, load_md5_key};

/// A key file unique to this test, removed on drop.
struct KeyFile(PathBuf);

impl KeyFile {
    fn new(name: &str, contents: &[u8]) -> Self {
        let path =
            std::env::temp_dir().join(format!("podcidr-config-md5-{}-{name}", std::process::id()));
        std::fs::write(&path, contents).expect("write key file");
        KeyFile(path)
    }
}

impl Drop for KeyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn md5_key_trims_exactly_one_trailing_newline() {
    let f = KeyFile::new("nl", b"s3cret\n");
    assert_eq!(load_md5_key(&f.0).unwrap(), b"s3cret");
    let f = KeyFile::new("crlf", b"s3cret\r\n");
    assert_eq!(load_md5_key(&f.0).unwrap(), b"s3cret");
    let f = KeyFile::new("two", b"s3cret\n\n");
    assert_eq!(load_md5_key(&f.0).unwrap(), b"s3cret\n");
    let f = KeyFile::new("none", b" s3 cret ");
    assert_eq!(load_md5_key(&f.0).unwrap(), b" s3 cret ");
}

#[test]
fn md5_key_must_not_be_empty() {
    for (name, contents) in [("empty", &b""[..]), ("only-newline", &b"\n"[..])] {
        let f = KeyFile::new(name, contents);
        assert!(matches!(load_md5_key(&f.0), Err(Md5KeyError::Empty { .. })));
    }
}

#[test]
fn md5_key_is_at_most_80_bytes() {
    let f = KeyFile::new("80", &[b'k'; 80]);
    assert_eq!(load_md5_key(&f.0).unwrap().len(), 80);
    let f = KeyFile::new("80-nl", &[&[b'k'; 80][..], b"\n"].concat());
    assert_eq!(load_md5_key(&f.0).unwrap().len(), 80);
    let f = KeyFile::new("81", &[b'k'; 81]);
    let err = load_md5_key(&f.0).unwrap_err();
    assert!(matches!(err, Md5KeyError::TooLong { len: 81, .. }));
    assert!(
        err.to_string()
            .ends_with("TCP MD5 key is 81 bytes, the limit is 80 (TCP_MD5SIG_MAXKEYLEN)")
    );
}

#[test]
fn md5_key_missing_file_names_the_path() {
    let err = load_md5_key("/nonexistent/podcidr/key").unwrap_err();
    assert!(matches!(err, Md5KeyError::Read { .. }));
    assert!(
        err.to_string()
            .starts_with("/nonexistent/podcidr/key: cannot read TCP MD5 key")
    );
}

/// The bug: the whole file was read (`std::fs::read`) before its length was checked, so a
/// wrong `passwordFile` (a log, a disk image) was read into memory whole. Now at most 83
/// bytes are read: a 1 GiB sparse file is rejected at once, naming the path and the limit.
#[test]
fn md5_key_file_is_read_bounded_and_a_huge_file_is_rejected() {
    let f = KeyFile::new("huge", b"");
    std::fs::File::options()
        .write(true)
        .open(&f.0)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let err = load_md5_key(&f.0).unwrap_err();
    assert!(
        matches!(&err, Md5KeyError::FileTooLarge { limit: 82, path } if *path == f.0),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.starts_with(&format!("{}: ", f.0.display())), "{text}");
    assert!(
        text.contains("larger than 82 bytes (a key of at most 80 bytes plus an optional CRLF)"),
        "{text}"
    );
    assert_eq!(podcidr_config::MD5_KEY_FILE_MAX_LEN, 82);
    // 82 bytes is still read (and judged as a key); 83 is not.
    let f = KeyFile::new("82", &[b'k'; 82]);
    assert!(matches!(
        load_md5_key(&f.0),
        Err(Md5KeyError::TooLong { len: 82, .. })
    ));
    let f = KeyFile::new("83", &[b'k'; 83]);
    assert!(matches!(
        load_md5_key(&f.0),
        Err(Md5KeyError::FileTooLarge { .. })
    ));
}

/// An endless file (a character device) ends after the limit instead of never.
#[test]
fn md5_key_from_endless_file_stops_at_the_limit() {
    let err = load_md5_key("/dev/zero").unwrap_err();
    assert!(matches!(err, Md5KeyError::FileTooLarge { .. }), "{err:?}");
}
