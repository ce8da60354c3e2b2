//! The datapath gate's prober: asks the node's service proxy (kube-proxy, Cilium) on each
//! Service's `healthCheckNodePort` whether it has a local endpoint, as cloud load balancers
//! do, once a second, and tells the core when an answer changes. The core decides (hold-down,
//! what is announced); this only asks.
//!
//! The answer kube-proxy gives (`pkg/proxy/healthcheck`): HTTP 200 with
//! `{"service": {...}, "localEndpoints": N}` and N > 0 while the node serves the Service, 503
//! with `"localEndpoints": 0` while it does not.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use podcidr_services::ServiceKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::core::Event;
use super::core::services::ProbeTargets;

/// How often each Service is asked.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// Bound on one probe (connect, request, answer).
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// Bound on an answer's size: the proxy's is a few hundred bytes.
const MAX_ANSWER: u64 = 16 * 1024;

pub struct Prober {
    targets: watch::Sender<ProbeTargets>,
    task: JoinHandle<()>,
}

impl Prober {
    pub fn spawn(first: ProbeTargets, events: mpsc::Sender<Event>) -> Self {
        let (targets, rx) = watch::channel(first);
        Prober {
            targets,
            task: tokio::spawn(run(rx, events)),
        }
    }

    pub fn set(&self, targets: ProbeTargets) {
        self.targets.send_replace(targets);
    }

    pub fn abort(&self) {
        self.task.abort();
    }
}

async fn run(mut targets: watch::Receiver<ProbeTargets>, events: mpsc::Sender<Event>) {
    let mut last: Option<BTreeMap<ServiceKey, Result<(), String>>> = None;
    let mut tick = tokio::time::interval(PROBE_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            changed = targets.changed() => if changed.is_err() { return },
        }
        let t = targets.borrow_and_update().clone();
        let probes = t.services.iter().map(|(key, port)| {
            let at = SocketAddr::new(t.address, *port);
            async move { (key.clone(), probe(at).await) }
        });
        let answers: BTreeMap<_, _> = futures::future::join_all(probes)
            .await
            .into_iter()
            .collect();
        if last.as_ref() != Some(&answers) {
            last = Some(answers.clone());
            if events.send(Event::ServiceProbes(answers)).await.is_err() {
                return;
            }
        }
    }
}

/// One question to the proxy: `Ok` when it reports a local endpoint, else what it said.
pub async fn probe(at: SocketAddr) -> Result<(), String> {
    match tokio::time::timeout(PROBE_TIMEOUT, ask(at)).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "{at}: no answer within {} s",
            PROBE_TIMEOUT.as_secs()
        )),
    }
}

async fn ask(at: SocketAddr) -> Result<(), String> {
    let mut stream = tokio::net::TcpStream::connect(at)
        .await
        .map_err(|e| format!("{at}: {e}"))?;
    let request = format!("GET / HTTP/1.1\r\nHost: {at}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("{at}: {e}"))?;
    let mut answer = Vec::new();
    stream
        .take(MAX_ANSWER)
        .read_to_end(&mut answer)
        .await
        .map_err(|e| format!("{at}: {e}"))?;
    verdict(&String::from_utf8_lossy(&answer)).map_err(|e| format!("{at}: {e}"))
}

/// Reads the proxy's HTTP answer.
fn verdict(answer: &str) -> Result<(), String> {
    let status = answer
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or("not an HTTP answer")?;
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let local = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["localEndpoints"].as_u64());
    match (status, local) {
        (200, None) => Ok(()),
        (200, Some(n)) if n > 0 => Ok(()),
        (code, Some(n)) => Err(format!("HTTP {code}, localEndpoints {n}")),
        (code, None) => Err(format!("HTTP {code}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_proxy_answers_are_read_as_served_or_not() {
        let ok = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"service\":{\"namespace\":\"shop\",\"name\":\"web\"},\"localEndpoints\":2}";
        assert_eq!(verdict(ok), Ok(()));
        let none = "HTTP/1.1 503 Service Unavailable\r\n\r\n{\"service\":{\"namespace\":\"shop\",\"name\":\"web\"},\"localEndpoints\":0}";
        assert_eq!(verdict(none), Err("HTTP 503, localEndpoints 0".into()));
        assert_eq!(verdict("HTTP/1.1 500 Oops\r\n\r\n"), Err("HTTP 500".into()));
        assert!(verdict("garbage").is_err());
    }
}
