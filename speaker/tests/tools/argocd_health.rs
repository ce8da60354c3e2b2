//! Issue 30 item 9: the Argo CD health check the operator guide promises
//! (`deploy/argocd/health.lua`), run in gopher-lua, the Lua VM Argo CD runs health checks in
//! (built from its Go module by scripts/build-go-tool.sh), on configuration objects whose
//! status the real status writer code (`objects::status`) produced: Healthy, Degraded with
//! the writer's message for each reason, Progressing before the writer has seen a
//! generation. And the `argocd-cm` patch carries exactly that Lua for both kinds.

use integration_tests::skip::Need;
use std::path::PathBuf;
use std::process::Command;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use podcidr_api::{BGPPeer, BGPSpeakerConfig, RolloutStatus, SecretKeyRef, rollout_state};
use podcidr_bgp::objects::status::{KeyProblem, NodeLabels, status, verdicts};
use podcidr_bgp::objects::{ObjectKind, Objects};
use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// gopher-lua's `glua`, linked by scripts/install-test-deps.sh.
fn glua() -> Option<PathBuf> {
    integration_tests::skip::require(&[Need::TestTool("glua/glua")])?;
    Some(repo().join("target/test-tools/glua/glua"))
}

fn health_lua() -> String {
    std::fs::read_to_string(repo().join("deploy/argocd/health.lua")).unwrap()
}

/// `v` as a Lua table constructor (what Argo CD hands the script as `obj`).
fn lua(v: &Value) -> String {
    match v {
        Value::Null => "nil".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::Array(a) => format!("{{{}}}", a.iter().map(lua).collect::<Vec<_>>().join(", ")),
        Value::Object(o) => format!(
            "{{{}}}",
            o.iter()
                .map(|(k, v)| format!("[{k:?}] = {}", lua(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Runs the health check on `obj` in gopher-lua: (status, message).
fn health(glua: &PathBuf, obj: &Value) -> (String, String) {
    let dir = std::env::temp_dir().join(format!("argocd-health-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("run.lua");
    std::fs::write(
        &script,
        format!(
            "local function health(obj)\n{}\nend\nlocal hs = health({})\nprint(hs.status)\nprint(hs.message or \"\")\n",
            health_lua(),
            lua(obj)
        ),
    )
    .unwrap();
    let out = Command::new(glua).arg(&script).output().unwrap();
    assert!(
        out.status.success(),
        "glua: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    (
        lines.next().unwrap_or_default().to_owned(),
        lines.next().unwrap_or_default().to_owned(),
    )
}

fn objects(peers: &str) -> Objects {
    let config: BGPSpeakerConfig = serde_saphyr::from_str(
        "apiVersion: bgp.podcidr.io/v1beta1\nkind: BGPSpeakerConfig\nmetadata: {name: default, generation: 1}\n\
         spec: {asn: 65010, source: {kind: ipam-crd}, allowedPrefixes: [10.244.0.0/16]}\n",
    )
    .unwrap();
    let peers: Vec<BGPPeer> = serde_saphyr::from_str_multiple(peers).unwrap();
    Objects::from_lists(vec![config], peers)
}

/// The peer `name` as the API server would hand it to Argo CD: with the status the writer
/// computes for it.
fn written(objects: &Objects, name: &str, missing_key: Option<&str>) -> Value {
    written_with(objects, name, missing_key, None)
}

fn written_with(
    objects: &Objects,
    name: &str,
    missing_key: Option<&str>,
    rollout: Option<&RolloutStatus>,
) -> Value {
    let nodes = [NodeLabels {
        name: "node-a".into(),
        labels: Default::default(),
    }];
    let problem = |r: &SecretKeyRef, _| {
        (Some(r.key.as_str()) == missing_key)
            .then(|| KeyProblem::Missing(format!("Secret x has no key {:?}", r.key)))
    };
    let v = verdicts(objects, &nodes, &problem)
        .into_iter()
        .find(|v| v.kind == ObjectKind::Peer && v.name == name)
        .unwrap();
    let now = Time(Timestamp::from_second(1_800_000_000).unwrap());
    let mut peer = serde_json::to_value(&objects.peers[name]).unwrap();
    peer["status"] = serde_json::to_value(status(&v, None, rollout, now)).unwrap();
    peer
}

const PEERS: &str = "apiVersion: bgp.podcidr.io/v1beta1\nkind: BGPPeer\nmetadata: {name: tor1, generation: 1}\n\
spec: {address: 192.0.2.1, asn: 65000, passwordSecretRef: {name: x, key: tor1}}\n---\n\
apiVersion: bgp.podcidr.io/v1beta1\nkind: BGPPeer\nmetadata: {name: tor2, generation: 1}\n\
spec: {address: 192.0.2.1, asn: 65001}\n";

#[test]
fn argocd_health_reads_ready_for_the_current_generation_in_gopher_lua() {
    let glua = integration_tests::needs!(glua());
    let objects = objects(PEERS);

    let healthy = written(&objects, "tor1", None);
    assert_eq!(health(&glua, &healthy).0, "Healthy", "{healthy}");

    // tor2 peers with the same address: a Conflict (tor1 comes first by name).
    let conflict = written(&objects, "tor2", None);
    let (s, m) = health(&glua, &conflict);
    assert_eq!(s, "Degraded", "{conflict}");
    assert!(m.contains("BGPPeer tor1"), "{m}");

    let no_key = written(&objects, "tor1", Some("tor1"));
    let (s, m) = health(&glua, &no_key);
    assert_eq!(s, "Degraded");
    assert!(m.contains("has no key"), "{m}");

    // An edit the writer has not seen yet: its condition describes generation 1.
    let mut edited = healthy.clone();
    edited["metadata"]["generation"] = 2.into();
    let (s, m) = health(&glua, &edited);
    assert_eq!(
        (s.as_str(), m.as_str()),
        ("Progressing", "Generation 2 not checked yet")
    );

    let mut fresh = healthy.clone();
    fresh.as_object_mut().unwrap().remove("status");
    assert_eq!(health(&glua, &fresh).0, "Progressing");

    // A session-resetting edit rolling out in waves is progress; one stalled is not.
    let mut rollout = RolloutStatus {
        generation: 1,
        state: rollout_state::PROGRESSING.into(),
        wave: 1,
        nodes_admitted: 10,
        nodes_selected: 100,
        ..RolloutStatus::default()
    };
    let waves = written_with(&objects, "tor1", None, Some(&rollout));
    let (s, m) = health(&glua, &waves);
    assert_eq!(s, "Progressing", "{waves}");
    assert!(m.contains("rolls out in waves"), "{m}");
    rollout.state = rollout_state::STALLED.into();
    rollout.message = Some("wave 1: node-a: runs generation 0".into());
    let stalled = written_with(&objects, "tor1", None, Some(&rollout));
    let (s, m) = health(&glua, &stalled);
    assert_eq!(
        (s.as_str(), m.as_str()),
        ("Degraded", "wave 1: node-a: runs generation 0")
    );
}

#[test]
fn the_argocd_cm_patch_carries_the_health_check_for_both_kinds() {
    let patch: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(repo().join("deploy/argocd/argocd-cm-patch.yaml")).unwrap(),
    )
    .unwrap();
    for kind in ["BGPSpeakerConfig", "BGPPeer"] {
        let key = format!("resource.customizations.health.bgp.podcidr.io_{kind}");
        assert_eq!(
            patch["data"][&key].as_str(),
            Some(health_lua().as_str()),
            "{key}"
        );
    }
}
