//! The `file` source reloads on change, keeps the last good set when the file goes bad, and
//! sees ConfigMap-style updates (atomic rename, `..data` symlink swap). Every wait is a bounded
//! await on the published channel.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ipam_watch::source::{ClusterSet, DesiredSet, FileSource, PodCidrSource, View};
use tokio::sync::watch;
use tokio::time::timeout;

use crate::common;
use common::{nets, until};

const WAIT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(10);

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ipam-watch-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Replace `path` atomically, as kubelet and editors do.
fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test]
async fn rewrite_by_rename_publishes_the_new_set() {
    let dir = TempDir::new("rename");
    let path = dir.0.join("cidrs.yaml");
    write_atomic(&path, "nodes:\n  node-a: [198.19.1.0/24, fd00:19:1::/64]\n");
    let source = FileSource::new(&path).with_interval(POLL);
    let (mut rx, driver) = source.watch_node("node-a");
    let driver = tokio::spawn(driver);

    let set = until(&mut rx, WAIT, "first load", |s| s.ready).await;
    assert_eq!(set.cidrs, nets(&["198.19.1.0/24", "fd00:19:1::/64"]));

    write_atomic(&path, "nodes:\n  node-a: [198.19.2.0/24]\n");
    let set = until(&mut rx, WAIT, "reload", |s| {
        s.cidrs != nets(&["198.19.1.0/24", "fd00:19:1::/64"])
    })
    .await;
    assert_eq!(set.cidrs, nets(&["198.19.2.0/24"]));
    assert!(set.ready);

    write_atomic(&path, "nodes:\n  node-b: [198.19.3.0/24]\n");
    let set = until(&mut rx, WAIT, "withdrawal", |s| s.cidrs.is_empty()).await;
    assert!(
        set.ready,
        "a node missing from a good file has nothing to announce"
    );
    driver.abort();
}

/// Watches node-a in `dir/cidrs.yaml`, written good (198.19.1.0/24); returns after the
/// first load.
async fn watching_a_good_file(
    dir: &TempDir,
) -> (
    PathBuf,
    watch::Receiver<Arc<DesiredSet>>,
    tokio::task::JoinHandle<()>,
) {
    let path = dir.0.join("cidrs.yaml");
    write_atomic(&path, "nodes:\n  node-a: [198.19.1.0/24]\n");
    let (mut rx, driver) = FileSource::new(&path)
        .with_interval(POLL)
        .watch_node("node-a");
    let driver = tokio::spawn(driver);
    until(&mut rx, WAIT, "first load", |s| s.ready).await;
    (path, rx, driver)
}

#[tokio::test]
async fn garbage_keeps_the_last_good_set_and_reports() {
    let dir = TempDir::new("garbage");
    let (path, mut rx, driver) = watching_a_good_file(&dir).await;

    write_atomic(&path, "nodes:\n  node-a: [198.19.1.0/24\n  nonsense: {\n");
    let set = until(&mut rx, WAIT, "error", |s| s.last_error.is_some()).await;
    assert_eq!(set.cidrs, nets(&["198.19.1.0/24"]), "last good set kept");
    assert!(set.ready);
    let error = set.last_error.clone().unwrap();
    assert_eq!(error.view, View::Source);
    assert!(error.message.contains("cidrs.yaml"), "{}", error.message);

    write_atomic(&path, "nodes:\n  node-a: [198.19.1.0/24]\nextra: true\n");
    let set = until(&mut rx, WAIT, "unknown key rejected", |s| {
        s.last_error
            .as_ref()
            .is_some_and(|e| e.message != error.message)
    })
    .await;
    assert_eq!(set.cidrs, nets(&["198.19.1.0/24"]));

    write_atomic(&path, "nodes:\n  node-a: [198.19.9.0/24]\n");
    let set = until(&mut rx, WAIT, "recovery", |s| s.last_error.is_none()).await;
    assert_eq!(set.cidrs, nets(&["198.19.9.0/24"]));
    driver.abort();
}

#[tokio::test]
async fn missing_file_is_not_ready_until_it_appears() {
    let dir = TempDir::new("missing");
    let path = dir.0.join("cidrs.yaml");
    let (mut rx, driver) = FileSource::new(&path)
        .with_interval(POLL)
        .watch_node("node-a");
    let driver = tokio::spawn(driver);
    let set = until(&mut rx, WAIT, "error", |s| s.last_error.is_some()).await;
    assert!(!set.ready);

    write_atomic(&path, "nodes:\n  node-a: [198.19.1.0/24]\n");
    let set = until(&mut rx, WAIT, "first load", |s| s.ready).await;
    assert_eq!(set.cidrs, nets(&["198.19.1.0/24"]));
    assert_eq!(set.last_error, None);
    driver.abort();
}

#[tokio::test]
async fn configmap_symlink_swap_is_seen() {
    configmap_swap("configmap", POLL).await;
}

/// Polling an hour apart: only the inotify watch on the directory can see these in time.
const NO_POLL: Duration = Duration::from_secs(3600);

#[tokio::test]
async fn configmap_symlink_swap_is_seen_at_once_through_inotify() {
    configmap_swap("configmap-inotify", NO_POLL).await;
}

#[tokio::test]
async fn rename_and_in_place_writes_are_seen_at_once_through_inotify() {
    let dir = TempDir::new("inotify");
    let path = dir.0.join("cidrs.yaml");
    write_atomic(
        &path,
        "nodes:
  node-a: [198.19.1.0/24]
",
    );
    let (mut rx, driver) = FileSource::new(&path)
        .with_interval(NO_POLL)
        .watch_node("node-a");
    let driver = tokio::spawn(driver);
    until(&mut rx, WAIT, "first load", |s| s.ready).await;

    write_atomic(
        &path,
        "nodes:
  node-a: [198.19.2.0/24]
",
    );
    until(&mut rx, WAIT, "rename", |s| {
        s.cidrs == nets(&["198.19.2.0/24"])
    })
    .await;
    std::fs::write(
        &path,
        "nodes:
  node-a: [198.19.3.0/24]
",
    )
    .unwrap();
    until(&mut rx, WAIT, "in-place write", |s| {
        s.cidrs == nets(&["198.19.3.0/24"])
    })
    .await;
    driver.abort();
}

async fn configmap_swap(test: &str, poll: Duration) {
    use std::os::unix::fs::symlink;
    let dir = TempDir::new(test);
    let root = &dir.0;
    // kubelet's layout: cidrs.yaml -> ..data/cidrs.yaml, ..data -> ..<timestamp>/
    std::fs::create_dir(root.join("..v1")).unwrap();
    std::fs::write(
        root.join("..v1/cidrs.yaml"),
        "nodes:\n  node-a: [198.19.1.0/24]\n",
    )
    .unwrap();
    symlink("..v1", root.join("..data")).unwrap();
    symlink("..data/cidrs.yaml", root.join("cidrs.yaml")).unwrap();

    let (mut rx, driver) = FileSource::new(root.join("cidrs.yaml"))
        .with_interval(poll)
        .watch_node("node-a");
    let driver = tokio::spawn(driver);
    until(&mut rx, WAIT, "first load", |s| s.ready).await;

    std::fs::create_dir(root.join("..v2")).unwrap();
    std::fs::write(
        root.join("..v2/cidrs.yaml"),
        "nodes:\n  node-a: [198.19.2.0/24]\n",
    )
    .unwrap();
    symlink("..v2", root.join("..data_tmp")).unwrap();
    std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();

    let set = until(&mut rx, WAIT, "swap", |s| {
        s.cidrs == nets(&["198.19.2.0/24"])
    })
    .await;
    assert!(set.ready);
    driver.abort();
}

#[tokio::test]
async fn cluster_mode_maps_every_node_in_the_file() {
    let dir = TempDir::new("cluster");
    let path = dir.0.join("cidrs.yaml");
    write_atomic(
        &path,
        "nodes:\n  node-a: [198.19.1.0/24]\n  node-b: [198.19.2.0/24, 198.19.2.0/24]\n",
    );
    let (mut rx, driver) = FileSource::new(&path).with_interval(POLL).watch_cluster();
    let driver = tokio::spawn(driver);
    let set: Arc<ClusterSet> = timeout(WAIT, rx.wait_for(|s| s.ready))
        .await
        .unwrap()
        .unwrap()
        .clone();
    assert_eq!(set.nodes.len(), 2);
    assert_eq!(set.nodes["node-b"].valid, nets(&["198.19.2.0/24"]));
    assert_eq!(set.nodes["node-b"].invalid.len(), 1, "duplicate reported");
    assert!(set.mismatches.is_empty());
    driver.abort();
}

/// The bug: the whole file was read (`read_to_string`) before anything looked at its size,
/// so a wrong path (a log, a disk image) was read into memory whole. Now a file over the
/// limit (16 MiB) is rejected from its size, the error names the path and the limit, and
/// the last good set stays.
#[tokio::test]
async fn file_source_huge_file_is_rejected_naming_the_limit() {
    let dir = TempDir::new("huge");
    let (path, mut rx, driver) = watching_a_good_file(&dir).await;

    // 1 GiB, sparse: no disk used, but reading it whole takes seconds and a GiB of memory.
    let tmp = path.with_extension("tmp");
    std::fs::File::create(&tmp)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    let set = until(&mut rx, WAIT, "error", |s| s.last_error.is_some()).await;
    assert_eq!(set.cidrs, nets(&["198.19.1.0/24"]), "last good set kept");
    let message = &set.last_error.as_ref().unwrap().message;
    assert_eq!(
        *message,
        format!(
            "{} is larger than the limit of 16777216 bytes for a pod-CIDR file",
            path.display()
        )
    );
    driver.abort();
}

#[test]
fn file_source_read_is_bounded_by_the_limit() {
    use ipam_watch::source::{FileError, MAX_FILE_BYTES, read_file};
    assert_eq!(MAX_FILE_BYTES, 16 << 20);
    let dir = TempDir::new("bounded");
    let path = dir.0.join("cidrs.yaml");
    std::fs::write(&path, "nodes: {}\n").unwrap();
    assert_eq!(read_file(&path, 10).unwrap(), "nodes: {}\n");
    assert!(matches!(
        read_file(&path, 9),
        Err(FileError::TooLarge { limit: 9, .. })
    ));
    // A device reports size 0 and never ends: cut off after the limit.
    let err = read_file(Path::new("/dev/zero"), 1024).unwrap_err();
    assert!(
        matches!(&err, FileError::TooLarge { limit: 1024, path } if path == Path::new("/dev/zero")),
        "{err:?}"
    );
    std::fs::write(&path, b"nodes: {}\xff\n").unwrap();
    assert!(matches!(
        read_file(&path, 100),
        Err(FileError::NotUtf8 { .. })
    ));
}

/// Issue 30 item 5: a file source confined to a directory (a path from a BGPSpeakerConfig)
/// reads a ConfigMap-style file there, symlinks inside included, and refuses a symlink that
/// leads out (to the MD5 key directory, say), saying so without reading it.
#[tokio::test]
async fn a_confined_file_source_refuses_a_symlink_that_leads_outside_its_directory() {
    let dir = TempDir::new("within");
    let allowed = dir.0.join("cidrs");
    let data = allowed.join("..data");
    std::fs::create_dir_all(&data).unwrap();
    write_atomic(
        &data.join("cidrs.yaml"),
        "nodes:\n  node-a: [198.19.1.0/24]\n",
    );
    std::os::unix::fs::symlink("..data/cidrs.yaml", allowed.join("cidrs.yaml")).unwrap();
    let (mut rx, driver) = FileSource::new(allowed.join("cidrs.yaml"))
        .with_interval(POLL)
        .within(&allowed)
        .watch_node("node-a");
    let driver = tokio::spawn(driver);
    let set = until(&mut rx, WAIT, "inside", |s| s.ready).await;
    assert_eq!(set.cidrs, nets(&["198.19.1.0/24"]));
    driver.abort();

    let secret = dir.0.join("keys");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(secret.join("tor1"), "nodes:\n  node-a: [198.19.66.0/24]\n").unwrap();
    std::os::unix::fs::symlink(secret.join("tor1"), allowed.join("escape.yaml")).unwrap();
    let (mut rx, driver) = FileSource::new(allowed.join("escape.yaml"))
        .with_interval(POLL)
        .within(&allowed)
        .watch_node("node-a");
    let driver = tokio::spawn(driver);
    let set = until(&mut rx, WAIT, "refused", |s| s.last_error.is_some()).await;
    assert!(!set.ready && set.cidrs.is_empty(), "{set:?}");
    let message = &set.last_error.as_ref().unwrap().message;
    assert!(message.contains("outside"), "{message}");
    driver.abort();
}
