//! Issue 30 item 1 on the real kube-apiserver (the server decides what it stores): the last
//! good version of each configuration object survives the speaker's restart. Both objects are
//! made unusable with edits the schema accepts and only the speaker refuses; a new speaker
//! process on the node (a fresh key directory, as a new pod gets) still peers with BIRD over
//! TCP MD5 and still announces, from `--state-dir`. Without that directory (a new node) it is
//! not Ready, says why, announces nothing and its gauges show it.

use crate::common;
use integration_tests::skip::Need;

use std::net::IpAddr;
use std::path::Path;

use common::real_api::{
    self, ControlPlane, LEASE_NS, SYSTEM_NS, WAIT, condition, poll_blocking, runtime,
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

fn patch(cp: &ControlPlane, what: &str, spec: &Value) {
    let body = json!({"spec": spec}).to_string();
    cp.kubectl_as(cp.admin(), &["patch", what, "--type=merge", "-p", &body])
        .unwrap_or_else(|e| panic!("patch {what} {spec}: {e}"));
}

/// A speaker as the DaemonSet runs it, with its own key directory (an in-memory volume: a
/// new pod starts with an empty one) and, when given, the state directory.
fn speaker(kubeconfig: &Path, dir: &TempDir, tag: &str, state: Option<&Path>) -> (Proc, String) {
    let admin = format!("127.0.0.1:{}", free_port());
    let keys = dir.path(&format!("keys-{tag}"));
    let mut args = vec![
        "speaker".to_owned(),
        "--config-source=kubernetes".to_owned(),
        format!("--admin-listen={admin}"),
        format!("--key-dir={}", keys.display()),
        "--kubeconfig".to_owned(),
        kubeconfig.display().to_string(),
        "--lease-namespace".to_owned(),
        LEASE_NS.to_owned(),
    ];
    if let Some(state) = state {
        args.push(format!("--state-dir={}", state.display()));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let p = Proc::spawn_with_env(
        &args,
        &[
            ("NODE_NAME", "node-a"),
            ("POD_NAMESPACE", SYSTEM_NS),
            ("POD_NAME", &format!("speaker-{tag}")),
        ],
        &dir.path(&format!("speaker-{tag}.log")),
    );
    (p, admin)
}

fn get(admin: &str, path: &str) -> Option<(u16, String)> {
    runtime().block_on(http_get(admin.parse().unwrap(), path))
}

/// Stops a speaker as the kubelet does (SIGTERM) and waits for it.
fn stop(mut p: Proc) {
    p.signal(libc::SIGTERM);
    assert!(
        p.wait_exit(WAIT).is_some(),
        "the speaker stops on SIGTERM\n{}",
        p.log()
    );
}

fn node_status(cp: &ControlPlane) -> Option<Value> {
    let out = cp
        .kubectl_as(cp.admin(), &["get", "nbs", "node-a", "-o", "json"])
        .ok()?;
    serde_json::from_str(&out).ok()
}

/// node-a with its pod CIDR, BIRD passive on loopback with TCP MD5, the Secret with its key,
/// and the objects: `BGPSpeakerConfig` `default` (with `config_extra` in its spec) and
/// `BGPPeer` `tor` (returned too, to re-create it).
struct Fabric {
    cp: ControlPlane,
    router: Bird,
    peer: Value,
    id: integration_tests::control_plane::Identity,
}

impl Fabric {
    fn start(config_extra: Value) -> Option<Fabric> {
        let cp = real_api::installed_control_plane()?;
        let ours = net::alloc_v4();
        let router = Bird::start(
            BirdConfig::new(net::alloc_v4(), 65001).neighbor(
                BirdNeighbor::new("tor1", ours, OUR_ASN)
                    .passive(true)
                    .password("change-me"),
            ),
        );
        let tor = router.peer_addr("tor1");
        let IpAddr::V4(tor_ip) = tor.addr else {
            panic!("an IPv4 router")
        };
        cp.create_node("node-a", "198.18.0.10", &[POD_CIDR]);
        apply(
            &cp,
            &json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "podcidr-bgp-md5", "namespace": SYSTEM_NS},
                    "stringData": {"tor": "change-me"}}),
        );
        let mut spec = json!({"asn": OUR_ASN, "source": {"kind": "node-spec"},
                              "allowedPrefixes": ["10.244.0.0/16"],
                              "status": {"minInterval": 1}});
        if let (Some(s), Some(extra)) = (spec.as_object_mut(), config_extra.as_object()) {
            s.extend(extra.clone());
        }
        apply(
            &cp,
            &json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPSpeakerConfig",
                    "metadata": {"name": "default"}, "spec": spec}),
        );
        let peer = json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPPeer",
                "metadata": {"name": "tor"},
                "spec": {"address": tor_ip.to_string(), "port": tor.port, "asn": tor.asn,
                         "localAddress": ours.to_string(),
                         "passwordSecretRef": {"name": "podcidr-bgp-md5", "key": "tor"}}});
        apply(&cp, &peer);
        let id = real_api::speaker_identity(&cp, "node-a");
        Some(Fabric {
            cp,
            router,
            peer,
            id,
        })
    }
}

/// BIRD has the session up and the pod CIDR from it.
fn learned(b: &Bird) -> bool {
    b.protocol("tor1").info == "Established"
        && b.routes_from("tor1")
            .iter()
            .any(|r| r.prefix.to_string() == POD_CIDR)
}

#[test]
fn a_restarted_speaker_runs_the_last_good_objects_from_its_state_dir_and_without_it_is_not_ready() {
    integration_tests::require!(Need::Bird);
    let Fabric { cp, router, id, .. } = integration_tests::needs!(Fabric::start(json!({})));
    let dir = TempDir::new("real-api-last-good");
    let state = dir.path("state");
    let (first, _) = speaker(&id.kubeconfig, &dir, "first", Some(&state));
    assert!(
        router.wait_until(WAIT, learned),
        "{}\n{}",
        first.log(),
        router.diagnostics()
    );

    // Edits the server stores and the speaker refuses: an IPv6 prefix with host bits (the
    // schema checks host bits of IPv4 only) and a community that does not parse. The running
    // speaker keeps both last good versions.
    patch(
        &cp,
        "bgpspeakerconfigs.bgp.podcidr.io/default",
        &json!({"allowedPrefixes": ["10.244.0.0/16", "2001:db8::1/64"]}),
    );
    patch(
        &cp,
        "bgppeers.bgp.podcidr.io/tor",
        &json!({"communities": ["65000:bogus"]}),
    );
    poll_blocking(WAIT, || {
        let v = node_status(&cp)?;
        let last = &v["status"]["config"];
        (last["speakerConfig"]["lastGood"].is_string() && last["peers"][0]["lastGood"].is_string())
            .then_some(())
    })
    .unwrap_or_else(|| panic!("both run their last good version\n{}", first.log()));
    let kept = std::fs::read_to_string(state.join("last-good.json")).unwrap();
    assert!(kept.contains("\"node\":\"node-a\""), "{kept}");
    assert!(
        !kept.contains("change-me"),
        "no key is kept on disk: {kept}"
    );
    stop(first);

    // A new pod on the node: an empty key directory, the same state directory.
    let since = router.protocol("tor1").since;
    let (second, admin) = speaker(&id.kubeconfig, &dir, "second", Some(&state));
    let again = router.wait_until(WAIT, |b| learned(b) && b.protocol("tor1").since != since);
    assert!(
        again,
        "the restarted speaker peers again from the kept versions\n{}\n{}",
        second.log(),
        router.diagnostics()
    );
    let v = poll_blocking(WAIT, || {
        let v = node_status(&cp)?;
        (condition(&v, "ConfigApplied")["reason"] == "LastGood").then_some(v)
    })
    .unwrap_or_else(|| panic!("the node says it runs last good\n{}", second.log()));
    assert_eq!(
        v["status"]["config"]["speakerConfig"]["generation"], 1,
        "{v}"
    );
    assert_eq!(v["status"]["config"]["peers"][0]["generation"], 1, "{v}");
    let ready = poll_blocking(WAIT, || {
        get(&admin, "/readyz").filter(|(code, _)| *code == 200)
    });
    assert!(
        ready.is_some(),
        "{:?}\n{}",
        get(&admin, "/readyz"),
        second.log()
    );
    stop(second);

    // A node that never ran them (no state directory): not Ready, saying which objects and
    // why, nothing announced, and the gauge the alert reads shows it. (Without a config the
    // node has no source either: podcidr_node_source_cidrs stays 0, so the alert here is
    // PodcidrNodeConfigObjectsNotApplied, not PodcidrNodeNothingAnnounced.)
    let (third, admin) = speaker(&id.kubeconfig, &dir, "third", None);
    let why = poll_blocking(WAIT, || {
        get(&admin, "/readyz").filter(|(code, body)| *code == 503 && body.contains("cannot run"))
    })
    .unwrap_or_else(|| panic!("{:?}\n{}", get(&admin, "/readyz"), third.log()))
    .1;
    assert!(
        why.contains("BGPSpeakerConfig default") && why.contains("2001:db8::1/64"),
        "{why}"
    );
    let v = poll_blocking(WAIT, || {
        let v = node_status(&cp)?;
        (condition(&v, "Ready")["reason"] == "ConfigObjectCannotRun").then_some(v)
    })
    .unwrap_or_else(|| panic!("the node's Ready condition says why\n{}", third.log()));
    assert_eq!(condition(&v, "Ready")["status"], "False", "{v}");
    let metrics = poll_blocking(WAIT, || {
        get(&admin, "/metrics")
            .map(|(_, b)| b)
            .filter(|b| b.contains("podcidr_node_config_cannot_run 1"))
    })
    .unwrap_or_else(|| panic!("{}", third.log()));
    assert!(
        metrics.contains("podcidr_node_announced_cidrs 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("podcidr_node_config_objects{state=\"not_applied\"} 1"),
        "{metrics}"
    );
    assert_ne!(router.protocol("tor1").info, "Established");
    stop(third);
}

/// Issue 30 item 2 on the real server: deleting the `BGPPeer` CRD (which deletes its objects
/// without admission, past the delete guard) withdraws nothing: the session stays up with its
/// route, and a speaker that restarts while the kind is gone peers again from what it kept.
/// Removing the peer on purpose (the CRD back, the object annotated
/// `bgp.podcidr.io/allow-delete`, then deleted) withdraws it gracefully: the route carries
/// GRACEFUL_SHUTDOWN (RFC 8326) before the session ends.
#[test]
fn deleting_the_peer_crd_withdraws_nothing_and_a_deliberate_delete_withdraws_gracefully_rfc8326() {
    integration_tests::require!(Need::Bird);
    let Some(Fabric {
        cp,
        router,
        id,
        peer: tor_peer,
    }) = Fabric::start(json!({"gracefulShutdown": {"wait": "5s"}}))
    else {
        return;
    };
    let dir = TempDir::new("real-api-kind-gone");
    let state = dir.path("state");
    let (first, _) = speaker(&id.kubeconfig, &dir, "first", Some(&state));
    assert!(
        router.wait_until(WAIT, learned),
        "{}\n{}",
        first.log(),
        router.diagnostics()
    );
    let since = router.protocol("tor1").since;

    let crd = "bgppeers.bgp.podcidr.io";
    cp.kubectl(&["delete", "crd", crd]);
    assert!(cp.kubectl_as(cp.admin(), &["get", "crd", crd]).is_err());
    let kept = poll_blocking(WAIT, || {
        let v = node_status(&cp)?;
        let why = v["status"]["config"]["peers"][0]["lastGood"]
            .as_str()?
            .to_owned();
        why.contains("allow-delete").then_some(why)
    })
    .unwrap_or_else(|| panic!("the node says it keeps the peer\n{}", first.log()));
    assert!(kept.contains("still running"), "{kept}");
    let p = router.protocol("tor1");
    assert_eq!(
        (p.info.as_str(), &p.since),
        ("Established", &since),
        "untouched"
    );
    assert!(learned(&router));
    stop(first);

    // A new pod while the kind is gone: it peers from what --state-dir kept.
    let (second, _) = speaker(&id.kubeconfig, &dir, "second", Some(&state));
    let again = router.wait_until(WAIT, |b| learned(b) && b.protocol("tor1").since != since);
    assert!(again, "{}\n{}", second.log(), router.diagnostics());
    let since = router.protocol("tor1").since;

    // On purpose: the CRD back, the peer again, annotated, deleted.
    let crds = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/crds/bgppeers.bgp.podcidr.io.yaml");
    cp.kubectl(&["apply", "-f", crds.to_str().unwrap()]);
    cp.wait_crds_established();
    apply(&cp, &tor_peer);
    cp.kubectl(&[
        "annotate",
        "bgppeer",
        "tor",
        "bgp.podcidr.io/allow-delete=true",
    ]);
    // The speaker sees the annotation before the delete (as a person's two commands are).
    poll_blocking(WAIT, || {
        let v = node_status(&cp)?;
        (v["status"]["config"]["peers"][0]["lastGood"].is_null()
            && v["status"]["config"]["peers"][0]["name"] == "tor")
            .then_some(())
    })
    .unwrap_or_else(|| panic!("the re-created peer takes over\n{}", second.log()));
    let p = router.protocol("tor1");
    assert_eq!(
        (p.info.as_str(), &p.since),
        ("Established", &since),
        "no reset"
    );
    cp.kubectl(&["delete", "bgppeer", "tor"]);
    let gshut = router.wait_until(WAIT, |b| {
        b.routes_from("tor1")
            .iter()
            .any(|r| r.prefix.to_string() == POD_CIDR && r.communities.contains(&(65535, 0)))
    });
    assert!(
        gshut,
        "GRACEFUL_SHUTDOWN first\n{}\n{}",
        second.log(),
        router.diagnostics()
    );
    let down = router.wait_until(WAIT, |b| b.protocol("tor1").info != "Established");
    assert!(down, "then the session ends\n{}", second.log());
    // The speaker logs the stop as it carries it out: BIRD can see the Cease first.
    let said = poll_blocking(WAIT, || {
        second
            .log()
            .contains("session stopped peer=tor why=\"removed from the config\"")
            .then_some(())
    });
    assert!(said.is_some(), "{}", second.log());
    stop(second);
}
