//! One watch per Secret a selected peer names (field selector on its name), and the key a
//! peer names read from it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use futures::StreamExt;
use kube::Api;
use kube::runtime::watcher::{self, Event};
use podcidr_api::SecretKeyRef;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::secret::Md5Secret as Secret;
use super::watch_all;
use crate::objects::key_files::{KeyUse, key_path};
use crate::objects::status::KeyProblem;

/// What is known of one Secret.
#[derive(Debug, Clone)]
enum SecretState {
    /// Listed: the Secret, or none of that name.
    Listed(Option<Box<Secret>>),
    /// Never listed: why (forbidden, unreachable).
    Unreadable(String),
}

pub type SecretEvent = (String, Result<Event<Secret>, watcher::Error>);

/// The watch of one Secret and what it knows.
struct SecretWatch {
    task: JoinHandle<()>,
    /// `None` until listed (or found unreadable).
    state: Option<SecretState>,
    relist: Option<Option<Box<Secret>>>,
}

/// One watch per Secret a selected peer names (field selector on its name).
pub struct SecretWatches {
    api: Api<Secret>,
    namespace: String,
    tx: mpsc::Sender<SecretEvent>,
    watches: BTreeMap<String, SecretWatch>,
}

impl std::fmt::Debug for SecretWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretWatches")
            .field("namespace", &self.namespace)
            .field("watching", &self.watches.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl SecretWatches {
    pub fn new(api: Api<Secret>, namespace: String, tx: mpsc::Sender<SecretEvent>) -> Self {
        SecretWatches {
            api,
            namespace,
            tx,
            watches: BTreeMap::new(),
        }
    }

    /// Watches exactly `names`.
    pub fn want(&mut self, names: BTreeSet<String>) {
        self.watches.retain(|name, w| {
            let keep = names.contains(name);
            if !keep {
                w.task.abort();
            }
            keep
        });
        for name in names {
            if self.watches.contains_key(&name) {
                continue;
            }
            let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
            let mut stream = watch_all(self.api.clone(), cfg);
            let tx = self.tx.clone();
            let tag = name.clone();
            let task = tokio::spawn(async move {
                while let Some(ev) = stream.next().await {
                    if tx.send((tag.clone(), ev)).await.is_err() {
                        return;
                    }
                }
            });
            let w = SecretWatch {
                task,
                state: None,
                relist: None,
            };
            self.watches.insert(name, w);
        }
    }

    /// Whether anything changed.
    pub fn apply(&mut self, (name, ev): SecretEvent) -> bool {
        let Some(w) = self.watches.get_mut(&name) else {
            return false;
        };
        let next = match ev {
            Ok(Event::Init) => {
                w.relist = Some(None);
                return false;
            }
            Ok(Event::InitApply(s)) => {
                w.relist = Some(Some(Box::new(s)));
                return false;
            }
            Ok(Event::InitDone) => SecretState::Listed(w.relist.take().flatten()),
            Ok(Event::Apply(s)) => SecretState::Listed(Some(Box::new(s))),
            Ok(Event::Delete(_)) => SecretState::Listed(None),
            Err(e) => {
                tracing::warn!(secret = %name, namespace = %self.namespace, error = %e, "watching a Secret failed; keeping what is known");
                if w.state.is_some() {
                    return false;
                }
                SecretState::Unreadable(e.to_string())
            }
        };
        w.state = Some(next);
        true
    }

    /// Every watched Secret was listed or found unreadable.
    pub fn known(&self) -> bool {
        self.watches.values().all(|w| w.state.is_some())
    }

    /// The key `r` names, or why it cannot be used for `key_use`.
    pub fn key(&self, r: &SecretKeyRef, key_use: KeyUse) -> Result<Vec<u8>, KeyProblem> {
        let ns = &self.namespace;
        if key_path(Path::new("/"), r).is_none() {
            return Err(KeyProblem::Invalid(format!(
                "{:?}/{:?} is not a Secret name and key",
                r.name, r.key
            )));
        }
        let secret = match self.watches.get(&r.name).and_then(|w| w.state.as_ref()) {
            None => {
                return Err(KeyProblem::Missing(format!(
                    "Secret {ns}/{} is not read yet",
                    r.name
                )));
            }
            Some(SecretState::Unreadable(e)) => {
                return Err(KeyProblem::Missing(format!(
                    "cannot read Secret {ns}/{}: {e}",
                    r.name
                )));
            }
            Some(SecretState::Listed(None)) => {
                return Err(KeyProblem::Missing(format!(
                    "Secret {ns}/{} does not exist",
                    r.name
                )));
            }
            Some(SecretState::Listed(Some(s))) => s,
        };
        let bytes = secret
            .bytes(&r.key)
            .ok_or_else(|| {
                KeyProblem::Missing(format!("Secret {ns}/{} has no key {:?}", r.name, r.key))
            })?
            .map_err(|e| KeyProblem::Invalid(format!("Secret {ns}/{}: {e}", r.name)))?;
        key_use.key_from_bytes(bytes).map_err(|e| {
            KeyProblem::Invalid(format!("Secret {ns}/{} key {:?}: {e}", r.name, r.key))
        })
    }
}

impl Drop for SecretWatches {
    fn drop(&mut self) {
        for w in self.watches.values() {
            w.task.abort();
        }
    }
}
