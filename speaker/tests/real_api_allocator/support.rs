//! What the tests share: records as compared, waits on the allocator, its calls in the
//! audit log, and objects as a person writes them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ipnet::Ipv4Net;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::common::Proc;
use crate::common::real_api::{
    Call, ControlPlane, SYSTEM_NS, admin_get, calls_by, list_cr, metric_sum, wait_for,
};

pub const WAIT: Duration = Duration::from_secs(40);
/// NodePodCIDRs as the audit log names them.
pub const NPC: &str = "nodepodcidrs.podcidr.io";
/// ... and as kubectl gets them: the version named, whatever discovery prefers.
pub const NPC_V1: &str = "nodepodcidrs.v1alpha1.podcidr.io";
pub const POOLS_V1: &str = "podcidrpools.v1alpha1.podcidr.io";
pub const ALLOCATOR_USER: &str = "system:serviceaccount:podcidr-system:podcidr-bgp-allocator";

/// One NodePodCIDR as the tests compare it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub cidrs: Vec<String>,
    pub resource_version: String,
    pub owner_uid: String,
    pub allocated: String,
    pub allocated_by: String,
}

pub fn record(v: &Value) -> Record {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    Record {
        cidrs: v["spec"]["podCIDRs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(s)
            .collect(),
        resource_version: s(&v["metadata"]["resourceVersion"]),
        owner_uid: s(&v["metadata"]["ownerReferences"][0]["uid"]),
        allocated: v["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Allocated")
            .map(|c| format!("{}/{}", s(&c["status"]), s(&c["reason"])))
            .unwrap_or_default(),
        allocated_by: s(&v["metadata"]["annotations"]["podcidr.io/allocated-by"]),
    }
}

pub fn records(cp: &ControlPlane) -> BTreeMap<String, Record> {
    list_cr(cp, "nodepodcidrs", "v1alpha1")
        .iter()
        .map(|v| {
            (
                v["metadata"]["name"].as_str().unwrap().to_owned(),
                record(v),
            )
        })
        .collect()
}

/// Waits until every node in `nodes` has a record with `Allocated=True`; the records.
pub fn wait_allocated(
    cp: &ControlPlane,
    nodes: &[&str],
    allocator: &mut Proc,
) -> BTreeMap<String, Record> {
    wait_for(WAIT, &format!("{nodes:?} allocated"), || {
        assert_running(allocator);
        let all = records(cp);
        nodes
            .iter()
            .all(|n| all.get(*n).is_some_and(|r| r.allocated == "True/Allocated"))
            .then_some(all)
    })
}

/// Fails with its log if the process has exited.
pub fn assert_running(p: &mut Proc) {
    if let Ok(Some(status)) = p.child.try_wait() {
        panic!("the allocator exited ({status}):\n{}", p.log());
    }
}

/// Every CIDR held by exactly one record, each inside `pool`.
pub fn assert_disjoint_in(all: &BTreeMap<String, Record>, pool: &str) {
    let pool: Ipv4Net = pool.parse().unwrap();
    let mut seen: Vec<(Ipv4Net, &str)> = Vec::new();
    for (name, r) in all {
        for c in &r.cidrs {
            let net: Ipv4Net = c.parse().unwrap_or_else(|e| panic!("{name}: {c}: {e}"));
            assert!(pool.contains(&net), "{name}: {c} outside {pool}");
            if let Some((_, other)) = seen
                .iter()
                .find(|(n, _)| n.contains(&net) || net.contains(n))
            {
                panic!("{c} of {name} overlaps a CIDR of {other}: {all:#?}");
            }
            seen.push((net, name));
        }
    }
}

/// SIGTERM, then a bounded wait for a clean exit (the Lease is released).
pub fn stop(mut p: Proc) -> String {
    p.signal(libc::SIGTERM);
    let status = p.wait_exit(Duration::from_secs(20));
    let log = p.log();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{log}");
    log
}

/// The allocator's own /metrics once it leads and has run at least `passes` passes.
pub fn after_passes(admin: &str, passes: f64, p: &mut Proc) -> String {
    wait_for(WAIT, &format!("{passes} passes as leader"), || {
        assert_running(p);
        let m = admin_get(admin, "/metrics")?;
        (metric_sum(&m, "podcidr_allocator_leader", &[]) == 1.0
            && metric_sum(&m, "podcidr_allocator_passes_total", &[]) >= passes)
            .then_some(m)
    })
}

/// The allocator's calls since audit event `since`, once its Lease release (on SIGTERM) is
/// in the log, so every earlier request of that process is too.
pub fn calls_until_release(cp: &ControlPlane, since: usize) -> Vec<Call> {
    wait_for(WAIT, "the Lease release in the audit log", || {
        let calls = calls_by(cp, ALLOCATOR_USER, since);
        calls
            .iter()
            .any(|c| c.verb == "update" && c.resource == "leases.coordination.k8s.io")
            .then_some(calls)
    });
    calls_by(cp, ALLOCATOR_USER, since)
}

pub fn writes(calls: &[Call]) -> Vec<&Call> {
    calls.iter().filter(|c| c.is_write()).collect()
}

/// The write verbs of `resource` in the API server's own request counter.
pub fn apiserver_writes(cp: &ControlPlane, resource: &str) -> f64 {
    let m = cp.metrics();
    [
        "POST",
        "PUT",
        "PATCH",
        "APPLY",
        "DELETE",
        "DELETECOLLECTION",
    ]
    .iter()
    .map(|verb| {
        metric_sum(
            &m,
            "apiserver_request_total",
            &[("resource", resource), ("verb", verb)],
        )
    })
    .sum()
}

/// `(apiGroups, resources, verbs)` of a Role or ClusterRole as the API server holds it.
pub fn rules(
    cp: &ControlPlane,
    kind: &str,
    name: &str,
    ns: Option<&str>,
) -> Vec<(Vec<String>, Vec<String>, Vec<String>)> {
    let mut args = vec!["get", kind, name, "-o", "json"];
    if let Some(ns) = ns {
        args.extend(["-n", ns]);
    }
    let role: Value = serde_json::from_str(&cp.kubectl(&args)).unwrap();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    };
    role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                strings(&r["apiGroups"]),
                strings(&r["resources"]),
                strings(&r["verbs"]),
            )
        })
        .collect()
}

/// A pool object as a person writes it.
pub fn pool_yaml(name: &str, cidrs: &[&str], mask: u8, selector: Option<(&str, &str)>) -> String {
    let selector = selector.map_or(String::new(), |(k, v)| {
        format!("  nodeSelector:\n    matchLabels: {{{k}: {v}}}\n")
    });
    format!(
        "apiVersion: podcidr.io/v1alpha1\nkind: PodCIDRPool\nmetadata:\n  name: {name}\nspec:\n  \
         ipv4:\n    cidrs: [{}]\n    maskSize: {mask}\n{selector}",
        cidrs.join(", ")
    )
}

/// Server-side apply as a person (field manager `manager`), as the admin.
pub fn apply_as(
    cp: &ControlPlane,
    manager: &str,
    yaml: &str,
    force: bool,
) -> Result<String, String> {
    let fm = format!("--field-manager={manager}");
    let mut args = vec!["apply", "--server-side", &fm, "-f", "-"];
    if force {
        args.push("--force-conflicts");
    }
    cp.kubectl_with_input(cp.admin(), &args, Some(yaml))
}

pub fn get_json(cp: &ControlPlane, resource: &str, name: &str) -> Value {
    serde_json::from_str(&cp.kubectl(&[
        "get",
        resource,
        name,
        "-o",
        "json",
        "--show-managed-fields",
    ]))
    .unwrap()
}

/// The managers (and their operations) whose managed fields include `path`
/// (e.g. `["f:spec", "f:podCIDRs"]`).
pub fn owners(obj: &Value, path: &[&str]) -> BTreeSet<String> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| {
            path.iter()
                .try_fold(&m["fieldsV1"], |v, k| v.get(*k))
                .is_some()
        })
        .map(|m| {
            format!(
                "{}:{}",
                m["manager"].as_str().unwrap(),
                m["operation"].as_str().unwrap()
            )
        })
        .collect()
}

/// The top-level field sets (`f:spec`, `f:status`, `f:metadata`) `manager` owns.
pub fn owned_roots(obj: &Value, manager: &str) -> BTreeSet<String> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["manager"] == manager)
        .flat_map(|m| m["fieldsV1"].as_object().unwrap().keys().cloned())
        .collect()
}

pub fn npc_yaml(name: &str, metadata: &str, spec: &str) -> String {
    format!(
        "apiVersion: podcidr.io/v1alpha1\nkind: NodePodCIDR\nmetadata:\n  name: {name}\n{metadata}spec: {spec}\n"
    )
}

pub fn lease(cp: &ControlPlane) -> Option<Value> {
    let out = cp
        .kubectl_as(
            cp.admin(),
            &[
                "get",
                "lease",
                "-n",
                SYSTEM_NS,
                "podcidr-bgp-allocator",
                "-o",
                "json",
            ],
        )
        .ok()?;
    Some(serde_json::from_str(&out).unwrap())
}

pub fn micro_time(v: &Value) -> Timestamp {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a MicroTime: {v}"))
}
