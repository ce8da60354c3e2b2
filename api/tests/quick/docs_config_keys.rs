//! docs/config.md, "Every key, file and objects", lists every field of the BGPSpeakerConfig and
//! BGPPeer specs exactly once, names no field the CRDs do not have, and spells each one the
//! file's way (`BGPSpeakerConfig spec.X` is file key `X`, `BGPPeer spec.X` is `peers[].X`), so
//! a key added to the types cannot be left out of the reference.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray,
};

const SECTION: &str = "## Every key, file and objects";
const KINDS: [&str; 2] = ["BGPSpeakerConfig", "BGPPeer"];

/// `spec` field paths (`connectRetry.base`, `asnOverrides[].asn`); a label selector is one
/// field (its keys are Kubernetes'), and so is a list of scalars. `true`: below it any key
/// goes (preserve-unknown-fields).
fn paths(prefix: &str, p: &JSONSchemaProps, out: &mut BTreeMap<String, bool>) {
    for (k, child) in p.properties.iter().flatten() {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        out.insert(
            path.clone(),
            child.x_kubernetes_preserve_unknown_fields == Some(true),
        );
        if k == "nodeSelector" || k == "canarySelector" {
            continue;
        }
        paths(&path, child, out);
        if let Some(JSONSchemaPropsOrArray::Schema(item)) = &child.items {
            paths(&format!("{path}[]"), item, out);
        }
    }
}

/// The schema of a CRD's `spec`.
fn spec_schema(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> &JSONSchemaProps {
    &crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| s.properties.as_ref())
        .expect("a schema")["spec"]
}

fn schema_fields() -> BTreeMap<(String, String), bool> {
    let mut out = BTreeMap::new();
    for crd in podcidr_api::crds() {
        let kind = crd.spec.names.kind.clone();
        if !KINDS.contains(&kind.as_str()) {
            continue;
        }
        let spec = spec_schema(&crd);
        let mut fields = BTreeMap::new();
        paths("", spec, &mut fields);
        out.extend(
            fields
                .into_iter()
                .map(|(p, open)| ((kind.clone(), p), open)),
        );
    }
    out
}

/// The table's rows: (file key, `(kind, spec path)` if the object column names one).
fn doc_rows() -> Vec<(String, Option<(String, String)>)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/config.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find(SECTION).expect("the section");
    let section = &text[start + SECTION.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut rows = Vec::new();
    // After the header row (the separator row starts "|-").
    for line in section.lines().filter(|l| l.starts_with("| ")).skip(1) {
        let cells: Vec<&str> = line.split(" | ").collect();
        let file = cells[0]
            .trim_start_matches("| ")
            .trim_matches('`')
            .to_owned();
        let object = KINDS.iter().find_map(|kind| {
            let rest = cells[1].strip_prefix(&format!("`{kind}` `spec."))?;
            Some((kind.to_string(), rest[..rest.find('`')?].to_owned()))
        });
        rows.push((file, object));
    }
    assert!(rows.len() > 50, "{} rows", rows.len());
    rows
}

#[test]
fn config_md_lists_every_spec_field_of_both_crds_once_in_both_spellings() {
    let fields = schema_fields();
    let rows = doc_rows();
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (file, object) in &rows {
        let Some((kind, path)) = object else { continue };
        *seen.entry((kind.clone(), path.clone())).or_default() += 1;
        // A field the schema has, or a key below one that takes any.
        let known = fields.contains_key(&(kind.clone(), path.clone()))
            || fields
                .iter()
                .any(|((k, p), open)| *open && k == kind && path.starts_with(&format!("{p}.")));
        assert!(
            known,
            "docs/config.md names {kind} spec.{path}, which the CRD has not"
        );
        let expected = match (kind.as_str(), path.as_str()) {
            (_, "nodeSelector") if kind == "BGPSpeakerConfig" => "—".to_owned(),
            // Precedence between objects: a file has one config and named peers.
            (_, "priority") => "—".to_owned(),
            // How an edit of an object reaches the nodes: a file is edited on each node.
            (_, p) if p == "rollout" || p.starts_with("rollout.") => "—".to_owned(),
            // The file's `asn` is a number or a mapping; the object types the two apart.
            ("BGPSpeakerConfig", "asnFrom") => "—".to_owned(),
            ("BGPSpeakerConfig", "asnFrom.nodeLabel") => "asn.fromNodeLabel".to_owned(),
            ("BGPSpeakerConfig", "asnFrom.nodeAnnotation") => "asn.fromNodeAnnotation".to_owned(),
            ("BGPSpeakerConfig", "asnFrom.default") => "asn.default".to_owned(),
            ("BGPPeer", p) if p.starts_with("passwordSecretRef") => {
                if p == "passwordSecretRef" {
                    "peers[].passwordFile".to_owned()
                } else {
                    "—".to_owned()
                }
            }
            // The BFD key is in a Secret too.
            ("BGPPeer", "bfd.authentication.secretRef") => {
                "peers[].bfd.authentication.secretFile".to_owned()
            }
            ("BGPPeer", p) if p.starts_with("bfd.authentication.secretRef.") => "—".to_owned(),
            ("BGPPeer", p) => format!("peers[].{p}"),
            (_, p) => p.to_owned(),
        };
        assert_eq!(
            *file, expected,
            "docs/config.md: {kind} spec.{path} is file key {expected}"
        );
    }
    for (key, _) in fields.keys().map(|k| (k, ())) {
        let count = seen.get(key).copied().unwrap_or(0);
        assert_eq!(
            count, 1,
            "docs/config.md lists {} spec.{} {count} times (once expected)",
            key.0, key.1
        );
    }
    let mut files: Vec<&String> = rows.iter().map(|(f, _)| f).filter(|f| *f != "—").collect();
    let all = files.len();
    files.sort();
    files.dedup();
    assert_eq!(files.len(), all, "a file key is listed twice");
    for file_only in [
        "nodeName",
        "admin.listen",
        "admin.metricsListen",
        "peers[].name",
    ] {
        assert!(
            files.contains(&&file_only.to_owned()),
            "docs/config.md: {file_only}"
        );
    }
}

/// docs/config.md, "BGPAdvertisement: Service routes", lists every field of its `spec` exactly
/// once (a label selector is one field) and none the CRD does not have.
#[test]
fn config_md_lists_every_bgp_advertisement_spec_field_once() {
    let crd = podcidr_api::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "BGPAdvertisement")
        .expect("the CRD");
    let spec = spec_schema(&crd);
    let fields: Vec<String> = spec
        .properties
        .iter()
        .flatten()
        .map(|(k, _)| k.clone())
        .collect();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/config.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let title = "## BGPAdvertisement: Service routes";
    let start = text.find(title).expect("the section");
    let section = &text[start + title.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let rows: Vec<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `spec."))
        .filter_map(|l| l.split('`').next())
        .map(str::to_owned)
        .collect();
    for f in &fields {
        assert_eq!(
            rows.iter().filter(|r| *r == f).count(),
            1,
            "docs/config.md lists BGPAdvertisement spec.{f} once"
        );
    }
    for r in &rows {
        assert!(
            fields.contains(r),
            "docs/config.md names spec.{r}, which the CRD has not"
        );
    }
}
