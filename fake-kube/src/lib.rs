//! In-process fake Kubernetes API server.
//!
//! Speaks the real HTTP list/watch protocol (resourceVersion, bookmarks, 410 Gone, field
//! and label selectors, merge/JSON patch, server-side apply as merge, status subresource,
//! finalizers, owner-reference GC) so the unmodified `kube` client and
//! `kube::runtime::watcher` run against it. Any resource works without registration.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use fake_kube::{FakeKube, Fault, Gvr, Verb};
//! use k8s_openapi::api::core::v1::Node;
//! use kube::api::{Api, ListParams};
//!
//! let fake = FakeKube::start().await?;
//! fake.insert(&Gvr::nodes(), serde_json::json!({"metadata": {"name": "node-a"}}))?;
//! let nodes: Api<Node> = Api::all(fake.client());
//! assert_eq!(nodes.list(&ListParams::default()).await?.items.len(), 1);
//!
//! // The next create of a Lease is applied, but the client sees 504 Timeout.
//! fake.inject(Fault::apply_then_timeout().verb(Verb::Create).resource("leases"));
//! // ... run the code under test, then await its effect (bounded, no polling):
//! fake.wait_for(Duration::from_secs(5), |f| !f.list(&Gvr::leases(), None).is_empty()).await?;
//! assert_eq!(fake.writes_to("nodes"), 0);
//! # Ok(()) }
//! ```
//!
//! Behaviour worth knowing when writing tests:
//! - The default kube client ([`FakeKube::client`]) retries 429/503/504 answers itself (up to
//!   15 times with backoff), as in production; [`FakeKube::client_without_retry`] does not.
//! - HTTP creates drop `.status` except for types set with
//!   [`FakeKubeBuilder::keep_status_on_create`] (`v1/nodes` by default); direct
//!   [`FakeKube::insert`] keeps everything. Every type behaves as if it had a status subresource.
//! - Server-side apply merges the body and keeps field ownership per manager and subresource
//!   (`metadata.managedFields`, `Apply` entries only): fields a manager applied before and
//!   leaves out now are removed unless another applier owns them or another writer changed
//!   them since. Lists are atomic and conflicts are never reported (see `ownership`).
//!   Strategic merge is a merge patch (lists are replaced).
//! - Metadata-only requests (`Accept: application/json;as=PartialObjectMetadata[List];
//!   g=meta.k8s.io;v=v1`, what `Api<PartialObjectMeta<K>>` sends) get `PartialObjectMetadata`
//!   objects on GET, LIST and WATCH.
//! - Lists always serve the current state; an exact-resourceVersion list older than the
//!   history answers 410, a newer one is not reconstructed.
//! - `events.k8s.io/v1` Events are validated as the real server does for that API version
//!   (required fields, the `default` namespace for cluster-scoped objects, only `series`
//!   mutable), so a client's de-duplication is checked. They are stored apart from core/v1
//!   `events` (the real server keeps one object with two views).
//! - Garbage collection and finalizer handling are synchronous (no GC delay); `Foreground`
//!   propagation behaves like `Background`. Namespaces are not required to exist.

mod discovery;
mod error;
mod faults;
mod gc;
mod meta;
mod ownership;
mod patch;
mod resource;
mod router;
mod selector;
mod server;
mod shared;
mod store;
mod traffic;
mod validate;
mod watch;

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch as watch_channel;
use tokio::task::JoinHandle;

pub use error::{ApiError, reason_for};
pub use faults::{Fault, FaultAction, Verb};
pub use patch::{json_patch, merge_patch};
pub use resource::Gvr;
pub use selector::{FieldSelector, LabelSelector, Selectors};
pub use store::{EventType, StoreEvent, TypeInfo};
pub use traffic::{REQUEST_LOG_CAP, RequestRecord, Traffic};

use shared::{Shared, Signals};
use store::{DeleteOpts, Scope, Store};

/// A bounded wait on the fake's state ran out of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("timed out after {0:?} waiting on the fake API server")]
pub struct WaitTimeout(pub Duration);

/// Options for [`FakeKube`]; start with [`FakeKube::builder`].
#[derive(Debug, Clone)]
pub struct FakeKubeBuilder {
    history_limit: usize,
    bookmark_interval: Option<Duration>,
    keep_status_on_create: HashSet<Gvr>,
    types: BTreeMap<Gvr, TypeInfo>,
}

impl Default for FakeKubeBuilder {
    fn default() -> Self {
        let builtin = |kind: &str, namespaced| TypeInfo {
            kind: kind.to_owned(),
            namespaced,
        };
        let types = BTreeMap::from([
            (Gvr::nodes(), builtin("Node", false)),
            (Gvr::new("v1", "namespaces"), builtin("Namespace", false)),
            (Gvr::new("v1", "events"), builtin("Event", true)),
            (Gvr::events(), builtin("Event", true)),
            (Gvr::leases(), builtin("Lease", true)),
        ]);
        Self {
            history_limit: 1000,
            bookmark_interval: None,
            keep_status_on_create: HashSet::from([Gvr::nodes()]),
            types,
        }
    }
}

impl FakeKubeBuilder {
    /// How many events the watch history keeps (default 1000); older resourceVersions get 410.
    #[must_use]
    pub fn history_limit(mut self, events: usize) -> Self {
        self.history_limit = events;
        self
    }

    /// Send a BOOKMARK on every watch that allows them at this period (default: only on demand).
    #[must_use]
    pub fn bookmark_interval(mut self, period: Duration) -> Self {
        self.bookmark_interval = Some(period);
        self
    }

    /// Keep `.status` on HTTP create for this type. By default only `v1/nodes` does,
    /// like the real Node strategy; CRDs with a status subresource drop it.
    #[must_use]
    pub fn keep_status_on_create(mut self, gvr: Gvr) -> Self {
        self.keep_status_on_create.insert(gvr);
        self
    }

    /// Declares a type for discovery (`/apis/...`) before any object of it exists, e.g. to
    /// model an installed but empty CRD. Types are otherwise learnt from the first write.
    #[must_use]
    pub fn register(mut self, gvr: Gvr, kind: &str, namespaced: bool) -> Self {
        self.types.insert(
            gvr,
            TypeInfo {
                kind: kind.to_owned(),
                namespaced,
            },
        );
        self
    }

    /// Binds 127.0.0.1 on an ephemeral port and starts serving on the current runtime.
    pub async fn start(self) -> std::io::Result<FakeKube> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            store: Store::new(self.history_limit, self.keep_status_on_create, self.types),
            faults: faults::Faults::default(),
            traffic: traffic::Recorder::default(),
            signals: watch_channel::channel(Signals::default()).0,
            open_watches: watch_channel::channel(0).0,
            bookmark_interval: self.bookmark_interval,
        });
        let (shutdown, shutdown_rx) = watch_channel::channel(false);
        let task = tokio::spawn(server::serve(listener, shared.clone(), shutdown_rx));
        Ok(FakeKube {
            shared,
            addr,
            shutdown,
            task: Some(task),
        })
    }
}

/// A running fake API server; stops when dropped or on [`FakeKube::shutdown`].
#[derive(Debug)]
pub struct FakeKube {
    shared: Arc<Shared>,
    addr: SocketAddr,
    shutdown: watch_channel::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl Drop for FakeKube {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl FakeKube {
    /// Options for a server.
    pub fn builder() -> FakeKubeBuilder {
        FakeKubeBuilder::default()
    }

    /// Starts a server with default options.
    pub async fn start() -> std::io::Result<Self> {
        Self::builder().start().await
    }

    /// Stops accepting and closes every connection (open watches end).
    pub async fn shutdown(mut self) {
        self.shutdown.send_replace(true);
        if let Some(task) = self.task.take() {
            // The serve task never panics; a join error only means it was aborted.
            let _ = task.await;
        }
    }

    /// Listening address (always 127.0.0.1).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kube `Config` for this server: plain HTTP, no auth, namespace `default`.
    pub fn config(&self) -> kube::Config {
        let uri: http::Uri = self.url().parse().unwrap_or_default();
        kube::Config::new(uri)
    }

    /// A kube client as production builds it (the default retry layer included).
    pub fn client(&self) -> kube::Client {
        Self::client_from(self.config())
    }

    /// A kube client without the retry layer, so 503/504 faults reach the caller at once.
    pub fn client_without_retry(&self) -> kube::Client {
        let mut config = self.config();
        config.default_retry = false;
        Self::client_from(config)
    }

    /// Like [`FakeKube::client`], but reports a client setup failure instead of panicking.
    pub fn try_client(&self) -> kube::Result<kube::Client> {
        kube::Client::try_from(self.config())
    }

    fn client_from(config: kube::Config) -> kube::Client {
        // Only TLS or auth setup can fail, and this config uses neither.
        kube::Client::try_from(config).unwrap_or_else(|e| panic!("kube client for fake-kube: {e}"))
    }

    /// A kubeconfig with one context `fake-kube` pointing at this server.
    pub fn kubeconfig(&self) -> kube::config::Kubeconfig {
        self.kubeconfig_at(&self.url())
    }

    /// Like [`FakeKube::kubeconfig`], for clients that reach the server at `server` (a URL
    /// of a listener added with [`FakeKube::serve_also`]).
    pub fn kubeconfig_at(&self, server: &str) -> kube::config::Kubeconfig {
        use kube::config::{
            AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
        };
        let name = "fake-kube".to_owned();
        Kubeconfig {
            clusters: vec![NamedCluster {
                name: name.clone(),
                cluster: Some(Cluster {
                    server: Some(server.to_owned()),
                    ..Cluster::default()
                }),
                ..NamedCluster::default()
            }],
            auth_infos: vec![NamedAuthInfo {
                name: name.clone(),
                auth_info: Some(AuthInfo::default()),
                ..NamedAuthInfo::default()
            }],
            contexts: vec![NamedContext {
                name: name.clone(),
                context: Some(Context {
                    cluster: name.clone(),
                    user: Some(name.clone()),
                    namespace: Some("default".to_owned()),
                    ..Context::default()
                }),
                ..NamedContext::default()
            }],
            current_context: Some(name),
            kind: Some("Config".to_owned()),
            api_version: Some("v1".to_owned()),
            ..Kubeconfig::default()
        }
    }

    /// Serves this API on `listener` too, until the server stops: for clients that cannot
    /// reach 127.0.0.1, e.g. processes in a network namespace when the listening socket was
    /// created inside that namespace. Returns the listener's address.
    pub fn serve_also(&self, listener: std::net::TcpListener) -> std::io::Result<SocketAddr> {
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let listener = TcpListener::from_std(listener)?;
        tokio::spawn(server::serve(
            listener,
            self.shared.clone(),
            self.shutdown.subscribe(),
        ));
        Ok(addr)
    }

    /// Writes [`FakeKube::kubeconfig_at`] `server` as YAML to `path`.
    pub fn write_kubeconfig_at(&self, path: &Path, server: &str) -> std::io::Result<()> {
        let yaml =
            serde_saphyr::to_string(&self.kubeconfig_at(server)).map_err(std::io::Error::other)?;
        std::fs::write(path, yaml)
    }

    /// Writes [`FakeKube::kubeconfig`] as YAML to `path` (for `--kubeconfig` CLI tests).
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        let yaml = serde_saphyr::to_string(&self.kubeconfig()).map_err(std::io::Error::other)?;
        std::fs::write(path, yaml)
    }

    // ---- direct store access (no HTTP, not counted, never faulted) ----

    /// Creates or wholly replaces an object (status included, no preconditions).
    /// The namespace comes from `metadata.namespace`; server fields are filled in.
    pub fn insert(&self, gvr: &Gvr, object: Value) -> Result<Value, ApiError> {
        self.shared.store.upsert(gvr, object)
    }

    /// [`FakeKube::insert`] for a typed kube resource, e.g. a `k8s_openapi` `Node`.
    pub fn insert_resource<K>(&self, object: &K) -> Result<Value, ApiError>
    where
        K: kube::Resource<DynamicType = ()> + serde::Serialize,
    {
        let mut value =
            serde_json::to_value(object).map_err(|e| ApiError::bad_request(e.to_string()))?;
        value["apiVersion"] = K::api_version(&()).into();
        value["kind"] = K::kind(&()).into();
        self.insert(&Gvr::of::<K>(), value)
    }

    /// One object; `namespace` is `None` for cluster-scoped types.
    pub fn get(&self, gvr: &Gvr, namespace: Option<&str>, name: &str) -> Option<Value> {
        self.shared.store.get(gvr, &key(namespace, name))
    }

    /// All objects of a type (in one namespace if given), sorted by namespace and name.
    pub fn list(&self, gvr: &Gvr, namespace: Option<&str>) -> Vec<Value> {
        self.shared
            .store
            .snapshot(gvr, namespace, &Selectors::default())
            .0
    }

    /// Changes an object in place (status included); no-op changes bump nothing.
    pub fn update(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
        change: impl FnOnce(&mut Value),
    ) -> Result<Value, ApiError> {
        self.shared
            .store
            .update_with(gvr, &key(namespace, name), Scope::Whole, |old| {
                let mut new = old.clone();
                change(&mut new);
                Ok(new)
            })
    }

    /// Deletes like an API DELETE: finalizers defer it, dependents are garbage-collected.
    pub fn delete(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.shared
            .store
            .delete(gvr, &key(namespace, name), &DeleteOpts::default())
    }

    /// The current (latest) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store.current_rv()
    }

    /// Store events from now on, across all types.
    pub fn subscribe(&self) -> Subscription {
        Subscription {
            shared: self.shared.clone(),
            rx: self.shared.store.subscribe_rv(),
            cursor: self.shared.store.current_rv(),
            pending: VecDeque::new(),
        }
    }

    /// Waits until `ready(self)` holds, re-checking on every store change, at most `timeout`.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        mut ready: impl FnMut(&Self) -> bool,
    ) -> Result<(), WaitTimeout> {
        let mut rx = self.shared.store.subscribe_rv();
        let wait = async {
            loop {
                rx.borrow_and_update();
                if ready(self) {
                    return;
                }
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(timeout, wait)
            .await
            .map_err(|_| WaitTimeout(timeout))
    }

    /// Waits until the object satisfies `ready` (it gets `None` while absent); returns it.
    pub async fn wait_for_object(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
        timeout: Duration,
        mut ready: impl FnMut(Option<&Value>) -> bool,
    ) -> Result<Option<Value>, WaitTimeout> {
        let mut found = None;
        self.wait_for(timeout, |fake| {
            found = fake.get(gvr, namespace, name);
            ready(found.as_ref())
        })
        .await?;
        Ok(found)
    }

    // ---- watches ----

    /// Number of watch responses currently streaming.
    pub fn open_watches(&self) -> usize {
        *self.shared.open_watches.borrow()
    }

    /// Waits until exactly `count` watches are open (e.g. a watcher has connected, or a
    /// dropped watch is really gone server-side).
    pub async fn wait_for_open_watches(
        &self,
        count: usize,
        timeout: Duration,
    ) -> Result<(), WaitTimeout> {
        let mut rx = self.shared.open_watches.subscribe();
        match tokio::time::timeout(timeout, rx.wait_for(|n| *n == count)).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(WaitTimeout(timeout)),
        }
    }

    /// Sends a BOOKMARK at the current resourceVersion on every watch that allows them.
    pub fn send_bookmarks(&self) {
        self.shared.signals.send_modify(|s| s.bookmark += 1);
    }

    /// Ends every open watch response (cleanly, like a server-side watch timeout).
    pub fn drop_watches(&self) {
        self.shared.signals.send_modify(|s| s.drop += 1);
    }

    /// Sends an ERROR event with a 410 Gone Status on every open watch, then ends it.
    pub fn expire_watches(&self) {
        self.shared.signals.send_modify(|s| s.expire += 1);
    }

    /// Forgets the watch history: watches and exact lists from an older resourceVersion get 410.
    pub fn compact(&self) {
        self.shared.store.compact();
    }

    // ---- faults and counters ----

    /// Adds a fault rule; rules are tried in insertion order.
    pub fn inject(&self, fault: Fault) {
        self.shared.faults.inject(fault);
    }

    /// Removes all fault rules.
    pub fn clear_faults(&self) {
        self.shared.faults.clear();
    }

    /// Requests still to be hit by fault rules.
    pub fn pending_faults(&self) -> usize {
        self.shared.faults.pending()
    }

    /// While on, every request answers 503 ServiceUnavailable; turning it on also drops watches.
    pub fn set_outage(&self, on: bool) {
        self.shared.faults.set_outage(on);
        if on {
            self.drop_watches();
        }
    }

    /// Requests received for (verb, resource), faulted ones included. `resource` is the
    /// plural, with `/status` for the status subresource.
    pub fn requests(&self, verb: Verb, resource: &str) -> u64 {
        self.shared
            .faults
            .counts()
            .get(&(verb, resource.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// All request counts.
    pub fn request_counts(&self) -> BTreeMap<(Verb, String), u64> {
        self.shared.faults.counts()
    }

    /// All request counts by (verb, API group, resource); the group is `""` for the core
    /// group. Tells `events` of `events.k8s.io` from core/v1 `events` (RBAC checks).
    pub fn request_counts_by_group(&self) -> BTreeMap<(Verb, String, String), u64> {
        self.shared.faults.counts_by_group()
    }

    /// Write requests (create, update, patch, delete) of any resource.
    pub fn writes(&self) -> u64 {
        self.shared
            .faults
            .counts()
            .iter()
            .filter(|((v, _), _)| v.is_write())
            .map(|(_, n)| n)
            .sum()
    }

    /// Write requests to one resource (`/status` counted separately).
    pub fn writes_to(&self, resource: &str) -> u64 {
        self.shared
            .faults
            .counts()
            .iter()
            .filter(|((v, r), _)| v.is_write() && r == resource)
            .map(|(_, n)| n)
            .sum()
    }

    /// Zeroes all request counters, the traffic totals and the request log.
    pub fn reset_counters(&self) {
        self.shared.faults.reset_counts();
        self.shared.traffic.reset();
    }

    /// Requests, bytes and objects per (verb, resource) since the start or the last
    /// [`FakeKube::reset_counters`]. `resource` is the plural, with `/status` for the status
    /// subresource; watch bytes and objects are counted as the stream sends them.
    pub fn traffic(&self) -> BTreeMap<(Verb, String), Traffic> {
        self.shared.traffic.totals()
    }

    /// [`FakeKube::traffic`] summed over every verb and resource.
    pub fn traffic_total(&self) -> Traffic {
        self.shared.traffic.total()
    }

    /// The last [`REQUEST_LOG_CAP`] requests, oldest first: verb, resource, namespace,
    /// name, selectors and paging parameters, to check what a client asks for.
    pub fn request_log(&self) -> Vec<RequestRecord> {
        self.shared.traffic.log()
    }

    /// (verb, resource) pairs a real API server would have authorized for the requests
    /// so far: every request's own verb, plus `create` for a server-side apply that created
    /// its object (Kubernetes checks `create` as well as `patch` then, so RBAC needs both).
    pub fn authorized_verbs(&self) -> std::collections::BTreeSet<(Verb, String)> {
        self.shared.traffic.authorized()
    }
}

fn key(namespace: Option<&str>, name: &str) -> (String, String) {
    (namespace.unwrap_or("").to_owned(), name.to_owned())
}

/// Store events in resourceVersion order, from [`FakeKube::subscribe`].
#[derive(Debug)]
pub struct Subscription {
    shared: Arc<Shared>,
    rx: watch_channel::Receiver<u64>,
    cursor: u64,
    pending: VecDeque<Arc<StoreEvent>>,
}

impl Subscription {
    /// The next event; waits for one (wrap in a timeout). Errs with 410 if the history
    /// dropped events this subscription had not read yet.
    pub async fn next(&mut self) -> Result<Arc<StoreEvent>, ApiError> {
        // Each pass reads new history or waits for the store to change.
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(event);
            }
            self.rx.borrow_and_update();
            let (events, rv) = self.shared.store.events_after(None, self.cursor)?;
            self.cursor = rv;
            self.pending.extend(events);
            if self.pending.is_empty() && self.rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}
