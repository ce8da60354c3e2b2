//! `podcidr-bgp allocator` against the real kube-apiserver (the newest the suite builds) and
//! etcd, as its shipped
//! ServiceAccount (`podcidr-system/podcidr-bgp-allocator`): what the API server decides about
//! its writes (RBAC, CAS, field ownership, CRD versions, the Lease), read back from the
//! objects and from the API server's audit log.
//!
//! No kubelet or controller-manager runs: Nodes are plain objects, nothing is garbage
//! collected. Its events.k8s.io/v1 Events about cluster-scoped objects are stored in
//! `default`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common;
#[path = "../real_api_allocator/fields.rs"]
mod fields;
#[path = "../real_api_allocator/support.rs"]
mod support;

use common::real_api::{
    ALLOCATOR_SA, AllocatorRun, Call, SYSTEM_NS, admin_get, allocator_identity, calls_by,
    installed_control_plane, metric_sum, request_as, wait_for,
};
use common::{Proc, TempDir};
use support::*;

#[test]
fn allocator_restores_every_allocation_before_allocating_and_a_full_restart_writes_nothing() {
    let cp = integration_tests::needs!(installed_control_plane());
    let id = allocator_identity(&cp);
    let dir = TempDir::new("ra-restore");
    let run = AllocatorRun {
        pod: "allocator-0",
        pool: Some("10.20.0.0/16"),
        extra: &["--resync", "1"],
    };
    let nodes = ["node-a", "node-b", "node-c", "node-d"];
    let mut uids = BTreeMap::new();
    for (i, n) in nodes.iter().enumerate() {
        uids.insert(*n, cp.create_node(n, &format!("198.18.0.{}", 10 + i), &[]));
    }

    let (mut first, _) = run.spawn(&dir, &id);
    let allocated = wait_allocated(&cp, &nodes, &mut first);
    assert_eq!(allocated.len(), nodes.len(), "{allocated:#?}");
    assert_disjoint_in(&allocated, "10.20.0.0/16");
    for (n, r) in &allocated {
        assert_eq!(r.cidrs.len(), 1, "{n}: {r:?}");
        assert!(r.cidrs[0].ends_with("/24"), "{n}: {r:?}");
        assert_eq!(r.owner_uid, uids[n.as_str()], "{n} is owned by its Node");
        assert!(r.allocated_by.starts_with("allocator-0"), "{n}: {r:?}");
    }
    stop(first);

    // A restart of a fully allocated cluster: it leads, passes, and writes only its Lease.
    let mark = cp.audit_events().len();
    let counted = apiserver_writes(&cp, "nodepodcidrs");
    let (mut second, admin) = run.spawn(&dir, &id);
    let m = after_passes(&admin, 3.0, &mut second);
    assert_eq!(
        metric_sum(&m, "podcidr_allocator_writes_total", &[]),
        0.0,
        "the allocator counts no writes:\n{m}"
    );
    assert_eq!(
        metric_sum(
            &m,
            "podcidr_allocator_pool_allocated",
            &[("pool", "default")]
        ),
        nodes.len() as f64,
        "every record restored:\n{m}"
    );
    stop(second);
    let calls = calls_until_release(&cp, mark);
    let written: BTreeSet<&str> = writes(&calls).iter().map(|c| c.resource.as_str()).collect();
    assert_eq!(
        written,
        BTreeSet::from(["leases.coordination.k8s.io"]),
        "the API server saw writes to the Lease only: {calls:#?}"
    );
    assert_eq!(
        apiserver_writes(&cp, "nodepodcidrs"),
        counted,
        "apiserver_request_total counts no write to nodepodcidrs"
    );
    assert_eq!(records(&cp), allocated, "no record changed");

    // A Node added while no allocator runs gets a fresh block; nothing else is touched.
    let mark = cp.audit_events().len();
    cp.create_node("node-e", "198.18.0.20", &[]);
    let (mut third, _) = run.spawn(&dir, &id);
    let after = wait_allocated(&cp, &["node-e"], &mut third);
    stop(third);
    assert_disjoint_in(&after, "10.20.0.0/16");
    for (n, r) in &allocated {
        assert_eq!(&after[n], r, "{n}'s record is untouched");
    }
    let calls = calls_until_release(&cp, mark);
    let npc_writes: Vec<&Call> = writes(&calls)
        .into_iter()
        .filter(|c| c.resource.starts_with(NPC))
        .collect();
    assert!(
        npc_writes
            .iter()
            .all(|c| c.name == "node-e" && c.code < 300),
        "writes to records other than the new node's: {npc_writes:#?}"
    );
    assert_eq!(
        npc_writes
            .iter()
            .map(|c| (c.verb.as_str(), c.resource.as_str()))
            .collect::<Vec<_>>(),
        [("create", NPC), ("patch", "nodepodcidrs.podcidr.io/status")],
        "one create, one status write"
    );
}

#[test]
fn allocator_rbac_allows_every_call_it_makes_and_forbids_writes_outside_its_grant() {
    let cp = integration_tests::needs!(installed_control_plane());
    let id = allocator_identity(&cp);
    let dir = TempDir::new("ra-rbac");
    // Two blocks for three nodes: pool status, an exhausted node, Events; and node-a's
    // record already there, empty, for the allocator to fill (a spec patch).
    cp.apply(&pool_yaml("main", &["10.30.0.0/23"], 24, None));
    cp.apply(&npc_yaml("node-a", "", "{}"));
    // Configuration objects, whose status the leader writes (no Secret named: the MD5
    // Secret's Role is the speakers', proven in real_api_objects.rs).
    cp.apply(
        "apiVersion: bgp.podcidr.io/v1beta1\nkind: BGPSpeakerConfig\nmetadata: {name: all}\n\
         spec: {asn: 65010, source: {kind: ipam-crd}, allowedPrefixes: [10.30.0.0/16]}\n\
         ---\napiVersion: bgp.podcidr.io/v1beta1\nkind: BGPPeer\nmetadata: {name: tor}\n\
         spec: {address: 192.0.2.1, asn: 65000}\n\
         ---\napiVersion: bgp.podcidr.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {name: lb}\n\
         spec: {serviceSelector: {}, addresses: [LoadBalancerIP], allowedPrefixes: [198.51.100.0/24]}\n",
    );
    for (i, n) in ["node-a", "node-b", "node-c"].iter().enumerate() {
        cp.create_node(n, &format!("198.18.0.{}", 10 + i), &[]);
    }
    let mark = cp.audit_events().len();
    let run = AllocatorRun {
        pod: "allocator-0",
        pool: None,
        extra: &["--resync", "1"],
    };
    let (mut alloc, admin) = run.spawn(&dir, &id);
    wait_allocated(&cp, &["node-a", "node-b"], &mut alloc);
    wait_for(WAIT, "the configuration objects Accepted", || {
        [
            "bgpspeakerconfigs.bgp.podcidr.io/all",
            "bgppeers.bgp.podcidr.io/tor",
            "bgpadvertisements.bgp.podcidr.io/lb",
        ]
        .iter()
        .all(|o| {
            cp.kubectl(&["get", o, "-o", "jsonpath={.status.conditions[0].reason}"]) == "Valid"
        })
        .then_some(())
    });
    wait_for(WAIT, "node-c PoolExhausted, two Event attempts", || {
        let c = records(&cp).remove("node-c")?;
        let m = admin_get(&admin, "/metrics")?;
        (c.allocated == "False/PoolExhausted"
            && metric_sum(&m, "podcidr_allocator_writes_total", &[("kind", "event")]) >= 2.0
            && metric_sum(
                &m,
                "podcidr_allocator_writes_total",
                &[("kind", "pool_status")],
            ) >= 1.0)
            .then_some(())
    });
    let log = stop(alloc);
    let calls = calls_until_release(&cp, mark);

    // Every request passed RBAC; the only failed answers: the Lease absent at start, and the
    // earlier release's speaker Role and RoleBinding the allocator looks for (none here). The
    // Events about cluster-scoped objects in `default` are stored (1.20 refused them, 422).
    let refused: Vec<&Call> = calls.iter().filter(|c| c.decision != "allow").collect();
    assert!(refused.is_empty(), "RBAC refused: {refused:#?}\n{log}");
    assert!(!log.to_lowercase().contains("forbidden"), "{log}");
    // A 429 (API Priority and Fairness, seen on a watch in a loaded CI run) that the client
    // retried with success is no refusal, as in `Request::refused_in`.
    let retried_ok = |c: &Call| {
        c.code == 429
            && calls
                .iter()
                .any(|d| d.verb == c.verb && d.resource == c.resource && d.code < 400)
    };
    let failed: BTreeSet<(&str, &str, u16)> = calls
        .iter()
        .filter(|c| c.code >= 400 && !retried_ok(c))
        .map(|c| (c.verb.as_str(), c.resource.as_str(), c.code))
        .collect();
    assert_eq!(
        failed,
        BTreeSet::from([
            ("get", "leases.coordination.k8s.io", 404),
            ("get", "roles.rbac.authorization.k8s.io", 404),
            ("get", "rolebindings.rbac.authorization.k8s.io", 404),
        ]),
        "answers other than success: {calls:#?}"
    );

    // What it used is inside the grant, and the grant holds nothing it did not use but the
    // GET after a write of unknown outcome and the Event series patch of a repeat.
    let cluster = rules(&cp, "clusterrole", ALLOCATOR_SA, None);
    let ns = rules(&cp, "role", ALLOCATOR_SA, Some(SYSTEM_NS));
    // Events: about its own objects in "default", on Services in theirs (any namespace).
    let events = rules(&cp, "clusterrole", "podcidr-bgp-allocator-events", None);
    let covered = |rules: &[(Vec<String>, Vec<String>, Vec<String>)], c: &Call| {
        rules.iter().any(|(g, r, v)| {
            g.contains(&c.group) && r.contains(&c.rbac_resource) && v.contains(&c.verb)
        })
    };
    let mut used = BTreeSet::new();
    for c in calls.iter().filter(|c| !c.rbac_resource.is_empty()) {
        assert!(
            covered(&cluster, c)
                || (c.namespace == SYSTEM_NS && covered(&ns, c))
                || covered(&events, c),
            "not granted: {c:?}"
        );
        used.insert((c.group.clone(), c.rbac_resource.clone(), c.verb.clone()));
    }
    let granted: BTreeSet<(String, String, String)> = cluster
        .iter()
        .chain(&ns)
        .chain(&events)
        .flat_map(|(g, r, v)| {
            g.iter().flat_map(move |g| {
                r.iter()
                    .flat_map(move |r| v.iter().map(move |v| (g.clone(), r.clone(), v.clone())))
            })
        })
        .collect();
    let unused: Vec<_> = granted.difference(&used).collect();
    assert_eq!(
        unused,
        [
            &("events.k8s.io".into(), "events".into(), "patch".into()),
            &("podcidr.io".into(), "nodepodcidrs".into(), "get".into()),
        ],
        "granted but unused"
    );

    // Writes outside the grant, with the allocator's own token: Forbidden by RBAC.
    let nbs = json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "NodeBGPStatus",
                     "metadata": {"name": "node-a"}, "spec": {}});
    let lease = |ns: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "node-a", "namespace": ns}, "spec": {"holderIdentity": "x"}})
    };
    let npc: Value =
        serde_json::from_str(&cp.kubectl(&["get", NPC_V1, "node-a", "-o", "json"])).unwrap();
    let core_event = json!({"apiVersion": "v1", "kind": "Event",
                            "metadata": {"name": "e", "namespace": "default"},
                            "involvedObject": {"kind": "Node", "name": "node-a"}, "reason": "X"});
    let label = json!({"metadata": {"labels": {"x": "y"}}});
    let crd = "/apis/podcidr.io/v1alpha1";
    let leases = "/apis/coordination.k8s.io/v1/namespaces";
    let own_lease = format!("{leases}/{SYSTEM_NS}/leases/podcidr-bgp-allocator");
    let attempts: Vec<(&str, String, Option<Value>, &str)> = vec![
        (
            "POST",
            format!("{crd}/nodebgpstatuses"),
            Some(nbs),
            "create resource \"nodebgpstatuses\"",
        ),
        (
            "PATCH",
            "/api/v1/nodes/node-a".into(),
            Some(label.clone()),
            "patch resource \"nodes\"",
        ),
        (
            "POST",
            format!("{leases}/kube-system/leases"),
            Some(lease("kube-system")),
            "create resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-system\"",
        ),
        (
            "POST",
            format!("{leases}/kube-node-lease/leases"),
            Some(lease("kube-node-lease")),
            "create resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-node-lease\"",
        ),
        (
            "POST",
            format!("{leases}/podcidr-node-lease/leases"),
            Some(lease("podcidr-node-lease")),
            "create resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"podcidr-node-lease\"",
        ),
        // Its own Lease: update only (a replace with resourceVersion), no patch, no delete.
        (
            "PATCH",
            own_lease.clone(),
            Some(json!({"spec": {"holderIdentity": "x"}})),
            "patch resource \"leases\"",
        ),
        ("DELETE", own_lease, None, "delete resource \"leases\""),
        (
            "DELETE",
            format!("{crd}/nodepodcidrs/node-a"),
            None,
            "delete resource \"nodepodcidrs\"",
        ),
        (
            "PUT",
            format!("{crd}/nodepodcidrs/node-a"),
            Some(npc),
            "update resource \"nodepodcidrs\"",
        ),
        (
            "PATCH",
            format!("{crd}/podcidrpools/main"),
            Some(label),
            "patch resource \"podcidrpools\"",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/events".into(),
            Some(core_event),
            "create resource \"events\" in API group \"\"",
        ),
    ];
    let mark = cp.audit_events().len();
    for (method, path, body, what) in &attempts {
        let (code, message) = request_as(&id, method, path, body.as_ref())
            .expect_err(&format!("{method} {path} must be refused"));
        assert!(
            code == 403 && message.contains(&format!("User \"{ALLOCATOR_USER}\" cannot {what}")),
            "{method} {path}: {code} {message}"
        );
    }
    let denied = calls_by(&cp, ALLOCATOR_USER, mark);
    let writes: Vec<&Call> = denied.iter().filter(|c| c.is_write()).collect();
    assert_eq!(writes.len(), attempts.len(), "{denied:#?}");
    assert!(
        writes
            .iter()
            .all(|c| c.code == 403 && c.decision == "forbid"),
        "{writes:#?}"
    );
}

#[test]
fn two_allocators_elect_one_leader_and_the_standby_takes_over_after_the_leader_is_killed() {
    let cp = integration_tests::needs!(installed_control_plane());
    let id = allocator_identity(&cp);
    let dir = TempDir::new("ra-leader");
    const POOL: &str = "10.20.0.0/16";
    // The longer of the two --lease-duration values below.
    const LONGER: Duration = Duration::from_secs(6);
    for (i, n) in ["node-a", "node-b", "node-c"].iter().enumerate() {
        cp.create_node(n, &format!("198.18.0.{}", 10 + i), &[]);
    }
    // Started together, so both race to create the Lease. Their durations differ: whichever
    // stands by, the longer of the record's and its own counts, and the one that polls more
    // often (3 s: every second) sees the last renew early, so the bound below is tight.
    let pods = ["allocator-a", "allocator-b"];
    let extras = [
        ["--lease-duration", "6", "--resync", "1"],
        ["--lease-duration", "3", "--resync", "1"],
    ];
    let mut procs: Vec<(Proc, String)> = pods
        .iter()
        .zip(&extras)
        .map(|(pod, extra)| {
            AllocatorRun {
                pod,
                pool: Some(POOL),
                extra,
            }
            .spawn(&dir, &id)
        })
        .collect();
    // At every observation: no CIDR held by two records.
    let observe = || {
        let r = records(&cp);
        assert_disjoint_in(&r, POOL);
        r
    };
    let holder = wait_for(WAIT, "a Lease holder and three allocations", || {
        procs.iter_mut().for_each(|(p, _)| assert_running(p));
        let r = observe();
        let holder = lease(&cp)?["spec"]["holderIdentity"].as_str()?.to_owned();
        ["node-a", "node-b", "node-c"]
            .iter()
            .all(|n| r.get(*n).is_some_and(|r| r.allocated == "True/Allocated"))
            .then_some(holder)
    });
    let leader = pods
        .iter()
        .position(|p| holder.starts_with(&format!("{p}-")))
        .unwrap_or_else(|| panic!("holder {holder}"));
    let metrics: Vec<String> = procs
        .iter()
        .map(|(_, a)| admin_get(a, "/metrics").unwrap())
        .collect();
    let (lm, fm) = (&metrics[leader], &metrics[1 - leader]);
    assert_eq!(metric_sum(lm, "podcidr_allocator_leader", &[]), 1.0, "{lm}");
    assert_eq!(metric_sum(fm, "podcidr_allocator_leader", &[]), 0.0, "{fm}");
    assert_eq!(
        metric_sum(fm, "podcidr_allocator_writes_total", &[]),
        0.0,
        "the standby writes nothing:\n{fm}"
    );
    assert_eq!(
        metric_sum(
            lm,
            "podcidr_allocator_writes_total",
            &[("kind", "create"), ("result", "ok")]
        ),
        3.0,
        "{lm}"
    );
    let before = observe();
    assert!(
        before.values().all(|r| r.allocated_by == holder),
        "{before:#?}"
    );

    // SIGKILL: no release; the standby must wait out the Lease.
    let (mut dead, _) = procs.remove(leader);
    let (mut standby, standby_admin) = procs.remove(0);
    dead.signal(libc::SIGKILL);
    dead.wait_exit(Duration::from_secs(10))
        .expect("SIGKILL ends the leader");
    let killed = std::time::Instant::now();
    let last = lease(&cp).unwrap();
    assert_eq!(last["spec"]["holderIdentity"], holder.as_str(), "{last}");
    cp.create_node("node-late", "198.18.0.20", &[]);
    let after = wait_for(WAIT, "the standby leads and allocates node-late", || {
        assert_running(&mut standby);
        let r = observe();
        r.get("node-late")
            .is_some_and(|r| r.allocated == "True/Allocated")
            .then_some(r)
    });
    let took = killed.elapsed();
    let new = lease(&cp).unwrap();
    let new_holder = new["spec"]["holderIdentity"].as_str().unwrap().to_owned();
    assert!(
        new_holder.starts_with(&format!("{}-", pods[1 - leader])),
        "{new}"
    );
    assert_eq!(
        new["spec"]["leaseTransitions"].as_i64().unwrap(),
        last["spec"]["leaseTransitions"].as_i64().unwrap_or(0) + 1,
        "{last}\n{new}"
    );
    // Safety: it acquired no sooner than the longer duration after the dead leader's last
    // renew, so their write windows never overlapped (both clocks are this host's).
    let gap = micro_time(&new["spec"]["acquireTime"])
        .duration_since(micro_time(&last["spec"]["renewTime"]));
    assert!(
        gap.as_secs_f64() >= LONGER.as_secs_f64() - 0.001,
        "acquired {gap:?} after the dead leader's last renew:\n{last}\n{new}"
    );
    assert_eq!(after["node-late"].allocated_by, new_holder);
    for (n, r) in &before {
        assert_eq!(&after[n], r, "{n}'s record is untouched by the new leader");
    }
    let m = admin_get(&standby_admin, "/metrics").unwrap();
    assert_eq!(metric_sum(&m, "podcidr_allocator_leader", &[]), 1.0, "{m}");
    assert_eq!(
        metric_sum(&m, "podcidr_allocator_writes_total", &[("kind", "create")]),
        1.0,
        "{m}"
    );
    eprintln!(
        "takeover: SIGKILL to node-late allocated in {took:?}, acquired {gap:?} after the last renew"
    );
    stop(standby);
}
