//! `cni` against the real binary: a missing config dir is an error the operator can see
//! (metric, `CNIConfigured` condition, log line) while the routes still go out; once the dir
//! exists the retry writes the conflist.

use crate::common;
use integration_tests::skip::Need;

use std::collections::BTreeSet;
use std::time::Duration;

use common::speaker::{Peer, Speaker};
use common::{TempDir, http_get, poll};
use integration_tests::{Bird, BirdConfig, BirdNeighbor, net};
use ipnet::IpNet;

const T: Duration = Duration::from_secs(30);

async fn cni_condition(s: &Speaker) -> Option<serde_json::Value> {
    let (_, body) = http_get(s.admin, "/debug/status").await?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "CNIConfigured")
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_conf_dir_is_reported_routes_still_go_out_and_the_retry_writes_it() {
    integration_tests::require!(Need::Bird);
    let ours = net::alloc_v4();
    let bird = Bird::start(
        BirdConfig::new(net::alloc_v4(), 65001)
            .neighbor(BirdNeighbor::new("spk", ours, 4_200_000_001).passive(true)),
    );
    let dir = TempDir::new("cni-conf-dir");
    let conf_dir = dir.path("net.d");
    let a = bird.peer_addr("spk");
    let top = format!("cni: {{enabled: true, confDir: {}}}\n", conf_dir.display());
    let s = Speaker::start(
        dir,
        &["198.19.5.0/24"],
        &top,
        &[Peer::at("bird", &a, ours.into(), "")],
        &[],
    );
    let want: BTreeSet<IpNet> = ["198.19.5.0/24".parse().unwrap()].into();
    assert!(
        bird.wait_until(T, |b| b
            .routes_from("spk")
            .iter()
            .map(|r| r.prefix)
            .collect::<BTreeSet<_>>()
            == want),
        "announcing does not wait for the CNI config\n{}",
        s.proc.log()
    );
    let failed = poll(T, || async {
        let c = cni_condition(&s).await?;
        (c["status"] == "False" && c["reason"] == "WriteFailed").then_some(c)
    })
    .await
    .unwrap_or_else(|| panic!("no WriteFailed condition\n{}", s.proc.log()));
    assert!(
        failed["message"]
            .as_str()
            .is_some_and(|m| m.contains("does not exist") && m.contains("net.d")),
        "{failed}"
    );
    let metrics = s.metrics().await;
    assert!(metrics.contains("podcidr_cni_config_ok 0"), "{metrics}");
    assert!(
        metrics.contains("podcidr_cni_config_writes_total{result=\"error\"}"),
        "{metrics}"
    );
    assert!(
        s.proc.log().contains("CNI config not written"),
        "{}",
        s.proc.log()
    );

    // The dir appears (the mount is fixed): the retry writes the conflist.
    std::fs::create_dir_all(&conf_dir).unwrap();
    let written = poll(T, || async {
        let c = cni_condition(&s).await?;
        (c["status"] == "True").then_some(())
    })
    .await;
    assert!(written.is_some(), "{}", s.proc.log());
    let text = std::fs::read_to_string(conf_dir.join("10-podcidr-bgp.conflist")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        doc["plugins"][0]["ipam"]["ranges"],
        serde_json::json!([[{"subnet": "198.19.5.0/24"}]])
    );
    assert!(s.metrics().await.contains("podcidr_cni_config_ok 1"));
}
