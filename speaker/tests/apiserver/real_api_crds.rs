//! The three IPAM CRDs (deploy/crds/) on a real kube-apiserver (the newest the suite builds)
//! with etcd: what the API server decides about our objects, as opposed to what the in-process
//! fake assumes. The CEL rules are kept and enforced (the pool rule "ipv4, ipv6 or both").

use crate::common;

use std::collections::BTreeSet;

use common::real_api::{self, ControlPlane};
use serde_json::{Value, json};

const CRDS: [(&str, &str); 3] = [
    ("nodepodcidrs", "NodePodCIDR"),
    ("podcidrpools", "PodCIDRPool"),
    ("nodebgpstatuses", "NodeBGPStatus"),
];

fn get(cp: &ControlPlane, plural: &str, name: &str) -> Value {
    let out = cp.kubectl(&["get", &format!("{plural}.podcidr.io"), name, "-o", "json"]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn create(cp: &ControlPlane, obj: &Value) {
    cp.kubectl_with_input(cp.admin(), &["create", "-f", "-"], Some(&obj.to_string()))
        .unwrap_or_else(|e| panic!("create {obj}: {e}"));
}

/// A merge patch of the object (`status: true`: of its status subresource) as the admin.
fn patch(cp: &ControlPlane, plural: &str, name: &str, status: bool, body: &Value) -> Value {
    let kind = format!("{plural}.podcidr.io");
    let body = body.to_string();
    let mut args = vec![
        "patch",
        &kind,
        name,
        "--type=merge",
        "-p",
        &body,
        "-o",
        "json",
    ];
    if status {
        args.push("--subresource=status");
    }
    let out = cp.kubectl(&args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn generation(obj: &Value) -> i64 {
    obj["metadata"]["generation"].as_i64().expect("generation")
}

/// One object of each kind: a spec, and a status the create must not keep.
fn objects() -> Vec<(&'static str, Value)> {
    let meta = |kind: &str| json!({"apiVersion": "podcidr.io/v1alpha1", "kind": kind, "metadata": {"name": "node-a"}});
    let mut npc = meta("NodePodCIDR");
    npc["spec"] = json!({"podCIDRs": ["10.20.1.0/24"], "pool": "default"});
    let mut pcp = meta("PodCIDRPool");
    pcp["metadata"]["name"] = json!("default");
    pcp["spec"] = json!({"ipv4": {"cidrs": ["10.20.0.0/16"], "maskSize": 24}});
    let mut nbs = meta("NodeBGPStatus");
    nbs["spec"] = json!({"nodeName": "node-a"});
    let status = json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Set",
        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
    [
        ("nodepodcidrs", npc),
        ("podcidrpools", pcp),
        ("nodebgpstatuses", nbs),
    ]
    .into_iter()
    .map(|(p, mut o)| {
        o["status"] = status.clone();
        (p, o)
    })
    .collect()
}

/// The status subresource as the allocator and the speaker rely on it: a status apply to a
/// missing object is 404; a create drops `.status`; a status write changes only `.status` and keeps `metadata.generation`; a write
/// of the object changes only the rest, and `generation` moves only when the spec does (not
/// for labels).
#[test]
fn status_subresource_separates_spec_from_status_and_generation_follows_the_spec() {
    let cp = integration_tests::needs!(real_api::installed_control_plane());
    for (plural, obj) in objects() {
        let name = obj["metadata"]["name"].as_str().unwrap();
        // A status apply needs the object: the speaker applies the object on a 404.
        let err = real_api::apply_as(&cp, cp.admin(), "test", &obj, Some("status")).unwrap_err();
        assert!(err.contains("NotFound"), "{plural}: {err}");
        create(&cp, &obj);
        let created = get(&cp, plural, name);
        assert_eq!(
            created["status"],
            Value::Null,
            "{plural}: create keeps no status"
        );
        assert_eq!(generation(&created), 1, "{plural}");

        // A status write that also tries to change the spec.
        let spec_try = match plural {
            "nodepodcidrs" => json!({"podCIDRs": ["10.20.9.0/24"]}),
            "podcidrpools" => json!({"ipv4": {"cidrs": ["10.99.0.0/16"], "maskSize": 24}}),
            _ => json!({"nodeName": "node-z"}),
        };
        let status = obj["status"].clone();
        let after = patch(
            &cp,
            plural,
            name,
            true,
            &json!({"spec": spec_try, "status": status}),
        );
        assert_eq!(
            after["spec"], created["spec"],
            "{plural}: /status ignores the spec"
        );
        assert_eq!(
            after["status"]["conditions"][0]["type"], "Ready",
            "{plural}"
        );
        assert_eq!(
            generation(&after),
            1,
            "{plural}: a status write keeps generation"
        );

        // A write of the object that also tries to change the status.
        let after = patch(
            &cp,
            plural,
            name,
            false,
            &json!({"spec": spec_try, "status": {"conditions": []}}),
        );
        assert_eq!(after["status"], get(&cp, plural, name)["status"]);
        assert_eq!(
            after["status"]["conditions"][0]["type"], "Ready",
            "{plural}: the object write ignores the status"
        );
        assert_ne!(after["spec"], created["spec"], "{plural}");
        assert_eq!(
            generation(&after),
            2,
            "{plural}: a spec change moves generation"
        );

        // Metadata only: no new generation.
        let after = patch(
            &cp,
            plural,
            name,
            false,
            &json!({"metadata": {"labels": {"podcidr.io/test": "x"}}}),
        );
        assert_eq!(after["metadata"]["labels"]["podcidr.io/test"], "x");
        assert_eq!(generation(&after), 2, "{plural}: labels keep generation");
    }
}

/// `kubectl get` of each kind prints the shipped printer columns (headers and values), the
/// short names `npc`, `pcp`, `nbs` resolve, and the category `podcidr` lists all three.
#[test]
fn printer_columns_short_names_and_the_podcidr_category_show_in_kubectl_get() {
    let cp = integration_tests::needs!(real_api::installed_control_plane());
    for (plural, obj) in objects() {
        create(&cp, &obj);
        let name = obj["metadata"]["name"].as_str().unwrap();
        let status = match plural {
            "nodepodcidrs" => json!({"conditions": [
                {"type": "Allocated", "status": "True", "reason": "Allocated", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "SourceMismatch", "status": "False", "reason": "Agree", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
            "podcidrpools" => json!({"ipv4": {"capacity": 256, "free": 255, "allocated": 1},
                "conditions": [
                {"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Exhausted", "status": "False", "reason": "Free", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
            _ => json!({"source": "ipam-crd", "localAsn": 64512, "announced": ["10.20.1.0/24"],
                "updatedAt": "2026-01-01T00:00:00Z",
                "conditions": [
                {"type": "Established", "status": "True", "reason": "AllEstablished",
                 "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
        };
        patch(&cp, plural, name, true, &json!({"status": status}));
    }
    let table = |args: &[&str]| {
        let out = cp.kubectl(args);
        println!("kubectl {}\n{out}", args.join(" "));
        real_api::table(&out)
    };
    let npc = table(&["get", "npc"]);
    assert_eq!(
        npc[0],
        ["NAME", "PODCIDRS", "POOL", "ALLOCATED", "MISMATCH", "AGE"],
        "{npc:?}"
    );
    assert_eq!(
        npc[1][..5],
        [
            "node-a",
            "[\"10.20.1.0/24\"]",
            "default",
            "Allocated",
            "False"
        ]
    );

    let pcp = table(&["get", "pcp"]);
    assert_eq!(
        pcp[0],
        [
            "NAME", "IPV4", "V4MASK", "IPV6", "V6MASK", "V4FREE", "V6FREE", "READY", "AGE"
        ],
        "{pcp:?}"
    );
    // Absent values (no IPv6 part) print blank.
    assert_eq!(
        pcp[1][..8],
        [
            "default",
            "[\"10.20.0.0/16\"]",
            "24",
            "",
            "",
            "255",
            "",
            "True"
        ]
    );
    let wide = table(&["get", "pcp", "-o", "wide"]);
    assert_eq!(
        wide[0][8], "EXHAUSTED",
        "priority-1 column only with -o wide: {wide:?}"
    );
    assert_eq!(wide[1][8], "False");

    let nbs = table(&["get", "nbs"]);
    assert_eq!(
        nbs[0],
        [
            "NAME",
            "SOURCE",
            "ASN",
            "ESTABLISHED",
            "ANNOUNCED",
            "MISMATCH",
            "UPDATED"
        ],
        "{nbs:?}"
    );
    assert_eq!(
        nbs[1][..6],
        [
            "node-a",
            "ipam-crd",
            "64512",
            "True",
            "[\"10.20.1.0/24\"]",
            ""
        ]
    );

    let names: BTreeSet<String> = cp
        .kubectl(&["get", "podcidr", "-o", "name"])
        .lines()
        .map(str::to_owned)
        .collect();
    let want: BTreeSet<String> = [
        "nodepodcidr.podcidr.io/node-a",
        "podcidrpool.podcidr.io/default",
        "nodebgpstatus.podcidr.io/node-a",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(names, want, "the podcidr category lists every kind");
}

/// Every `default:` in the shipped schemas, with its path, as `(path, value)`. Paths use
/// `.key` and `[]` for array items.
fn defaults(schema: &Value, path: &str, out: &mut Vec<(String, Value)>) {
    if let Some(d) = schema.get("default") {
        out.push((path.to_owned(), d.clone()));
    }
    if let Some(props) = schema["properties"].as_object() {
        for (k, s) in props {
            defaults(s, &format!("{path}.{k}"), out);
        }
    }
    if schema["items"].is_object() {
        defaults(&schema["items"], &format!("{path}[]"), out);
    }
    if schema["additionalProperties"].is_object() {
        defaults(&schema["additionalProperties"], &format!("{path}{{}}"), out);
    }
}

fn has_inner_default(schema: &Value) -> bool {
    let mut found = Vec::new();
    defaults(schema, "", &mut found);
    found.iter().any(|(p, _)| !p.is_empty())
}

/// The smallest valid value for a required field the test does not care about.
fn filler(schema: &Value) -> Value {
    match schema["type"].as_str() {
        Some("string") => schema["enum"].get(0).cloned().unwrap_or(json!("x")),
        Some("integer") => json!(schema["minimum"].as_f64().unwrap_or(0.0) as i64),
        Some("boolean") => json!(false),
        Some("array") => json!([]),
        _ => skeleton(schema, 0),
    }
}

/// An instance that leaves every defaulted field out, so the server must fill it in, except
/// that the outermost `keep` levels of defaulted fields with defaults inside are sent (one
/// item for an array) so the defaults inside are exercised. Required fields get [`filler`]
/// values.
fn skeleton(schema: &Value, keep: usize) -> Value {
    if schema["type"] == "array" {
        return json!([skeleton(&schema["items"], keep)]);
    }
    let mut obj = serde_json::Map::new();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (k, s) in schema["properties"].as_object().into_iter().flatten() {
        let defaulted = s.get("default").is_some();
        if has_inner_default(s) && !defaulted {
            obj.insert(k.clone(), skeleton(s, keep));
        } else if has_inner_default(s) && keep > 0 {
            obj.insert(k.clone(), skeleton(s, keep - 1));
        } else if !defaulted && required.contains(&k.as_str()) {
            obj.insert(k.clone(), filler(s));
        }
    }
    Value::Object(obj)
}

/// Every default whose parent the sent instance has and which it left out, checked against
/// what the server stored; returns the paths checked.
fn check_defaults(
    schema: &Value,
    sent: &Value,
    stored: &Value,
    path: &str,
    checked: &mut BTreeSet<String>,
) {
    if schema["type"] == "array" {
        for (s, st) in sent.as_array().into_iter().flatten().zip(
            stored
                .as_array()
                .unwrap_or_else(|| panic!("{path}: {stored}")),
        ) {
            check_defaults(&schema["items"], s, st, &format!("{path}[]"), checked);
        }
        return;
    }
    for (k, s) in schema["properties"].as_object().into_iter().flatten() {
        let p = format!("{path}.{k}");
        match (sent.get(k), s.get("default")) {
            (None, Some(d)) => {
                assert_eq!(
                    stored.get(k),
                    Some(d),
                    "{p}: the server fills in the default"
                );
                checked.insert(p);
            }
            (Some(v), _) => check_defaults(s, v, &stored[k], &p, checked),
            (None, None) => {}
        }
    }
}

fn shipped_crd(plural: &str) -> Value {
    let path = format!(
        "{}/../deploy/crds/{plural}.podcidr.io.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every `default:` in deploy/crds/*.yaml is applied by the API server (the fake applies
/// none): on create for the spec, on a status write for the status, inside list items too.
/// The readers rely on it only through serde defaults, so an object written before a field
/// existed reads the same; this pins that the server's view matches the schema we ship.
#[test]
fn the_server_fills_in_every_schema_default_of_the_shipped_crds() {
    let cp = integration_tests::needs!(real_api::installed_control_plane());
    let mut every = BTreeSet::new();
    let mut checked = BTreeSet::new();
    for (plural, kind) in CRDS {
        let crd = shipped_crd(plural);
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        let mut found = Vec::new();
        defaults(schema, "", &mut found);
        every.extend(found.into_iter().map(|(p, _)| format!("{plural}{p}")));
        // One object per nesting level of defaults: {}, then [{}] with [] inside, ...
        let variants = (0..).map(|keep| skeleton(schema, keep));
        let mut last = Value::Null;
        for (i, sent) in variants
            .take_while(|v| std::mem::replace(&mut last, v.clone()) != *v)
            .enumerate()
        {
            let name = format!("defaults-{i}");
            let mut obj = json!({"apiVersion": "podcidr.io/v1alpha1", "kind": kind,
                                 "metadata": {"name": name}});
            obj["spec"] = sent["spec"].clone();
            // The pool's CEL rule wants a family; the spec holds no default to exercise.
            if plural == "podcidrpools" {
                obj["spec"]["ipv4"] = json!({"cidrs": ["10.20.0.0/16"], "maskSize": 24});
            }
            create(&cp, &obj);
            if let Some(status) = sent.get("status") {
                patch(&cp, plural, &name, true, &json!({"status": status}));
            }
            let stored = get(&cp, plural, &name);
            let mut seen = BTreeSet::new();
            check_defaults(schema, &sent, &stored, "", &mut seen);
            checked.extend(seen.into_iter().map(|p| format!("{plural}{p}")));
        }
    }
    assert!(!every.is_empty());
    assert_eq!(checked, every, "every shipped default was exercised");
}

/// Whether a validation error names the field `list[i].field` (`list[0].field`; servers
/// before 1.22 left the index out).
fn names(err: &str, list: &str, field: &str) -> bool {
    err.contains(&format!("{list}[0].{field}")) || err.contains(&format!("{list}.{field}"))
}

/// The server validates against the shipped schema: a wrong type, an unknown enum value and
/// too many items are refused, each naming the field (kubectl's own validation off, so the
/// answer is the server's), and so is an object a CEL rule refuses.
#[test]
fn the_server_refuses_objects_violating_the_schema_naming_the_field() {
    let cp = integration_tests::needs!(real_api::installed_control_plane());
    let create_raw = |obj: Value| {
        cp.kubectl_with_input(
            cp.admin(),
            &["create", "--validate=false", "-f", "-"],
            Some(&obj.to_string()),
        )
    };
    let npc = |spec: Value| {
        json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "NodePodCIDR",
               "metadata": {"name": "node-a"}, "spec": spec})
    };
    let err = create_raw(npc(json!({"podCIDRs": "10.20.1.0/24"}))).unwrap_err();
    assert!(
        err.contains("spec.podCIDRs") && err.contains("must be of type array"),
        "{err}"
    );
    let err = create_raw(npc(
        json!({"podCIDRs": ["10.20.1.0/24", "fd00::/64", "10.20.2.0/24"]}),
    ))
    .unwrap_err();
    assert!(
        err.contains("spec.podCIDRs") && err.contains("at most 2 items"),
        "{err}"
    );
    let pool = |operator: &str| {
        json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "PodCIDRPool",
               "metadata": {"name": "racks"},
               "spec": {"ipv4": {"cidrs": ["10.30.0.0/16"], "maskSize": 24},
                        "nodeSelector": {"matchExpressions": [{"key": "rack", "operator": operator}]}}})
    };
    let err = create_raw(pool("Sometimes")).unwrap_err();
    assert!(
        names(&err, "spec.nodeSelector.matchExpressions", "operator")
            && err.contains("Unsupported value: \"Sometimes\""),
        "{err}"
    );
    create_raw(pool("Exists")).expect("a valid pool");

    // A status enum, through the status subresource.
    create_raw(npc(json!({"podCIDRs": ["10.20.1.0/24"]}))).expect("a valid NodePodCIDR");
    let bad = json!({"status": {"conditions": [{"type": "Allocated", "status": "Maybe",
        "reason": "Allocated", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    let err = cp
        .kubectl_as(
            cp.admin(),
            &[
                "patch",
                "npc",
                "node-a",
                "--subresource=status",
                "--type=merge",
                "-p",
                &bad.to_string(),
            ],
        )
        .unwrap_err();
    assert!(
        names(&err, "status.conditions", "status") && err.contains("Unsupported value: \"Maybe\""),
        "{err}"
    );

    // The CRD's CEL rule (kept and enforced by every supported server) refuses a pool with
    // neither family, naming the rule's message.
    let installed = real_api::get_json(&cp, &["crd", "podcidrpools.podcidr.io"]);
    let schema = installed["spec"]["versions"][0]["schema"].to_string();
    assert!(schema.contains("maskSize") && schema.contains("x-kubernetes-validations"));
    let err = create_raw(
        json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "PodCIDRPool",
                      "metadata": {"name": "empty"}, "spec": {}}),
    )
    .expect_err("the server evaluates the CEL rule");
    assert!(err.contains("a pool needs ipv4, ipv6 or both"), "{err}");
}
