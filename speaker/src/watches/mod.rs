//! Kubernetes watches shared by the speaker's objects task and the allocator's status writer:
//! a watch of every object of a kind, a store of what was listed, the per-Secret watches (by
//! name, never the namespace's other Secrets) and the Secret decoder that cannot log a key.
//! No subcommand's module: both subcommands import it.

pub mod secret;
mod secrets;
pub mod store;

use std::fmt::Debug;

use futures::stream::{BoxStream, StreamExt};
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

pub use secrets::{SecretEvent, SecretWatches};
pub use store::Store;

/// Every object of a kind: a watcher with the default backoff.
pub fn watch_all<K>(
    api: Api<K>,
    cfg: watcher::Config,
) -> BoxStream<'static, Result<Event<K>, watcher::Error>>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher::watcher(api, cfg).default_backoff().boxed()
}
