//! One BFD session next to each BGP session that has `bfd` configured. Its events go to the
//! core with the session's, which decides what they mean for BGP (`core::bfd_gate`).

use std::io;
use std::net::IpAddr;
use std::time::Duration;

use bgp_io::bfd::driver::{self, BfdTask, StopMode};

use bgp_io::bfd::udp::{SourcePort, UdpTransport, stable_source_port};
use bgp_io::driver::SessionEvent;
use bgp_io::transport::interface_index;
use bgp_proto::bfd::auth::sequence_floor;
use bgp_proto::bfd::{BfdAuthKey, BfdSession, BfdSessionConfig};
use podcidr_config::{BfdAuthConfig, BfdAuthType, PeerAddress, PeerConfig};
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;

/// Upper bound on a planned stop's packets: AdminDown for a detection time, at most
/// `driver::ADMIN_DOWN_LIMIT` (3 s), or a handover's three Polls.
pub(super) const BFD_STOP_WAIT: Duration = Duration::from_secs(4);

#[derive(Debug)]
pub(super) struct BfdHandle {
    pub(super) task: BfdTask,
    forward: JoinHandle<()>,
    /// The authentication it runs with: another one needs a new session.
    pub(super) authentication: Option<BfdAuthConfig>,
}

impl BfdHandle {
    /// Ends BFD the way `mode` says, bounded (AdminDown and handover send a few packets).
    pub(super) async fn stop(self, mode: StopMode) {
        self.task.stop(mode);
        if tokio::time::timeout(BFD_STOP_WAIT, self.task.wait())
            .await
            .is_err()
        {
            tracing::warn!("BFD AdminDown not sent within {BFD_STOP_WAIT:?}");
        }
        self.forward.abort();
    }
}

fn session_config(p: &PeerConfig) -> Option<BfdSessionConfig> {
    let b = p.bfd.as_ref()?;
    Some(BfdSessionConfig {
        // Random and non-zero (RFC 5880 §6.3); one session per peer address, so no clash
        // within this process.
        my_discriminator: fastrand::u32(1..),
        desired_min_tx: b.min_tx,
        required_min_rx: b.min_rx,
        detect_mult: b.multiplier,
        jitter_seed: fastrand::u64(..),
    })
}

/// The session's key, read from `secretFile` now (so a rotated file takes effect at the
/// next BFD session; the error never shows the key).
fn auth_key(a: &BfdAuthConfig) -> io::Result<BfdAuthKey> {
    let secret = podcidr_config::load_bfd_key(&a.secret_file)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    let meticulous = a.auth_type == BfdAuthType::MeticulousKeyedSha1;
    BfdAuthKey::new(meticulous, a.key_id, &secret)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
}

/// Starts BFD for `p` (when configured); its events reach `events` as the session's do.
pub(super) fn start(
    p: &PeerConfig,
    restarting: bool,
    events: mpsc::Sender<(String, SessionEvent)>,
) -> Option<io::Result<BfdHandle>> {
    let cfg = session_config(p)?;
    let authentication = p.bfd.as_ref().and_then(|b| b.authentication.clone());
    let auth = match authentication.as_ref().map(auth_key).transpose() {
        Ok(k) => k,
        Err(e) => return Some(Err(e)),
    };
    // A default gateway is resolved (to an address, or an interface peer for a link-local
    // router) before a session starts.
    let (peer, scope) = match &p.address {
        PeerAddress::Fixed(ip) => (*ip, 0),
        // Link-local: the interface is the scope (RFC 4007), looked up at each start.
        PeerAddress::Interface {
            name,
            peer: Some(ll),
        } => match interface_index(name) {
            Ok(index) => (IpAddr::V6(*ll), index),
            Err(e) => {
                return Some(Err(io::Error::new(
                    e.kind(),
                    format!("interface {name}: {e}"),
                )));
            }
        },
        other => {
            return Some(Err(io::Error::other(format!(
                "BFD needs the peer's address, not {other}"
            ))));
        }
    };
    let key = source_key(p.local_address, peer, p.address.interface());
    // BFD runs on its own thread and runtime, so nothing else the speaker does can delay
    // its timers (`bgp_io::bfd::runtime`); its sockets are made inside that runtime, so
    // its reactor polls them, and the control port's receive task is spawned there too.
    let runtime = match bgp_io::bfd::runtime::handle() {
        Ok(rt) => rt,
        Err(e) => return Some(Err(e)),
    };
    let bound = {
        let _bfd = runtime.enter();
        bind(&p.name, p.local_address, (peer, scope), &key, restarting)
    };
    let (transport, restarting) = match bound {
        Ok(t) => t,
        Err(e) => return Some(Err(e)),
    };
    let (tx, rx) = broadcast::channel(64);
    // After a planned restart the peer may still run our previous process's session, and
    // believes in it for the window that process announced: the same config gives the same
    // window.
    let session = if restarting {
        BfdSession::resuming(cfg, super::bfd_gate::handover_window(p))
    } else {
        BfdSession::new(cfg)
    };
    // bfd.XmitAuthSeq starts at the wall clock's floor (not at random, RFC 5880 §6.8.1's
    // SHOULD): Keyed SHA1 then continues where the previous process left off
    // (`auth::sequence_floor`, docs/bgp.md).
    let session = match auth {
        Some(k) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            session.with_auth(k, sequence_floor(now))
        }
        None => session,
    };
    let task = driver::spawn_on(&runtime, session, peer, transport, tx);
    let forward = tokio::spawn(super::forward_events(
        p.name.clone(),
        rx,
        events,
        SessionEvent::Bfd,
    ));
    Some(Ok(BfdHandle {
        task,
        forward,
        authentication,
    }))
}

/// What names a session's source port: the same in the next process for the same peer.
fn source_key(local: Option<IpAddr>, peer: IpAddr, interface: Option<&str>) -> String {
    let local = local.map_or_else(|| "*".to_owned(), |l| l.to_string());
    format!("{local}>{peer}%{}", interface.unwrap_or(""))
}

/// The transport, and whether the session may continue the previous process's. RFC 5881 §4:
/// a session keeps its source port for life, so continuing one needs the port it had (the
/// stable port of `key`); without it the session starts afresh, which the peer sees as BFD
/// Down, rather than continue from another port.
fn bind(
    name: &str,
    local: Option<IpAddr>,
    (peer, scope): (IpAddr, u32),
    key: &str,
    restarting: bool,
) -> io::Result<(UdpTransport, bool)> {
    let port = stable_source_port(key);
    if restarting {
        match UdpTransport::bind_with(local, peer, scope, SourcePort::Exactly(port)) {
            Ok(t) => return Ok((t, true)),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                tracing::warn!(peer = %name, error = %e, "the BFD source port of the previous process is taken; starting a new BFD session (RFC 5881 §4), which the peer sees as BFD Down");
                return Ok((
                    UdpTransport::bind_with(local, peer, scope, SourcePort::Any)?,
                    false,
                ));
            }
            Err(e) => return Err(e),
        }
    }
    let t = UdpTransport::bind_with(local, peer, scope, SourcePort::Prefer(port))?;
    let got = t.source_port()?;
    if got != port {
        tracing::warn!(peer = %name, port, got, "BFD source port taken; this session uses another, so after a planned restart the next process starts a new BFD session");
    }
    Ok((t, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    fn ips(local: &str, peer: &str) -> (Option<IpAddr>, IpAddr) {
        (Some(local.parse().unwrap()), peer.parse().unwrap())
    }

    #[tokio::test]
    async fn restart_continues_from_the_same_source_port_rfc5881_4() {
        let (local, ip) = ips("127.0.0.81", "127.0.0.82");
        let key = source_key(local, ip, None);
        let (first, _) = bind("tor", local, (ip, 0), &key, false).unwrap();
        let port = first.source_port().unwrap();
        assert_eq!(port, stable_source_port(&key));
        drop(first);
        let (next, resume) = bind("tor", local, (ip, 0), &key, true).unwrap();
        assert!(resume);
        assert_eq!(next.source_port().unwrap(), port);
    }

    #[tokio::test]
    async fn restart_without_its_source_port_starts_a_new_session_rfc5881_4() {
        let (local, ip) = ips("127.0.0.83", "127.0.0.84");
        let key = source_key(local, ip, None);
        let port = stable_source_port(&key);
        let _taken = UdpSocket::bind(("127.0.0.83", port)).unwrap();
        let (t, resume) = bind("tor", local, (ip, 0), &key, true).unwrap();
        assert!(!resume, "another port is another session");
        assert_ne!(t.source_port().unwrap(), port);
    }

    /// A bad BFD key file rejects the config before any session changes (as `passwordFile`
    /// does), naming the field and never the key.
    #[test]
    fn bad_bfd_key_file_is_refused_naming_its_field_rfc5880_4_4() {
        let dir = std::env::temp_dir().join(format!("bfd-check-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("key");
        std::fs::write(&key, "twenty-one-bytes-long\n").unwrap();
        let yaml = format!(
            "nodeName: node1\nasn: 64512\nrouterId: 198.18.0.2\nsource: {{kind: file, path: /x}}\n\
             peers:\n  - name: tor\n    address: 198.18.0.1\n    asn: 65000\n    \
             bfd: {{authentication: {{type: keyed-sha1, keyId: 1, secretFile: {}}}}}\n",
            key.display()
        );
        let config = podcidr_config::Config::from_yaml_str(&yaml).unwrap();
        let err = super::super::check_keys(&config.peers)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("peers[tor].bfd.authentication.secretFile: ")
                && err.contains("21 bytes, the limit is 20"),
            "{err}"
        );
        assert!(!err.contains("twenty-one"), "{err}");
        std::fs::write(&key, "twenty-bytes-long!!!\n").unwrap();
        assert!(super::super::check_keys(&config.peers).is_ok());
        let peer = &config.peers[0];
        let a = peer.bfd.as_ref().unwrap().authentication.as_ref().unwrap();
        assert!(!format!("{:?}", auth_key(a).unwrap()).contains("twenty"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A stall of the speaker's runtime (a long synchronous JSON render, a starved worker)
    /// must not delay BFD: the peer's detection time of us runs out while our timers wait
    /// for the runtime, our session goes Down and tells the ToR, which flushes (RFC 5880
    /// §6.8.4). BFD has its own thread and runtime (`bgp_io::bfd::runtime`).
    #[test]
    fn bfd_keeps_its_timers_while_the_speakers_runtime_is_stalled_rfc5880_6_8_4() {
        use bgp_io::bfd::driver::BfdStatus;
        use bgp_proto::bfd::{BfdEvent, BfdState};
        let (ours, theirs) = ("127.0.0.85", "127.0.0.86");
        let yaml = format!(
            "asn: 65010\nrouterId: 192.0.2.10\nsource: {{kind: file, path: /x}}\npeers:\n  - {{name: tor, address: {theirs}, asn: 65000, localAddress: {ours}, bfd: {{minTx: 100, minRx: 100, multiplier: 3}}}}\n"
        );
        let p = podcidr_config::Config::from_yaml_str(&yaml).unwrap().peers[0].clone();
        // The peer: a BFD session on a runtime and thread of its own, like a ToR.
        let peer_rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let peer_handle = peer_rt.handle().clone();
        let (end_peer, ended) = tokio::sync::oneshot::channel::<()>();
        let peer_thread = std::thread::spawn(move || peer_rt.block_on(ended));
        let (peer_events, mut peer_heard) = broadcast::channel(256);
        let peer = {
            let _in = peer_handle.enter();
            let t = UdpTransport::bind(theirs.parse().ok(), ours.parse().unwrap()).unwrap();
            let cfg = session_config(&p).unwrap();
            driver::spawn_on(
                &peer_handle,
                BfdSession::new(cfg),
                ours.parse().unwrap(),
                t,
                peer_events,
            )
        };
        // The speaker's runtime: one worker, which the test then blocks.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (events, _keep) = mpsc::channel(64);
            let h = start(&p, false, events).unwrap().unwrap();
            let up = |s: &BfdStatus| s.state == BfdState::Up;
            let (mut mine, mut theirs) = (h.task.status.clone(), peer.status.clone());
            tokio::time::timeout(Duration::from_secs(10), async {
                mine.wait_for(up).await.unwrap();
                theirs.wait_for(up).await.unwrap();
            })
            .await
            .expect("BFD Up within 10 s");
            while peer_heard.try_recv().is_ok() {}
            // The stall: five of the peer's detection times (3 × 100 ms).
            std::thread::sleep(Duration::from_millis(1500));
            let mut down = Vec::new();
            while let Ok(ev) = peer_heard.try_recv() {
                if let BfdEvent::StateChanged { to, diag, .. } = ev {
                    down.push((to, diag));
                }
            }
            assert!(
                down.is_empty(),
                "the peer saw our BFD change during the stall: {down:?}"
            );
            assert_eq!(h.task.status.borrow().state, BfdState::Up);
            h.stop(StopMode::Silent).await;
        });
        peer.stop(StopMode::Silent);
        let _ = end_peer.send(());
        peer_thread.join().unwrap().unwrap();
    }

    #[test]
    fn source_key_tells_interfaces_apart() {
        let ll: IpAddr = "fe80::1".parse().unwrap();
        assert_ne!(
            source_key(None, ll, Some("eth0")),
            source_key(None, ll, Some("eth1"))
        );
    }
}
