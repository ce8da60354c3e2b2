//! `deploy/crds/` must equal what the Rust types generate, and what they generate must be a
//! CRD the apiserver accepts. Regenerate with:
//!
//! ```sh
//! UPDATE_CRDS=1 cargo test -p podcidr-api --test quick crds_in_sync
//! ```

use std::path::PathBuf;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use podcidr_api::{crd_files, crds_yaml};

const REGENERATE: &str = "UPDATE_CRDS=1 cargo test -p podcidr-api --test quick crds_in_sync";

fn crd_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds")
}

/// With `UPDATE_CRDS` set, writes the generated `files` into `dir`.
fn regenerate_when_asked(dir: &std::path::Path, files: &[(String, String)]) {
    if std::env::var_os("UPDATE_CRDS").is_some() {
        std::fs::create_dir_all(dir).unwrap();
        for (name, contents) in files {
            std::fs::write(dir.join(name), contents).unwrap();
        }
    }
}

/// The Helm chart's `crds/`: the same files (Helm installs them as they are, before the
/// templates, and never upgrades or deletes them).
fn chart_crd_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/helm/podcidr-bgp/crds")
}

#[test]
fn the_helm_charts_crds_are_deploy_crds() {
    let files = crd_files().expect("CRDs serialize");
    let dir = chart_crd_dir();
    regenerate_when_asked(&dir, &files);
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut names: Vec<String> = files.iter().map(|(n, _)| n.clone()).collect();
    names.sort();
    assert_eq!(on_disk, names, "{}: exactly the CRD files", dir.display());
    for (name, expected) in &files {
        let actual = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        assert!(
            actual == *expected,
            "{}/{name} is out of date; regenerate with: {REGENERATE}",
            dir.display()
        );
    }
}

/// deploy/crds/'s one file that is no CRD: the two namespaces (uninstalling the workloads
/// must not delete them, with the user's MD5 Secret).
const NAMESPACES: &str = "namespaces.yaml";

#[test]
fn deploy_crds_match_the_rust_types() {
    let files = crd_files().expect("CRDs serialize");
    let dir = crd_dir();
    regenerate_when_asked(&dir, &files);
    for (name, expected) in &files {
        let path = dir.join(name);
        let actual = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            actual == *expected,
            "{} is out of date with api/src/lib.rs; regenerate with: {REGENERATE}",
            path.display()
        );
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        // The namespaces are installed with the CRDs (the state layer), hand-written.
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml" && n != NAMESPACES)
        .collect();
    on_disk.sort();
    let mut generated: Vec<String> = files.into_iter().map(|(n, _)| n).collect();
    generated.sort();
    assert_eq!(
        on_disk, generated,
        "deploy/crds holds a CRD the types no longer generate; delete it"
    );
    // `kubectl apply -k deploy/crds` installs exactly these.
    let kustomization = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
    let mut listed: Vec<String> = kustomization
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .filter(|l| l.ends_with(".yaml"))
        .map(str::to_owned)
        .collect();
    listed.sort();
    let mut want = on_disk.clone();
    want.push(NAMESPACES.to_owned());
    want.sort();
    assert_eq!(
        listed, want,
        "deploy/crds/kustomization.yaml must list every CRD file and the namespaces"
    );
}

fn parsed() -> Vec<CustomResourceDefinition> {
    let yaml = crds_yaml().expect("CRDs serialize");
    serde_saphyr::from_str_multiple(&yaml).expect("generated YAML is a list of v1 CRDs")
}

fn by_name(name: &str) -> CustomResourceDefinition {
    parsed()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no CRD {name}"))
}

fn schema(crd: &CustomResourceDefinition) -> &JSONSchemaProps {
    let version = &crd.spec.versions[0];
    version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("every version has a schema")
}

fn children(props: &JSONSchemaProps) -> Vec<(String, &JSONSchemaProps)> {
    let mut out: Vec<(String, &JSONSchemaProps)> = Vec::new();
    for (k, v) in props.properties.iter().flatten() {
        out.push((k.clone(), v));
    }
    match &props.items {
        Some(JSONSchemaPropsOrArray::Schema(s)) => out.push(("[]".into(), s)),
        Some(JSONSchemaPropsOrArray::Schemas(list)) => {
            out.extend(list.iter().map(|s| ("[]".to_string(), s)))
        }
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(s)) = &props.additional_properties {
        out.push(("{}".into(), s));
    }
    out
}

/// Visit every schema node with its path.
fn walk<'a>(
    path: &str,
    props: &'a JSONSchemaProps,
    visit: &mut dyn FnMut(&str, &'a JSONSchemaProps),
) {
    visit(path, props);
    for (key, child) in children(props) {
        walk(&format!("{path}.{key}"), child, visit);
    }
}

#[test]
fn generated_yaml_is_a_valid_v1_crd_set() {
    let crds = parsed();
    let names: Vec<_> = crds
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "podcidrpools.podcidr.io",
            "nodepodcidrs.podcidr.io",
            "nodebgpstatuses.podcidr.io",
            "bgpspeakerconfigs.bgp.podcidr.io",
            "bgppeers.bgp.podcidr.io",
            "bgpadvertisements.bgp.podcidr.io"
        ]
    );
    for crd in &crds {
        // IPAM and status kinds are v1alpha1 in podcidr.io; the configuration objects are
        // v1beta1 in their own group, so RBAC can grant them apart.
        let (group, version_name) = if crd.spec.group == "bgp.podcidr.io" {
            ("bgp.podcidr.io", "v1beta1")
        } else {
            ("podcidr.io", "v1alpha1")
        };
        assert_eq!(crd.spec.group, group);
        assert_eq!(crd.spec.scope, "Cluster", "{names:?} are cluster-scoped");
        let [version] = crd.spec.versions.as_slice() else {
            panic!("exactly one version")
        };
        assert_eq!(version.name, version_name);
        assert!(version.served && version.storage);
        let status = version
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref());
        assert!(status.is_some(), "status subresource enabled");
        assert!(
            version
                .additional_printer_columns
                .as_ref()
                .is_some_and(|c| c.len() >= 3),
            "printer columns for kubectl get"
        );
    }
}

#[test]
fn schema_is_structural_every_node_has_a_type() {
    for crd in parsed() {
        walk("", schema(&crd), &mut |path, props| {
            let untyped_ok = props.x_kubernetes_int_or_string == Some(true)
                || props.x_kubernetes_preserve_unknown_fields == Some(true);
            assert!(
                props.type_.is_some() || untyped_ok,
                "{}: {path} has no type",
                crd.metadata.name.as_deref().unwrap_or_default()
            );
            assert!(props.ref_path.is_none(), "{path}: $ref is not structural");
            for list in [&props.any_of, &props.one_of, &props.all_of] {
                for branch in list.iter().flatten() {
                    assert!(branch.type_.is_none(), "{path}: type inside a junctor");
                }
            }
        });
    }
}

/// kube-apiserver 1.20.2 (the test suite's) refused both configuration CRDs while an
/// `Option` of an enum listed `null` among its values; no writer sends `null`.
#[test]
fn no_enum_lists_null_which_a_1_20_server_refuses() {
    for crd in parsed() {
        walk("", schema(&crd), &mut |path, props| {
            for v in props.enum_.iter().flatten() {
                assert!(
                    !v.0.is_null(),
                    "{}: {path} lists null in its enum",
                    crd.metadata.name.as_deref().unwrap_or_default()
                );
            }
        });
    }
}

/// Required fields, per object path. Anything optional in Kubernetes style must not appear.
fn required(crd: &str) -> Vec<(String, Vec<String>)> {
    let crd = by_name(crd);
    let mut out = Vec::new();
    walk("", schema(&crd), &mut |path, props| {
        if let Some(required) = &props.required
            && !required.is_empty()
        {
            let mut required = required.clone();
            required.sort();
            out.push((path.to_owned(), required));
        }
    });
    out
}

/// metav1.Condition, sorted.
const CONDITION_REQUIRED: [&str; 5] = ["lastTransitionTime", "message", "reason", "status", "type"];

#[test]
fn pod_cidr_pool_optional_fields_are_not_required() {
    let strs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut expected = vec![
        (".spec".to_string(), strs(&[])),
        (".spec.ipv4".into(), strs(&["cidrs", "maskSize"])),
        (".spec.ipv6".into(), strs(&["cidrs", "maskSize"])),
        (
            ".spec.nodeSelector.matchExpressions.[]".into(),
            strs(&["key", "operator"]),
        ),
        (".status.conditions.[]".into(), strs(&CONDITION_REQUIRED)),
        ("".into(), strs(&["spec"])),
    ];
    expected.retain(|(_, r)| !r.is_empty());
    let mut actual = required("podcidrpools.podcidr.io");
    actual.sort();
    expected.sort();
    assert_eq!(actual, expected);
}

#[test]
fn node_pod_cidr_optional_fields_are_not_required() {
    let mut actual = required("nodepodcidrs.podcidr.io");
    actual.sort();
    let conditions: Vec<String> = CONDITION_REQUIRED.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        actual,
        vec![
            ("".to_string(), vec!["spec".to_string()]),
            (".status.conditions.[]".to_string(), conditions),
        ]
    );
}

#[test]
fn node_pod_cidr_fields_use_kubernetes_spelling() {
    let crd = by_name("nodepodcidrs.podcidr.io");
    let root = schema(&crd).properties.as_ref().unwrap();
    let spec = root["spec"].properties.as_ref().unwrap();
    assert!(spec.contains_key("podCIDRs"), "spec.podCIDRs, like Node");
    assert!(spec.contains_key("pool"));
    let conditions = &root["status"].properties.as_ref().unwrap()["conditions"];
    assert_eq!(conditions.x_kubernetes_list_type.as_deref(), Some("map"));
    assert_eq!(
        conditions.x_kubernetes_list_map_keys.as_deref(),
        Some(&["type".to_string()][..])
    );
}

#[test]
fn pool_status_counts_per_family() {
    let crd = by_name("podcidrpools.podcidr.io");
    let status = &schema(&crd).properties.as_ref().unwrap()["status"];
    for family in ["ipv4", "ipv6"] {
        let counts = status.properties.as_ref().unwrap()[family]
            .properties
            .as_ref()
            .unwrap();
        for field in ["capacity", "allocated", "free", "quarantined"] {
            assert_eq!(
                counts[field].type_.as_deref(),
                Some("integer"),
                "status.{family}.{field}"
            );
        }
    }
}

#[test]
fn node_pod_cidr_is_named_after_and_owned_by_its_node() {
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use podcidr_api::{NodePodCIDR, NodePodCIDRSpec};
    let node = Node {
        metadata: ObjectMeta {
            name: Some("node-a".into()),
            uid: Some("6f1c".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let object = NodePodCIDR::for_node(&node, NodePodCIDRSpec::default());
    assert_eq!(object.metadata.name.as_deref(), Some("node-a"));
    let owners = object.metadata.owner_references.unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].uid.as_str()),
        ("Node", "6f1c")
    );
    assert_eq!(owners[0].api_version, "v1");
}

#[test]
fn pool_schema_rejects_a_familyless_pool_and_an_ipv4_mask_over_32() {
    let crd = by_name("podcidrpools.podcidr.io");
    let spec = &schema(&crd).properties.as_ref().unwrap()["spec"];
    let rules = |p: &JSONSchemaProps| -> Vec<String> {
        let list = p.x_kubernetes_validations.iter().flatten();
        list.map(|v| v.rule.clone()).collect()
    };
    assert_eq!(rules(spec), ["has(self.ipv4) || has(self.ipv6)"]);
    let ipv4 = &spec.properties.as_ref().unwrap()["ipv4"];
    assert_eq!(
        rules(ipv4),
        ["self.maskSize <= 32", "self.cidrs.all(c, !c.contains(':'))"]
    );
    let ipv6 = &spec.properties.as_ref().unwrap()["ipv6"];
    assert_eq!(rules(ipv6), ["self.cidrs.all(c, c.contains(':'))"]);
}

/// Every version a release has stored objects in, per CRD (the CRD version policy,
/// docs/operator-guide.md "CRD versions"). Append when a release makes a new version the
/// storage version; remove an entry only in a release that documents the migration of every
/// object out of it (the API server refuses to drop a version still in
/// `status.storedVersions`, so shipping such a CRD would fail to apply on old clusters).
const RELEASED_STORAGE_VERSIONS: &[(&str, &str)] = &[
    ("nodepodcidrs.podcidr.io", "v1alpha1"),
    ("podcidrpools.podcidr.io", "v1alpha1"),
    ("nodebgpstatuses.podcidr.io", "v1alpha1"),
    ("bgpspeakerconfigs.bgp.podcidr.io", "v1beta1"),
    ("bgppeers.bgp.podcidr.io", "v1beta1"),
    ("bgpadvertisements.bgp.podcidr.io", "v1beta1"),
];

#[test]
fn shipped_crds_still_serve_every_version_a_release_stored_objects_in() {
    for crd in parsed() {
        let name = crd.metadata.name.clone().unwrap();
        let released: Vec<&str> = RELEASED_STORAGE_VERSIONS
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .collect();
        assert!(
            !released.is_empty(),
            "{name}: a new CRD; add its storage version to RELEASED_STORAGE_VERSIONS"
        );
        let storage: Vec<&str> = crd
            .spec
            .versions
            .iter()
            .filter(|v| v.storage)
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(storage.len(), 1, "{name}: one storage version");
        assert!(
            released.contains(&storage[0]),
            "{name}: storage version {} is not listed as released",
            storage[0]
        );
        for v in released {
            assert!(
                crd.spec.versions.iter().any(|s| s.name == v && s.served),
                "{name}: {v} holds stored objects of an earlier release and must stay served"
            );
        }
    }
}

/// Every string, list and map of every CRD has a bound the API server knows (maxLength,
/// maxItems, maxProperties, or an enum), so objects are bounded and CEL cost estimates hold.
#[test]
fn every_string_list_and_map_of_every_crd_is_bounded() {
    fn walk(p: &JSONSchemaProps, path: &str, out: &mut Vec<String>) {
        let int_or_string = p.x_kubernetes_int_or_string == Some(true);
        match p.type_.as_deref() {
            Some("string") if p.max_length.is_none() && p.enum_.is_none() => {
                out.push(format!("{path}: a string without maxLength"))
            }
            Some("array") if p.max_items.is_none() => {
                out.push(format!("{path}: a list without maxItems"))
            }
            Some("object") if p.additional_properties.is_some() && p.max_properties.is_none() => {
                out.push(format!("{path}: a map without maxProperties"))
            }
            None if int_or_string && p.max_length.is_none() => {
                out.push(format!("{path}: an int-or-string without maxLength"))
            }
            _ => {}
        }
        for (k, c) in p.properties.iter().flatten() {
            walk(c, &format!("{path}.{k}"), out);
        }
        if let Some(JSONSchemaPropsOrArray::Schema(i)) = &p.items {
            walk(i, &format!("{path}[]"), out);
        }
        if let Some(JSONSchemaPropsOrBool::Schema(v)) = &p.additional_properties {
            walk(v, &format!("{path}{{}}"), out);
        }
    }
    let mut unbounded = Vec::new();
    for crd in podcidr_api::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        for v in &crd.spec.versions {
            let s = v
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref());
            for (k, c) in s.and_then(|s| s.properties.as_ref()).into_iter().flatten() {
                walk(c, &format!("{name} {}: .{k}", v.name), &mut unbounded);
            }
        }
    }
    assert!(unbounded.is_empty(), "{unbounded:#?}");
}
