//! One watched kind folded into objects by name (a relist swapped in whole), shared by the
//! speaker's objects task (through [`super::node_store`]) and the status writer.

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::runtime::watcher::{self, Event};

/// One watched kind, folded: objects by name, a relist swapped in whole.
#[derive(Debug)]
pub struct Store<K> {
    pub objects: BTreeMap<String, K>,
    relist: Option<BTreeMap<String, K>>,
    pub ready: bool,
}

impl<K: kube::Resource> Default for Store<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: kube::Resource> Store<K> {
    pub fn new() -> Self {
        Store {
            objects: BTreeMap::new(),
            relist: None,
            ready: false,
        }
    }

    /// Whether anything changed.
    pub fn apply(&mut self, ev: Result<Event<K>, watcher::Error>, what: &str) -> bool {
        match ev {
            Ok(Event::Init) => {
                self.relist = Some(BTreeMap::new());
                false
            }
            Ok(Event::InitApply(o)) => {
                self.relist.get_or_insert_default().insert(o.name_any(), o);
                false
            }
            Ok(Event::InitDone) => {
                self.objects = self.relist.take().unwrap_or_default();
                self.ready = true;
                true
            }
            Ok(Event::Apply(o)) => {
                self.objects.insert(o.name_any(), o);
                true
            }
            Ok(Event::Delete(o)) => self.objects.remove(&o.name_any()).is_some(),
            Err(e) => {
                tracing::warn!(kind = what, error = %e, "watching configuration objects failed; keeping what is known");
                false
            }
        }
    }
}
