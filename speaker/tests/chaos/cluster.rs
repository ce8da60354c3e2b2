//! The system under test: the fake API server, two allocator replicas run as a Deployment
//! would (restarted when they exit), N speakers on their own loopback addresses, one BIRD ToR.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_kube::{FakeKube, Gvr};
use integration_tests::{Bird, BirdConfig, BirdNeighbor, net};
use ipnet::IpNet;
use serde_json::json;

use crate::common::{BIN, Proc, TempDir, free_port};

pub const POOL: &str = "10.20.0.0/16";
pub const SPEAKER_ASN: u32 = 64512;
pub const TOR_ASN: u32 = 65000;

pub fn speaker_node(i: usize) -> String {
    format!("node-{i}")
}

pub fn node_json(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"rack": "r1"}},
        "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}
    })
}

/// One allocator replica, restarted 300 ms after every exit until the cluster stops.
pub struct Replica {
    pub name: String,
    pub pid: Arc<AtomicI32>,
    pub exits: Arc<AtomicU64>,
}

pub struct SpeakerSlot {
    pub node: String,
    pub addr: Ipv4Addr,
    pub proc: Option<Proc>,
    pub dir: TempDir,
    pub kills: u64,
}

pub struct Cluster {
    pub fake: Arc<FakeKube>,
    pub dir: TempDir,
    pub kubeconfig: PathBuf,
    pub lease_secs: u64,
    pub replicas: Vec<Replica>,
    pub speakers: Vec<SpeakerSlot>,
    /// `None` while BIRD is being restarted.
    pub bird: Arc<Mutex<Option<Bird>>>,
    bird_cfg: BirdConfig,
    /// Bumped when BIRD is restarted: its routes are gone for a reason that is not an API fault.
    pub bird_epoch: Arc<AtomicU64>,
    pub stopping: Arc<AtomicBool>,
}

impl Cluster {
    pub async fn start(speakers: usize, lease_secs: u64) -> Cluster {
        integration_tests::assert_bird();
        let fake = Arc::new(FakeKube::start().await.unwrap());
        let dir = TempDir::new("chaos");
        let kubeconfig = dir.path("kubeconfig");
        fake.write_kubeconfig(&kubeconfig).unwrap();
        for i in 0..speakers {
            fake.insert(&Gvr::nodes(), node_json(&speaker_node(i)))
                .unwrap();
        }
        let addrs: Vec<Ipv4Addr> = (0..speakers).map(|_| net::alloc_v4()).collect();
        let mut cfg = BirdConfig::new(net::alloc_v4(), TOR_ASN).debug("states");
        for (i, a) in addrs.iter().enumerate() {
            // Graceful restart: a speaker killed and restarted keeps its routes at the ToR.
            cfg = cfg.neighbor(
                BirdNeighbor::new(&format!("n{i}"), *a, SPEAKER_ASN)
                    .passive(true)
                    .graceful_restart(120),
            );
        }
        let bird = Bird::start(cfg.clone());
        let mut c = Cluster {
            fake,
            kubeconfig,
            lease_secs,
            replicas: Vec::new(),
            speakers: Vec::new(),
            bird: Arc::new(Mutex::new(Some(bird))),
            bird_cfg: cfg,
            bird_epoch: Arc::new(AtomicU64::new(0)),
            stopping: Arc::new(AtomicBool::new(false)),
            dir,
        };
        for r in 0..2 {
            c.spawn_replica(r);
        }
        for (i, addr) in addrs.into_iter().enumerate() {
            let sdir = TempDir::new(&format!("chaos-speaker{i}"));
            let mut slot = SpeakerSlot {
                node: speaker_node(i),
                addr,
                proc: None,
                dir: sdir,
                kills: 0,
            };
            slot.proc = Some(c.spawn_speaker(&slot, i));
            c.speakers.push(slot);
        }
        c
    }

    fn spawn_replica(&mut self, r: usize) {
        let name = format!("alloc-{r}");
        let pid = Arc::new(AtomicI32::new(0));
        let exits = Arc::new(AtomicU64::new(0));
        let args: Vec<String> = [
            "allocator",
            "--kubeconfig",
            self.kubeconfig.to_str().unwrap(),
            "--cluster-pool-ipv4-cidr",
            POOL,
            "--cluster-pool-ipv4-mask-size",
            "24",
            "--lease-namespace",
            "default",
            "--lease-duration",
            &self.lease_secs.to_string(),
            "--quarantine",
            "3",
            "--resync",
            "10",
        ]
        .map(str::to_owned)
        .to_vec();
        let log = self.dir.path(&format!("{name}.log"));
        let stopping = self.stopping.clone();
        let (pid2, exits2, name2) = (pid.clone(), exits.clone(), name.clone());
        tokio::spawn(async move {
            while !stopping.load(Ordering::SeqCst) {
                let out = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log)
                    .unwrap();
                let mut child = tokio::process::Command::new(BIN)
                    .args(&args)
                    .args(["--admin-listen", &format!("127.0.0.1:{}", free_port())])
                    .env("POD_NAME", &name2)
                    .env(
                        "RUST_LOG",
                        std::env::var("CHAOS_ALLOCATOR_LOG").unwrap_or_else(|_| "info".into()),
                    )
                    .stdout(std::process::Stdio::from(out.try_clone().unwrap()))
                    .stderr(std::process::Stdio::from(out))
                    .kill_on_drop(true)
                    .spawn()
                    .unwrap();
                pid2.store(
                    i32::try_from(child.id().unwrap_or(0)).unwrap_or(0),
                    Ordering::SeqCst,
                );
                // Stopping is noticed within 1 s; the child is killed on drop.
                loop {
                    tokio::select! {
                        _ = child.wait() => break,
                        () = tokio::time::sleep(Duration::from_secs(1)) => {
                            if stopping.load(Ordering::SeqCst) {
                                let _ = child.kill().await;
                                return;
                            }
                        }
                    }
                }
                pid2.store(0, Ordering::SeqCst);
                exits2.fetch_add(1, Ordering::SeqCst);
                // Deployment restart pacing.
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        self.replicas.push(Replica { name, pid, exits });
    }

    fn bird_peer(&self, i: usize) -> integration_tests::TestPeerAddr {
        self.bird_cfg.peer_addr(&format!("n{i}"))
    }

    pub fn spawn_speaker(&self, slot: &SpeakerSlot, i: usize) -> Proc {
        let tor = self.bird_peer(i);
        let config = format!(
            "nodeName: {node}\nasn: {SPEAKER_ASN}\nrouterId: {addr}\nsource: {{kind: ipam-crd}}\n\
             allowedPrefixes: [{POOL}]\nnextHop: {{ipv4: self}}\n\
             peers:\n  - {{name: tor, address: {ta}, port: {tp}, asn: {TOR_ASN}, localAddress: {addr}, \
             connectRetry: {{base: 1, max: 2}}}}\n\
             admin: {{listen: \"127.0.0.1:{admin}\"}}\nstatus: {{publish: true, minInterval: 1}}\n",
            node = slot.node,
            addr = slot.addr,
            ta = tor.addr,
            tp = tor.port,
            admin = free_port(),
        );
        let n = slot.kills;
        crate::common::spawn_api_speaker(
            &slot.dir,
            &config,
            &self.kubeconfig,
            &format!("speaker-{n}.log"),
        )
    }

    /// The replica holding the Lease, from the Lease's holder (`$POD_NAME-<suffix>`).
    pub fn leader(&self) -> Option<&Replica> {
        let lease = self
            .fake
            .get(&Gvr::leases(), Some("default"), "podcidr-bgp-allocator")?;
        let holder = lease["spec"]["holderIdentity"].as_str()?.to_owned();
        self.replicas
            .iter()
            .find(|r| holder.starts_with(&format!("{}-", r.name)) || holder == r.name)
    }

    pub fn kill_and_restart_bird(&self) {
        let mut g = self.bird.lock().unwrap();
        self.bird_epoch.fetch_add(1, Ordering::SeqCst);
        if let Some(mut b) = g.take() {
            b.kill();
        }
        *g = Some(Bird::start(self.bird_cfg.clone()));
        self.bird_epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Allocations: node → CIDRs of its `NodePodCIDR`.
    pub fn allocations(&self) -> BTreeMap<String, Vec<IpNet>> {
        self.fake
            .list(&crate::common::npc(), None)
            .iter()
            .map(|o| {
                let name = o["metadata"]["name"].as_str().unwrap_or("").to_owned();
                (name, cidrs_of(o))
            })
            .collect()
    }

    /// One node's allocation as a set (empty without a record).
    pub fn allocation_of(&self, node: &str) -> BTreeSet<IpNet> {
        self.allocations()
            .get(node)
            .map(|v| v.iter().copied().collect())
            .unwrap_or_default()
    }

    pub fn pids(&self) -> Vec<(String, i32)> {
        let mut out = Vec::new();
        for r in &self.replicas {
            let p = r.pid.load(Ordering::SeqCst);
            if p > 0 {
                out.push(("allocator".to_owned(), p));
            }
        }
        for s in &self.speakers {
            if let Some(p) = &s.proc {
                out.push(("speaker".to_owned(), p.pid()));
            }
        }
        out
    }
}

pub fn cidrs_of(o: &serde_json::Value) -> Vec<IpNet> {
    o["spec"]["podCIDRs"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c.as_str()?.parse().ok()).collect())
        .unwrap_or_default()
}
