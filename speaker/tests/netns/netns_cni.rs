//! Cluster-pool mode end to end, in network namespaces the test creates: the fake API server
//! and the cluster-pool allocator (in this process), one `podcidr-bgp speaker` per node (each
//! in its node's namespace, `cni.enabled`), and a BIRD ToR installing kernel routes. Pods are
//! created the way a container runtime creates them: Debian's CNI reference plugins (bridge +
//! host-local) run with the conflist each speaker wrote, CNI 1.0 ADD/CHECK/DEL.
//!
//! The API server listens on 127.0.0.1 for this process and, through a socket created inside
//! the ToR namespace (`netns::tcp_listener_in`), on 198.18.0.1 for the speakers; the nodes
//! reach it over their default route via the ToR. Addresses: 198.18.0.0/15 and fd00::/8.
//! Skipped with a message where namespaces, BIRD, ping or the plugins are not available.

use crate::common;
use integration_tests::skip::Need;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::{Proc, TempDir};
use fake_kube::{FakeKube, Gvr};
use integration_tests::cni::{Attachment, CniRuntime, result_addresses};
use integration_tests::netns::{Netns, in_ns, ip, node_behind, ping_within};
use integration_tests::wait_for;
use ipam_watch::allocator::PodCidrPool;
use ipam_watch::allocator::{self, AllocatorMetrics, AllocatorOptions, Family, LeaseConfig};
use ipnet::IpNet;
use serde_json::{Value, json};

const NODES: u8 = 3;
const WAIT: Duration = Duration::from_secs(60);

fn npc() -> Gvr {
    Gvr::new("podcidr.io/v1alpha1", "nodepodcidrs")
}

fn node(i: u8) -> String {
    format!("node-{i}")
}

/// The node's allocation as the allocator wrote it.
fn allocated(fake: &FakeKube, i: u8) -> Vec<IpNet> {
    fake.get(&npc(), None, &node(i))
        .and_then(|o| o["spec"]["podCIDRs"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str()?.parse().ok())
        .collect()
}

/// ToR and node namespaces with their links, addresses and routes.
fn topology(ns: &mut Netns, tor: &str, nodes: &[String]) {
    ns.add(tor);
    // The API server's address for the nodes lives on the ToR.
    ip(&["-n", tor, "addr", "add", "198.18.0.1/32", "dev", "lo"]);
    sysctl_forwarding(tor);
    for (k, n) in nodes.iter().enumerate() {
        let i = k + 1;
        node_behind(ns, tor, n, i);
        sysctl_forwarding(n);
        ip(&[
            "-n",
            n,
            "-6",
            "route",
            "add",
            "default",
            "via",
            &format!("fd00:18:{i}::1"),
        ]);
    }
}

fn sysctl_forwarding(ns: &str) {
    let out = in_ns(
        ns,
        &[
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
            "net.ipv6.conf.all.forwarding=1",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn bird_config(dir: &TempDir) -> String {
    let mut c = format!(
        "log \"{}\" all;\nrouter id 198.18.0.1;\nprotocol device {{ scan time 1; }}\n\
         protocol kernel k4 {{ ipv4 {{ import none; export all; }}; }}\n\
         protocol kernel k6 {{ ipv6 {{ import none; export all; }}; }}\n",
        dir.path("bird.log").display()
    );
    for i in 1..=NODES {
        c.push_str(&format!(
            "protocol bgp node{i} {{ local 198.18.{i}.1 as 65000; neighbor 198.18.{i}.2 as 64512;\n  \
             ipv4 {{ import filter {{ if net ~ [ 198.19.0.0/16{{24,24}} ] then accept; reject; }}; export none; }};\n  \
             ipv6 {{ import filter {{ if net ~ [ fd00:19::/48{{64,64}} ] then accept; reject; }}; export none; }}; }}\n"
        ));
    }
    c
}

fn speaker_config(dir: &TempDir, i: u8, plugin: &str) -> std::path::PathBuf {
    let cni = dir.path(&format!("node-{i}"));
    std::fs::create_dir_all(cni.join("net.d")).unwrap();
    let path = dir.path(&format!("speaker{i}.yaml"));
    std::fs::write(
        &path,
        format!(
            "nodeName: {node}\nasn: 64512\ngracefulShutdown: {{wait: 0}}\nrouterId: 198.18.{i}.2\nsource: {{kind: ipam-crd}}\n\
             allowedPrefixes: [198.19.0.0/16, \"fd00:19::/48\"]\n\
             nextHop: {{ipv4: self, ipv6: \"fd00:18:{i}::2\"}}\n\
             peers:\n  - {{name: tor, address: 198.18.{i}.1, asn: 65000, holdTime: 9, \
             connectRetry: {{base: 1, max: 2}}, gracefulRestart: {{enabled: false}}}}\n\
             status: {{publish: true, minInterval: 1}}\n\
             cni: {{enabled: true, plugin: {plugin}, confDir: {d}/net.d, dataDir: {d}/leases}}\n",
            node = node(i),
            d = cni.display(),
        ),
    )
    .unwrap();
    path
}

/// `podcidr-bgp speaker` inside the node's namespace.
fn spawn_speaker(
    dir: &TempDir,
    ns: &str,
    i: u8,
    kubeconfig: &std::path::Path,
    plugin: &str,
) -> Proc {
    let cfg = speaker_config(dir, i, plugin);
    let log = dir.path(&format!("speaker{i}.log"));
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new("ip")
        .args(["netns", "exec", ns, common::BIN, "speaker", "--final"])
        .arg("--config")
        .arg(&cfg)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("RUST_LOG", "info")
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .spawn()
        .unwrap();
    Proc { child, log }
}

fn birdc(tor: &str, sock: &str) -> String {
    String::from_utf8_lossy(&in_ns(tor, &["birdc", "-s", sock, "show route"]).stdout).into_owned()
}

struct Pod {
    node: u8,
    attachment: Attachment,
    result: Value,
    addrs: Vec<IpNet>,
}

impl Pod {
    fn addr(&self, v6: bool) -> String {
        self.addrs
            .iter()
            .find(|a| a.addr().is_ipv6() == v6)
            .map(|a| a.addr().to_string())
            .unwrap_or_else(|| {
                panic!(
                    "pod on node-{} has no {} address",
                    self.node,
                    if v6 { "IPv6" } else { "IPv4" }
                )
            })
    }
}

#[test]
fn bridge_pods_get_addresses_from_the_cidr_their_node_announces_and_reach_each_other_via_the_tor() {
    scenario("bridge", "b");
}

#[test]
fn ptp_pods_get_addresses_from_the_cidr_their_node_announces_and_reach_each_other_via_the_tor() {
    scenario("ptp", "p");
}

/// The whole flow with `cni.plugin: plugin`; `letter` keeps namespace names apart.
fn scenario(plugin: &str, letter: &str) {
    let tag = format!("pc{letter}{}", std::process::id() % 100_000);
    integration_tests::require!(Need::Netns, Need::Bird, Need::Bin("ping"), Need::CniPlugins);
    let dir = TempDir::new(&format!("netns-cni-{plugin}"));
    let tor = format!("{tag}-tor");
    let nodes: Vec<String> = (1..=NODES).map(|i| format!("{tag}-n{i}")).collect();
    let mut ns = Netns::default();
    topology(&mut ns, &tor, &nodes);

    // The API server and the allocator, on a runtime of their own: the test thread blocks.
    let rt = tokio::runtime::Runtime::new().unwrap();
    // Clients and tasks made on this thread belong to that runtime.
    let _in_rt = rt.enter();
    let fake = Arc::new(rt.block_on(async {
        FakeKube::builder()
            .register(npc(), "NodePodCIDR", false)
            .register(common::nbs(), "NodeBGPStatus", false)
            .start()
            .await
            .unwrap()
    }));
    let kubeconfig = dir.path("kubeconfig");
    common::serve_fake_api_in(&fake, &tor, &kubeconfig);
    for i in 1..=NODES {
        fake.insert(
            &Gvr::nodes(),
            json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node(i)},
                "spec": {},
                "status": {"addresses": [
                    {"type": "InternalIP", "address": format!("198.18.{i}.2")},
                    {"type": "InternalIP", "address": format!("fd00:18:{i}::2")}
                ]}
            }),
        )
        .unwrap();
    }
    let mut opts = AllocatorOptions::new(LeaseConfig {
        namespace: "podcidr-system".into(),
        name: "podcidr-bgp-allocator".into(),
        identity: "netns-cni".into(),
        duration: Duration::from_secs(15),
    });
    opts.flag_pool = Some(PodCidrPool::default_from_flags(
        &["198.19.0.0/16".to_owned()],
        24,
        &["fd00:19::/48".to_owned()],
        64,
    ));
    opts.families = vec![Family::V4, Family::V6];
    let (stop_alloc, alloc_stopped) = tokio::sync::oneshot::channel::<()>();
    let alloc_client = fake.client();
    let allocator_task = rt.spawn(async move {
        allocator::run(
            alloc_client,
            opts,
            Arc::new(AllocatorMetrics::new()),
            async {
                let _ = alloc_stopped.await;
            },
        )
        .await
    });
    assert!(
        wait_for(WAIT, || (1..=NODES).all(|i| allocated(&fake, i).len() == 2)),
        "the allocator gives every node one CIDR per family"
    );
    let cidrs: BTreeMap<u8, Vec<IpNet>> = (1..=NODES).map(|i| (i, allocated(&fake, i))).collect();

    // The ToR and the speakers.
    std::fs::write(dir.path("bird.conf"), bird_config(&dir)).unwrap();
    let sock = dir.path("bird.sock").display().to_string();
    let bird_conf = dir.path("bird.conf");
    let mut bird = Command::new("ip")
        .args(["netns", "exec", &tor, "bird", "-f", "-c"])
        .arg(&bird_conf)
        .args(["-s", &sock])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut speakers: BTreeMap<u8, Proc> = (1..=NODES)
        .map(|i| {
            (
                i,
                spawn_speaker(&dir, &nodes[usize::from(i - 1)], i, &kubeconfig, plugin),
            )
        })
        .collect();
    let logs = |speakers: &BTreeMap<u8, Proc>| {
        speakers
            .values()
            .map(Proc::log)
            .collect::<Vec<_>>()
            .join("\n----\n")
    };
    let all_routes = wait_for(WAIT, || {
        let r = birdc(&tor, &sock);
        cidrs.values().flatten().all(|c| r.contains(&c.to_string()))
    });
    assert!(
        all_routes,
        "ToR routes:\n{}\n{}",
        birdc(&tor, &sock),
        logs(&speakers)
    );

    // Each speaker wrote its node's conflist with exactly that node's CIDRs.
    let conflist_path = |i: u8| dir.path(&format!("node-{i}/net.d/10-podcidr-bgp.conflist"));
    assert!(
        wait_for(WAIT, || (1..=NODES).all(|i| conflist_path(i).is_file())),
        "every speaker writes its conflist\n{}",
        logs(&speakers)
    );
    let conflists: BTreeMap<u8, Value> = (1..=NODES)
        .map(|i| {
            let text = std::fs::read_to_string(conflist_path(i)).unwrap();
            (i, serde_json::from_str(&text).unwrap())
        })
        .collect();
    for c in conflists.values() {
        assert_eq!(c["plugins"][0]["type"], plugin, "{c}");
    }

    // Two pods per node, each in its own namespace, created as a runtime does.
    let cni = CniRuntime::default();
    let mut pods: Vec<Pod> = Vec::new();
    for i in 1..=NODES {
        for k in 1..=2u8 {
            let pod_ns = format!("{tag}-p{i}{k}");
            ns.add(&pod_ns);
            let attachment = Attachment {
                host_ns: nodes[usize::from(i - 1)].clone(),
                pod_ns,
                container_id: format!("{tag}-c{i}{k}"),
                ifname: "eth0".into(),
            };
            let result = cni
                .add(&conflists[&i], &attachment)
                .unwrap_or_else(|e| panic!("ADD on node-{i}: {e}"));
            let addrs = result_addresses(&result);
            pods.push(Pod {
                node: i,
                attachment,
                result,
                addrs,
            });
        }
    }

    // Every pod address lies inside the CIDR its node announces, one per family.
    let tor_routes = birdc(&tor, &sock);
    for p in &pods {
        assert_eq!(p.addrs.len(), 2, "one address per family: {:?}", p.result);
        for a in &p.addrs {
            let home = cidrs[&p.node]
                .iter()
                .find(|c| c.contains(&a.addr()))
                .unwrap_or_else(|| {
                    panic!(
                        "{a} of a pod on node-{} is outside {:?}",
                        p.node, cidrs[&p.node]
                    )
                });
            let via = if home.addr().is_ipv6() {
                format!("fd00:18:{}::2", p.node)
            } else {
                format!("198.18.{}.2", p.node)
            };
            let line = tor_routes
                .lines()
                .skip_while(|l| !l.starts_with(&home.to_string()))
                .take(2)
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                line.contains(&via),
                "the ToR routes {home} via {via}: {line}\n{tor_routes}"
            );
        }
    }

    // The ToR reaches every pod; pods reach each other across nodes through the ToR.
    for p in &pods {
        for v6 in [false, true] {
            let addr = p.addr(v6);
            assert!(
                ping_within(&tor, &addr, Duration::from_secs(15)),
                "ToR → {addr} (node-{})",
                p.node
            );
        }
    }
    let from = &pods[0];
    for to in pods.iter().filter(|p| p.node != from.node) {
        for v6 in [false, true] {
            let addr = to.addr(v6);
            assert!(
                ping_within(&from.attachment.pod_ns, &addr, Duration::from_secs(15)),
                "pod on node-{} → {addr} on node-{}",
                from.node,
                to.node
            );
        }
    }

    // CHECK passes for every pod.
    for p in &pods {
        cni.check(&conflists[&p.node], &p.attachment, &p.result)
            .unwrap_or_else(|e| panic!("CHECK on node-{}: {e}", p.node));
    }

    // DEL frees the addresses (host-local's lease files go) and a new ADD still works.
    let gone = pods.remove(1);
    cni.del(&conflists[&gone.node], &gone.attachment, &gone.result)
        .unwrap_or_else(|e| panic!("DEL: {e}"));
    let leases = dir.path(&format!("node-{}/leases/podcidr", gone.node));
    for a in &gone.addrs {
        assert!(
            !leases.join(a.addr().to_string()).exists(),
            "{a} is still leased after DEL"
        );
    }
    let again = Attachment {
        pod_ns: gone.attachment.pod_ns.clone(),
        container_id: format!("{tag}-c-again"),
        ..gone.attachment.clone()
    };
    let result = cni
        .add(&conflists[&gone.node], &again)
        .unwrap_or_else(|e| panic!("ADD after DEL: {e}"));
    for a in result_addresses(&result) {
        assert!(
            cidrs[&gone.node].iter().any(|c| c.contains(&a.addr())),
            "{a}"
        );
        assert!(leases.join(a.addr().to_string()).exists(), "{a} leased");
    }

    // node-3 leaves: its speaker stops (Cease) and its Node goes. Only its routes go; every
    // other pod stays reachable.
    let leaving = NODES;
    let mut p = speakers.remove(&leaving).unwrap();
    p.signal(libc::SIGTERM);
    assert!(
        p.wait_exit(Duration::from_secs(20)).is_some(),
        "speaker exits on SIGTERM"
    );
    fake.delete(&Gvr::nodes(), None, &node(leaving)).unwrap();
    let withdrawn = wait_for(WAIT, || {
        let r = birdc(&tor, &sock);
        cidrs[&leaving].iter().all(|c| !r.contains(&c.to_string()))
    });
    assert!(withdrawn, "{}", birdc(&tor, &sock));
    let r = birdc(&tor, &sock);
    for i in 1..leaving {
        for c in &cidrs[&i] {
            assert!(
                r.contains(&c.to_string()),
                "{c} of node-{i} must stay:\n{r}"
            );
        }
    }
    for p in pods.iter().filter(|p| p.node != leaving) {
        for v6 in [false, true] {
            let addr = p.addr(v6);
            assert!(
                ping_within(&tor, &addr, Duration::from_secs(15)),
                "ToR → {addr} after node-{leaving} left"
            );
        }
    }
    let to = pods.iter().find(|p| p.node == 2).unwrap();
    assert!(ping_within(
        &pods[0].attachment.pod_ns,
        &to.addr(false),
        Duration::from_secs(15)
    ));

    for (_, p) in speakers.iter_mut() {
        p.signal(libc::SIGTERM);
        let _ = p.wait_exit(Duration::from_secs(20));
    }
    let _ = bird.kill();
    let _ = bird.wait();
    let _ = stop_alloc.send(());
    let _ =
        rt.block_on(async { tokio::time::timeout(Duration::from_secs(10), allocator_task).await });
}
