//! Where reconciler actions go: a trait shaped like the API calls, and an in-memory fake
//! with fault injection for tests.

use std::collections::{BTreeMap, VecDeque};

use super::cidr::NodeUid;
use super::record::{ObservedRecord, RecordSpec};
use super::status::Condition;

/// Result of one API call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Applied.
    Ok,
    /// Not applied: already exists (create) or `resourceVersion` changed (patch).
    Conflict,
    /// Not applied: the object does not exist.
    NotFound,
    /// Unknown outcome: the request may or may not have been applied.
    Timeout,
    /// Server error (5xx); treated as an unknown outcome.
    ServerError(String),
}

/// The `NodePodCIDR` store (cluster-scoped, name = node name). No delete: the allocator
/// never deletes records; Kubernetes GC does via the owner reference.
pub trait NodePodCidrStore {
    /// Creates the record with this spec; `Conflict` if it already exists.
    fn create(&mut self, name: &str, spec: &RecordSpec) -> WriteOutcome;
    /// Replaces the spec only if the record is still at `resource_version`.
    fn patch_spec_if_version(
        &mut self,
        name: &str,
        resource_version: &str,
        spec: &RecordSpec,
    ) -> WriteOutcome;
    /// Writes the `Allocated` condition (status subresource).
    fn update_status(&mut self, name: &str, condition: &Condition) -> WriteOutcome;
}

/// A fault applied to the next write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answer 409 without applying.
    Conflict,
    /// Apply, then answer with a timeout.
    TimeoutApplied,
    /// Do not apply, answer with a timeout.
    TimeoutNotApplied,
    /// Answer 404 without applying.
    NotFound,
    /// Answer 500 without applying.
    ServerError,
}

#[derive(Debug, Clone)]
struct Stored {
    spec: RecordSpec,
    condition: Option<Condition>,
    rv: u64,
}

/// In-memory store with resourceVersion semantics and a queue of injected faults.
#[derive(Debug, Clone, Default)]
pub struct FakeStore {
    records: BTreeMap<String, Stored>,
    next_rv: u64,
    faults: VecDeque<Fault>,
    writes: usize,
}

impl FakeStore {
    /// Empty store.
    pub fn new() -> Self {
        FakeStore::default()
    }

    /// Queues a fault for a future write (FIFO).
    pub fn inject(&mut self, f: Fault) {
        self.faults.push_back(f);
    }

    /// Drops faults not consumed yet.
    pub fn clear_faults(&mut self) {
        self.faults.clear();
    }

    /// Faults not consumed yet.
    pub fn pending_faults(&self) -> usize {
        self.faults.len()
    }

    /// Number of write calls received (including failed ones).
    pub fn writes(&self) -> usize {
        self.writes
    }

    fn bump(&mut self) -> u64 {
        self.next_rv += 1;
        self.next_rv
    }

    /// Snapshot of every record, as a LIST would return it.
    pub fn records(&self) -> Vec<ObservedRecord> {
        self.records.keys().filter_map(|n| self.record(n)).collect()
    }

    /// One record.
    pub fn record(&self, name: &str) -> Option<ObservedRecord> {
        self.records.get(name).map(|s| ObservedRecord {
            name: name.to_string(),
            owner_uid: s.spec.owner_uid.clone(),
            pod_cidrs: s.spec.pod_cidrs.clone(),
            resource_version: s.rv.to_string(),
            allocated: s.condition.clone(),
        })
    }

    /// Writes a record behind the allocator's back (another writer, a previous leader, a user).
    pub fn put_external(&mut self, name: &str, owner: &str, pod_cidrs: &[&str]) {
        let rv = self.bump();
        let spec = RecordSpec {
            owner_uid: NodeUid::from(owner),
            pod_cidrs: pod_cidrs.iter().map(|s| s.to_string()).collect(),
        };
        let condition = self.records.get(name).and_then(|s| s.condition.clone());
        self.records.insert(
            name.to_string(),
            Stored {
                spec,
                condition,
                rv,
            },
        );
    }

    /// Deletes a record (what Kubernetes GC does once the owner Node is gone).
    pub fn remove(&mut self, name: &str) -> bool {
        self.records.remove(name).is_some()
    }

    /// Runs `apply` under the next fault, if any.
    fn faulty(&mut self, apply: impl FnOnce(&mut Self) -> WriteOutcome) -> WriteOutcome {
        self.writes += 1;
        match self.faults.pop_front() {
            None => apply(self),
            Some(Fault::Conflict) => WriteOutcome::Conflict,
            Some(Fault::NotFound) => WriteOutcome::NotFound,
            Some(Fault::ServerError) => WriteOutcome::ServerError("injected 500".into()),
            Some(Fault::TimeoutNotApplied) => WriteOutcome::Timeout,
            Some(Fault::TimeoutApplied) => {
                apply(self);
                WriteOutcome::Timeout
            }
        }
    }
}

impl NodePodCidrStore for FakeStore {
    fn create(&mut self, name: &str, spec: &RecordSpec) -> WriteOutcome {
        self.faulty(|s| {
            if s.records.contains_key(name) {
                return WriteOutcome::Conflict;
            }
            let rv = s.bump();
            s.records.insert(
                name.to_string(),
                Stored {
                    spec: spec.clone(),
                    condition: None,
                    rv,
                },
            );
            WriteOutcome::Ok
        })
    }

    fn patch_spec_if_version(
        &mut self,
        name: &str,
        resource_version: &str,
        spec: &RecordSpec,
    ) -> WriteOutcome {
        self.faulty(|s| {
            let Some(cur) = s.records.get(name) else {
                return WriteOutcome::NotFound;
            };
            if cur.rv.to_string() != resource_version {
                return WriteOutcome::Conflict;
            }
            let rv = s.bump();
            if let Some(cur) = s.records.get_mut(name) {
                cur.spec = spec.clone();
                cur.rv = rv;
            }
            WriteOutcome::Ok
        })
    }

    fn update_status(&mut self, name: &str, condition: &Condition) -> WriteOutcome {
        self.faulty(|s| {
            let rv = s.bump();
            let Some(cur) = s.records.get_mut(name) else {
                return WriteOutcome::NotFound;
            };
            cur.condition = Some(condition.clone());
            cur.rv = rv;
            WriteOutcome::Ok
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(uid: &str, cidrs: &[&str]) -> RecordSpec {
        RecordSpec {
            owner_uid: NodeUid::from(uid),
            pod_cidrs: cidrs.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn cas_and_faults() {
        let mut s = FakeStore::new();
        assert_eq!(s.create("n", &spec("u", &[])), WriteOutcome::Ok);
        assert_eq!(s.create("n", &spec("u", &[])), WriteOutcome::Conflict);
        let rv = s.record("n").unwrap().resource_version;
        assert_eq!(
            s.patch_spec_if_version("n", "999", &spec("u", &["10.0.0.0/24"])),
            WriteOutcome::Conflict
        );
        s.inject(Fault::TimeoutNotApplied);
        assert_eq!(
            s.patch_spec_if_version("n", &rv, &spec("u", &["10.0.0.0/24"])),
            WriteOutcome::Timeout
        );
        assert!(s.record("n").unwrap().pod_cidrs.is_empty());
        s.inject(Fault::TimeoutApplied);
        assert_eq!(
            s.patch_spec_if_version("n", &rv, &spec("u", &["10.0.0.0/24"])),
            WriteOutcome::Timeout
        );
        assert_eq!(s.record("n").unwrap().pod_cidrs, vec!["10.0.0.0/24"]);
        assert_eq!(
            s.update_status(
                "x",
                &Condition::new("A", super::super::ConditionStatus::True, "R", "")
            ),
            WriteOutcome::NotFound
        );
        assert_eq!(s.writes(), 6);
    }
}
