//! The CEL rules (`x-kubernetes-validations`) of BGPSpeakerConfig and BGPPeer, evaluated as a
//! 1.25+ API server evaluates them: every rule is read from the generated CRD schema (not
//! written down here), compiled, and run with `self` bound to the value at its schema node,
//! for every such value an object has. The shipped example manifests and a set of valid
//! objects pass every rule; each invalid object is refused by exactly the rule meant for it,
//! and by the speaker's own reader too (same meaning as the config file's rules); every rule
//! refuses at least one of them.
//!
//! The API server decides, though: the last test runs the same objects through real
//! kube-apiservers (the newest Kubernetes the suite builds and the oldest the README supports),
//! where the shipped CRDs must be created (every rule compiled within the cost budget), the
//! valid objects, the shipped examples and `config convert`'s output for every example config
//! stored with strict field validation, and each invalid object refused with the message of
//! the rule meant for it. Where this file's evaluator and the server disagree, the server is
//! right and the evaluator's case is what changes.

use crate::common;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use cel::objects::{Key, Map as CelMap, Value as CelValue};
use cel::{Context, Env};
use common::real_api::{ControlPlane, ControlPlaneOptions};
use integration_tests::control_plane::KubeVersion;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray,
};
use podcidr_bgp::objects::assemble_specs;
use serde_json::{Value, json};

/// One rule where the schema has it: the path from the object's root (`spec`,
/// `spec.connectRetry`, `spec.asnOverrides.[]`).
#[derive(Debug, Clone)]
struct Rule {
    kind: &'static str,
    path: Vec<String>,
    rule: String,
    message: String,
    /// The properties `self` has there (`None`: any, preserve-unknown-fields).
    fields: Option<BTreeSet<String>>,
    /// The same for each property that is an object.
    nested: HashMap<String, BTreeSet<String>>,
}

impl Rule {
    fn at(&self) -> String {
        format!("{} {}: {}", self.kind, self.path.join("."), self.message)
    }
}

fn props_of(p: &JSONSchemaProps) -> Option<BTreeSet<String>> {
    if p.x_kubernetes_preserve_unknown_fields == Some(true) {
        return None;
    }
    Some(
        p.properties
            .iter()
            .flatten()
            .map(|(k, _)| k.clone())
            .collect(),
    )
}

fn walk(kind: &'static str, path: &[String], p: &JSONSchemaProps, out: &mut Vec<Rule>) {
    for v in p.x_kubernetes_validations.iter().flatten() {
        let nested = p
            .properties
            .iter()
            .flatten()
            .filter_map(|(k, c)| Some((k.clone(), props_of(c)?)))
            .collect();
        out.push(Rule {
            kind,
            path: path.to_vec(),
            rule: v.rule.clone(),
            message: v.message.clone().unwrap_or_default(),
            fields: props_of(p),
            nested,
        });
    }
    for (k, child) in p.properties.iter().flatten() {
        let mut next = path.to_vec();
        next.push(k.clone());
        walk(kind, &next, child, out);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(item)) = &p.items {
        let mut next = path.to_vec();
        next.push("[]".into());
        walk(kind, &next, item, out);
    }
}

/// Every rule of the two configuration CRDs, as generated (deploy/crds/ is checked to be
/// the same by ipam-watch's crds_in_sync).
fn rules() -> Vec<Rule> {
    let mut out = Vec::new();
    for crd in podcidr_api::crds() {
        let kind = match crd.spec.names.kind.as_str() {
            "BGPSpeakerConfig" => "BGPSpeakerConfig",
            "BGPPeer" => "BGPPeer",
            _ => continue,
        };
        let schema = crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("a schema");
        walk(kind, &[], schema, &mut out);
    }
    out
}

/// JSON as the API server hands it to CEL: integers are `int`.
fn cel_value(v: &Value) -> CelValue {
    match v {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => CelValue::Int(i),
            None => CelValue::Float(n.as_f64().unwrap()),
        },
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(items) => CelValue::List(Arc::new(items.iter().map(cel_value).collect())),
        Value::Object(m) => {
            let map: HashMap<Key, CelValue> = m
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), cel_value(v)))
                .collect();
            CelValue::Map(CelMap::from(map))
        }
    }
}

/// The values at `path` in `obj` (each item for `[]`); none where it is absent.
fn values_at<'a>(obj: &'a Value, path: &[String]) -> Vec<&'a Value> {
    let Some((first, rest)) = path.split_first() else {
        return vec![obj];
    };
    match (first.as_str(), obj) {
        ("[]", Value::Array(items)) => items.iter().flat_map(|i| values_at(i, rest)).collect(),
        (key, Value::Object(m)) => m.get(key).map_or(Vec::new(), |v| values_at(v, rest)),
        _ => Vec::new(),
    }
}

/// CEL as Kubernetes compiles CRD rules: the standard library and the strings extension
/// (`split`, which the IPv4 host-bits rule uses; in every supported server).
fn kubernetes_env() -> Arc<Env> {
    let mut env = Env::stdlib();
    env.add_extension(cel::extensions::strings)
        .expect("the strings extension");
    Arc::new(env)
}

/// The messages of the rules `obj` breaks (an evaluation error is a refusal, as on the
/// server).
fn refused_by(rules: &[Rule], kind: &str, obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for r in rules.iter().filter(|r| r.kind == kind) {
        let env = kubernetes_env();
        let program = env.compile(&r.rule).unwrap();
        for value in values_at(obj, &r.path) {
            let mut ctx = Context::with_env(env.clone());
            ctx.add_variable_from_value("self", cel_value(value));
            match program.execute(&ctx) {
                Ok(CelValue::Bool(true)) => {}
                Ok(CelValue::Bool(false)) => out.push(r.message.clone()),
                other => out.push(format!("{}: evaluation: {other:?}", r.at())),
            }
        }
    }
    out
}

#[test]
fn every_rule_compiles_reads_self_and_names_fields_its_schema_node_has() {
    let rules = rules();
    assert!(rules.len() >= 20, "{} rules", rules.len());
    for r in &rules {
        let program = kubernetes_env()
            .compile(&r.rule)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", r.at(), r.rule));
        // Any other free variable fails evaluation, with `self` the only one bound (below).
        assert!(program.references().has_variable("self"), "{}", r.at());
        assert!(!r.message.is_empty(), "{}: a message", r.at());
        // The API server type-checks `self.field` against the schema; an unknown field is a
        // CRD it refuses.
        let Some(fields) = &r.fields else { continue };
        for (i, _) in r.rule.match_indices("self.") {
            let chain: Vec<&str> = r.rule[i + 5..]
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
                .next()
                .unwrap()
                .split('.')
                .take(2)
                .collect();
            let field = chain[0];
            if matches!(
                field,
                "all" | "exists" | "getSeconds" | "contains" | "split" | "startsWith" | "endsWith"
            ) {
                continue;
            }
            assert!(fields.contains(field), "{}: no field {field}", r.at());
            if let (Some(sub), Some(known)) = (chain.get(1), r.nested.get(field))
                && !matches!(*sub, "contains" | "getSeconds" | "split")
            {
                assert!(known.contains(*sub), "{}: no field {field}.{sub}", r.at());
            }
        }
    }
}

fn object(kind: &str, spec: Value) -> Value {
    json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": kind,
           "metadata": {"name": "example"}, "spec": spec})
}

const PEER: &str = "BGPPeer";
const CONFIG: &str = "BGPSpeakerConfig";

fn base_config() -> Value {
    json!({"asn": 65001, "source": {"kind": "ipam-crd"}, "allowedPrefixes": ["10.244.0.0/16"]})
}

/// The speaker's reader on the same spec: `Ok` when a node would run it.
fn reader(kind: &str, spec: &Value) -> Result<(), String> {
    let key_file = |_: &str, r: &podcidr_api::SecretKeyRef| PathBuf::from(&r.key);
    let result = if kind == PEER {
        assemble_specs(("c", &base_config()), &[("example", spec)], &key_file)
    } else {
        assemble_specs(("example", spec), &[], &key_file)
    };
    result.map(|_| ()).map_err(|e| e.to_string())
}

fn valid() -> Vec<(&'static str, Value)> {
    let p = |extra: Value| {
        let mut spec = json!({"address": "192.0.2.1", "asn": 65000});
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        (PEER, spec)
    };
    vec![
        (CONFIG, base_config()),
        (
            CONFIG,
            json!({"asnFrom": {"nodeLabel": "example.com/asn", "default": 4200000001u64},
                   "asnOverrides": [{"nodeSelector": {"matchLabels": {"rack": "r7"}}, "asn": 65107}],
                   "source": {"kind": "node-spec"}, "allowedPrefixes": ["10.0.0.0/8"],
                   "routerId": "192.0.2.10", "gracefulShutdown": {"wait": "5m"},
                   "status": {"minInterval": "1h"}}),
        ),
        (
            CONFIG,
            json!({"asn": 65001, "source": {"kind": "file", "path": "/etc/podcidr-bgp/cidrs/cidrs.yaml"}}),
        ),
        p(json!({"holdTime": 0, "keepaliveTime": 0})),
        p(
            json!({"holdTime": "3m", "keepaliveTime": "1m", "connectRetry": {"base": "2s", "max": "1h"}}),
        ),
        p(
            json!({"keepaliveTime": 89, "localAddress": "192.0.2.10", "ttlSecurity": true, "ebgpMultihop": 1}),
        ),
        p(json!({"asn": 4200000001u64, "bfd": {"enabled": false}, "ebgpMultihop": 3})),
        // Link-local BFD: the socket is scoped to the interface.
        (
            PEER,
            json!({"interface": "eth1", "peerAddress": "fe80::1", "asn": 65000, "bfd": {"enabled": true}}),
        ),
        p(
            json!({"bfd": {"minRx": 50}, "passive": true, "acceptIncoming": true, "gracefulRestart": {"restartTime": 4095}}),
        ),
        p(json!({"gracefulRestart": {"restartTime": 2, "longLivedStaleTime": 16_777_215u64}})),
        p(json!({"gracefulRestart": {"enabled": false, "longLivedStaleTime": 0}})),
        (
            PEER,
            json!({"address": "default-gateway", "addressFamily": "ipv6", "asn": "auto",
                   "allowedAsns": ["65000-65100", 64512], "families": ["ipv6-unicast"]}),
        ),
        (
            PEER,
            json!({"interface": "eth1", "peerAddress": "fe80::1", "asn": 65000, "passive": true,
                   "extendedNextHop": true, "families": ["ipv4-unicast", "ipv6-unicast"]}),
        ),
        (
            PEER,
            json!({"interface": "eth2", "asn": 65000, "extendedNextHop": true, "ttlSecurity": true}),
        ),
    ]
}

/// `(kind, spec, the start of the message of the one rule that refuses it)`.
fn invalid() -> Vec<(&'static str, Value, &'static str)> {
    let c = |patch: Value| {
        let mut spec = base_config();
        for (k, v) in patch.as_object().unwrap() {
            if v.is_null() {
                spec.as_object_mut().unwrap().remove(k);
            } else {
                spec[k] = v.clone();
            }
        }
        spec
    };
    let p = |patch: Value| {
        let mut spec = json!({"address": "192.0.2.1", "asn": 65000});
        for (k, v) in patch.as_object().unwrap() {
            if v.is_null() {
                spec.as_object_mut().unwrap().remove(k);
            } else {
                spec[k] = v.clone();
            }
        }
        spec
    };
    let file = json!({"kind": "file", "path": "/etc/podcidr-bgp/cidrs/cidrs.yaml"});
    vec![
        (
            CONFIG,
            c(json!({"asn": null})),
            "exactly one of asn, asnFrom",
        ),
        (
            CONFIG,
            c(json!({"asnFrom": {"nodeLabel": "example.com/asn"}})),
            "exactly one of asn, asnFrom",
        ),
        (CONFIG, c(json!({"asn": 23456})), "asn 23456 (AS_TRANS)"),
        (
            CONFIG,
            c(json!({"asn": null, "asnFrom": {"nodeLabel": "a", "nodeAnnotation": "b"}})),
            "asnFrom takes exactly one of nodeLabel, nodeAnnotation",
        ),
        (
            CONFIG,
            c(json!({"asn": null, "asnFrom": {"default": 65001}})),
            "asnFrom takes exactly one of nodeLabel, nodeAnnotation",
        ),
        (
            CONFIG,
            c(json!({"asn": null, "asnFrom": {"nodeLabel": "a", "default": 23456}})),
            "asnFrom.default 23456 (AS_TRANS)",
        ),
        (
            CONFIG,
            c(json!({"allowedPrefixes": null})),
            "allowedPrefixes is required",
        ),
        (
            CONFIG,
            c(json!({"allowedPrefixes": []})),
            "allowedPrefixes is required",
        ),
        (
            CONFIG,
            c(json!({"source": file, "asnOverrides": [{"nodeSelector": {}, "asn": 65002}]})),
            "asnOverrides is not allowed",
        ),
        (
            CONFIG,
            c(json!({"source": file, "asn": null, "asnFrom": {"nodeLabel": "example.com/asn"}})),
            "asnFrom is not allowed with source.kind file",
        ),
        (
            CONFIG,
            c(json!({"routerId": "0.0.0.0"})),
            "routerId must be non-zero",
        ),
        (
            CONFIG,
            c(json!({"allowedPrefixes": ["10.244.0.1/16"]})),
            "has host bits set",
        ),
        (
            CONFIG,
            c(json!({"allowedPrefixes": ["fd00::/48", "10.245.0.0/15"]})),
            "has host bits set",
        ),
        (
            CONFIG,
            c(json!({"source": {"kind": "file"}})),
            "source.path is required",
        ),
        (
            CONFIG,
            c(
                json!({"source": {"kind": "file", "path": "/run/podcidr-bgp/keys/podcidr-bgp-md5/tor1"}}),
            ),
            "source.path must be a file under /etc/podcidr-bgp/cidrs/",
        ),
        (
            CONFIG,
            c(json!({"source": {"kind": "file", "path": "/etc/podcidr-bgp/cidrs/../../shadow"}})),
            "source.path must be a file under /etc/podcidr-bgp/cidrs/",
        ),
        (
            CONFIG,
            c(
                json!({"source": {"kind": "node-spec", "path": "/etc/podcidr-bgp/cidrs/cidrs.yaml"}}),
            ),
            "source.path is required",
        ),
        (
            CONFIG,
            c(json!({"asnOverrides": [{"nodeSelector": {}, "asn": 23456}]})),
            "asn 23456 (AS_TRANS)",
        ),
        (
            CONFIG,
            c(json!({"gracefulShutdown": {"wait": "6m"}})),
            "gracefulShutdown.wait",
        ),
        (
            CONFIG,
            c(json!({"status": {"minInterval": 0}})),
            "status.minInterval",
        ),
        (
            CONFIG,
            c(json!({"status": {"minInterval": "2h"}})),
            "status.minInterval",
        ),
        (
            PEER,
            p(json!({"interface": "eth1"})),
            "exactly one of address, interface",
        ),
        (
            PEER,
            p(json!({"address": null})),
            "exactly one of address, interface",
        ),
        (
            PEER,
            p(json!({"peerAddress": "fe80::1"})),
            "peerAddress names the neighbor",
        ),
        (
            PEER,
            p(json!({"addressFamily": "ipv4"})),
            "addressFamily is only allowed",
        ),
        (
            PEER,
            p(
                json!({"address": null, "interface": "eth1", "peerAddress": "fe80::1", "localAddress": "fe80::2"}),
            ),
            "localAddress is not allowed",
        ),
        (
            PEER,
            p(json!({"address": "default-gateway", "localAddress": "192.0.2.10"})),
            "localAddress is not allowed",
        ),
        (
            PEER,
            p(json!({"localAddress": "192.0.2.1"})),
            "localAddress must differ",
        ),
        (
            PEER,
            p(json!({"localAddress": "2001:db8::1"})),
            "localAddress must differ",
        ),
        (PEER, p(json!({"asn": 23456})), "asn 23456 (AS_TRANS)"),
        (PEER, p(json!({"asn": "auto"})), "allowedAsns is required"),
        (
            PEER,
            p(json!({"allowedAsns": [65000]})),
            "allowedAsns is required",
        ),
        (
            PEER,
            p(json!({"address": null, "interface": "eth1", "passive": true})),
            "passive and acceptIncoming need",
        ),
        (
            PEER,
            p(json!({"address": null, "interface": "eth1", "acceptIncoming": true})),
            "passive and acceptIncoming need",
        ),
        (
            PEER,
            p(json!({"passive": true, "acceptIncoming": false})),
            "a passive peer",
        ),
        (
            PEER,
            p(json!({"extendedNextHop": true, "families": ["ipv6-unicast"]})),
            "extendedNextHop carries",
        ),
        (PEER, p(json!({"holdTime": 2})), "holdTime is 0 or 3..65535"),
        (
            PEER,
            p(json!({"holdTime": "19h"})),
            "holdTime is 0 or 3..65535",
        ),
        (
            PEER,
            p(json!({"holdTime": 30, "keepaliveTime": 30})),
            "keepaliveTime is",
        ),
        (
            PEER,
            p(json!({"holdTime": 0, "keepaliveTime": 5})),
            "keepaliveTime is",
        ),
        (
            PEER,
            p(json!({"holdTime": 9, "keepaliveTime": 0})),
            "keepaliveTime is",
        ),
        (PEER, p(json!({"keepaliveTime": "2m"})), "keepaliveTime is"),
        (
            PEER,
            p(json!({"ttlSecurity": true, "ebgpMultihop": 2})),
            "ttlSecurity and ebgpMultihop",
        ),
        (
            PEER,
            p(json!({"bfd": {}, "ebgpMultihop": 2})),
            "single-hop BFD",
        ),
        (
            PEER,
            p(json!({"connectRetry": {"base": "2h"}})),
            "connectRetry.base and connectRetry.max are",
        ),
        (
            PEER,
            p(json!({"connectRetry": {"base": 30, "max": 10}})),
            "connectRetry.max is at least",
        ),
        (
            PEER,
            p(json!({"gracefulRestart": {"restartTime": 4096}})),
            "gracefulRestart.restartTime",
        ),
        (
            PEER,
            p(json!({"gracefulRestart": {"longLivedStaleTime": 16_777_216u64}})),
            "gracefulRestart.longLivedStaleTime is 0..16777215",
        ),
        (
            PEER,
            p(json!({"gracefulRestart": {"enabled": false, "longLivedStaleTime": "1h"}})),
            "gracefulRestart.longLivedStaleTime needs gracefulRestart.enabled",
        ),
    ]
}

fn example_manifests() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples/objects");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text).unwrap();
        for d in docs
            .into_iter()
            .filter(|d| d["kind"] == CONFIG || d["kind"] == PEER)
        {
            out.push((path.display().to_string(), d));
        }
    }
    assert!(out.len() >= 20, "{} example objects", out.len());
    out
}

#[test]
fn shipped_examples_and_valid_objects_pass_every_rule() {
    let rules = rules();
    for (file, obj) in example_manifests() {
        let kind = obj["kind"].as_str().unwrap();
        assert_eq!(
            refused_by(&rules, kind, &obj),
            Vec::<String>::new(),
            "{file}: {obj}"
        );
    }
    for (kind, spec) in valid() {
        assert_eq!(
            refused_by(&rules, kind, &object(kind, spec.clone())),
            Vec::<String>::new(),
            "{kind} {spec}"
        );
        reader(kind, &spec).unwrap_or_else(|e| panic!("the reader refuses {kind} {spec}: {e}"));
    }
}

#[test]
fn each_invalid_object_is_refused_by_its_rule_only_and_by_the_reader_and_every_rule_refuses_one() {
    let rules = rules();
    let mut fired = BTreeSet::new();
    for (kind, spec, expected) in invalid() {
        let refused = refused_by(&rules, kind, &object(kind, spec.clone()));
        assert!(
            refused.len() == 1 && refused[0].starts_with(expected),
            "{kind} {spec}: expected only \"{expected}…\", refused by {refused:?}"
        );
        fired.insert((kind, refused[0].clone()));
        assert!(
            reader(kind, &spec).is_err(),
            "the speaker's reader accepts {kind} {spec}, which the rule \"{expected}\" refuses"
        );
    }
    for r in &rules {
        assert!(
            fired.contains(&(r.kind, r.message.clone())),
            "no invalid object is refused by {}",
            r.at()
        );
    }
}

/// `kubectl apply --server-side --validate=strict` of `obj` as the admin: the server's
/// schema, CEL rules and strict field validation decide.
fn server_apply(cp: &ControlPlane, obj: &Value) -> Result<String, String> {
    cp.kubectl_with_input(
        cp.admin(),
        &[
            "apply",
            "--server-side",
            "--validate=strict",
            "--field-manager=crd-rules-test",
            "-f",
            "-",
        ],
        Some(&obj.to_string()),
    )
}

fn named(kind: &str, name: &str, spec: Value) -> Value {
    let mut o = object(kind, spec);
    o["metadata"]["name"] = json!(name);
    o
}

/// What `podcidr-bgp config convert` prints for each deploy/examples/*.yaml, as objects.
fn converted_examples() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let run = std::process::Command::new(common::BIN)
            .args(["config", "convert", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "config convert {}: {}",
            path.display(),
            String::from_utf8_lossy(&run.stderr)
        );
        let docs: Vec<Value> =
            serde_saphyr::from_str_multiple(&String::from_utf8(run.stdout).unwrap()).unwrap();
        out.extend(
            docs.into_iter()
                .filter(|d| d.is_object())
                .map(|d| (path.display().to_string(), d)),
        );
    }
    assert!(out.len() >= 9, "{} converted objects", out.len());
    out
}

/// What the schema's formats refuse (not CEL, so not in [`invalid`]): `(kind, spec, a part
/// of the server's message)`. The reader refuses each too.
fn invalid_formats() -> Vec<(&'static str, Value, &'static str)> {
    let c = |k: &str, v: Value| {
        let mut spec = base_config();
        spec[k] = v;
        (CONFIG, spec)
    };
    let p = |k: &str, v: Value| {
        let mut spec = json!({"address": "192.0.2.1", "asn": 65000});
        spec[k] = v;
        (PEER, spec)
    };
    let cases = [
        (c("allowedPrefixes", json!(["10.244.0.0/33"])), "type cidr"),
        (c("allowedPrefixes", json!(["10.244.0.0"])), "type cidr"),
        (
            c("nextHop", json!({"ipv4": "2001:db8::1"})),
            "spec.nextHop.ipv4",
        ),
        (
            c("nextHop", json!({"ipv6": "gateway"})),
            "spec.nextHop.ipv6",
        ),
        (p("address", json!("192.0.2.1/32")), "spec.address"),
        (p("address", json!("tor1.example.com")), "spec.address"),
        (p("localAddress", json!("eth0")), "spec.localAddress"),
    ];
    cases
        .into_iter()
        .map(|((kind, spec), msg)| (kind, spec, msg))
        .collect()
}

const ADVERTISEMENT: &str = "BGPAdvertisement";

fn advertisement(extra: Value) -> Value {
    let mut spec = json!({"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
                          "allowedPrefixes": ["198.51.100.0/24"]});
    for (k, v) in extra.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    spec
}

/// BGPAdvertisements the server must store, and the speakers read.
fn valid_advertisements() -> Vec<Value> {
    vec![
        advertisement(json!({})),
        advertisement(json!({
            "nodeSelector": {"matchLabels": {"rack": "r1"}},
            "serviceSelector": {"matchExpressions": [
                {"key": "podcidr.io/service-namespace", "operator": "In", "values": ["shop"]}]},
            "addresses": ["LoadBalancerIP", "ExternalIP", "ClusterIP"],
            "allowedPrefixes": ["198.51.100.0/24", "2001:db8:5::/64", "10.96.0.0/12"],
            "peers": {"matchLabels": {"role": "tor"}},
            "aggregationLengthIPv4": 28, "aggregationLengthIPv6": 120,
            "communities": ["65000:300", "no-export"], "largeCommunities": ["4200000001:1:2"],
            "localPref": 200, "loadBalancerClass": "example.com/bgp", "origin": "Incomplete"
        })),
    ]
}

/// What the schema refuses in a BGPAdvertisement: `(spec, a part of the server's message)`.
/// The speakers' reader refuses each too (a server that predates CEL stores the host bits).
fn invalid_advertisements() -> Vec<(Value, &'static str)> {
    vec![
        (advertisement(json!({"addresses": []})), "spec.addresses"),
        (
            advertisement(json!({"addresses": ["NodeIP"]})),
            "spec.addresses[0]",
        ),
        (
            advertisement(json!({"addresses": ["ClusterIP", "ClusterIP"]})),
            "duplicate entries",
        ),
        (
            advertisement(json!({"allowedPrefixes": []})),
            "spec.allowedPrefixes",
        ),
        (
            advertisement(json!({"allowedPrefixes": ["198.51.100.1/24"]})),
            "has host bits set",
        ),
        (
            advertisement(json!({"aggregationLengthIPv4": 33})),
            "spec.aggregationLengthIPv4",
        ),
        (advertisement(json!({"origin": "EGP"})), "spec.origin"),
    ]
}

#[test]
fn the_reader_reads_every_valid_bgp_advertisement_and_refuses_what_the_schema_refuses() {
    let read = |spec: &Value| {
        let spec: podcidr_api::BGPAdvertisementSpec =
            serde_json::from_value(spec.clone()).map_err(|e| e.to_string())?;
        podcidr_services::Advertisement::from_spec("example", &spec).map_err(|e| e.join("; "))
    };
    for spec in valid_advertisements() {
        read(&spec).unwrap_or_else(|e| panic!("the reader refuses {spec}: {e}"));
    }
    for (spec, _) in invalid_advertisements() {
        // A repeated address is one address to the reader (the server refuses the list).
        if spec["addresses"] == json!(["ClusterIP", "ClusterIP"]) {
            continue;
        }
        assert!(read(&spec).is_err(), "the reader accepts {spec}");
    }
}

#[test]
fn the_reader_refuses_what_the_schema_formats_refuse() {
    for (kind, spec, _) in invalid_formats() {
        assert!(
            reader(kind, &spec).is_err(),
            "the speaker's reader accepts {kind} {spec}"
        );
    }
}

#[test]
fn the_api_server_stores_every_valid_and_shipped_object_and_refuses_each_invalid_one_with_its_rule()
{
    for version in KubeVersion::ALL {
        let cp = integration_tests::needs!(ControlPlane::start_with(ControlPlaneOptions {
            version,
            ..ControlPlaneOptions::default()
        }));
        // Created and Established: every rule compiled, within the cost budget.
        cp.install_crds();
        let v = version.version();
        for (i, (kind, spec)) in valid().into_iter().enumerate() {
            let obj = named(kind, &format!("valid-{i}"), spec);
            server_apply(&cp, &obj).unwrap_or_else(|e| panic!("{v} refuses {obj}: {e}"));
        }
        for (file, obj) in example_manifests().into_iter().chain(converted_examples()) {
            server_apply(&cp, &obj).unwrap_or_else(|e| panic!("{v} refuses {file}: {obj}: {e}"));
        }
        for (i, spec) in valid_advertisements().into_iter().enumerate() {
            let obj = named(ADVERTISEMENT, &format!("valid-{i}"), spec);
            server_apply(&cp, &obj).unwrap_or_else(|e| panic!("{v} refuses {obj}: {e}"));
        }
        let advertisements = invalid_advertisements()
            .into_iter()
            .map(|(spec, expected)| (ADVERTISEMENT, spec, expected));
        for (i, (kind, spec, expected)) in invalid()
            .into_iter()
            .chain(invalid_formats())
            .chain(advertisements)
            .enumerate()
        {
            let obj = named(kind, &format!("invalid-{i}"), spec);
            let err = server_apply(&cp, &obj)
                .expect_err(&format!("{v} stores {obj}, which \"{expected}\" refuses"));
            assert!(
                err.contains(expected),
                "{v} refuses {obj} without the rule \"{expected}…\": {err}"
            );
        }
    }
}
