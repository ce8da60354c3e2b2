//! Owner-reference garbage collection and final removal of objects.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::meta::{finalizers, meta_str};
use crate::resource::Gvr;
use crate::store::{DeleteOpts, EventType, ObjKey, State};

impl State {
    /// Removes the object (RV already bumped) and garbage-collects its dependents.
    pub(crate) fn remove_and_collect(
        &mut self,
        gvr: &Gvr,
        key: &ObjKey,
        last: Value,
        orphan: bool,
    ) {
        let mut queue = vec![(meta_str(&last, "uid").to_owned(), orphan)];
        if let Some(m) = self.objects.get_mut(gvr) {
            m.remove(key);
        }
        self.record(gvr, EventType::Deleted, last, None);
        // Each pass removes or rewrites dependents, so the queue drains.
        while let Some((uid, orphan)) = queue.pop() {
            if uid.is_empty() {
                continue;
            }
            for (dep_gvr, dep_key, dep) in self.dependents_of(&uid) {
                let live = self.live_uids();
                let refs = dep["metadata"]["ownerReferences"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let kept: Vec<Value> = refs
                    .into_iter()
                    .filter(|r| {
                        r["uid"]
                            .as_str()
                            .is_some_and(|u| u != uid && live.contains(u))
                    })
                    .collect();
                if orphan || !kept.is_empty() {
                    let mut new = dep.clone();
                    if kept.is_empty() {
                        new["metadata"]
                            .as_object_mut()
                            .map(|m| m.remove("ownerReferences"));
                    } else {
                        new["metadata"]["ownerReferences"] = Value::Array(kept);
                    }
                    // An update can't fail here: no finalizer is added.
                    let _ = self.commit_update(&dep_gvr, &dep_key, &dep, new);
                } else if !finalizers(&dep).is_empty() {
                    let _ = self.delete(&dep_gvr, &dep_key, &DeleteOpts::default());
                } else {
                    let mut last = dep;
                    last["metadata"]["resourceVersion"] = json!(self.next_rv().to_string());
                    queue.push((meta_str(&last, "uid").to_owned(), false));
                    if let Some(m) = self.objects.get_mut(&dep_gvr) {
                        m.remove(&dep_key);
                    }
                    self.record(&dep_gvr, EventType::Deleted, last, None);
                }
            }
        }
    }

    /// The garbage collector's view of a new object: if it has owner references and none of
    /// its owners exists (created after its owner was deleted), it is collected at once, as
    /// the real garbage collector does shortly after (it verifies absent owners by lookup).
    pub(crate) fn collect_if_dangling(&mut self, gvr: &Gvr, key: &ObjKey, obj: &Value) {
        let refs = obj["metadata"]["ownerReferences"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if refs.is_empty() {
            return;
        }
        let live = self.live_uids();
        if refs
            .iter()
            .any(|r| r["uid"].as_str().is_some_and(|u| live.contains(u)))
        {
            return;
        }
        if !finalizers(obj).is_empty() {
            let _ = self.delete(gvr, key, &DeleteOpts::default());
            return;
        }
        let mut last = obj.clone();
        last["metadata"]["resourceVersion"] = json!(self.next_rv().to_string());
        self.remove_and_collect(gvr, key, last, false);
    }

    fn dependents_of(&self, uid: &str) -> Vec<(Gvr, ObjKey, Value)> {
        let mut out = Vec::new();
        for (gvr, objects) in &self.objects {
            for (key, obj) in objects {
                let owned = obj["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|refs| refs.iter().any(|r| r["uid"].as_str() == Some(uid)));
                if owned {
                    out.push((gvr.clone(), key.clone(), obj.clone()));
                }
            }
        }
        out
    }

    fn live_uids(&self) -> HashSet<String> {
        self.objects
            .values()
            .flat_map(|m| m.values())
            .map(|o| meta_str(o, "uid").to_owned())
            .collect()
    }
}
