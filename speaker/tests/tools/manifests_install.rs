//! What an install, an upgrade and an uninstall do, read from what `kubectl kustomize`
//! renders: the CRDs (and so every IPAM record) live apart from the workloads, the base holds
//! no placeholder pool and no secret value, and the workloads are hardened (seccomp, Events
//! only where they are written, user roles for the built-in `view`/`edit`, an allocator that
//! tolerates node trouble and can roll out on one node as on three).

use crate::common;
use integration_tests::skip::Need;

use common::TempDir;
use common::kustomize::*;
use common::rbac::{self, Ask, User};
use serde_json::Value;

/// The kinds whose objects are the state an uninstall must keep.
const STATE_KINDS: [&str; 6] = [
    "NodePodCIDR",
    "PodCIDRPool",
    "NodeBGPStatus",
    "BGPSpeakerConfig",
    "BGPPeer",
    "BGPAdvertisement",
];

const CRD_NAMES: [&str; 6] = [
    "bgpadvertisements.bgp.podcidr.io",
    "bgppeers.bgp.podcidr.io",
    "bgpspeakerconfigs.bgp.podcidr.io",
    "nodebgpstatuses.podcidr.io",
    "nodepodcidrs.podcidr.io",
    "podcidrpools.podcidr.io",
];

fn pod_spec(workload: &Value) -> &Value {
    &workload["spec"]["template"]["spec"]
}

fn workloads(docs: &[Value]) -> Vec<&Value> {
    of_kind(docs, "DaemonSet")
        .into_iter()
        .chain(of_kind(docs, "Deployment"))
        .collect()
}

fn allocator(docs: &[Value]) -> &Value {
    let d = of_kind(docs, "Deployment");
    assert_eq!(d.len(), 1, "one allocator Deployment");
    d[0]
}

/// `kubectl delete -k deploy/` deletes what deploy/ renders: no CRD (deleting one deletes
/// every object of its kind), no object of the state kinds and no Namespace (deleting one
/// deletes the user's MD5 Secret in it), in any rendering a user can apply. deploy/crds/
/// holds the five CRDs and the two namespaces.
#[test]
fn deleting_the_workloads_keeps_the_crds_and_every_ipam_record() {
    integration_tests::require!(Need::Kubectl);
    let tmp = TempDir::new("install-crds");
    for (what, docs) in all_renderings(&tmp) {
        for d in &docs {
            let kind = d["kind"].as_str().unwrap();
            assert_ne!(
                kind, "CustomResourceDefinition",
                "{what}: {} would be deleted with the workloads",
                d["metadata"]["name"]
            );
            assert!(
                !STATE_KINDS.contains(&kind) && kind != "Namespace",
                "{what}: a {kind} in the workloads would be deleted by an uninstall"
            );
        }
    }
    let state = render(&crds());
    let mut namespaces: Vec<&str> = state
        .iter()
        .filter(|d| d["kind"] == "Namespace")
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    namespaces.sort_unstable();
    assert_eq!(namespaces, ["podcidr-node-lease", "podcidr-system"]);
    let crds: Vec<&Value> = state.iter().filter(|d| d["kind"] != "Namespace").collect();
    let mut names: Vec<&str> = crds
        .iter()
        .map(|d| {
            assert_eq!(d["kind"], "CustomResourceDefinition", "{d}");
            d["metadata"]["name"].as_str().unwrap()
        })
        .collect();
    names.sort_unstable();
    assert_eq!(names, CRD_NAMES);
    let mut kinds: Vec<&str> = crds
        .iter()
        .map(|d| d["spec"]["names"]["kind"].as_str().unwrap())
        .collect();
    kinds.sort_unstable();
    let mut want = STATE_KINDS;
    want.sort_unstable();
    assert_eq!(kinds, want);
}

/// An unedited `kubectl apply -k deploy/` allocates nothing and overwrites no key: the
/// allocator is given no pool (the operator writes a PodCIDRPool), and no Secret carries a
/// value.
#[test]
fn the_base_names_no_pool_and_ships_no_secret_value() {
    integration_tests::require!(Need::Kubectl);
    let tmp = TempDir::new("install-placeholders");
    for (what, docs) in all_renderings(&tmp) {
        for s in of_kind(&docs, "Secret") {
            assert!(
                s["data"].is_null() && s["stringData"].is_null(),
                "{what}: Secret {} ships a value",
                s["metadata"]["name"]
            );
        }
        let args = &pod_spec(allocator(&docs))["containers"][0]["args"];
        for a in args.as_array().unwrap() {
            let a = a.as_str().unwrap();
            assert!(
                !a.starts_with("--cluster-pool-"),
                "{what}: the allocator is given a pool: {a}"
            );
        }
    }
}

#[test]
fn both_workloads_run_under_the_runtimes_default_seccomp_profile() {
    integration_tests::require!(Need::Kubectl);
    let tmp = TempDir::new("install-seccomp");
    for (what, docs) in all_renderings(&tmp) {
        let w = workloads(&docs);
        assert_eq!(w.len(), 2, "{what}");
        for w in w {
            assert_eq!(
                pod_spec(w)["securityContext"]["seccompProfile"]["type"],
                "RuntimeDefault",
                "{what}: {}",
                w["metadata"]["name"]
            );
            for c in pod_spec(w)["containers"].as_array().unwrap() {
                // A container-level profile would override the pod's.
                assert!(c["securityContext"]["seccompProfile"].is_null(), "{what}");
            }
        }
    }
}

/// Both Recorders write Events about cluster-scoped objects, which land in `default`
/// (`EVENT_NAMESPACE`; kube-runtime's Recorder for the speaker's Node Events too); the
/// allocator also writes Events on Services (`BGPAnnounced`, `BGPWithdrawn`) in each
/// Service's namespace. So: the speaker may create and patch Events in `default` and nowhere
/// else; the allocator in every namespace, through the one ClusterRole that grants Events,
/// `podcidr-bgp-allocator-events`, which grants nothing but events.k8s.io create and patch.
#[test]
fn speaker_events_only_in_default_allocator_events_wherever_a_service_is() {
    integration_tests::require!(Need::Kubectl);
    let tmp = TempDir::new("install-events");
    let written_to = ipam_watch::allocator::EVENT_NAMESPACE;
    for (what, docs) in all_renderings(&tmp) {
        for r in of_kind(&docs, "ClusterRole") {
            let name = r["metadata"]["name"].as_str().unwrap();
            // A rendering may prefix every name (`namePrefix`).
            let allocator_events = name.ends_with("podcidr-bgp-allocator-events");
            for rule in r["rules"].as_array().unwrap() {
                for verb in ["create", "patch", "update", "delete", "get", "list"] {
                    for group in ["events.k8s.io", ""] {
                        let ask = Ask {
                            group,
                            resource: "events",
                            verb,
                            namespace: None,
                        };
                        let allowed = allocator_events
                            && group == "events.k8s.io"
                            && matches!(verb, "create" | "patch");
                        assert_eq!(
                            rbac::rule_grants(rule, &ask),
                            allowed,
                            "{what}: ClusterRole {name}, events {group:?} {verb}"
                        );
                    }
                }
            }
            if allocator_events {
                assert_eq!(r["rules"].as_array().unwrap().len(), 1, "{what}: {r}");
            }
        }
        let system = pod_spec(allocator(&docs))["serviceAccountName"]
            .as_str()
            .unwrap()
            .to_owned();
        let ns = allocator(&docs)["metadata"]["namespace"].as_str().unwrap();
        let speaker = pod_spec(of_kind(&docs, "DaemonSet")[0])["serviceAccountName"]
            .as_str()
            .unwrap();
        for (sa, everywhere) in [(system.as_str(), true), (speaker, false)] {
            let user = User::service_account(ns, sa);
            for verb in ["create", "patch"] {
                let ask = |namespace| Ask {
                    group: "events.k8s.io",
                    resource: "events",
                    verb,
                    namespace: Some(namespace),
                };
                assert!(
                    rbac::allowed(&docs, &user, &ask(written_to)),
                    "{what}: {sa} {verb}"
                );
                for elsewhere in ["kube-system", ns, "podcidr-node-lease", "team-a"] {
                    assert_eq!(
                        rbac::allowed(&docs, &user, &ask(elsewhere)),
                        everywhere,
                        "{what}: {sa} {verb} Events in {elsewhere}"
                    );
                }
            }
        }
    }
}

/// The ClusterRoles labelled for aggregation into `view`, `edit` and `admin` grant read on
/// every kind of the shipped CRDs and write on none (issue 30 item 4: routing control is a
/// network role); `podcidr-bgp-network-admin`, aggregated nowhere, writes the objects people
/// own and leaves the controllers' records and every status to the controllers. (The real
/// API server checks the labels against its own selectors: real_api_install.rs.)
#[test]
fn aggregated_roles_read_every_kind_and_only_the_network_role_writes_what_people_own() {
    integration_tests::require!(Need::Kubectl);
    let docs = render(&deploy());
    let labelled = |label: &str| -> Vec<&Value> {
        of_kind(&docs, "ClusterRole")
            .into_iter()
            .filter(|r| r["metadata"]["labels"][label] == "true")
            .collect()
    };
    let grants = |roles: &[&Value], group: &str, resource: &str, verb: &str| {
        let ask = Ask {
            group,
            resource,
            verb,
            namespace: None,
        };
        roles.iter().any(|r| {
            r["rules"]
                .as_array()
                .unwrap()
                .iter()
                .any(|rule| rbac::rule_grants(rule, &ask))
        })
    };
    let view = labelled("rbac.authorization.k8s.io/aggregate-to-view");
    let edit = labelled("rbac.authorization.k8s.io/aggregate-to-edit");
    let admin = labelled("rbac.authorization.k8s.io/aggregate-to-admin");
    assert!(!view.is_empty() && !edit.is_empty());
    let network: Vec<&Value> = of_kind(&docs, "ClusterRole")
        .into_iter()
        .filter(|r| r["metadata"]["name"] == "podcidr-bgp-network-admin")
        .collect();
    assert_eq!(network.len(), 1, "the network role ships");
    assert!(
        network[0]["metadata"]["labels"]
            .as_object()
            .is_none_or(|l| l.keys().all(|k| !k.contains("aggregate-to"))),
        "{}",
        network[0]
    );
    let owned = [
        "podcidrpools",
        "bgpspeakerconfigs",
        "bgppeers",
        "bgpadvertisements",
    ];
    for crd in render(&crds())
        .into_iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
    {
        let group = crd["spec"]["group"].as_str().unwrap();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap();
        for verb in ["get", "list", "watch"] {
            assert!(grants(&view, group, plural, verb), "view {verb} {plural}");
        }
        for verb in ["create", "update", "patch", "delete"] {
            assert!(!grants(&view, group, plural, verb), "view {verb} {plural}");
            assert!(!grants(&edit, group, plural, verb), "edit {verb} {plural}");
            assert!(
                !grants(&admin, group, plural, verb),
                "admin {verb} {plural}"
            );
            let owned = owned.contains(&plural);
            assert_eq!(
                grants(&network, group, plural, verb),
                owned,
                "network-admin {verb} {plural}"
            );
            let status = format!("{plural}/status");
            assert!(
                !grants(&network, group, &status, verb),
                "network-admin {verb} {status}"
            );
        }
    }
}

/// The allocator stays through node trouble and runs where add-ons are confined: NoExecute
/// not-ready without a limit (every node is NotReady until it has allocated), unreachable
/// bounded so a lost replica is replaced, and `CriticalAddonsOnly`.
#[test]
fn allocator_tolerates_not_ready_and_unreachable_nodes_and_critical_addons_only() {
    integration_tests::require!(Need::Kubectl);
    let docs = render(&deploy());
    let tolerations = pod_spec(allocator(&docs))["tolerations"]
        .as_array()
        .unwrap()
        .clone();
    let find = |key: &str, effect: Option<&str>| {
        tolerations
            .iter()
            .find(|t| {
                t["key"] == key
                    && t["operator"] == "Exists"
                    && effect.is_none_or(|e| t["effect"] == e)
            })
            .unwrap_or_else(|| panic!("tolerates {key} {effect:?}: {tolerations:?}"))
    };
    assert!(find("node.kubernetes.io/not-ready", Some("NoExecute"))["tolerationSeconds"].is_null());
    let unreachable = find("node.kubernetes.io/unreachable", Some("NoExecute"));
    let secs = unreachable["tolerationSeconds"].as_u64().expect("bounded");
    assert!((1..300).contains(&secs), "{unreachable}");
    assert!(find("CriticalAddonsOnly", None)["effect"].is_null());
}

/// Pods of one Deployment on `nodes` nodes, each needing a node of its own (required
/// anti-affinity and the host port): whether a rollout from an old template to a new one
/// completes. The Deployment controller's rules (pkg/controller/deployment): `Recreate`
/// scales the old ReplicaSet to 0 and, once its pods are gone, the new one up; a rolling
/// update scales the new ReplicaSet up to `replicas + maxSurge` pods in all, and the old
/// ones down, unhealthy pods first, never below `replicas - maxUnavailable` available pods
/// (counting the new ReplicaSet's unavailable pods against the budget). A pod is available
/// once placed (the scheduler places a pending pod on a free node).
fn rollout_completes(strategy: &Value, replicas: i64, nodes: i64) -> bool {
    let pct = |v: &Value, round_up: bool| -> i64 {
        match v {
            Value::Number(n) => n.as_i64().unwrap(),
            Value::String(s) => {
                let p: i64 = s.trim_end_matches('%').parse().unwrap();
                if round_up {
                    (replicas * p + 99) / 100
                } else {
                    replicas * p / 100
                }
            }
            // Defaults: 25%, surge rounded up, unavailable down.
            _ => {
                if round_up {
                    (replicas * 25 + 99) / 100
                } else {
                    replicas * 25 / 100
                }
            }
        }
    };
    let recreate = strategy["type"] == "Recreate";
    let surge = pct(&strategy["rollingUpdate"]["maxSurge"], true);
    let unavailable = pct(&strategy["rollingUpdate"]["maxUnavailable"], false);
    // Pods: (new?, placed?). The old ReplicaSet at steady state: min(replicas, nodes) placed.
    let mut pods: Vec<(bool, bool)> = (0..replicas).map(|i| (false, i < nodes)).collect();
    let place = |pods: &mut Vec<(bool, bool)>| {
        let mut free = nodes - pods.iter().filter(|p| p.1).count() as i64;
        for p in pods.iter_mut().filter(|p| !p.1) {
            if free > 0 {
                p.1 = true;
                free -= 1;
            }
        }
    };
    for _ in 0..50 {
        let old = pods.iter().filter(|p| !p.0).count() as i64;
        let new = pods.len() as i64 - old;
        let placed_new = pods.iter().filter(|p| p.0 && p.1).count() as i64;
        if old == 0 && new == replicas && placed_new == replicas.min(nodes) {
            return true;
        }
        if recreate {
            if old > 0 {
                pods.retain(|p| p.0);
            } else {
                pods.extend((new..replicas).map(|_| (true, false)));
            }
        } else {
            let up = (replicas + surge - pods.len() as i64).min(replicas - new);
            pods.extend((0..up.max(0)).map(|_| (true, false)));
            let min_available = replicas - unavailable;
            let new_unavailable = pods.iter().filter(|p| p.0 && !p.1).count() as i64;
            let mut budget = pods.len() as i64 - min_available - new_unavailable;
            // Unhealthy old pods first, then available ones down to min_available.
            while budget > 0 {
                let Some(i) = pods.iter().position(|p| !p.0 && !p.1) else {
                    break;
                };
                pods.remove(i);
                budget -= 1;
            }
            let available = pods.iter().filter(|p| p.1).count() as i64;
            let mut down = (available - min_available).min(budget.max(0));
            while down > 0 {
                let Some(i) = pods.iter().position(|p| !p.0) else {
                    break;
                };
                pods.remove(i);
                down -= 1;
            }
        }
        place(&mut pods);
    }
    false
}

/// The model finds the deadlocks the issue names, so a pass means something: the default
/// rolling update needs a third node for two replicas, and `maxUnavailable: 1` leaves a
/// one-node cluster waiting forever.
#[test]
fn rollout_model_finds_the_rolling_update_deadlocks() {
    let default = serde_json::json!({"type": "RollingUpdate"});
    assert!(rollout_completes(&default, 2, 3));
    assert!(
        !rollout_completes(&default, 2, 2),
        "surge needs a third node"
    );
    let one_down = serde_json::json!({"type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}});
    assert!(rollout_completes(&one_down, 2, 2));
    assert!(
        !rollout_completes(&one_down, 2, 1),
        "one node: the old pod keeps the port"
    );
}

/// The shipped strategy completes on one, two and three nodes (and more).
#[test]
fn allocator_rollout_completes_on_one_two_and_three_nodes() {
    integration_tests::require!(Need::Kubectl);
    let docs = render(&deploy());
    let d = allocator(&docs);
    let replicas = d["spec"]["replicas"].as_i64().unwrap();
    let spec = pod_spec(d);
    // The constraints the model assumes: one replica per node.
    let anti =
        &spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    assert_eq!(anti[0]["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(spec["hostNetwork"], true);
    for nodes in 1..=5 {
        assert!(
            rollout_completes(&d["spec"]["strategy"], replicas, nodes),
            "{nodes} node(s): {}",
            d["spec"]["strategy"]
        );
    }
}

/// deploy/components/resource-quota: a ResourceQuota in the workloads' namespace whose
/// PriorityClass scope covers the class of each workload, and nothing else added.
#[test]
fn resource_quota_component_admits_both_critical_priority_classes() {
    integration_tests::require!(Need::Kubectl);
    let tmp = TempDir::new("install-quota");
    let base = render(&deploy());
    let docs = render(&with_component(&tmp, "resource-quota"));
    assert_eq!(docs.len(), base.len() + 1);
    let quotas = of_kind(&docs, "ResourceQuota");
    assert_eq!(quotas.len(), 1);
    let q = quotas[0];
    let exprs = q["spec"]["scopeSelector"]["matchExpressions"]
        .as_array()
        .unwrap();
    assert!(q["spec"]["hard"]["pods"].is_string(), "{q}");
    for w in workloads(&docs) {
        assert_eq!(q["metadata"]["namespace"], w["metadata"]["namespace"]);
        let class = &pod_spec(w)["priorityClassName"];
        assert!(
            exprs.iter().any(|e| e["scopeName"] == "PriorityClass"
                && e["operator"] == "In"
                && e["values"].as_array().unwrap().contains(class)),
            "{class} not covered: {q}"
        );
    }
}
