//! `file` source: a YAML file mapping node names to CIDRs, reloaded on change.
//!
//! ```yaml
//! nodes:
//!   node-a: [198.19.1.0/24, fd00:19:1::/64]
//! ```
//!
//! Change detection compares (device, inode, mtime, ctime, size) of the path, followed through
//! symlinks: a ConfigMap volume updates by swapping a symlinked `..data` directory and editors
//! replace files by rename, and the stamp catches both. It is checked when an inotify watch on
//! the file's directory reports anything (changes apply within a millisecond) and on a
//! bounded interval (default 2 s) regardless, so a missed event or a kernel without inotify
//! only costs latency. A bad file (or a half-written one) keeps the last good set and sets
//! `last_error`; the next change is picked up by the next check.
//!
//! The file is at most [`MAX_FILE_BYTES`] (16 MiB; 100,000 nodes with a dual-stack pair
//! each take about 5 MiB). It is read through a bounded reader: a larger file is rejected
//! from its size, and one that grows while read (or a device) is cut off after the limit,
//! so no more than the limit is ever read or allocated.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::stream::{self, StreamExt};
use serde::Deserialize;
use tokio::sync::watch;

use super::dir_watch::DirWatch;
use super::drive::{Observation, drive, snapshot};
use super::parse::parse_cidrs;
use super::{ClusterSet, DesiredSet, Driver, NodeCidrs, PodCidrSource, SourceKind, View};

/// The file could not be used; the previous set stays in force.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// `stat` or `read` failed (missing file, permissions).
    #[error("cannot read {path}: {source}")]
    Read {
        /// The configured path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Larger than [`MAX_FILE_BYTES`]: not read (further).
    #[error("{path} is larger than the limit of {limit} bytes for a pod-CIDR file")]
    TooLarge {
        /// The configured path.
        path: PathBuf,
        /// The limit, [`MAX_FILE_BYTES`].
        limit: u64,
    },
    /// Not UTF-8 text.
    #[error("{path} is not UTF-8 text")]
    NotUtf8 {
        /// The configured path.
        path: PathBuf,
    },
    /// Not the expected YAML shape (unknown keys included). Where, never what: the parser's
    /// own message quotes the text (a snippet, a value, a key), and a path pointed at a file
    /// that is not ours (a key, a credential) must not publish it in a status, an Event, the
    /// log or `/debug`.
    #[error("invalid pod-CIDR file: {0}")]
    Parse(ParseLocation),
}

/// Where a pod-CIDR file stopped parsing, without any of its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseLocation {
    /// 1-based line and column, when the parser knows them.
    pub at: Option<(u64, u64)>,
}

impl std::fmt::Display for ParseLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not YAML of the form `nodes: {<node>: [<cidr>, ...]}`")?;
        if let Some((line, column)) = self.at {
            write!(f, " (line {line}, column {column})")?;
        }
        f.write_str("; the file's content is not shown")
    }
}

impl From<serde_saphyr::Error> for FileError {
    fn from(e: serde_saphyr::Error) -> Self {
        FileError::Parse(ParseLocation {
            at: e.location().map(|l| (l.line(), l.column())),
        })
    }
}

/// Largest pod-CIDR file accepted, in bytes (16 MiB).
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Reads the pod-CIDR file at `path`, at most `limit` bytes: a larger file is
/// [`FileError::TooLarge`]. Never reads or allocates more than `limit + 1` bytes.
pub fn read_file(path: &Path, limit: u64) -> Result<String, FileError> {
    let read_err = |source| FileError::Read {
        path: path.to_owned(),
        source,
    };
    let too_large = || FileError::TooLarge {
        path: path.to_owned(),
        limit,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let size = file.metadata().map_err(read_err)?.len();
    if size > limit {
        return Err(too_large());
    }
    // The size is a hint only (the file may change; a device reports 0): the loop below
    // enforces the limit and grows the buffer at most to `limit + 1`.
    let cap = usize::try_from(limit.saturating_add(1)).unwrap_or(usize::MAX);
    let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(cap).min(cap));
    let mut reader = file.take(limit.saturating_add(1));
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(read_err(e)),
        };
        if buf.capacity() - buf.len() < n {
            let want = buf.len().saturating_mul(2).max(buf.len() + n).min(cap);
            buf.reserve_exact(want - buf.len());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    if buf.len() as u64 > limit {
        return Err(too_large());
    }
    String::from_utf8(buf).map_err(|_| FileError::NotUtf8 {
        path: path.to_owned(),
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    nodes: BTreeMap<String, Vec<String>>,
}

/// Parse the file contents into node → CIDRs. Bad CIDRs are reported per node, not fatal;
/// a bad document shape is.
pub fn parse_file(text: &str) -> Result<BTreeMap<String, NodeCidrs>, FileError> {
    match parse_plain(text) {
        Some(nodes) => Ok(nodes),
        None => parse_yaml(text),
    }
}

/// Most nodes (mappings, sequences, scalars) the direct reader takes: well inside
/// serde-saphyr's default budget of 250,000, so the budget never decides differently.
const PLAIN_MAX_NODES: usize = 200_000;

/// The file as generators write it, read without the YAML parser (three quarters of the
/// CPU of reading 100,000 CIDRs): exactly
///
/// ```text
/// nodes:
///   <name>: [<cidr>, <cidr>, ...]
/// ```
///
/// with names of lowercase letters, digits, `-` and `.` that start with a letter and are
/// no YAML 1.1 keyword, and values of hex digits, `.`, `:` and `/` that start with a hex
/// digit, end with a digit and hold a `/` (so YAML reads every one as that string, never a
/// number or a key). Anything else (comments, quotes, other spacing, a repeated name, more
/// than [`PLAIN_MAX_NODES`]) is `None`, and the YAML parser decides; what this accepts it
/// reads as the parser does (a proptest holds it to that).
fn parse_plain(text: &str) -> Option<BTreeMap<String, NodeCidrs>> {
    let body = text.strip_prefix("nodes:\n")?;
    if body.is_empty() || !body.ends_with('\n') {
        return None;
    }
    let mut nodes = BTreeMap::new();
    // The root mapping, the `nodes` key and its mapping.
    let mut yaml_nodes = 3usize;
    for line in body.split_terminator('\n') {
        let (name, list) = line.strip_prefix("  ")?.split_once(": [")?;
        let list = list.strip_suffix(']')?;
        if !plain_name(name) {
            return None;
        }
        let values: Vec<&str> = if list.is_empty() {
            Vec::new()
        } else {
            list.split(", ").collect()
        };
        yaml_nodes += 2 + values.len();
        if yaml_nodes > PLAIN_MAX_NODES || !values.iter().all(|v| plain_value(v)) {
            return None;
        }
        if nodes.insert(name.to_owned(), parse_cidrs(values)).is_some() {
            // A repeated key: the parser's error, not ours to phrase.
            return None;
        }
    }
    Some(nodes)
}

fn plain_name(name: &str) -> bool {
    const KEYWORDS: [&str; 9] = ["null", "true", "false", "yes", "no", "on", "off", "y", "n"];
    let b = name.as_bytes();
    (1..=253).contains(&b.len())
        && b.first().is_some_and(u8::is_ascii_lowercase)
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'-' | b'.'))
        && !KEYWORDS.contains(&name)
}

fn plain_value(value: &str) -> bool {
    let b = value.as_bytes();
    b.first().is_some_and(u8::is_ascii_hexdigit)
        && b.last().is_some_and(u8::is_ascii_digit)
        && b.contains(&b'/')
        && b.iter()
            .all(|c| c.is_ascii_hexdigit() || matches!(c, b'.' | b':' | b'/'))
}

/// The file read by the YAML parser: every shape, and every error with its location.
fn parse_yaml(text: &str) -> Result<BTreeMap<String, NodeCidrs>, FileError> {
    let spec: FileSpec = serde_saphyr::from_str(text)?;
    Ok(spec
        .nodes
        .into_iter()
        .map(|(node, cidrs)| (node, parse_cidrs(cidrs.iter().map(String::as_str))))
        .collect())
}

/// Reads a YAML file of node → CIDRs and polls it for changes.
#[derive(Debug, Clone)]
pub struct FileSource {
    path: PathBuf,
    interval: Duration,
    /// The file must resolve (symlinks followed) to a file under this directory.
    within: Option<PathBuf>,
}

impl FileSource {
    /// Default time between two `stat` checks.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(2);

    /// A source reading `path`, checked every [`Self::DEFAULT_INTERVAL`].
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            interval: Self::DEFAULT_INTERVAL,
            within: None,
        }
    }

    /// Reads the file only if it resolves, symlinks followed, to a file under `dir`: a path
    /// from an object names a file there lexically, and a symlink placed there must not lead
    /// out (a ConfigMap volume's own `..data` links stay inside).
    pub fn within(mut self, dir: impl Into<PathBuf>) -> Self {
        self.within = Some(dir.into());
        self
    }

    /// Change the polling interval (tests use a short one).
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The file this source reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn observations(&self) -> impl futures::Stream<Item = Observation> + Send + 'static {
        let path = self.path.clone();
        let within = self.within.clone();
        let period = self.interval;
        // The timer and the watch are made on first poll, so building a driver needs no
        // runtime.
        let state = (
            None::<(tokio::time::Interval, Option<DirWatch>)>,
            None::<Result<Stamp, String>>,
        );
        stream::unfold(state, move |(wakers, mut last)| {
            let path = path.clone();
            let within = within.clone();
            async move {
                let (mut ticks, mut watch) = wakers.unwrap_or_else(|| {
                    let mut ticks = tokio::time::interval(period);
                    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    (ticks, dir_watch(&path))
                });
                loop {
                    let failed = tokio::select! {
                        _ = ticks.tick() => None,
                        r = next_event(&mut watch) => r.err(),
                    };
                    if let Some(e) = failed {
                        tracing::warn!(path = %path.display(), error = %e, "inotify watch failed; polling only");
                        watch = None;
                    }
                    let current = stamp(&path).await;
                    if last.as_ref() == Some(&current) {
                        continue;
                    }
                    let observations = match (&current, confined(&path, within.as_deref())) {
                        (_, Err(outside)) => vec![(View::Source, Err(outside))],
                        (Ok(_), Ok(())) => load(&path).await,
                        (Err(message), Ok(())) => vec![(View::Source, Err(message.clone()))],
                    };
                    last = Some(current);
                    return Some((stream::iter(observations), (Some((ticks, watch)), last)));
                }
            }
        })
        .flatten()
    }
}

/// `Err` when `path` resolves (symlinks followed) outside `within`; a path that does not
/// resolve yet is left to the read, which names it.
fn confined(path: &Path, within: Option<&Path>) -> Result<(), String> {
    let Some(dir) = within else {
        return Ok(());
    };
    let (Ok(file), Ok(dir)) = (std::fs::canonicalize(path), std::fs::canonicalize(dir)) else {
        return Ok(());
    };
    if file.starts_with(&dir) {
        return Ok(());
    }
    Err(format!(
        "{} resolves to {}, outside {}: not read",
        path.display(),
        file.display(),
        dir.display()
    ))
}

fn dir_watch(path: &Path) -> Option<DirWatch> {
    DirWatch::new(path)
        .inspect_err(|e| {
            tracing::warn!(path = %path.display(), error = %e, "no inotify watch on the file's directory; polling only");
        })
        .ok()
}

async fn next_event(watch: &mut Option<DirWatch>) -> std::io::Result<()> {
    match watch {
        Some(w) => w.changed().await,
        None => std::future::pending().await,
    }
}

/// What identifies one version of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    modified: Option<SystemTime>,
    changed: (i64, i64),
    len: u64,
}

async fn stamp(path: &Path) -> Result<Stamp, String> {
    use std::os::unix::fs::MetadataExt;
    let meta = tokio::fs::metadata(path).await.map_err(|source| {
        FileError::Read {
            path: path.to_owned(),
            source,
        }
        .to_string()
    })?;
    Ok(Stamp {
        dev: meta.dev(),
        ino: meta.ino(),
        modified: meta.modified().ok(),
        changed: (meta.ctime(), meta.ctime_nsec()),
        len: meta.len(),
    })
}

async fn load(path: &Path) -> Vec<Observation> {
    let owned = path.to_owned();
    let text = tokio::task::spawn_blocking(move || read_file(&owned, MAX_FILE_BYTES))
        .await
        .unwrap_or_else(|e| {
            Err(FileError::Read {
                path: path.to_owned(),
                source: std::io::Error::other(e),
            })
        });
    match text.and_then(|text| parse_file(&text)) {
        Ok(nodes) => snapshot(nodes),
        // Read errors name the path themselves.
        Err(
            error @ (FileError::Read { .. }
            | FileError::TooLarge { .. }
            | FileError::NotUtf8 { .. }),
        ) => {
            vec![(View::Source, Err(error.to_string()))]
        }
        Err(error) => vec![(View::Source, Err(format!("{}: {error}", path.display())))],
    }
}

impl PodCidrSource for FileSource {
    fn kind(&self) -> SourceKind {
        SourceKind::File
    }

    fn watch_node(&self, node: &str) -> (watch::Receiver<Arc<DesiredSet>>, Driver) {
        let (tx, rx) = watch::channel(Arc::default());
        let node = node.to_owned();
        let events = self.observations();
        (rx, Box::pin(drive(events, tx, move |t| t.desired(&node))))
    }

    /// A file has no Node view: the events are not read.
    fn watch_node_with(
        &self,
        node: &str,
        _node_events: super::NodeEvents,
    ) -> (watch::Receiver<Arc<DesiredSet>>, Driver) {
        self.watch_node(node)
    }

    fn watch_cluster(&self) -> (watch::Receiver<Arc<ClusterSet>>, Driver) {
        let (tx, rx) = watch::channel(Arc::default());
        let events = self.observations();
        (rx, Box::pin(drive(events, tx, |t| t.cluster())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{InvalidCidr, InvalidReason};
    use proptest::prelude::*;

    #[test]
    fn good_file_parses_per_node() {
        let nodes = parse_file(
            "nodes:\n  node-a: [198.19.1.0/24, fd00:19:1::/64]\n  node-b:\n    - 198.19.2.0/24\n",
        )
        .unwrap();
        assert_eq!(nodes.len(), 2);
        assert_eq!(
            nodes["node-a"].valid,
            vec![
                "198.19.1.0/24".parse().unwrap(),
                "fd00:19:1::/64".parse().unwrap()
            ]
        );
        assert_eq!(
            nodes["node-b"].valid,
            vec!["198.19.2.0/24".parse().unwrap()]
        );
    }

    #[test]
    fn bad_cidr_in_file_is_reported_not_fatal() {
        let nodes = parse_file("nodes:\n  node-a: [198.19.1.7/24, 198.19.1.0/24]\n").unwrap();
        assert_eq!(
            nodes["node-a"].valid,
            vec!["198.19.1.0/24".parse().unwrap()]
        );
        assert_eq!(
            nodes["node-a"].invalid,
            vec![InvalidCidr {
                value: "198.19.1.7/24".into(),
                reason: InvalidReason::HostBitsSet
            }]
        );
    }

    #[test]
    fn empty_node_map_is_valid() {
        assert!(parse_file("nodes: {}\n").unwrap().is_empty());
    }

    #[test]
    fn bad_file_shapes_are_rejected() {
        for text in [
            "",
            "nodes: [198.19.1.0/24]\n",
            "nodes:\n  node-a: 198.19.1.0/24\n",
            "node: {}\n",
            "nodes: {}\nextra: 1\n",
            "nodes:\n  node-a: [198.19.1.0/24\n",
        ] {
            assert!(parse_file(text).is_err(), "accepted {text:?}");
        }
    }

    /// The shapes the direct reader is tried on: its own layout with names and values that
    /// YAML may read otherwise (keywords, numbers, keys, comments, quotes), other spacing,
    /// headers and endings, repeated names.
    fn near_plain_files() -> impl Strategy<Value = String> {
        let name = prop_oneof![
            "[a-z][a-z0-9.-]{0,6}",
            prop::sample::select(vec![
                "null", "true", "false", "yes", "no", "on", "off", "y", "n", "nan", "inf", "~",
                "1", "0x1f", "1e3", "a:b", "-a", "Node", "a b", "a#b", "a-", "b.", "node-a", "'q'",
                "[a]",
            ])
            .prop_map(str::to_owned),
        ];
        let value = prop_oneof![
            (0u8..4, 0u8..3, 22u8..=32).prop_map(|(c, h, l)| format!("10.0.{c}.{}/{l}", h * 64)),
            (0u16..4, 60u8..=128).prop_map(|(c, l)| format!("fd00:{c}::/{l}")),
            prop::sample::select(vec![
                "1e5/2",
                "0x1/2",
                "::/0",
                "a::/0",
                "1:/2",
                "10.0.0.0/26:",
                "f/1",
                "ff:ff/1",
                "10.0.0.0",
                "1.5",
                "1/2",
                "0/0",
                "00010.0.0.0/8",
                "x",
                "'q'",
                "1/2 #c",
                "1/2: 3",
                "a/1:b/2",
                "010.0.0.0/8",
                "10.0.0.0/026",
                "Fd00::/64",
                "-1/2",
            ])
            .prop_map(str::to_owned),
        ];
        let entry = (name, prop::collection::vec(value, 0..5));
        let sep = prop::sample::select(vec![", ", ", ", ", ", ",", " , ", ",  "]);
        let indent = prop::sample::select(vec!["  ", "  ", "  ", "   ", " ", "\t"]);
        let head = prop::sample::select(vec![
            "nodes:\n",
            "nodes:\n",
            "nodes:\n",
            "nodes: \n",
            "nodes:\r\n",
            "---\nnodes:\n",
            "\u{feff}nodes:\n",
            "node:\n",
        ]);
        let tail = prop::sample::select(vec!["", "", "", "\n", "# c\n", "...\n", "x: 1\n"]);
        (prop::collection::vec(entry, 0..5), sep, indent, head, tail).prop_map(
            |(entries, sep, indent, head, tail)| {
                let mut text = head.to_owned();
                for (name, values) in entries {
                    text += &format!("{indent}{name}: [{}]\n", values.join(sep));
                }
                text + tail
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Whatever the direct reader accepts, the YAML parser reads to the same nodes and
        /// CIDRs (valid and invalid, in order); what it declines is the parser's to decide.
        #[test]
        fn the_direct_reader_agrees_with_the_yaml_parser(text in near_plain_files()) {
            if let Some(plain) = parse_plain(&text) {
                prop_assert_eq!(parse_yaml(&text).ok(), Some(plain), "{:?}", text);
            }
        }

        /// One character added or removed anywhere still never makes the two disagree.
        #[test]
        fn an_edited_plain_file_never_makes_them_disagree(
            text in near_plain_files(),
            at in any::<prop::sample::Index>(),
            insert in prop::option::of(prop::sample::select(vec![
                ' ', '#', ':', ',', '[', ']', '{', '\'', '"', '\n', '-', '&', '*', '!', '?', '|',
                '>', '%', '@', '`', '\t', 'a', '0', '/', '.',
            ])),
        ) {
            let mut chars: Vec<char> = text.chars().collect();
            if !chars.is_empty() || insert.is_some() {
                let i = at.index(chars.len() + 1);
                match insert {
                    Some(c) => chars.insert(i, c),
                    None if i < chars.len() => {
                        chars.remove(i);
                    }
                    None => {}
                }
            }
            let text: String = chars.into_iter().collect();
            if let Some(plain) = parse_plain(&text) {
                prop_assert_eq!(parse_yaml(&text).ok(), Some(plain), "{:?}", text);
            }
        }
    }

    /// The layout the benchmark and generators write takes the direct path, withdrawals
    /// (`node-a: []`) and both families included.
    #[test]
    fn generated_files_take_the_direct_path() {
        for text in [
            "nodes:\n  node-a: [198.19.1.0/24, fd00:19:1::/64]\n  node-b: [198.19.2.0/24]\n",
            "nodes:\n  node-a: []\n",
            "nodes:\n  ip-10-0-1-7.ec2.internal: [10.0.0.0/26, 10.0.0.64/26]\n",
        ] {
            let plain = parse_plain(text).unwrap_or_else(|| panic!("declined {text:?}"));
            assert_eq!(Some(plain), parse_yaml(text).ok(), "{text:?}");
        }
    }

    /// Past the direct reader's node limit the YAML parser decides, budget included.
    #[test]
    fn a_file_past_the_direct_limit_is_the_yaml_parsers() {
        let values: Vec<String> = (0..PLAIN_MAX_NODES as u32)
            .map(|i| format!("{}/32", std::net::Ipv4Addr::from(0x0a00_0000 + i)))
            .collect();
        let text = format!("nodes:\n  node-a: [{}]\n", values.join(", "));
        assert!(parse_plain(&text).is_none());
        assert_eq!(
            parse_file(&text).ok(),
            parse_yaml(&text).ok(),
            "the same answer as the parser"
        );
    }

    /// Issue 30 item 5: pointed at a file that is not ours, the error says where parsing
    /// stopped and never what the file holds.
    #[test]
    fn a_parse_error_never_echoes_the_files_content() {
        for text in [
            "hunter2-secret-key\n",
            "nodes:\n  node-a: [hunter2-secret-key\n",
            "hunter2-secret-key: 1\n",
            "nodes: {}\nhunter2-secret-key: x\n",
            "nodes:\n  node-a: hunter2-secret-key\n",
            "-----BEGIN PRIVATE KEY-----\nhunter2-secret-key\n",
        ] {
            let e = parse_file(text).expect_err(text).to_string();
            assert!(!e.contains("hunter2"), "{e}");
            assert!(e.contains("content is not shown"), "{e}");
        }
        let e = parse_file("nodes:\n  node-a: [x\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line "), "{e}");
    }
}
