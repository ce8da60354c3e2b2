//! The generic object store: one global resourceVersion counter, a bounded event
//! history for watches, and the write semantics of the real API server.

pub(crate) use crate::ownership::Scope;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::error::ApiError;
use crate::meta::{finalizers, make_uid, meta_str, metadata_mut, name_suffix, now_rfc3339};
use crate::ownership;
use crate::resource::Gvr;
use crate::selector::Selectors;
use crate::validate;

/// Kind of change recorded in the store history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed (including `deletionTimestamp` being set).
    Modified,
    /// Object removed from the store.
    Deleted,
}

impl EventType {
    /// Wire name in a watch event.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change in the store, as kept in the watch history.
#[derive(Debug, Clone)]
pub struct StoreEvent {
    /// The resourceVersion this change produced.
    pub resource_version: u64,
    /// What happened.
    pub event_type: EventType,
    /// Resource type of the object.
    pub gvr: Gvr,
    /// Object after the change (for `Deleted`: its last state, at the deletion RV).
    pub object: Value,
    /// Object before the change, for `Modified`.
    pub previous: Option<Value>,
}

/// What discovery reports about a resource type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeInfo {
    /// `kind` of its objects.
    pub kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

/// Store key inside one resource type: (namespace or "", name).
pub(crate) type ObjKey = (String, String);

/// `DeleteOptions` fields the fake honours.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOpts {
    pub precondition_rv: Option<String>,
    pub precondition_uid: Option<String>,
    pub orphan: bool,
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) rv: u64,
    pub(crate) objects: BTreeMap<Gvr, BTreeMap<ObjKey, Value>>,
    history: VecDeque<Arc<StoreEvent>>,
    history_limit: usize,
    /// Events with a resourceVersion at or below this are gone from the history.
    compacted_rv: u64,
    types: BTreeMap<Gvr, TypeInfo>,
    uid_seed: u64,
    uid_counter: u64,
}

/// Shared store; every mutation notifies [`Store::subscribe_rv`] receivers.
#[derive(Debug)]
pub struct Store {
    state: Mutex<State>,
    notify: watch::Sender<u64>,
    keep_status_on_create: HashSet<Gvr>,
}

impl Store {
    pub(crate) fn new(
        history_limit: usize,
        keep_status_on_create: HashSet<Gvr>,
        types: BTreeMap<Gvr, TypeInfo>,
    ) -> Self {
        let uid_seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x5eed);
        let state = State {
            rv: 1,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            compacted_rv: 0,
            types,
            uid_seed,
            uid_counter: 0,
        };
        Self {
            state: Mutex::new(state),
            notify: watch::channel(1).0,
            keep_status_on_create,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs a mutation and wakes every waiter if it produced new resourceVersions.
    fn mutate<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let (out, rv) = {
            let mut st = self.lock();
            let out = f(&mut st);
            (out, st.rv)
        };
        self.notify
            .send_if_modified(|cur| std::mem::replace(cur, rv) != rv);
        out
    }

    /// A receiver that changes whenever the store's resourceVersion moves.
    pub(crate) fn subscribe_rv(&self) -> watch::Receiver<u64> {
        self.notify.subscribe()
    }

    pub(crate) fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Whether HTTP creates keep `.status` for this type (the real Node strategy does).
    pub(crate) fn keeps_status_on_create(&self, gvr: &Gvr) -> bool {
        self.keep_status_on_create.contains(gvr)
    }

    pub(crate) fn get(&self, gvr: &Gvr, key: &ObjKey) -> Option<Value> {
        self.lock().objects.get(gvr)?.get(key).cloned()
    }

    pub(crate) fn kind_of(&self, gvr: &Gvr) -> String {
        self.lock().kind_of(gvr)
    }

    /// Registered types plus every type ever written, for discovery.
    pub(crate) fn types(&self) -> BTreeMap<Gvr, TypeInfo> {
        self.lock().types.clone()
    }

    /// Drops the whole watch history: any older resourceVersion now gets 410 Gone.
    pub(crate) fn compact(&self) {
        let mut st = self.lock();
        st.compacted_rv = st.rv;
        st.history.clear();
    }

    /// Matching objects (sorted by namespace, name) and the current resourceVersion.
    pub(crate) fn snapshot(
        &self,
        gvr: &Gvr,
        ns: Option<&str>,
        sel: &Selectors,
    ) -> (Vec<Value>, u64) {
        let st = self.lock();
        (st.matching(gvr, ns, sel, None).cloned().collect(), st.rv)
    }

    /// One page of a list, each object through `project` (e.g. to its metadata, so a page
    /// clones only what it serves); `continue_token` is opaque to clients.
    pub(crate) fn list_page(
        &self,
        gvr: &Gvr,
        ns: Option<&str>,
        sel: &Selectors,
        limit: Option<usize>,
        continue_token: Option<&str>,
        project: impl Fn(&Value) -> Value,
    ) -> Result<ListPage, ApiError> {
        let st = self.lock();
        let (snapshot_rv, after) = match continue_token {
            Some(token) => {
                let (rv, key) = decode_continue(token)
                    .ok_or_else(|| ApiError::bad_request("invalid continue token"))?;
                if rv < st.compacted_rv {
                    return Err(ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. \
                         You can start a new list without the continue parameter.",
                    ));
                }
                (rv, Some(key))
            }
            None => (st.rv, None),
        };
        let mut items: Vec<Value> = Vec::new();
        let mut last: Option<&ObjKey> = None;
        let mut remaining = 0u64;
        for (key, obj) in st.matching_keyed(gvr, ns, sel, after.as_ref()) {
            if limit.is_some_and(|l| items.len() >= l) {
                remaining += 1;
            } else {
                items.push(project(obj));
                last = Some(key);
            }
        }
        let next = (remaining > 0)
            .then(|| last.map(|k| encode_continue(snapshot_rv, k)))
            .flatten();
        Ok(ListPage {
            items,
            resource_version: snapshot_rv,
            continue_token: next,
            remaining: (remaining > 0).then_some(remaining),
        })
    }

    /// Events of `gvr` (or all types) after `after`, or 410 Gone if the history no longer has them.
    /// Also returns the current resourceVersion: every event up to it has been seen.
    pub(crate) fn events_after(
        &self,
        gvr: Option<&Gvr>,
        after: u64,
    ) -> Result<(Vec<Arc<StoreEvent>>, u64), ApiError> {
        let st = self.lock();
        st.check_not_compacted(after)?;
        let start = st.history.partition_point(|e| e.resource_version <= after);
        let events = st
            .history
            .range(start..)
            .filter(|e| gvr.is_none_or(|g| e.gvr == *g))
            .cloned()
            .collect();
        Ok((events, st.rv.max(after)))
    }

    pub(crate) fn create(
        &self,
        gvr: &Gvr,
        ns: Option<&str>,
        body: Value,
        keep_status: bool,
    ) -> Result<Value, ApiError> {
        self.mutate(|st| st.create(gvr, ns, body, keep_status))
    }

    /// Replaces the object, within `scope`.
    pub(crate) fn replace(
        &self,
        gvr: &Gvr,
        key: &ObjKey,
        body: Value,
        scope: Scope,
    ) -> Result<Value, ApiError> {
        self.mutate(|st| {
            let old = st.get_or_404(gvr, key)?;
            if !body.is_object() {
                return Err(ApiError::bad_request("body must be a JSON object"));
            }
            let body_name = meta_str(&body, "name");
            if !body_name.is_empty() && body_name != key.1 {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({body_name}) does not match the name on the URL ({})",
                    key.1
                )));
            }
            let rv = meta_str(&body, "resourceVersion");
            if !rv.is_empty() && rv != meta_str(&old, "resourceVersion") {
                return Err(ApiError::conflict(&gvr.plural, &key.1));
            }
            let mut new = merge_subresource(&old, body, scope);
            ownership::update(&old, &mut new);
            st.commit_update(gvr, key, &old, new)
        })
    }

    /// Sets the object wholesale (status included), creating it if absent. No preconditions.
    pub(crate) fn upsert(&self, gvr: &Gvr, body: Value) -> Result<Value, ApiError> {
        self.mutate(|st| {
            let ns = meta_str(&body, "namespace").to_owned();
            let key = (ns.clone(), meta_str(&body, "name").to_owned());
            match st.objects.get(gvr).and_then(|m| m.get(&key)).cloned() {
                Some(old) => {
                    let mut new = body;
                    ownership::update(&old, &mut new);
                    st.commit_update(gvr, &key, &old, new)
                }
                None => st.create(gvr, Some(ns.as_str()).filter(|n| !n.is_empty()), body, true),
            }
        })
    }

    /// Read-modify-write under the lock: `f` computes the new object from the current one.
    pub(crate) fn update_with(
        &self,
        gvr: &Gvr,
        key: &ObjKey,
        scope: Scope,
        f: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<Value, ApiError> {
        self.mutate(|st| {
            let old = st.get_or_404(gvr, key)?;
            let mut new = merge_subresource(&old, f(&old)?, scope);
            ownership::update(&old, &mut new);
            st.commit_update(gvr, key, &old, new)
        })
    }

    /// Like [`Store::update_with`] but creates from `f(empty)` when absent (server-side apply:
    /// `f` records field ownership itself).
    pub(crate) fn upsert_with(
        &self,
        gvr: &Gvr,
        key: &ObjKey,
        scope: Scope,
        f: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<(Value, bool), ApiError> {
        self.mutate(
            |st| match st.objects.get(gvr).and_then(|m| m.get(key)).cloned() {
                Some(old) => {
                    let new = merge_subresource(&old, f(&old)?, scope);
                    Ok((st.commit_update(gvr, key, &old, new)?, false))
                }
                None if scope == Scope::Status => Err(ApiError::not_found(&gvr.plural, &key.1)),
                None => {
                    let ns = Some(key.0.as_str()).filter(|n| !n.is_empty());
                    let mut body = f(&json!({}))?;
                    if let Some(meta) = metadata_mut(&mut body) {
                        meta.insert("name".into(), json!(key.1));
                    }
                    let keep = self.keeps_status_on_create(gvr);
                    Ok((st.create(gvr, ns, body, keep)?, true))
                }
            },
        )
    }

    pub(crate) fn delete(
        &self,
        gvr: &Gvr,
        key: &ObjKey,
        opts: &DeleteOpts,
    ) -> Result<Value, ApiError> {
        self.mutate(|st| st.delete(gvr, key, opts))
    }
}

/// One page of a list response.
#[derive(Debug)]
pub(crate) struct ListPage {
    pub items: Vec<Value>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<u64>,
}

fn encode_continue(rv: u64, key: &ObjKey) -> String {
    format!("{rv}:{}:{}", key.0, key.1)
}

fn decode_continue(token: &str) -> Option<(u64, ObjKey)> {
    let mut parts = token.splitn(3, ':');
    let rv = parts.next()?.parse().ok()?;
    Some((rv, (parts.next()?.to_owned(), parts.next()?.to_owned())))
}

/// Writes through the main resource keep `.status`; writes through `/status` change only it.
fn merge_subresource(old: &Value, mut new: Value, scope: Scope) -> Value {
    if scope == Scope::Whole {
        return new;
    }
    if scope == Scope::Status {
        let mut out = old.clone();
        match new.get_mut("status").map(Value::take) {
            Some(status) if !status.is_null() => out["status"] = status,
            _ => {
                out.as_object_mut().map(|m| m.remove("status"));
            }
        }
        // A status write records who owns what, like any write.
        if let (Some(fields), Some(meta)) = (
            new["metadata"].get_mut("managedFields").map(Value::take),
            metadata_mut(&mut out),
        ) {
            meta.insert("managedFields".into(), fields);
        }
        return out;
    }
    match (old.get("status"), new.as_object_mut()) {
        (Some(status), Some(map)) => {
            map.insert("status".into(), status.clone());
        }
        (None, Some(map)) => {
            map.remove("status");
        }
        _ => {}
    }
    new
}

/// Fields of `metadata` owned by the server, carried over on every update.
const SERVER_META: [&str; 5] = [
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
];

impl State {
    fn kind_of(&self, gvr: &Gvr) -> String {
        self.types
            .get(gvr)
            .map_or_else(|| gvr.guess_kind(), |t| t.kind.clone())
    }

    /// A watch from before the history answers what kube-apiserver's does: 410 with reason
    /// Expired (`NewResourceExpired`), from the watch cache and from etcd alike.
    fn check_not_compacted(&self, rv: u64) -> Result<(), ApiError> {
        if rv < self.compacted_rv {
            return Err(ApiError::expired(format!(
                "too old resource version: {rv} ({})",
                self.compacted_rv
            )));
        }
        Ok(())
    }

    fn matching<'a>(
        &'a self,
        gvr: &Gvr,
        ns: Option<&'a str>,
        sel: &'a Selectors,
        after: Option<&'a ObjKey>,
    ) -> impl Iterator<Item = &'a Value> + 'a {
        self.matching_keyed(gvr, ns, sel, after).map(|(_, v)| v)
    }

    fn matching_keyed<'a>(
        &'a self,
        gvr: &Gvr,
        ns: Option<&'a str>,
        sel: &'a Selectors,
        after: Option<&'a ObjKey>,
    ) -> impl Iterator<Item = (&'a ObjKey, &'a Value)> + 'a {
        use std::ops::Bound::{Excluded, Unbounded};
        let start = after.map_or(Unbounded, Excluded);
        self.objects
            .get(gvr)
            .into_iter()
            .flat_map(move |m| m.range::<ObjKey, _>((start, Unbounded)))
            .filter(move |(k, v)| ns.is_none_or(|n| k.0 == n) && sel.matches(v))
    }

    fn get_or_404(&self, gvr: &Gvr, key: &ObjKey) -> Result<Value, ApiError> {
        self.objects
            .get(gvr)
            .and_then(|m| m.get(key))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&gvr.plural, &key.1))
    }

    pub(crate) fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    pub(crate) fn record(
        &mut self,
        gvr: &Gvr,
        event_type: EventType,
        object: Value,
        previous: Option<Value>,
    ) {
        let event = StoreEvent {
            resource_version: self.rv,
            event_type,
            gvr: gvr.clone(),
            object,
            previous,
        };
        self.history.push_back(Arc::new(event));
        while self.history.len() > self.history_limit {
            if let Some(old) = self.history.pop_front() {
                self.compacted_rv = old.resource_version;
            }
        }
    }

    fn create(
        &mut self,
        gvr: &Gvr,
        ns: Option<&str>,
        mut body: Value,
        keep_status: bool,
    ) -> Result<Value, ApiError> {
        let kind = self.kind_of(gvr);
        let Some(map) = body.as_object_mut() else {
            return Err(ApiError::bad_request("body must be a JSON object"));
        };
        match map.get("apiVersion").and_then(Value::as_str) {
            Some(v) if v != gvr.api_version => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({v}) does not match the expected API version ({})",
                    gvr.api_version
                )));
            }
            Some(_) => {}
            None => {
                map.insert("apiVersion".into(), json!(gvr.api_version));
            }
        }
        let kind = map
            .entry("kind")
            .or_insert_with(|| json!(kind))
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if !keep_status {
            map.remove("status");
        }
        self.uid_counter += 1;
        let (uid_n, seed) = (self.uid_counter, self.uid_seed);
        let meta = metadata_mut(&mut body).ok_or_else(|| ApiError::bad_request("bad metadata"))?;
        let body_ns = meta
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let ns = match ns {
            Some(path_ns) if !body_ns.is_empty() && body_ns != path_ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            Some(path_ns) => {
                meta.insert("namespace".into(), json!(path_ns));
                path_ns.to_owned()
            }
            None => {
                meta.remove("namespace");
                String::new()
            }
        };
        let mut name = meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if name.is_empty() {
            let prefix = meta
                .get("generateName")
                .and_then(Value::as_str)
                .unwrap_or("");
            if prefix.is_empty() {
                return Err(ApiError::invalid(
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
            name = format!("{prefix}{}", name_suffix(seed ^ uid_n));
            meta.insert("name".into(), json!(name));
        }
        let key_ns = ns.clone();
        let key = (ns, name.clone());
        if self.objects.get(gvr).is_some_and(|m| m.contains_key(&key)) {
            return Err(ApiError::already_exists(&gvr.plural, &name));
        }
        let rv = self.rv + 1;
        meta.insert("uid".into(), json!(make_uid(seed, uid_n)));
        meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
        meta.insert("generation".into(), json!(1));
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        validate::on_create(gvr, &body)?;
        self.next_rv();
        self.types.entry(gvr.clone()).or_insert(TypeInfo {
            kind,
            namespaced: !key_ns.is_empty(),
        });
        self.objects
            .entry(gvr.clone())
            .or_default()
            .insert(key.clone(), body.clone());
        self.record(gvr, EventType::Added, body.clone(), None);
        self.collect_if_dangling(gvr, &key, &body);
        Ok(body)
    }

    pub(crate) fn commit_update(
        &mut self,
        gvr: &Gvr,
        key: &ObjKey,
        old: &Value,
        mut new: Value,
    ) -> Result<Value, ApiError> {
        if !new.is_object() {
            return Err(ApiError::bad_request("the result is not a JSON object"));
        }
        for field in ["apiVersion", "kind"] {
            new[field] = old[field].clone();
        }
        let meta = metadata_mut(&mut new).ok_or_else(|| ApiError::bad_request("bad metadata"))?;
        for field in SERVER_META {
            match old["metadata"].get(field) {
                Some(v) => meta.insert(field.into(), v.clone()),
                None => meta.remove(field),
            };
        }
        meta.insert("name".into(), json!(key.1));
        if key.0.is_empty() {
            meta.remove("namespace");
        } else {
            meta.insert("namespace".into(), json!(key.0));
        }
        meta.insert(
            "resourceVersion".into(),
            old["metadata"]["resourceVersion"].clone(),
        );
        if new == *old {
            return Ok(new);
        }
        validate::on_update(gvr, old, &new)?;
        let deleting = !old["metadata"]["deletionTimestamp"].is_null();
        if deleting {
            let before: HashSet<&str> = finalizers(old).into_iter().collect();
            if finalizers(&new).iter().any(|f| !before.contains(f)) {
                return Err(ApiError::invalid(
                    "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted",
                ));
            }
        }
        if strip_meta_status(old) != strip_meta_status(&new) {
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            new["metadata"]["generation"] = json!(generation);
        }
        let rv = self.next_rv();
        new["metadata"]["resourceVersion"] = json!(rv.to_string());
        if deleting && finalizers(&new).is_empty() {
            // The last finalizer is gone: the object disappears now.
            self.remove_and_collect(gvr, key, new.clone(), false);
            return Ok(new);
        }
        self.objects
            .entry(gvr.clone())
            .or_default()
            .insert(key.clone(), new.clone());
        self.record(gvr, EventType::Modified, new.clone(), Some(old.clone()));
        Ok(new)
    }

    pub(crate) fn delete(
        &mut self,
        gvr: &Gvr,
        key: &ObjKey,
        opts: &DeleteOpts,
    ) -> Result<Value, ApiError> {
        let old = self.get_or_404(gvr, key)?;
        let rv_ok = opts
            .precondition_rv
            .as_deref()
            .is_none_or(|rv| rv == meta_str(&old, "resourceVersion"));
        let uid_ok = opts
            .precondition_uid
            .as_deref()
            .is_none_or(|uid| uid == meta_str(&old, "uid"));
        if !rv_ok || !uid_ok {
            return Err(ApiError::conflict(&gvr.plural, &key.1));
        }
        if !finalizers(&old).is_empty() {
            if !old["metadata"]["deletionTimestamp"].is_null() {
                return Ok(old);
            }
            let mut new = old.clone();
            new["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
            new["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            new["metadata"]["resourceVersion"] = json!(self.next_rv().to_string());
            self.objects
                .entry(gvr.clone())
                .or_default()
                .insert(key.clone(), new.clone());
            self.record(gvr, EventType::Modified, new.clone(), Some(old));
            return Ok(new);
        }
        let mut last = old;
        last["metadata"]["resourceVersion"] = json!(self.next_rv().to_string());
        self.remove_and_collect(gvr, key, last.clone(), opts.orphan);
        Ok(last)
    }
}

/// The object without metadata and status: what `generation` tracks.
fn strip_meta_status(obj: &Value) -> Value {
    let mut out = obj.clone();
    if let Some(map) = out.as_object_mut() {
        map.remove("metadata");
        map.remove("status");
    }
    out
}
