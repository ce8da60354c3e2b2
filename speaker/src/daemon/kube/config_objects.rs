//! `--config-source kubernetes`: the configuration objects this node runs. Watches the two
//! kinds cluster-wide (small lists), each Secret a selected peer names (one watch per Secret,
//! by name: never the namespace's other Secrets) and reads the Node's labels from the
//! speaker's own Node watch. On a change it works out the node's config (pure:
//! `objects::node_config`, last good per object), writes the MD5 keys the peers need as files
//! the sessions read, and publishes the result.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::stream::StreamExt;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use podcidr_api::{BGPPeer, BGPSpeakerConfig};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::node::NodeState;
use super::node_store::NodeStore;
use crate::daemon::host::state_file::{StateFile, write_whole};
use crate::objects::key_files::key_path;
use crate::objects::key_files::{key_file_plan, peer_key_refs};
use crate::objects::{Keys, LastGood, NodeConfig, ObjectKind, Objects, node_config, select};
use crate::watches::{SecretWatches, watch_all};

/// Where the objects' Secrets and the key files are.
#[derive(Debug, Clone)]
pub struct ObjectSettings {
    /// The namespace of the Secrets `passwordSecretRef` names (the speaker's own).
    pub secret_namespace: String,
    /// Where MD5 keys are written for the sessions (an in-memory volume in the DaemonSet).
    pub key_dir: PathBuf,
    /// `--state-dir`: where the last good versions are kept for the next process on this
    /// node; `None`: in memory only.
    pub state_dir: Option<PathBuf>,
}

/// The file in `--state-dir` with the last good objects.
pub const LAST_GOOD_FILE: &str = "last-good.json";

/// The last good versions of this node's objects, kept in `--state-dir` when it is set.
struct KeptLastGood {
    file: Option<StateFile>,
}

impl KeptLastGood {
    /// Reads what the previous process on this node ran successfully.
    fn load(state_dir: Option<&Path>, node_name: &str) -> (Self, LastGood) {
        let Some(dir) = state_dir else {
            return (KeptLastGood { file: None }, LastGood::default());
        };
        let mut file = StateFile::new(dir, LAST_GOOD_FILE, node_name);
        let last = match file.load::<LastGood>() {
            Ok(Some(last)) => {
                if !last.is_empty() {
                    tracing::info!(path = %file.path().display(), objects = %last.summary(), "last good configuration objects kept by the previous process; used where the current version cannot run");
                }
                last
            }
            Ok(None) => LastGood::default(),
            Err(e) => {
                tracing::warn!(error = %e, "no last good configuration objects from the previous process");
                LastGood::default()
            }
        };
        (KeptLastGood { file: Some(file) }, last)
    }

    fn save(&mut self, last: &LastGood) {
        let Some(file) = &mut self.file else {
            return;
        };
        if let Err(e) = file.save(last) {
            tracing::error!(path = %file.path().display(), error = %e, "cannot keep the last good configuration objects; a restart while one is unusable runs without it");
        }
    }
}

/// The Secrets the peers selecting a node with `labels` name (for TCP MD5 and BFD keys).
fn referenced(objects: &Objects, labels: &BTreeMap<String, String>) -> BTreeSet<String> {
    select(objects, labels)
        .peers
        .iter()
        .flat_map(|p| peer_key_refs(&p.spec))
        .map(|(_, r)| r.name.clone())
        .collect()
}

/// Writes `key` to `path` (0400) unless it already holds it: temp file, then rename, so a
/// session never reads half a key.
pub fn write_key(path: &Path, key: &[u8]) -> std::io::Result<()> {
    if std::fs::read(path).is_ok_and(|k| k == key) {
        return Ok(());
    }
    write_whole(path, key, 0o400)
}

/// Spawns the watches; the receiver holds `None` until the objects, the Secrets they name
/// and the Node are known.
pub fn spawn(
    client: Client,
    settings: ObjectSettings,
    node_name: &str,
    mut node: watch::Receiver<NodeState>,
) -> (watch::Receiver<Option<Arc<NodeConfig>>>, JoinHandle<()>) {
    let (mut kept, mut last) = KeptLastGood::load(settings.state_dir.as_deref(), node_name);
    let node_name = node_name.to_owned();
    let (tx, rx) = watch::channel(None);
    let task = tokio::spawn(async move {
        let all = watcher::Config::default;
        let mut configs = watch_all(Api::<BGPSpeakerConfig>::all(client.clone()), all());
        let mut peers = watch_all(Api::<BGPPeer>::all(client.clone()), all());
        let (secret_tx, mut secret_rx) = mpsc::channel(64);
        let mut secrets = SecretWatches::new(
            Api::namespaced(client, &settings.secret_namespace),
            settings.secret_namespace.clone(),
            secret_tx,
        );
        let mut config_store = NodeStore::<BGPSpeakerConfig>::new();
        let mut peer_store = NodeStore::<BGPPeer>::new();
        let mut written: BTreeSet<PathBuf> = BTreeSet::new();
        let mut dirty = false;
        // RFC 8326's wait for an object deleted on purpose: the running config's.
        let mut wait = podcidr_config::GracefulShutdownConfig::default().wait;
        loop {
            let deadline = [config_store.next_deadline(), peer_store.next_deadline()]
                .into_iter()
                .flatten()
                .min();
            dirty |= tokio::select! {
                Some(ev) = configs.next() => config_store.apply(ev, "BGPSpeakerConfig"),
                Some(ev) = peers.next() => peer_store.apply(ev, "BGPPeer"),
                Some(ev) = secret_rx.recv() => secrets.apply(ev),
                r = node.changed() => {
                    if r.is_err() {
                        return;
                    }
                    true
                }
                () = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                    let now = Instant::now();
                    config_store.expire(now) | peer_store.expire(now)
                }
                () = tx.closed() => return,
            };
            config_store.seed(last.configs());
            peer_store.seed(last.peers());
            let armed = Instant::now() + wait;
            config_store.arm(armed);
            peer_store.arm(armed);
            let labels = match &*node.borrow() {
                NodeState::Unknown => continue,
                NodeState::Present(n) => n.labels().clone(),
                NodeState::Absent => BTreeMap::new(),
            };
            if !(dirty && config_store.ready() && peer_store.ready()) {
                continue;
            }
            let mut objects = Objects {
                configs: config_store.all(),
                peers: peer_store.all(),
                ..Objects::default()
            };
            config_store.mark(ObjectKind::SpeakerConfig, &mut objects);
            peer_store.mark(ObjectKind::Peer, &mut objects);
            let mut names = referenced(&objects, &labels);
            names.extend(last.secret_names().map(str::to_owned));
            secrets.want(names);
            if !secrets.known() {
                continue;
            }
            dirty = false;
            let key_dir = &settings.key_dir;
            let keys = Keys {
                problem: &|r, key_use| secrets.key(r, key_use).err().map(|e| e.to_string()),
                kept: &|r| key_path(key_dir, r).is_some_and(|p| p.is_file()),
                file: &|_, r| key_path(key_dir, r).unwrap_or_else(|| key_dir.join("invalid")),
            };
            let computed = node_config(&objects, &labels, &node_name, &mut last, &keys);
            if let Some(c) = &computed.config {
                wait = c.graceful_shutdown.wait;
            }
            // The listing is complete here: what no longer exists is not run again.
            last.retain_existing(&objects);
            // What happens to the key files is decided in objects::key_files; done here.
            let plan = key_file_plan(
                &computed,
                |r, key_use| secrets.key(r, key_use).ok(),
                &written,
            );
            for (path, key) in &plan.write {
                if let Err(e) = write_key(path, key) {
                    tracing::error!(path = %path.display(), error = %e, "cannot write a key file");
                }
            }
            for stale in &plan.remove {
                let _ = std::fs::remove_file(stale);
            }
            written = plan.in_use;
            tx.send_if_modified(|cur| {
                let same = cur.as_deref() == Some(&computed);
                if !same {
                    *cur = Some(Arc::new(computed));
                }
                !same
            });
            // Kept after the node has its config: the file (and its fsync) never delays it.
            kept.save(&last);
        }
    });
    (rx, task)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::write_key;

    fn mode(path: &std::path::Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// A Secret only a BFD key comes from is watched too (else its key is "not read yet"
    /// forever and the peer never runs).
    #[test]
    fn the_node_watches_the_secret_a_bfd_key_names() {
        use crate::objects::Objects;
        let peer: podcidr_api::BGPPeer = serde_json::from_value(serde_json::json!({
            "apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPPeer",
            "metadata": {"name": "tor1"},
            "spec": {"address": "192.0.2.1", "asn": 65000,
                     "passwordSecretRef": {"name": "md5", "key": "tor1"},
                     "bfd": {"authentication": {"type": "keyed-sha1", "keyId": 1,
                             "secretRef": {"name": "bfd-keys", "key": "tor1"}}}}
        }))
        .unwrap();
        let objects = Objects::from_lists(Vec::new(), vec![peer]);
        let names = super::referenced(&objects, &Default::default());
        assert_eq!(names, ["bfd-keys".to_owned(), "md5".to_owned()].into());
    }

    #[test]
    fn key_files_are_0400_and_a_changed_key_replaces_the_file() {
        let dir = std::env::temp_dir().join(format!("podcidr-keys-{}", std::process::id()));
        let path = dir.join("md5").join("tor1");
        write_key(&path, b"first").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        assert_eq!(mode(&path), 0o400);
        write_key(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert_eq!(mode(&path), 0o400);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_leftover_0400_temp_file_does_not_block_the_next_key() {
        let dir = std::env::temp_dir().join(format!("podcidr-keys-tmp-{}", std::process::id()));
        let path = dir.join("tor1");
        std::fs::create_dir_all(&dir).unwrap();
        let tmp = dir.join(".tor1.tmp");
        std::fs::write(&tmp, b"half").unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o400)).unwrap();
        write_key(&path, b"whole").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"whole");
        assert!(!tmp.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
