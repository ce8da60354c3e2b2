//! `podcidr-bgp config convert --config FILE`: the objects it prints configure a node exactly
//! as the file does. For every example file and every node its selectors tell apart, the
//! printed objects, read back and assembled for that node the way the speaker and
//! `--check-config --objects` do, give the file's `Config` (less what is a flag with objects:
//! `nodeName`, `admin`; and the MD5 and BFD keys' paths, a Secret's keys instead of files).
//! deploy/examples/objects/<name>.yaml is what convert prints for deploy/examples/<name>.yaml;
//! regenerate them with:
//!
//! ```sh
//! UPDATE_EXAMPLES=1 cargo test -p podcidr-bgp --test quick config_convert
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use podcidr_api::{AsnFromNodeSpec, SecretKeyRef};
use podcidr_bgp::objects::check::parse_manifests;
use podcidr_bgp::objects::convert::{BFD_KEY_SUFFIX, MD5_SECRET, convert, to_yaml};
use podcidr_bgp::objects::{Objects, assemble, select};
use podcidr_config::{AdminConfig, Config};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_podcidr-bgp");
const REGENERATE: &str = "UPDATE_EXAMPLES=1 cargo test -p podcidr-bgp --test quick config_convert";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The file examples, by file name.
fn example_files() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo().join("deploy/examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 8, "the file examples: {names:?}");
    names
}

fn read_doc(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

/// The objects of a multi-document manifest, as the API server's clients read them.
fn read_objects(yaml: &str) -> Objects {
    let (objects, _) = parse_manifests(yaml).expect("valid object manifests");
    assert_eq!(objects.configs.len(), 1, "one BGPSpeakerConfig");
    objects
}

/// Labels of a node each selector in the file selects (plus a node with no labels): every
/// `matchLabels`, the first value of `In`, something for `Exists`.
fn label_sets(doc: &Value) -> Vec<BTreeMap<String, String>> {
    let mut selectors: Vec<&Value> = Vec::new();
    for list in ["peers", "asnOverrides"] {
        for item in doc[list].as_array().into_iter().flatten() {
            if item["nodeSelector"].is_object() {
                selectors.push(&item["nodeSelector"]);
            }
        }
    }
    let mut sets = vec![BTreeMap::new()];
    for s in selectors {
        let mut labels: BTreeMap<String, String> = s["matchLabels"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
            .collect();
        for e in s["matchExpressions"].as_array().into_iter().flatten() {
            let key = e["key"].as_str().unwrap().to_owned();
            match e["operator"].as_str().unwrap() {
                "In" => labels.insert(key, e["values"][0].as_str().unwrap().to_owned()),
                "Exists" => labels.insert(key, "yes".to_owned()),
                _ => None,
            };
        }
        if !sets.contains(&labels) {
            sets.push(labels);
        }
    }
    sets
}

/// What the objects cannot say or say otherwise: the node name and admin listener are flags,
/// a peer's node selector chose the node, the key is a Secret's, and peers run by name.
fn comparable(mut c: Config) -> Config {
    c.node_name = None;
    c.admin = AdminConfig::default();
    for p in &mut c.peers {
        p.node_selector = None;
        p.password_file = p.password_file.as_ref().map(|_| PathBuf::from("<md5 key>"));
        if let Some(a) = p.bfd.as_mut().and_then(|b| b.authentication.as_mut()) {
            a.secret_file = PathBuf::from("<bfd key>");
        }
    }
    c.peers.sort_by(|a, b| a.name.cmp(&b.name));
    c
}

/// The objects' config on a node with `labels`, as the speaker assembles it.
fn objects_config(objects: &Objects, labels: &BTreeMap<String, String>) -> Config {
    let selection = select(objects, labels);
    assert!(selection.conflicts.is_empty(), "{:?}", selection.conflicts);
    assert!(selection.bad_selectors.is_empty());
    let config = selection
        .config
        .expect("the BGPSpeakerConfig selects every node");
    let key_file = |peer: &str, r: &SecretKeyRef| {
        assert_eq!(r.name, MD5_SECRET);
        let bfd_key = format!("{peer}{BFD_KEY_SUFFIX}");
        assert!(r.key == peer || r.key == bfd_key, "{peer}: key {}", r.key);
        PathBuf::from(format!("/run/podcidr-bgp/keys/{}/{}", r.name, r.key))
    };
    comparable(assemble(config, &selection.peers, &key_file).unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn every_example_file_converts_to_objects_that_run_the_same_config_on_every_node() {
    for name in example_files() {
        let path = repo().join("deploy/examples").join(&name);
        let file = Config::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let doc = read_doc(&path);
        let converted = convert(&doc, "default").unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let yaml = to_yaml(&converted, &name).unwrap();
        let objects = read_objects(&yaml);
        assert_eq!(
            objects.peers.len(),
            file.peers.len(),
            "{name}: one BGPPeer per peer"
        );
        for labels in label_sets(&doc) {
            assert_eq!(
                objects_config(&objects, &labels),
                comparable(file.for_node(&labels)),
                "{name} on a node with labels {labels:?}:\n{yaml}"
            );
        }
    }
}

/// The round trip on what examples leave out: a 4-octet peer AS beyond a 32-bit signed
/// integer, `asn: auto` with ranges, durations with units, `null` keys, an anchor.
#[test]
fn a_config_with_4_octet_peer_asns_units_and_nulls_converts_to_the_same_config() {
    let text = "nodeName: node-a\nasn: {fromNodeAnnotation: example.com/asn, default: 4200000002}\n\
        asnOverrides: [{nodeSelector: {matchLabels: {rack: r7}}, asn: 65107}]\n\
        source: {kind: node-spec}\nallowedPrefixes: [10.0.0.0/8]\nrouterId: null\n\
        gracefulShutdown: {wait: 1m, onCordon: false}\nstatus: {minInterval: 30s}\n\
        cni: {enabled: true, plugin: ptp, mtu: 9000}\nminPrefixLength: {ipv4: 20}\n\
        admin: {listen: 127.0.0.1:9999, metricsListen: 0.0.0.0:9182}\n\
        peers:\n\
        - &p {name: big, address: 192.0.2.1, asn: 4200000001, holdTime: 3m, keepaliveTime: 1m,\n\
        \x20  connectRetry: {base: 2s, max: 1h}, bfd: {minRx: 50}, med: 4294967295, port: null}\n\
        - {name: any, address: default-gateway, addressFamily: ipv6, asn: auto,\n\
        \x20  allowedAsns: [4200000000-4200000100, 65000], families: [ipv6-unicast]}\n\
        - <<: *p\n  name: big2\n  address: 192.0.2.2\n  passwordFile: /etc/keys/big2\n\
        \x20 nodeSelector: {matchLabels: {rack: r7}}\n";
    let file = Config::from_yaml_str(text).unwrap_or_else(|e| panic!("{e}"));
    let doc: Value = serde_saphyr::from_str(text).unwrap();
    let converted = convert(&doc, "fabric").unwrap();
    let dropped: Vec<(&str, &str)> = converted
        .dropped
        .iter()
        .map(|d| (d.key.as_str(), d.replaced_by))
        .collect();
    assert_eq!(
        dropped,
        [
            ("nodeName", "--node-name (or $NODE_NAME)"),
            ("admin.listen", "--admin-listen"),
            ("admin.metricsListen", "--metrics-listen")
        ]
    );
    assert_eq!(
        converted.secret_keys,
        [("big2".to_owned(), "/etc/keys/big2".to_owned())]
    );
    // The file's `asn` mapping is the object's typed `asnFrom`: a 1.25+ API server must be
    // able to declare `spec.asn` (an integer) for the CRD's CEL rules.
    assert_eq!(converted.config.spec.asn, None);
    assert_eq!(
        converted.config.spec.asn_from,
        Some(AsnFromNodeSpec {
            node_label: None,
            node_annotation: Some("example.com/asn".into()),
            default: Some(4_200_000_002),
        })
    );
    let objects = read_objects(&to_yaml(&converted, "inline").unwrap());
    for labels in label_sets(&doc) {
        assert_eq!(
            objects_config(&objects, &labels),
            comparable(file.for_node(&labels)),
            "{labels:?}"
        );
    }
}

/// A peer's BFD authentication survives the round trip: the file's `secretFile` becomes a
/// `secretRef` to key `<peer>_bfd` of the MD5 Secret (next to its MD5 key `<peer>`), and the
/// objects assemble into the file's config, type and key ID included.
#[test]
fn bfd_authentication_converts_to_a_secret_ref_and_back_to_the_same_config() {
    let text = "asn: 64512\nsource: {kind: node-spec}\nallowedPrefixes: [10.244.0.0/16]\npeers:\n\
        - {name: tor1, address: 192.0.2.1, asn: 65000, passwordFile: /etc/keys/tor1,\n\
        \x20  bfd: {minRx: 300, authentication: {type: meticulous-keyed-sha1, keyId: 42,\n\
        \x20  secretFile: /etc/keys/tor1-bfd}}}\n\
        - {name: tor2, address: 192.0.2.2, asn: 65000, bfd: {authentication:\n\
        \x20  {type: keyed-sha1, keyId: 0, secretFile: /etc/keys/tor2-bfd}}}\n";
    let file = Config::from_yaml_str(text).unwrap_or_else(|e| panic!("{e}"));
    let doc: Value = serde_saphyr::from_str(text).unwrap();
    let converted = convert(&doc, "default").unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        converted.secret_keys,
        [
            ("tor1".to_owned(), "/etc/keys/tor1".to_owned()),
            ("tor1_bfd".to_owned(), "/etc/keys/tor1-bfd".to_owned()),
            ("tor2_bfd".to_owned(), "/etc/keys/tor2-bfd".to_owned()),
        ]
    );
    let yaml = to_yaml(&converted, "inline").unwrap();
    assert!(
        yaml.contains("# bfd.authentication.secretFile became bfd.authentication.secretRef")
            && yaml.contains("--from-file=tor1_bfd=/etc/keys/tor1-bfd"),
        "{yaml}"
    );
    assert!(
        !yaml.contains("secretFile:"),
        "no key file in an object:\n{yaml}"
    );
    let objects = read_objects(&yaml);
    let assembled = objects_config(&objects, &BTreeMap::new());
    assert!(
        assembled
            .peers
            .iter()
            .all(|p| p.bfd.as_ref().is_some_and(|b| b.authentication.is_some())),
        "{assembled:?}"
    );
    assert_eq!(assembled, comparable(file.for_node(&BTreeMap::new())));
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn config_convert_prints_the_objects_and_names_the_secret_and_the_flags_but_no_key() {
    let dir = std::env::temp_dir().join(format!("podcidr-convert-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("tor1.key");
    std::fs::write(&key, "k3y-n0t-t0-print\n").unwrap();
    let file = dir.join("config.yaml");
    std::fs::write(
        &file,
        format!(
            "nodeName: node-a\nasn: 65001\nallowedPrefixes: [10.0.0.0/8]\n\
             admin: {{listen: 127.0.0.1:9999}}\n\
             peers:\n  - {{name: tor1, address: 192.0.2.1, asn: 65000, passwordFile: {}}}\n\
             \x20 - {{name: tor2, address: 192.0.2.2, asn: 65000, nodeSelector: {{matchLabels: {{rack: r2}}}}}}\n",
            key.display()
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = run(&[
        "config",
        "convert",
        "--config",
        file.to_str().unwrap(),
        "--name",
        "fabric",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        !stdout.contains("k3y") && !stderr.contains("k3y"),
        "{stdout}{stderr}"
    );
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(&stdout).unwrap();
    let kinds: Vec<(&str, &str)> = docs
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap(),
                d["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("BGPSpeakerConfig", "fabric"),
            ("BGPPeer", "tor1"),
            ("BGPPeer", "tor2")
        ]
    );
    assert_eq!(docs[0]["apiVersion"], "bgp.podcidr.io/v1beta1");
    assert_eq!(
        docs[0]["spec"],
        serde_json::json!({"asn": 65001, "allowedPrefixes": ["10.0.0.0/8"]})
    );
    assert_eq!(
        docs[1]["spec"]["passwordSecretRef"],
        serde_json::json!({"name": "podcidr-bgp-md5", "key": "tor1"})
    );
    assert!(docs[1]["spec"].get("passwordFile").is_none());
    assert_eq!(docs[2]["spec"]["nodeSelector"]["matchLabels"]["rack"], "r2");
    let create = format!("--from-file=tor1={}", key.display());
    assert!(stderr.contains(&create), "{stderr}");
    assert!(stdout.contains(&format!("#     {create}")), "{stdout}");
    assert!(
        stderr.contains(
            "nodeName: node-a dropped (no object holds it): run the speaker with --node-name"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "admin.listen: 127.0.0.1:9999 dropped (no object holds it): run the speaker with --admin-listen"
        ),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn config_convert_of_a_bad_file_names_every_problem_and_prints_nothing() {
    let dir = std::env::temp_dir().join(format!("podcidr-convert-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.yaml");
    std::fs::write(
        &file,
        "asn: 65001\nallowedPrefixes: [10.0.0.0/8]\n\
         peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000, holdTime: 2, holdtime: 9}\n",
    )
    .unwrap();
    let (code, stdout, stderr) = run(&["config", "convert", "--config", file.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stdout, "");
    assert!(stderr.contains("invalid config"), "{stderr}");
    assert!(
        stderr.contains("peers[0].holdTime: 2 is not allowed (0 or 3..65535)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("peers[0].holdtime: unknown key (did you mean holdTime?)"),
        "{stderr}"
    );
    let (code, stdout, stderr) =
        run(&["config", "convert", "--config", "/nonexistent/podcidr.yaml"]);
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert!(stderr.contains("/nonexistent/podcidr.yaml"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// deploy/examples/objects/<name>.yaml is convert's output for deploy/examples/<name>.yaml,
/// so the two cannot drift; and each passes `--check-config --objects` on a node its
/// selectors pick.
#[test]
fn example_object_manifests_are_what_convert_prints_and_pass_the_offline_check() {
    let update = std::env::var_os("UPDATE_EXAMPLES").is_some();
    for name in example_files() {
        let file = format!("deploy/examples/{name}");
        let manifest = format!("deploy/examples/objects/{name}");
        let (code, stdout, stderr) = run(&["config", "convert", "--config", &file]);
        assert_eq!(code, 0, "{file}: {stderr}");
        if update {
            std::fs::write(repo().join(&manifest), &stdout).unwrap();
        }
        let on_disk = std::fs::read_to_string(repo().join(&manifest)).unwrap_or_default();
        assert!(
            on_disk == stdout,
            "{manifest} is not what convert prints for {file}; regenerate with: {REGENERATE}"
        );
        for labels in label_sets(&read_doc(&repo().join(&file))) {
            let labels = labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            let (code, out, err) = run(&[
                "speaker",
                "--config-source",
                "kubernetes",
                "--check-config",
                "--objects",
                &manifest,
                "--node-labels",
                &labels,
            ]);
            assert_eq!(code, 0, "{manifest} on {labels:?}: {out}{err}");
            assert!(out.contains("objects OK"), "{out}");
        }
    }
}

mod generated {
    //! The round trip on generated configs: any file the config crate accepts, built from
    //! every top-level and peer key, converts to objects that run its config on each node.

    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    use super::*;

    /// Optional keys: each present or not.
    fn maybe(entries: Vec<(&'static str, Value)>) -> impl Strategy<Value = Map<String, Value>> {
        let n = entries.len();
        proptest::collection::vec(any::<bool>(), n).prop_map(move |on| {
            entries
                .iter()
                .zip(on)
                .filter(|(_, on)| *on)
                .map(|((k, v), _)| ((*k).to_owned(), v.clone()))
                .collect()
        })
    }

    fn peer(i: usize) -> impl Strategy<Value = Value> {
        let endpoint = prop_oneof![
            Just(json!({"address": format!("192.0.2.{}", i + 1)})),
            Just(json!({"address": format!("2001:db8::{}", i + 1), "families": ["ipv6-unicast"]})),
            Just(
                json!({"interface": format!("eth{i}"), "peerAddress": format!("fe80::{}", i + 1)})
            ),
            Just(
                json!({"address": "default-gateway", "addressFamily": if i.is_multiple_of(2) { "ipv4" } else { "ipv6" }})
            ),
        ];
        let asn = prop_oneof![
            Just(json!({"asn": 65000})),
            Just(json!({"asn": 4_200_000_001u64})),
            Just(json!({"asn": "auto", "allowedAsns": ["65000-65100", 4_200_000_002u64]})),
        ];
        let options = maybe(vec![
            ("port", json!(1179)),
            ("holdTime", json!("3m")),
            ("keepaliveTime", json!(20)),
            ("connectRetry", json!({"base": "2s", "max": "5m"})),
            ("passwordFile", json!(format!("/etc/keys/p{i}"))),
            ("ttlSecurity", json!(true)),
            (
                "gracefulRestart",
                json!({"enabled": false, "restartTime": 30}),
            ),
            (
                "gracefulRestart",
                json!({"restartTime": 30, "longLivedStaleTime": "1h"}),
            ),
            (
                "bfd",
                json!({"minTx": 100, "multiplier": 5, "strict": true}),
            ),
            ("communities", json!(["65000:100", "no-export"])),
            ("largeCommunities", json!(["4200000001:1:2"])),
            ("med", json!(4_294_967_295u64)),
            ("asPathPrepend", json!(2)),
            ("acceptIncoming", json!(true)),
            (
                "nodeSelector",
                json!({"matchLabels": {"rack": format!("r{i}")}}),
            ),
            ("port", Value::Null),
        ]);
        (endpoint, asn, options).prop_map(move |(endpoint, asn, options)| {
            let mut p = Map::new();
            p.insert("name".into(), json!(format!("peer-{i}")));
            for part in [endpoint, asn, Value::Object(options)] {
                p.extend(part.as_object().unwrap().clone());
            }
            Value::Object(p)
        })
    }

    fn config() -> impl Strategy<Value = Value> {
        let top = maybe(vec![
            ("nodeName", json!("node-a")),
            ("routerId", json!("192.0.2.100")),
            (
                "asnOverrides",
                json!([{"nodeSelector": {"matchLabels": {"rack": "r1"}}, "asn": 65111}]),
            ),
            (
                "gracefulShutdown",
                json!({"wait": "20s", "onCordon": false}),
            ),
            ("minPrefixLength", json!({"ipv4": 20, "ipv6": 56})),
            ("nextHop", json!({"ipv4": "node", "ipv6": "2001:db8::10"})),
            ("status", json!({"publish": false, "minInterval": "1m"})),
            ("log", json!({"format": "json", "level": "debug"})),
            (
                "cni",
                json!({"enabled": true, "plugin": "ptp", "mtu": 1450}),
            ),
            ("admin", json!({"listen": "127.0.0.1:9999"})),
        ]);
        let asn = prop_oneof![
            Just(json!(65001)),
            Just(json!(4_200_000_001u64)),
            Just(json!({"fromNodeLabel": "example.com/asn", "default": 64512})),
        ];
        let source = prop_oneof![Just("node-spec"), Just("ipam-crd"), Just("cilium-node")];
        let peers = (1usize..=4).prop_flat_map(|n| (0..n).map(peer).collect::<Vec<_>>());
        (top, asn, source, peers).prop_map(|(top, asn, source, peers)| {
            let mut c = top;
            c.insert("asn".into(), asn);
            c.insert("source".into(), json!({"kind": source}));
            c.insert("allowedPrefixes".into(), json!(["10.0.0.0/8", "fd00::/48"]));
            c.insert("peers".into(), Value::Array(peers));
            Value::Object(c)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, max_global_rejects: 20_000, ..ProptestConfig::default() })]

        #[test]
        fn any_valid_config_converts_to_objects_that_run_it_on_every_node(doc in config()) {
            // JSON is YAML: the file the config crate reads.
            let text = doc.to_string();
            let file = Config::from_yaml_str(&text);
            prop_assume!(file.is_ok());
            let file = file.unwrap();
            let converted = convert(&doc, "default").unwrap();
            let objects = read_objects(&to_yaml(&converted, "generated").unwrap());
            for labels in label_sets(&doc) {
                prop_assert_eq!(
                    objects_config(&objects, &labels),
                    comparable(file.for_node(&labels)),
                    "{} on {:?}", text, labels
                );
            }
        }
    }
}
