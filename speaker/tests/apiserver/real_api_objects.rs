//! Configuration objects (`bgp.podcidr.io/v1beta1` `BGPSpeakerConfig`, `BGPPeer`) on the real
//! kube-apiserver (the newest the suite builds) with etcd: the CRDs from deploy/ (as the
//! other CRDs, generated from
//! the Rust types), objects applied with kubectl as a person would, and the speaker as its
//! shipped ServiceAccount (`--config-source kubernetes`, the DaemonSet's mode) peering with
//! BIRD over TCP MD5 from them, its key read from a Secret it may watch by name only.
//!
//! The server refuses what the schema and the CEL rules refuse (a peer AS of 23456, AS_TRANS);
//! what only the reader refuses (a community that does not parse) is stored, and the speaker
//! refuses it, keeps the last good version and says so on its NodeBGPStatus.

use crate::common;
use integration_tests::skip::Need;

use std::net::IpAddr;

use common::real_api::{
    self, ControlPlane, LEASE_NS, SYSTEM_NS, WAIT, condition, poll_blocking, requests_by, runtime,
};
use common::{Proc, TempDir, free_port, http_get};
use integration_tests::{Bird, BirdConfig, BirdNeighbor, net};
use serde_json::{Value, json};

const OUR_ASN: u32 = 4_200_000_001;
const POD_CIDR: &str = "10.244.1.0/24";

fn apply(cp: &ControlPlane, obj: &Value) {
    cp.kubectl_with_input(cp.admin(), &["apply", "-f", "-"], Some(&obj.to_string()))
        .unwrap_or_else(|e| panic!("kubectl apply {obj}: {e}"));
}

fn patch_peer(cp: &ControlPlane, spec: &Value) -> Result<String, String> {
    let body = json!({"spec": spec}).to_string();
    cp.kubectl_as(
        cp.admin(),
        &[
            "patch",
            "bgppeers.bgp.podcidr.io",
            "tor",
            "--type=merge",
            "-p",
            &body,
        ],
    )
}

/// node-a's NodeBGPStatus once `pred` holds for it.
fn status_when(cp: &ControlPlane, speaker: &Proc, pred: impl Fn(&Value) -> bool) -> Value {
    poll_blocking(WAIT, || {
        let out = cp
            .kubectl_as(cp.admin(), &["get", "nbs", "node-a", "-o", "json"])
            .ok()?;
        let v: Value = serde_json::from_str(&out).ok()?;
        pred(&v).then_some(v)
    })
    .unwrap_or_else(|| {
        let now = cp
            .kubectl_as(cp.admin(), &["get", "nbs", "node-a", "-o", "yaml"])
            .unwrap_or_default();
        panic!("node-a's status never matched:\n{now}\n{}", speaker.log())
    })
}

fn peer_generation(status: &Value) -> Option<i64> {
    status["status"]["config"]["peers"][0]["generation"].as_i64()
}

/// The kubectl-applied objects configure the speaker end to end: BIRD learns the pod CIDR
/// over an MD5 session; an edit reaches it (the peer's generation in the status, the session
/// reset for the new hold time); an invalid edit leaves the session and its routes alone and
/// the status says `LastGood`; the schema refuses a wrong type naming the field; and the
/// speaker's ServiceAccount is never refused anything.
#[test]
fn speaker_runs_from_kubectl_applied_objects_with_an_md5_secret_and_keeps_the_last_good_peer() {
    integration_tests::require!(Need::Bird);
    let cp = integration_tests::needs!(real_api::installed_control_plane());
    // The shipped examples (default.yaml and what `config convert` made of each file
    // example) pass the server's schema as a person applies them.
    let examples =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples/objects");
    for entry in std::fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path();
        let example = std::fs::read_to_string(&path).unwrap();
        cp.kubectl_with_input(
            cp.admin(),
            &["apply", "--dry-run=server", "-f", "-"],
            Some(&example),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let ours = net::alloc_v4();
    let router = Bird::start(
        BirdConfig::new(net::alloc_v4(), 65001).neighbor(
            BirdNeighbor::new("tor1", ours, OUR_ASN)
                .passive(true)
                .password("change-me"),
        ),
    );
    let tor = router.peer_addr("tor1");
    cp.create_node("node-a", "198.18.0.10", &[POD_CIDR]);
    cp.kubectl(&["label", "node", "node-a", "bgp.example/rack=r1"]);
    apply(
        &cp,
        &json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "podcidr-bgp-md5", "namespace": SYSTEM_NS},
                "stringData": {"tor": "change-me", "tor_bfd": "bfd-key"}}),
    );
    apply(
        &cp,
        &json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPSpeakerConfig",
                "metadata": {"name": "rack-r1"},
                "spec": {"nodeSelector": {"matchLabels": {"bgp.example/rack": "r1"}},
                         "asn": OUR_ASN, "source": {"kind": "node-spec"},
                         "allowedPrefixes": ["10.244.0.0/16"],
                         "status": {"minInterval": 1}}}),
    );
    let IpAddr::V4(tor_ip) = tor.addr else {
        panic!("an IPv4 router")
    };
    apply(
        &cp,
        &json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPPeer",
                "metadata": {"name": "tor"},
                "spec": {"nodeSelector": {"matchLabels": {"bgp.example/rack": "r1"}},
                         "address": tor_ip.to_string(), "port": tor.port, "asn": tor.asn,
                         "localAddress": ours.to_string(), "holdTime": 90,
                         "passwordSecretRef": {"name": "podcidr-bgp-md5", "key": "tor"}}}),
    );

    let id = real_api::speaker_identity(&cp, "node-a");
    let dir = TempDir::new("real-api-objects");
    let admin = format!("127.0.0.1:{}", free_port());
    let keys = dir.path("keys");
    let speaker = Proc::spawn_with_env(
        &[
            "speaker",
            "--config-source=kubernetes",
            &format!("--admin-listen={admin}"),
            &format!("--key-dir={}", keys.display()),
            "--kubeconfig",
            id.kubeconfig.to_str().unwrap(),
            "--lease-namespace",
            LEASE_NS,
        ],
        &[
            ("NODE_NAME", "node-a"),
            ("POD_NAMESPACE", SYSTEM_NS),
            ("POD_NAME", "speaker-node-a"),
        ],
        &dir.path("speaker.log"),
    );

    let learned = router.wait_until(WAIT, |b| {
        b.routes_from("tor1")
            .iter()
            .any(|r| r.prefix.to_string() == POD_CIDR)
    });
    assert!(learned, "{}\n{}", speaker.log(), router.diagnostics());
    let applied = status_when(&cp, &speaker, |v| {
        condition(v, "ConfigApplied")["status"] == "True" && peer_generation(v) == Some(1)
    });
    assert_eq!(
        applied["status"]["config"]["speakerConfig"]["name"],
        "rack-r1"
    );
    assert_eq!(applied["status"]["peers"][0]["bgpPeer"], "tor");

    // An edit: the peer's new hold time reaches the node (generation 2), the session is
    // reset for it and comes back with the route.
    let since = router.protocol("tor1").since;
    patch_peer(&cp, &json!({"holdTime": 60})).unwrap();
    status_when(&cp, &speaker, |v| {
        condition(v, "ConfigApplied")["status"] == "True" && peer_generation(v) == Some(2)
    });
    let reset = router.wait_until(WAIT, |b| {
        let p = b.protocol("tor1");
        p.info == "Established"
            && p.since != since
            && b.routes_from("tor1")
                .iter()
                .any(|r| r.prefix.to_string() == POD_CIDR)
    });
    assert!(
        reset,
        "hold time 60 resets the session\n{}",
        router.diagnostics()
    );

    // The schema refuses a wrong type, naming the field, and the CRD's CEL rule refuses
    // AS_TRANS: neither is ever stored.
    let refused = patch_peer(&cp, &json!({"holdTime": "soon"}));
    let err = refused.expect_err("holdTime: \"soon\" matches no duration");
    assert!(err.contains("spec.holdTime"), "{err}");
    let err = patch_peer(&cp, &json!({"asn": 23456})).expect_err("the CEL rule refuses AS_TRANS");
    assert!(err.contains("asn 23456 (AS_TRANS)"), "{err}");

    // What only the reader refuses (a community that does not parse; the schema types it as a
    // string) is stored: the speaker keeps generation 2 running, the session untouched, and
    // says why. "Untouched": the speaker applies no reload that resets a session (it logs
    // each with its count, `reset=N`). Neither BIRD's `since` (it once moved 2 ms while
    // Established) nor the flap counter (a reset re-creates the peer's series) says so
    // reliably.
    let resets = |log: &str| {
        log.lines()
            .filter(|l| l.contains("config reloaded") && !l.contains("reset=0"))
            .count()
    };
    let before = resets(&speaker.log());
    assert!(
        before >= 1,
        "the hold-time edit reset the session:\n{}",
        speaker.log()
    );
    patch_peer(&cp, &json!({"communities": ["65000:bogus"]})).unwrap();
    let last_good = status_when(&cp, &speaker, |v| {
        condition(v, "ConfigApplied")["reason"] == "LastGood"
    });
    assert_eq!(peer_generation(&last_good), Some(2), "{last_good}");
    let why = last_good["status"]["config"]["peers"][0]["lastGood"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("65000:bogus"), "{last_good}");
    assert_eq!(router.protocol("tor1").info, "Established");
    assert!(
        router
            .routes_from("tor1")
            .iter()
            .any(|r| r.prefix.to_string() == POD_CIDR)
    );
    assert_eq!(
        resets(&speaker.log()),
        before,
        "no reset for the refused edit:\n{}",
        speaker.log()
    );
    let metrics = runtime()
        .block_on(http_get(admin.parse().unwrap(), "/metrics"))
        .map(|(_, b)| b)
        .unwrap_or_default();
    assert!(
        metrics.contains("podcidr_config_stale 1"),
        "the last good version shows as stale config:\n{metrics}"
    );

    // The key file is the speaker's own: 0400 in its key directory.
    use std::os::unix::fs::PermissionsExt;
    let key = keys.join("podcidr-bgp-md5/tor");
    assert_eq!(std::fs::read(&key).unwrap(), b"change-me");
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o400
    );

    // Every call the speaker made was allowed (RBAC grew by exactly the config kinds and the
    // one named Secret: per-name list/watch is authorized by resourceNames).
    drop(speaker);
    let refused: Vec<_> = requests_by(&cp, &id.username)
        .into_iter()
        .filter(|r| r.code == 403)
        .collect();
    assert!(refused.is_empty(), "refused: {refused:#?}");
    let secret_reads: Vec<_> = requests_by(&cp, &id.username)
        .into_iter()
        .filter(|r| r.resource == "secrets")
        .collect();
    assert!(
        !secret_reads.is_empty()
            && secret_reads
                .iter()
                .all(|r| r.uri.contains("metadata.name%3Dpodcidr-bgp-md5")
                    || r.name == "podcidr-bgp-md5"),
        "{secret_reads:#?}"
    );
}

/// `Accepted` on every object of a kind, by name: `(reason, observedGeneration)`.
fn accepted(cp: &ControlPlane, plural: &str) -> std::collections::BTreeMap<String, (String, i64)> {
    let list = real_api::get_json(cp, &[&format!("{plural}.v1beta1.bgp.podcidr.io")]);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| {
            let c = o["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Accepted")?;
            Some((
                o["metadata"]["name"].as_str()?.to_owned(),
                (
                    c["reason"].as_str()?.to_owned(),
                    o["status"]["observedGeneration"].as_i64()?,
                ),
            ))
        })
        .collect()
}

/// The allocator's leader is the one writer of the objects' status (issue 22): with no
/// speaker running, kubectl-applied objects get `Accepted` True (`Valid`) or False with
/// `Conflict` (the younger of two where they meet, the nodes named), `SecretNotFound` (a key
/// the speakers' Secret lacks, for a TCP MD5 or a BFD key) or `Invalid` (a community only the reader refuses); a fix is
/// seen at its new generation; the allocator's ServiceAccount is refused nothing, and each
/// refusal is an Event on the object.
#[test]
fn the_allocator_writes_each_objects_accepted_condition_as_the_one_writer() {
    integration_tests::require!(Need::Bird);
    let cp = integration_tests::needs!(real_api::installed_control_plane());
    cp.create_node("node-a", "198.18.0.10", &[]);
    cp.create_node("node-b", "198.18.0.11", &[]);
    cp.kubectl(&["label", "node", "node-a", "bgp.example/rack=r1"]);
    apply(
        &cp,
        &json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "podcidr-bgp-md5", "namespace": SYSTEM_NS},
                "stringData": {"tor": "change-me", "tor_bfd": "bfd-key"}}),
    );
    let config = |name: &str, selector: Value| {
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPSpeakerConfig",
               "metadata": {"name": name},
               "spec": {"nodeSelector": selector, "asn": OUR_ASN, "source": {"kind": "node-spec"},
                        "allowedPrefixes": ["10.244.0.0/16"]}})
    };
    let peer = |name: &str, spec: Value| {
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPPeer",
               "metadata": {"name": name}, "spec": spec})
    };
    apply(&cp, &config("all", json!({})));
    apply(
        &cp,
        &peer(
            "tor",
            json!({"address": "192.0.2.1", "asn": 65000,
        "passwordSecretRef": {"name": "podcidr-bgp-md5", "key": "tor"},
        "bfd": {"authentication": {"type": "keyed-sha1", "keyId": 1,
                                   "secretRef": {"name": "podcidr-bgp-md5", "key": "tor_bfd"}}}}),
        ),
    );
    apply(
        &cp,
        &peer(
            "no-key",
            json!({"address": "192.0.2.3", "asn": 65000,
        "passwordSecretRef": {"name": "podcidr-bgp-md5", "key": "nope"}}),
        ),
    );
    apply(
        &cp,
        &peer(
            "no-bfd-key",
            json!({"address": "192.0.2.5", "asn": 65000,
        "bfd": {"authentication": {"type": "meticulous-keyed-sha1", "keyId": 255,
                                   "secretRef": {"name": "podcidr-bgp-md5", "key": "nope_bfd"}}}}),
        ),
    );
    apply(
        &cp,
        &peer(
            "bad-community",
            json!({"address": "192.0.2.4", "asn": 65004, "communities": ["65000:bogus"]}),
        ),
    );
    // Created after their rivals and named after them: with equal priorities the name
    // decides ("all" < "rack-r1", "tor" < "tor-again"), never the creation time.
    apply(
        &cp,
        &config(
            "rack-r1",
            json!({"matchLabels": {"bgp.example/rack": "r1"}}),
        ),
    );
    apply(
        &cp,
        &peer("tor-again", json!({"address": "192.0.2.1", "asn": 65001})),
    );

    let id = real_api::allocator_identity(&cp);
    let dir = TempDir::new("real-api-object-status");
    let run = real_api::AllocatorRun {
        pod: "allocator-0",
        pool: Some("10.20.0.0/16"),
        extra: &["--speaker-namespace", SYSTEM_NS],
    };
    let (allocator, _admin) = run.spawn(&dir, &id);
    let want = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(n, r)| ((*n).to_owned(), (*r).to_owned()))
            .collect()
    };
    let reasons = |plural| -> std::collections::BTreeMap<String, String> {
        accepted(&cp, plural)
            .into_iter()
            .map(|(n, (r, _))| (n, r))
            .collect()
    };
    let peers_want = want(&[
        ("bad-community", "Invalid"),
        ("no-bfd-key", "SecretNotFound"),
        ("no-key", "SecretNotFound"),
        ("tor", "Valid"),
        ("tor-again", "Conflict"),
    ]);
    let configs_want = want(&[("all", "Valid"), ("rack-r1", "Conflict")]);
    let settled = poll_blocking(WAIT, || {
        (reasons("bgppeers") == peers_want && reasons("bgpspeakerconfigs") == configs_want)
            .then_some(())
    });
    assert!(
        settled.is_some(),
        "peers {:?}, configs {:?}\n{}",
        reasons("bgppeers"),
        reasons("bgpspeakerconfigs"),
        allocator.log()
    );
    // kstatus's Ready beside Accepted (what Flux, `kubectl wait` and the Argo CD health
    // check read), as the server stored it: the same status, reason and generation.
    for plural in ["bgppeers", "bgpspeakerconfigs"] {
        let list = real_api::get_json(&cp, &[&format!("{plural}.bgp.podcidr.io")]);
        for o in list["items"].as_array().unwrap() {
            let conditions = o["status"]["conditions"].as_array().unwrap();
            let of = |t: &str| conditions.iter().find(|c| c["type"] == t).cloned();
            let (accepted, ready) = (of("Accepted").unwrap(), of("Ready").expect("Ready"));
            for field in ["status", "reason", "observedGeneration"] {
                assert_eq!(ready[field], accepted[field], "{field}: {o}");
            }
            assert_eq!(
                ready["observedGeneration"], o["metadata"]["generation"],
                "{o}"
            );
        }
    }
    let again = real_api::get_json(&cp, &["bgppeers.bgp.podcidr.io", "tor-again"]);
    // Nothing that changes with node churn (issue 30 item 6): no node count, no node list;
    // the conflict itself, named.
    assert!(again["status"]["selectedNodes"].is_null(), "{again}");
    assert!(again["status"]["notApplied"].is_null(), "{again}");
    let condition = again["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Accepted")
        .unwrap();
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.starts_with("not applied on some nodes it selects: ")
            && message.contains("BGPPeer tor has the same priority"),
        "{message}"
    );
    // A BFD key is checked as the MD5 key is, and named at its own field.
    let no_bfd_key = real_api::get_json(&cp, &["bgppeers.bgp.podcidr.io", "no-bfd-key"]);
    assert!(
        no_bfd_key["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Accepted"
                && c["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("spec.bfd.authentication.secretRef: "))),
        "{no_bfd_key}"
    );
    // The printer column a person reads.
    let table = cp.kubectl(&["get", "bgppeers.bgp.podcidr.io", "bad-community"]);
    assert!(table.contains("False"), "{table}");

    // A refusal is an Event on the object (events.k8s.io/v1, namespace default, where a
    // current server takes Events about cluster-scoped objects), stored.
    let event_creates: Vec<_> = real_api::calls_by(&cp, &id.username, 0)
        .into_iter()
        .filter(|c| c.rbac_resource == "events" && c.verb == "create")
        .collect();
    assert!(
        !event_creates.is_empty() && event_creates.iter().all(|c| c.code == 201),
        "{event_creates:#?}"
    );
    let events = cp.kubectl(&[
        "get",
        "events.events.k8s.io",
        "-n",
        "default",
        "--field-selector=regarding.name=bad-community",
        "-o",
        "jsonpath={.items[*].reason}",
    ]);
    assert!(!events.trim().is_empty(), "an Event about bad-community");

    // The fix is seen at its generation.
    apply(
        &cp,
        &peer(
            "bad-community",
            json!({"address": "192.0.2.4", "asn": 65004}),
        ),
    );
    let fixed = poll_blocking(WAIT, || {
        (accepted(&cp, "bgppeers").get("bad-community") == Some(&("Valid".to_owned(), 2)))
            .then_some(())
    });
    assert!(
        fixed.is_some(),
        "{:?}\n{}",
        accepted(&cp, "bgppeers"),
        allocator.log()
    );
    // The fix is a new generation: its rollout (status.rollout, as the server's schema
    // stores it) goes through its waves and completes, no speaker reporting to hold it.
    let rolled = poll_blocking(WAIT, || {
        let o = real_api::get_json(&cp, &["bgppeers.bgp.podcidr.io", "bad-community"]);
        let r = &o["status"]["rollout"];
        (r["generation"] == 2 && r["state"] == "Complete").then_some(o)
    });
    assert!(
        rolled.is_some(),
        "{}\n{}",
        real_api::get_json(&cp, &["bgppeers.bgp.podcidr.io", "bad-community"]),
        allocator.log()
    );

    drop(allocator);
    let refused: Vec<_> = real_api::calls_by(&cp, &id.username, 0)
        .into_iter()
        .filter(|c| c.code == 403)
        .collect();
    assert!(refused.is_empty(), "refused: {refused:#?}");
}
