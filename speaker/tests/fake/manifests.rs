//! Every manifest under deploy/ parses, and RBAC grants exactly the verbs the code uses:
//! the binary runs against the fake API server, which records every (verb, resource) it
//! was asked for.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Proc, TempDir, free_port};
use fake_kube::{FakeKube, Gvr, Verb};
use serde_json::{Value, json};

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml") {
            out.push(p);
        }
    }
}

fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.split("\n---")
        .filter(|d| {
            d.lines().any(|l| {
                !l.trim().is_empty() && !l.trim_start().starts_with('#') && l.trim() != "---"
            })
        })
        .map(|d| {
            serde_saphyr::from_str::<Value>(d).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect()
}

#[test]
fn every_manifest_parses_and_names_its_kind() {
    let mut files = Vec::new();
    yaml_files(&deploy(), &mut files);
    assert!(files.len() >= 10, "{files:?}");
    // The Helm chart's templates are Go templates, not manifests (manifests_helm.rs renders
    // and checks them; its crds/ are deploy/crds/).
    for f in files.iter().filter(|f| {
        !f.starts_with(deploy().join("examples")) && !f.starts_with(deploy().join("helm"))
    }) {
        for doc in documents(f) {
            if f.ends_with("kustomization.yaml") {
                // A Kustomization lists resources, a Component its patches.
                let dir = f.parent().unwrap();
                let listed = doc["resources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .chain(
                        doc["patches"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            // Inline patches (`patch:`) name no file.
                            .map(|p| &p["path"])
                            .filter(|p| !p.is_null()),
                    )
                    .collect::<Vec<_>>();
                assert!(!listed.is_empty(), "{}: lists nothing", f.display());
                for r in listed {
                    assert!(
                        dir.join(r.as_str().unwrap()).exists(),
                        "{} lists missing {r}",
                        f.display()
                    );
                }
                continue;
            }
            assert!(
                doc["apiVersion"].is_string() && doc["kind"].is_string(),
                "{}: {doc}",
                f.display()
            );
            assert!(
                doc["metadata"]["name"].is_string(),
                "{}: {doc}",
                f.display()
            );
        }
    }
}

/// The API group of a resource the fake saw created by a server-side apply.
fn group_of(resource: &str) -> &'static str {
    match resource.split('/').next().unwrap() {
        "nodes" => "",
        "events" => "events.k8s.io",
        "leases" => "coordination.k8s.io",
        "ciliumnodes" => "cilium.io",
        "bgpspeakerconfigs" | "bgppeers" | "bgpadvertisements" => "bgp.podcidr.io",
        "services" => "",
        "endpointslices" => "discovery.k8s.io",
        "secrets" => "",
        "roles" | "rolebindings" => "rbac.authorization.k8s.io",
        _ => "podcidr.io",
    }
}

fn verb_name(v: Verb) -> &'static str {
    match v {
        Verb::Get => "get",
        Verb::List => "list",
        Verb::Watch => "watch",
        Verb::Create => "create",
        Verb::Update => "update",
        Verb::Patch => "patch",
        Verb::Delete => "delete",
        Verb::DeleteCollection => "deletecollection",
    }
}

type Grants = BTreeSet<(String, String, String)>;

/// (apiGroup, resource, verb) granted by the named ClusterRole/Role in `file`.
fn granted(file: &str, role: &str) -> Grants {
    let mut out = Grants::new();
    for doc in documents(&deploy().join(file)) {
        if !matches!(doc["kind"].as_str(), Some("ClusterRole" | "Role"))
            || doc["metadata"]["name"] != role
        {
            continue;
        }
        for rule in doc["rules"].as_array().unwrap() {
            for g in rule["apiGroups"].as_array().unwrap() {
                for r in rule["resources"].as_array().unwrap() {
                    for v in rule["verbs"].as_array().unwrap() {
                        // Not an API call: the admission policy's mark of a speaker
                        // (speaker/tests/tools/admission_policy.rs proves what it does).
                        if v == "write-own-node-only" {
                            continue;
                        }
                        out.insert((
                            g.as_str().unwrap().into(),
                            r.as_str().unwrap().into(),
                            v.as_str().unwrap().into(),
                        ));
                    }
                }
            }
        }
    }
    out
}

/// What the requests needed, as a real API server authorizes them: each (apiGroup,
/// resource, verb) received, and `create` for a server-side apply that created its object
/// (the fake records that case).
fn used(fake: &FakeKube) -> Grants {
    let received = fake
        .request_counts_by_group()
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|((verb, group, resource), _)| (group, resource, verb_name(verb).into()));
    let apply_creates = fake
        .authorized_verbs()
        .into_iter()
        .filter(|(verb, _)| *verb == Verb::Create)
        .map(|(verb, resource)| (group_of(&resource).into(), resource, verb_name(verb).into()));
    received.chain(apply_creates).collect()
}

/// A pod CIDR outside `allowedPrefixes` (and not in `Node.spec.podCIDRs`) appears, goes
/// and comes back: the speaker's Events about the refusal and the mismatch are created,
/// then their series patched (kube-runtime's Recorder de-duplicates repeats).
async fn refuse_twice(fake: &FakeKube, speaker: &Proc) {
    let npc = Gvr::new("podcidr.io/v1alpha1", "nodepodcidrs");
    let set = |cidrs: Value| {
        fake.update(&npc, None, "node-a", |o| o["spec"]["podCIDRs"] = cidrs)
            .unwrap();
    };
    let seen = |f: &FakeKube, reason: &str, count: u64| {
        f.list(&Gvr::events(), Some("default"))
            .iter()
            .any(|e| e["reason"] == reason && e["series"]["count"].as_u64().unwrap_or(1) >= count)
    };
    for count in [1, 2] {
        set(json!(["10.244.1.0/24", "203.0.113.0/24"]));
        let raised = fake
            .wait_for(Duration::from_secs(30), |f| {
                seen(f, "PodCIDRRefused", count)
            })
            .await;
        assert!(raised.is_ok(), "refusal Event #{count}\n{}", speaker.log());
        // Seen gone before it comes back (the source coalesces changes).
        set(json!(["10.244.1.0/24"]));
        let resolved = fake
            .wait_for(Duration::from_secs(30), |f| {
                seen(f, "PodCIDRSourceMismatchResolved", count)
            })
            .await;
        assert!(
            resolved.is_ok(),
            "mismatch resolved #{count}\n{}",
            speaker.log()
        );
    }
}

async fn run_speaker(source: &str, fake: &FakeKube, dir: &TempDir) {
    let kubeconfig = dir.path("kubeconfig");
    fake.write_kubeconfig(&kubeconfig).unwrap();
    let cfg = dir.path(&format!("{source}.yaml"));
    std::fs::write(
        &cfg,
        format!(
            "nodeName: node-a\nasn: 64512\nrouterId: 192.0.2.40\nsource: {{kind: {source}}}\n\
             allowedPrefixes: [10.244.0.0/16]\npeers:\n  - name: tor\n    address: 127.0.0.1\n    port: {}\n    asn: 65000\n\
             admin: {{listen: \"127.0.0.1:{}\"}}\nstatus: {{publish: true, minInterval: 1}}\n",
            free_port(),
            free_port()
        ),
    )
    .unwrap();
    let speaker = Proc::spawn(
        &[
            "speaker",
            "--config",
            cfg.to_str().unwrap(),
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
        &dir.path(&format!("{source}.log")),
    );
    let nbs = Gvr::new("podcidr.io/v1alpha1", "nodebgpstatuses");
    let published = fake
        .wait_for_object(&nbs, None, "node-a", Duration::from_secs(30), |o| {
            o.is_some_and(|o| {
                o["status"]["allocated"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty())
            })
        })
        .await;
    assert!(
        published.is_ok(),
        "{source}: no status published\n{}",
        speaker.log()
    );
    // The node's Lease, in the speakers' Lease namespace (the flag's default).
    let renewed = fake
        .wait_for_object(
            &Gvr::leases(),
            Some("podcidr-node-lease"),
            "node-a",
            Duration::from_secs(30),
            |o| o.is_some(),
        )
        .await;
    assert!(renewed.is_ok(), "{source}: no Lease\n{}", speaker.log());
    if source == "ipam-crd" {
        refuse_twice(fake, &speaker).await;
    }
    let _ = fake.delete(&nbs, None, "node-a");
    let _ = fake.delete(&Gvr::leases(), Some("podcidr-node-lease"), "node-a");
}

/// `--config-source kubernetes`, as the DaemonSet runs it: the objects and the MD5 Secret
/// the shipped Role names. The key lands in the key directory, owner-only.
async fn run_objects_speaker(fake: &FakeKube, dir: &TempDir) {
    let kubeconfig = dir.path("kubeconfig");
    fake.write_kubeconfig(&kubeconfig).unwrap();
    let bgp = |plural| Gvr::new("bgp.podcidr.io/v1beta1", plural);
    fake.insert(
        &bgp("bgpspeakerconfigs"),
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPSpeakerConfig",
               "metadata": {"name": "default"},
               "spec": {"asn": 64512, "routerId": "192.0.2.40", "source": {"kind": "ipam-crd"},
                        "allowedPrefixes": ["10.244.0.0/16"], "status": {"minInterval": 1}}}),
    )
    .unwrap();
    fake.insert(
        &bgp("bgppeers"),
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPPeer",
               "metadata": {"name": "tor"},
               "spec": {"address": "127.0.0.1", "port": free_port(), "asn": 65000,
                        "passwordSecretRef": {"name": "podcidr-bgp-md5", "key": "tor"}}}),
    )
    .unwrap();
    let key = serde_json::to_value(k8s_openapi::ByteString(b"s3cret\n".to_vec())).unwrap();
    fake.insert(
        &Gvr::new("v1", "secrets"),
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "podcidr-bgp-md5", "namespace": "podcidr-system"},
               "data": {"tor": key}}),
    )
    .unwrap();
    // Service routes: with a BGPAdvertisement the speaker also watches Services,
    // EndpointSlices and BGPPeer labels.
    fake.insert(
        &bgp("bgpadvertisements"),
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPAdvertisement",
               "metadata": {"name": "lb"},
               "spec": {"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
                        "allowedPrefixes": ["198.51.100.0/24"]}}),
    )
    .unwrap();
    fake.insert(
        &Gvr::new("v1", "services"),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "namespace": "shop"},
               "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
               "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}]}}}),
    )
    .unwrap();
    fake.insert(
        &Gvr::new("discovery.k8s.io/v1", "endpointslices"),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "web-1", "namespace": "shop",
                            "labels": {"kubernetes.io/service-name": "web"}},
               "addressType": "IPv4",
               "endpoints": [{"addresses": ["10.244.1.5"], "nodeName": "node-a"}]}),
    )
    .unwrap();
    let keys = dir.path("keys");
    let admin: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let speaker = Proc::spawn(
        &[
            "speaker",
            "--config-source=kubernetes",
            "--node-name=node-a",
            "--secret-namespace=podcidr-system",
            &format!("--admin-listen={admin}"),
            &format!("--key-dir={}", keys.display()),
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
        &dir.path("objects.log"),
    );
    let nbs = Gvr::new("podcidr.io/v1alpha1", "nodebgpstatuses");
    let published = fake
        .wait_for_object(&nbs, None, "node-a", Duration::from_secs(30), |o| {
            o.is_some_and(|o| o["status"]["config"]["peers"][0]["name"] == "tor")
        })
        .await;
    assert!(
        published.is_ok(),
        "objects: no status naming BGPPeer tor\n{}",
        speaker.log()
    );
    let key_file = keys.join("podcidr-bgp-md5/tor");
    assert_eq!(
        std::fs::read(&key_file).unwrap(),
        b"s3cret",
        "{}",
        speaker.log()
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o400);
    let planned = common::poll(Duration::from_secs(30), || async {
        let (_, body) = common::http_get(admin, "/metrics").await?;
        body.contains("podcidr_service_addresses_announced 1")
            .then_some(())
    })
    .await;
    assert!(
        planned.is_some(),
        "objects: the Service route\n{}",
        speaker.log()
    );
    let _ = fake.delete(&nbs, None, "node-a");
    let _ = fake.delete(&Gvr::leases(), Some("podcidr-node-lease"), "node-a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speaker_rbac_grants_exactly_what_the_speaker_uses() {
    let fake = FakeKube::start().await.unwrap();
    fake.insert(
        &Gvr::nodes(),
        json!({"metadata": {"name": "node-a"}, "spec": {"podCIDRs": ["10.244.1.0/24"]},
               "status": {"addresses": [{"type": "InternalIP", "address": "198.18.0.40"}]}}),
    )
    .unwrap();
    fake.insert(
        &Gvr::new("podcidr.io/v1alpha1", "nodepodcidrs"),
        json!({"metadata": {"name": "node-a"}, "spec": {"podCIDRs": ["10.244.1.0/24"]}}),
    )
    .unwrap();
    fake.insert(
        &Gvr::new("cilium.io/v2", "ciliumnodes"),
        json!({"metadata": {"name": "node-a"}, "spec": {"ipam": {"podCIDRs": ["10.244.1.0/24"]}}}),
    )
    .unwrap();
    let dir = TempDir::new("rbac");
    for source in ["ipam-crd", "node-spec", "cilium-node"] {
        run_speaker(source, &fake, &dir).await;
    }
    run_objects_speaker(&fake, &dir).await;
    let used = used(&fake);
    let mut grants = granted("speaker/rbac.yaml", "podcidr-bgp-speaker");
    grants.extend(granted("speaker/rbac.yaml", "podcidr-bgp-speaker-md5"));
    grants.extend(granted("speaker/rbac.yaml", "podcidr-bgp-speaker-events"));
    assert_eq!(used, grants, "used (left) vs granted (right)");
}

fn pcp() -> Gvr {
    Gvr::new("podcidr.io/v1alpha1", "podcidrpools")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocator_rbac_grants_exactly_what_the_allocator_uses() {
    use fake_kube::Fault;
    let fake = FakeKube::start().await.unwrap();
    for i in 1..=3 {
        fake.insert(
            &Gvr::nodes(),
            json!({"metadata": {"name": format!("node-{i}")}}),
        )
        .unwrap();
    }
    // Two /31s for three nodes: exhaustion (condition, pool status, Event).
    fake.insert(&pcp(), json!({"metadata": {"name": "small"}, "spec": {"ipv4": {"cidrs": ["10.99.0.0/30"], "maskSize": 31}}}))
        .unwrap();
    // An existing empty record: filled by a compare-and-set patch, whose first attempt is
    // applied but answered with a timeout (the unknown outcome is re-read).
    let uid = fake.get(&Gvr::nodes(), None, "node-1").unwrap()["metadata"]["uid"].clone();
    fake.insert(
        &common::npc(),
        json!({"metadata": {"name": "node-1", "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": uid}]},
               "spec": {"podCIDRs": []}}),
    )
    .unwrap();
    fake.inject(
        Fault::apply_then_timeout()
            .verb(Verb::Patch)
            .resource("nodepodcidrs")
            .times(1),
    );
    // Configuration objects whose status the leader writes, one peer's MD5 Secret read by
    // name (the speakers' Role, bound to the allocator too).
    let bgp = |plural| Gvr::new("bgp.podcidr.io/v1beta1", plural);
    fake.insert(
        &bgp("bgpspeakerconfigs"),
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPSpeakerConfig",
               "metadata": {"name": "default", "generation": 1},
               "spec": {"asn": 64512, "source": {"kind": "ipam-crd"},
                        "allowedPrefixes": ["10.244.0.0/16"]}}),
    )
    .unwrap();
    fake.insert(
        &bgp("bgpadvertisements"),
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPAdvertisement",
               "metadata": {"name": "lb", "generation": 1},
               "spec": {"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
                        "allowedPrefixes": ["198.51.100.0/24"]}}),
    )
    .unwrap();
    fake.insert(
        &bgp("bgppeers"),
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPPeer",
               "metadata": {"name": "tor", "generation": 1},
               "spec": {"address": "192.0.2.1", "asn": 65000,
                        "passwordSecretRef": {"name": "podcidr-bgp-md5", "key": "tor"}}}),
    )
    .unwrap();
    fake.insert(
        &Gvr::new("v1", "secrets"),
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "podcidr-bgp-md5", "namespace": "podcidr-system"},
               "data": {"tor": serde_json::to_value(k8s_openapi::ByteString(b"s3cret".to_vec())).unwrap()}}),
    )
    .unwrap();
    let dir = TempDir::new("rbac-alloc");
    let kubeconfig = dir.path("kubeconfig");
    fake.write_kubeconfig(&kubeconfig).unwrap();
    let admin = format!("127.0.0.1:{}", free_port());
    let mut alloc = Proc::spawn(
        &[
            "allocator",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--lease-namespace",
            "podcidr-system",
            "--admin-listen",
            &admin,
            "--speaker-namespace",
            "podcidr-system",
        ],
        &dir.path("allocator.log"),
    );
    let exhausted = fake
        .wait_for(Duration::from_secs(30), |f| {
            let cond = |name: &str| {
                f.get(&common::npc(), None, name)
                    .and_then(|o| o["status"]["conditions"].as_array().cloned())
                    .unwrap_or_default()
            };
            let pool_done = f
                .get(&pcp(), None, "small")
                .is_some_and(|p| p["status"]["conditions"].is_array());
            let events = !f.list(&Gvr::events(), Some("default")).is_empty();
            let reasons: Vec<String> = (1..=3)
                .flat_map(|i| cond(&format!("node-{i}")))
                .filter_map(|c| c["reason"].as_str().map(str::to_owned))
                .collect();
            pool_done
                && events
                && reasons.iter().filter(|r| *r == "Allocated").count() == 2
                && reasons.iter().any(|r| r == "PoolExhausted")
        })
        .await;
    assert!(exhausted.is_ok(), "{}", alloc.log());
    // Room for one more node, then a fourth node: exhausted again, and the Recorder patches
    // the series of the pool's first PoolExhausted Event instead of creating another.
    let pool_exhausted = |f: &FakeKube, status: &str| {
        f.get(&pcp(), None, "small").is_some_and(|p| {
            p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Exhausted" && c["status"] == status)
        })
    };
    fake.update(&pcp(), None, "small", |p| {
        p["spec"]["ipv4"]["cidrs"] = json!(["10.99.0.0/30", "10.99.0.4/30"]);
    })
    .unwrap();
    let room = fake
        .wait_for(Duration::from_secs(30), |f| pool_exhausted(f, "False"))
        .await;
    assert!(room.is_ok(), "{}", alloc.log());
    fake.insert(&Gvr::nodes(), json!({"metadata": {"name": "node-4"}}))
        .unwrap();
    let repeated = fake
        .wait_for(Duration::from_secs(30), |f| {
            f.list(&Gvr::events(), Some("default"))
                .iter()
                .any(|e| e["reason"] == "PoolExhausted" && e["series"]["count"].as_u64() == Some(2))
        })
        .await;
    assert!(repeated.is_ok(), "{}", alloc.log());
    let accepted = valid(&fake, "bgppeers", "tor").await;
    assert!(accepted, "no status on BGPPeer tor\n{}", alloc.log());
    let event = fake
        .wait_for(Duration::from_secs(30), |f| {
            f.list(&Gvr::events(), Some("default")).iter().any(|e| {
                e["regarding"]["kind"] == "BGPPeer"
                    && e["regarding"]["name"] == "tor"
                    && e["reason"] == "Valid"
                    && e["reportingController"] == "podcidr-bgp-config-status"
            })
        })
        .await;
    assert!(event.is_ok(), "no Event on BGPPeer tor\n{}", alloc.log());
    let advertised = valid(&fake, "bgpadvertisements", "lb").await;
    assert!(
        advertised,
        "no status on BGPAdvertisement lb\n{}",
        alloc.log()
    );
    alloc.signal(libc::SIGTERM);
    assert!(
        alloc
            .wait_exit(Duration::from_secs(20))
            .is_some_and(|s| s.success()),
        "{}",
        alloc.log()
    );
    let used = used(&fake);
    let mut granted: Grants = granted("allocator/rbac.yaml", "podcidr-bgp-allocator");
    granted.extend(self::granted(
        "allocator/rbac.yaml",
        "podcidr-bgp-allocator-events",
    ));
    let md5 = documents(&deploy().join("allocator/rbac.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "RoleBinding" && d["roleRef"]["name"] == "podcidr-bgp-speaker-md5")
        .expect("the allocator is bound to the speakers' MD5 Secret Role");
    assert_eq!(md5["subjects"][0]["name"], "podcidr-bgp-allocator");
    granted.extend(self::granted(
        "speaker/rbac.yaml",
        "podcidr-bgp-speaker-md5",
    ));
    assert_eq!(used, granted, "used (left) vs granted (right)");
}

/// Whether the status writer's verdict on a configuration object, for its generation 1, is
/// `Valid` (waits at most 30 s).
async fn valid(fake: &FakeKube, plural: &str, name: &str) -> bool {
    let kind = Gvr::new("bgp.podcidr.io/v1beta1", plural);
    fake.wait_for_object(&kind, None, name, Duration::from_secs(30), |o| {
        o.is_some_and(|o| {
            o["status"]["conditions"][0]["reason"] == "Valid"
                && o["status"]["observedGeneration"] == 1
        })
    })
    .await
    .is_ok()
}

/// A container's `args`, as strings.
fn container_args(container: &Value) -> Vec<&str> {
    container["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str())
        .collect()
}

/// The DaemonSet configures each speaker from the objects (`--config-source=kubernetes`), with
/// no config file mounted; its MD5 keys go to the in-memory `emptyDir` at `--key-dir`; the
/// Secret namespace is the pod's own, where the Role granting the example's Secret lives.
#[test]
fn daemonset_runs_the_speaker_from_config_objects_with_keys_in_memory() {
    let ds = documents(&deploy().join("speaker/daemonset.yaml"));
    let pod = &ds[0]["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args = container_args(container);
    assert!(args.contains(&"--config-source=kubernetes"), "{args:?}");
    assert!(
        !args
            .iter()
            .any(|a| a.starts_with("--config=") || *a == "--config")
    );
    let key_dir = args
        .iter()
        .find_map(|a| a.strip_prefix("--key-dir="))
        .expect("--key-dir");
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == key_dir)
        .expect("a mount at --key-dir");
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("its volume");
    assert_eq!(volume["emptyDir"]["medium"], "Memory", "{volume}");
    assert!(
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["configMap"].is_null() && v["secret"].is_null()),
        "nothing but objects configures the speaker"
    );
    let env = container["env"].as_array().unwrap();
    let pod_ns = env
        .iter()
        .find(|e| e["name"] == "POD_NAMESPACE")
        .expect("POD_NAMESPACE: the Secrets' namespace");
    assert_eq!(
        pod_ns["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    let rbac = documents(&deploy().join("speaker/rbac.yaml"));
    let role = rbac
        .iter()
        .find(|d| d["kind"] == "Role" && d["metadata"]["name"] == "podcidr-bgp-speaker-md5")
        .expect("the MD5 Secret Role");
    assert_eq!(
        role["metadata"]["namespace"],
        ds[0]["metadata"]["namespace"]
    );
    // The example ships no Secret (a re-apply would reset the key); its peers name the one
    // Secret the Role grants, which the operator creates in the DaemonSet's namespace.
    let example = documents(&deploy().join("examples/objects/default.yaml"));
    assert!(example.iter().all(|d| d["kind"] != "Secret"));
    let names: Vec<&Value> = example
        .iter()
        .filter(|d| d["kind"] == "BGPPeer")
        .map(|d| &d["spec"]["passwordSecretRef"]["name"])
        .collect();
    assert!(!names.is_empty());
    for name in names {
        assert_eq!(
            role["rules"][0]["resourceNames"],
            serde_json::json!([name]),
            "the Role grants exactly the Secret the example's peers name"
        );
    }
}

/// The rollout watches BGP (issue 23 item 4): a new pod counts only after it has been Ready
/// (source synced, sessions Established or a silent peer excused after `--ready-peer-grace`)
/// for `minReadySeconds`, 1% of the nodes at a time, with the probe on the admin endpoint; the
/// grace period leaves room for a departure's RFC 8326 wait before the Cease.
#[tokio::test]
async fn daemonset_rollout_waits_for_ready_speakers_one_node_at_a_time() {
    let ds = &documents(&deploy().join("speaker/daemonset.yaml"))[0];
    let spec = &ds["spec"];
    assert!(
        spec["minReadySeconds"].as_u64().unwrap_or(0) >= 30,
        "{spec}"
    );
    // A percentage rounds up for a DaemonSet: at least one node, and batches that finish a
    // 5,000-node fleet in hours, not days (issue 30 item 8).
    assert_eq!(
        spec["updateStrategy"]["rollingUpdate"]["maxUnavailable"],
        "1%"
    );
    let pod = &spec["template"]["spec"];
    let container = &pod["containers"][0];
    let args = container_args(container);
    let admin = args
        .iter()
        .find_map(|a| a.strip_prefix("--admin-listen="))
        .expect("--admin-listen");
    let probe = &container["readinessProbe"]["httpGet"];
    assert_eq!(probe["path"], "/readyz");
    assert_eq!(
        format!("{}:{}", probe["host"].as_str().unwrap(), probe["port"]),
        admin
    );
    let grace = args
        .iter()
        .find(|a| a.starts_with("--ready-peer-grace="))
        .expect("--ready-peer-grace, stated in the manifest");
    // The binary accepts the flag as written.
    let dir = TempDir::new("ds-grace");
    let cfg = common::lone_speaker_config(&dir, &["10.0.0.0/24"], "");
    let run = common::run(&[
        "speaker",
        grace,
        "--check-config",
        "--config",
        cfg.to_str().unwrap(),
    ])
    .await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    // gracefulShutdown.wait defaults to 15 s.
    assert!(pod["terminationGracePeriodSeconds"].as_u64().unwrap() > 15 + 5);
}
