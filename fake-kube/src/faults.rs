//! Fault injection and request counters.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

/// API verb of a request, as in RBAC and audit logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH (any patch type, server-side apply included).
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
}

impl Verb {
    /// Whether the verb changes state.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Self::Create | Self::Update | Self::Patch | Self::Delete | Self::DeleteCollection
        )
    }
}

/// What an injected fault does to a matching request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultAction {
    /// Do not apply; answer this HTTP code with a `Status` body (reason from the code).
    Fail(u16),
    /// Do not apply; answer `code` with a `Retry-After: retry_after_secs` header and
    /// `details.retryAfterSeconds`, as kube-apiserver does when it sheds load (429 from API
    /// Priority and Fairness or max-in-flight; 503 when it cannot serve yet).
    FailRetryAfter {
        /// HTTP status code.
        code: u16,
        /// Seconds the client is asked to wait.
        retry_after_secs: u32,
    },
    /// Apply the request, then answer 504 Timeout: the client cannot know the outcome.
    ApplyThenTimeout,
    /// Do not apply; answer 504 Timeout.
    Timeout,
    /// Hold the request this long, then handle it normally (a slow API server or etcd).
    /// The wait happens before the request body is read; a client that gives up meanwhile
    /// still has its write applied if the server has read it, as with a real server.
    Delay(std::time::Duration),
}

/// A fault for the next `times` requests matching verb, resource and name.
///
/// `resource` is the plural as in the URL, with `/status` for the status subresource
/// (`"nodes"`, `"nodes/status"`), the same key the request counters use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// Only requests with this verb (any if `None`).
    pub verb: Option<Verb>,
    /// Only this resource (any if `None`).
    pub resource: Option<String>,
    /// Only requests for this object name (any if `None`).
    pub name: Option<String>,
    /// What to do.
    pub action: FaultAction,
    /// How many matching requests are hit.
    pub times: usize,
}

impl Fault {
    /// Fail one request of any kind with `code` (without applying it).
    pub fn fail(code: u16) -> Self {
        Self::with_action(FaultAction::Fail(code))
    }

    /// Answer one request with 429 Too Many Requests and `Retry-After: retry_after_secs`,
    /// without applying it (API Priority and Fairness rejecting a request).
    pub fn too_many_requests(retry_after_secs: u32) -> Self {
        Self::with_action(FaultAction::FailRetryAfter {
            code: 429,
            retry_after_secs,
        })
    }

    /// Answer `code` with `Retry-After: retry_after_secs`, without applying the request.
    pub fn fail_retry_after(code: u16, retry_after_secs: u32) -> Self {
        Self::with_action(FaultAction::FailRetryAfter {
            code,
            retry_after_secs,
        })
    }

    /// Apply one write but answer 504 Timeout.
    pub fn apply_then_timeout() -> Self {
        Self::with_action(FaultAction::ApplyThenTimeout)
    }

    /// Answer one request with 504 Timeout without applying it.
    pub fn timeout() -> Self {
        Self::with_action(FaultAction::Timeout)
    }

    /// Answer one request only after `delay` (then handle it normally).
    pub fn delay(delay: std::time::Duration) -> Self {
        Self::with_action(FaultAction::Delay(delay))
    }

    fn with_action(action: FaultAction) -> Self {
        Self {
            verb: None,
            resource: None,
            name: None,
            action,
            times: 1,
        }
    }

    /// Restrict to a verb.
    #[must_use]
    pub fn verb(mut self, verb: Verb) -> Self {
        self.verb = Some(verb);
        self
    }

    /// Restrict to a resource key (`"nodes"`, `"leases"`, `"nodes/status"`).
    #[must_use]
    pub fn resource(mut self, resource: &str) -> Self {
        self.resource = Some(resource.to_owned());
        self
    }

    /// Restrict to one object name.
    #[must_use]
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    /// Hit this many matching requests (default 1).
    #[must_use]
    pub fn times(mut self, times: usize) -> Self {
        self.times = times;
        self
    }

    fn matches(&self, verb: Verb, resource: &str, name: Option<&str>) -> bool {
        self.verb.is_none_or(|v| v == verb)
            && self.resource.as_deref().is_none_or(|r| r == resource)
            && self.name.as_deref().is_none_or(|n| Some(n) == name)
    }
}

/// Fault rules, outage switch and per-(verb, resource) counters.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    rules: Mutex<Vec<Fault>>,
    /// Keyed by (verb, API group, resource): two groups can have the same plural (`events`).
    counts: Mutex<BTreeMap<(Verb, String, String), u64>>,
    outage: AtomicBool,
}

impl Faults {
    pub(crate) fn inject(&self, fault: Fault) {
        if fault.times > 0 {
            self.rules
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(fault);
        }
    }

    pub(crate) fn clear(&self) {
        self.rules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    pub(crate) fn pending(&self) -> usize {
        self.rules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|f| f.times)
            .sum()
    }

    /// Counts the request (`group` is `""` for the core group).
    pub(crate) fn count(&self, verb: Verb, group: &str, resource: &str) {
        *self
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((verb, group.to_owned(), resource.to_owned()))
            .or_default() += 1;
    }

    /// Counts the request and returns the fault that applies to it, if any (first match wins).
    pub(crate) fn on_request(
        &self,
        verb: Verb,
        group: &str,
        resource: &str,
        name: Option<&str>,
    ) -> Option<FaultAction> {
        self.count(verb, group, resource);
        let mut rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        let idx = rules.iter().position(|f| f.matches(verb, resource, name))?;
        let action = rules[idx].action;
        rules[idx].times -= 1;
        if rules[idx].times == 0 {
            rules.remove(idx);
        }
        Some(action)
    }

    pub(crate) fn set_outage(&self, on: bool) {
        self.outage.store(on, Ordering::SeqCst);
    }

    pub(crate) fn outage(&self) -> bool {
        self.outage.load(Ordering::SeqCst)
    }

    /// Counts per (verb, resource), summed over API groups.
    pub(crate) fn counts(&self) -> BTreeMap<(Verb, String), u64> {
        let mut out = BTreeMap::new();
        for ((verb, _, resource), n) in self.counts_by_group() {
            *out.entry((verb, resource)).or_default() += n;
        }
        out
    }

    pub(crate) fn counts_by_group(&self) -> BTreeMap<(Verb, String, String), u64> {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn reset_counts(&self) {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}
