//! Running `podcidr-bgp speaker` with the `file` source against real routers.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::{Proc, TempDir, free_port, http_get, poll};

pub struct Peer {
    pub name: &'static str,
    pub address: IpAddr,
    pub port: u16,
    pub asn: u32,
    pub local: IpAddr,
    /// Extra YAML lines for this peer, indented by 4.
    pub extra: String,
}

impl Peer {
    /// A peer at a test router's listening address (`Bird::peer_addr`, `GoBgp::peer_addr`).
    pub fn at(
        name: &'static str,
        a: &integration_tests::TestPeerAddr,
        local: IpAddr,
        extra: &str,
    ) -> Peer {
        Peer {
            name,
            address: a.addr,
            port: a.port,
            asn: a.asn,
            local,
            extra: extra.to_owned(),
        }
    }
}

pub struct Speaker {
    pub proc: Proc,
    pub admin: SocketAddr,
    pub dir: TempDir,
}

pub const ROUTER_ID: &str = "192.0.2.31";

pub fn write_cidrs(dir: &TempDir, cidrs: &[&str]) {
    let tmp = dir.path("cidrs.yaml.tmp");
    std::fs::write(&tmp, format!("nodes:\n  node-a: [{}]\n", cidrs.join(", "))).unwrap();
    // Atomic replace, as a ConfigMap update does.
    std::fs::rename(tmp, dir.path("cidrs.yaml")).unwrap();
}

pub fn config(dir: &TempDir, admin: SocketAddr, top: &str, peers: &[Peer]) -> String {
    let mut s = format!(
        "nodeName: node-a\nasn: 4200000001\nrouterId: {ROUTER_ID}\n\
         source: {{kind: file, path: {}}}\n{top}\
         admin: {{listen: \"{admin}\"}}\nstatus: {{publish: false}}\npeers:\n",
        dir.path("cidrs.yaml").display()
    );
    for p in peers {
        // An unspecified local address means "let the kernel choose".
        let local = if p.local.is_unspecified() {
            String::new()
        } else {
            format!("    localAddress: {}\n", p.local)
        };
        s.push_str(&format!(
            "  - name: {}\n    address: {}\n    port: {}\n    asn: {}\n{local}    \
             connectRetry: {{base: 1, max: 2}}\n{}",
            p.name, p.address, p.port, p.asn, p.extra
        ));
    }
    s
}

impl Speaker {
    pub fn start(
        dir: TempDir,
        cidrs: &[&str],
        top: &str,
        peers: &[Peer],
        flags: &[&str],
    ) -> Speaker {
        let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        write_cidrs(&dir, cidrs);
        std::fs::write(dir.path("config.yaml"), config(&dir, admin, top, peers)).unwrap();
        Self::spawn(dir, admin, flags)
    }

    /// Starts again with the config already in `dir` (a restart).
    pub fn spawn(dir: TempDir, admin: SocketAddr, flags: &[&str]) -> Speaker {
        let cfg = dir.path("config.yaml");
        let log = dir.path(&format!("speaker-{}.log", std::process::id()));
        let mut args = vec![
            "speaker",
            "--config",
            cfg.to_str().unwrap(),
            "--config-poll-seconds",
            "1",
        ];
        args.extend_from_slice(flags);
        let proc = Proc::spawn(&args, &log);
        Speaker { proc, admin, dir }
    }

    /// `/debug/peers` of the running speaker.
    pub async fn peers(&self) -> Option<serde_json::Value> {
        let (code, body) = http_get(self.admin, "/debug/peers").await?;
        (code == 200)
            .then(|| serde_json::from_str(&body).ok())
            .flatten()
    }

    /// Waits (bounded polling of the child's admin endpoint) until peer `name` matches.
    pub async fn wait_peer(
        &self,
        name: &str,
        timeout: Duration,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let got = poll(timeout, || async {
            let v = self.peers().await?;
            let p = v["peers"]
                .as_array()?
                .iter()
                .find(|p| p["name"] == name)?
                .clone();
            pred(&p).then_some(p)
        })
        .await;
        got.unwrap_or_else(|| panic!("peer {name} never matched\n{}", self.proc.log()))
    }

    pub async fn metrics(&self) -> String {
        http_get(self.admin, "/metrics")
            .await
            .map(|(_, b)| b)
            .unwrap_or_default()
    }
}
