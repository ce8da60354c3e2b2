//! `podcidr-bgp config convert`: a validated config file's document as the objects that
//! configure the same speakers: one `BGPSpeakerConfig` (the top-level keys) and one `BGPPeer`
//! per `peers[i]`, keys and values as written. What no object holds (`nodeName`, `admin`) is
//! reported with the flag that replaces it; a `passwordFile` or `bfd.authentication.secretFile`
//! becomes a reference to a key of the MD5 Secret (which holds BFD keys too), which the
//! operator creates from the file (its key is never read here).

use kube::api::ObjectMeta;
use podcidr_api::{BGPPeer, BGPPeerSpec, BGPSpeakerConfig, BGPSpeakerConfigSpec};
use serde_json::{Map, Value};

use super::assemble::ASN_FROM_KEYS;

/// The Secret the shipped speaker Role may read (deploy/speaker/rbac.yaml): key `<peer>` is a
/// peer's TCP MD5 key, key `<peer>_bfd` its BFD key (the name predates BFD keys and is kept:
/// installs and Roles name it).
pub const MD5_SECRET: &str = "podcidr-bgp-md5";
/// What follows the peer's name in the Secret key of its BFD key: `_` is in no object name,
/// so it never collides with another peer's MD5 key.
pub const BFD_KEY_SUFFIX: &str = "_bfd";
/// The namespace the shipped speakers run in, where that Secret lives.
pub const MD5_SECRET_NAMESPACE: &str = podcidr_api::contract::DEFAULT_SECRET_NAMESPACE;

/// A file key no object holds, and what replaces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// `nodeName`, `admin.listen`, …
    pub key: String,
    /// The value as written (compact JSON for anything but a string).
    pub value: String,
    /// The speaker flag that takes its place.
    pub replaced_by: &'static str,
}

/// The objects a config file converts to.
#[derive(Debug, Clone, PartialEq)]
pub struct Converted {
    pub config: BGPSpeakerConfig,
    /// In the file's order.
    pub peers: Vec<BGPPeer>,
    /// `(Secret key, file)`: each file becomes that key of [`MD5_SECRET`] (`<peer>` for a
    /// `passwordFile`, `<peer>_bfd` for a `bfd.authentication.secretFile`).
    pub secret_keys: Vec<(String, String)>,
    pub dropped: Vec<Dropped>,
}

/// Top-level keys that are speaker flags when the config comes from objects.
const FLAGS: &[(&str, &str)] = &[
    ("nodeName", "--node-name (or $NODE_NAME)"),
    ("admin.listen", "--admin-listen"),
    ("admin.metricsListen", "--metrics-listen"),
];

fn flag_for(key: &str) -> &'static str {
    FLAGS
        .iter()
        .find(|(k, _)| *k == key)
        .map_or("a speaker flag", |(_, f)| f)
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `key: null` means "not set" in a config file; an object leaves the key out.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// The objects for the config document `doc` (a file that [`podcidr_config::Config`]
/// accepted), the `BGPSpeakerConfig` named `name`. An error names each part that has no
/// object shape (not expected of a validated file).
pub fn convert(doc: &Value, name: &str) -> Result<Converted, Vec<String>> {
    let doc = without_nulls(doc);
    let Some(top) = doc.as_object() else {
        return Err(vec![
            "the config is not a mapping of top-level keys".to_owned(),
        ]);
    };
    let mut errors = Vec::new();
    let mut dropped = Vec::new();
    let mut spec = Map::new();
    let mut peers = Vec::new();
    let mut secret_keys = Vec::new();
    for (key, value) in top {
        match key.as_str() {
            "nodeName" => dropped.push(Dropped {
                key: key.clone(),
                value: shown(value),
                replaced_by: flag_for(key),
            }),
            "admin" => {
                for (sub, v) in value.as_object().into_iter().flatten() {
                    let key = format!("admin.{sub}");
                    dropped.push(Dropped {
                        replaced_by: flag_for(&key),
                        key,
                        value: shown(v),
                    });
                }
            }
            "peers" => {
                for (i, p) in value.as_array().into_iter().flatten().enumerate() {
                    match peer(p) {
                        Ok((peer, key_files)) => {
                            secret_keys.extend(key_files);
                            peers.push(peer);
                        }
                        Err(e) => errors.push(format!("peers[{i}]: {e}")),
                    }
                }
            }
            "asn" if value.is_object() => {
                spec.insert("asnFrom".into(), asn_from(value));
            }
            _ => {
                spec.insert(key.clone(), value.clone());
            }
        }
    }
    let config = match serde_json::from_value::<BGPSpeakerConfigSpec>(Value::Object(spec)) {
        Ok(spec) => Some(BGPSpeakerConfig {
            metadata: named(name),
            spec,
            status: None,
        }),
        Err(e) => {
            errors.push(format!("the top-level keys as a BGPSpeakerConfig: {e}"));
            None
        }
    };
    match config {
        Some(config) if errors.is_empty() => Ok(Converted {
            config,
            peers,
            secret_keys,
            dropped,
        }),
        _ => Err(errors),
    }
}

/// The file's `asn: {fromNodeLabel | fromNodeAnnotation, default}` as the object's `asnFrom`.
fn asn_from(asn: &Value) -> Value {
    let renamed = asn.as_object().into_iter().flatten().map(|(key, v)| {
        let object_key = ASN_FROM_KEYS
            .iter()
            .find(|(_, file)| file == key)
            .map_or(key.as_str(), |(object, _)| object);
        (object_key.to_owned(), v.clone())
    });
    Value::Object(renamed.collect())
}

/// Named, and kept from GitOps prunes: deleting a config object is a deliberate step.
fn named(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        annotations: Some(podcidr_api::keep_annotations()),
        ..ObjectMeta::default()
    }
}

/// One `peers[i]` as a `BGPPeer`, and its key files as `(Secret key, file)`.
fn peer(p: &Value) -> Result<(BGPPeer, Vec<(String, String)>), String> {
    let mut spec = p.as_object().cloned().ok_or("is not a mapping")?;
    let name = match spec.remove("name") {
        Some(Value::String(n)) => n,
        _ => return Err("has no name".into()),
    };
    let mut key_files = Vec::new();
    if let Some(file) = spec.remove("passwordFile") {
        key_files.push((name.clone(), shown(&file)));
        spec.insert(
            "passwordSecretRef".into(),
            serde_json::json!({"name": MD5_SECRET, "key": name}),
        );
    }
    if let Some(Value::Object(auth)) = spec
        .get_mut("bfd")
        .and_then(|b| b.get_mut("authentication"))
        && let Some(file) = auth.remove("secretFile")
    {
        let key = format!("{name}{BFD_KEY_SUFFIX}");
        key_files.push((key.clone(), shown(&file)));
        auth.insert(
            "secretRef".into(),
            serde_json::json!({"name": MD5_SECRET, "key": key}),
        );
    }
    let spec = serde_json::from_value::<BGPPeerSpec>(Value::Object(spec))
        .map_err(|e| format!("{name} as a BGPPeer: {e}"))?;
    Ok((
        BGPPeer {
            metadata: named(&name),
            spec,
            status: None,
        },
        key_files,
    ))
}

/// What the operator does besides applying the objects, one line each (comment text).
pub fn notes(c: &Converted) -> Vec<String> {
    let mut out = Vec::new();
    for d in &c.dropped {
        out.push(format!(
            "{}: {} dropped (no object holds it): run the speaker with {} instead",
            d.key, d.value, d.replaced_by
        ));
    }
    if !c.secret_keys.is_empty() {
        out.push(format!(
            "passwordFile became passwordSecretRef: key <peer name> of Secret {MD5_SECRET}"
        ));
        if c.secret_keys
            .iter()
            .any(|(k, _)| k.ends_with(BFD_KEY_SUFFIX))
        {
            out.push(format!(
                "bfd.authentication.secretFile became bfd.authentication.secretRef: key \
                 <peer name>{BFD_KEY_SUFFIX} of the same Secret"
            ));
        }
        out.push(
            "in the speakers' namespace. This output holds no key: create the Secret from \
             the key files:"
                .to_owned(),
        );
        let mut cmd =
            format!("  kubectl -n {MD5_SECRET_NAMESPACE} create secret generic {MD5_SECRET}");
        for (key, file) in &c.secret_keys {
            cmd.push_str(&format!(" \\\n    --from-file={key}={file}"));
        }
        out.extend(cmd.lines().map(str::to_owned));
    }
    out
}

/// The objects as one multi-document YAML stream: a header comment (the `source` file, the
/// notes), then the `BGPSpeakerConfig` and each `BGPPeer`.
pub fn to_yaml(c: &Converted, source: &str) -> Result<String, serde_saphyr::SerializeError> {
    let mut out = format!(
        "# The objects equivalent to {source}, by `podcidr-bgp config convert`.\n\
         # Apply with kubectl apply -f; the speakers run them with --config-source kubernetes.\n"
    );
    for line in notes(c) {
        out.push_str(&format!("# {line}\n"));
    }
    out.push_str("---\n");
    out.push_str(&serde_saphyr::to_string(&c.config)?);
    for p in &c.peers {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(p)?);
    }
    Ok(out)
}
