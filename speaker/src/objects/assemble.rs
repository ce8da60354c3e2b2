//! From the objects a node runs to the `Config` the file would give: one config document
//! (the `BGPSpeakerConfig` spec at the top, the `BGPPeer` specs under `peers`) validated by the
//! file's parser, its errors named back on the objects.

use std::path::PathBuf;

use kube::ResourceExt;
use podcidr_api::{BGPPeer, BGPSpeakerConfig, SecretKeyRef};
use podcidr_config::{Config, ConfigError};
use serde_json::{Map, Value};

use super::ObjectKind;

/// One object, at one generation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub kind: ObjectKind,
    pub name: String,
    pub generation: Option<i64>,
}

impl ObjectRef {
    pub fn of<K: kube::Resource>(kind: ObjectKind, o: &K) -> Self {
        ObjectRef {
            kind,
            name: o.meta().name.clone().unwrap_or_default(),
            generation: o.meta().generation,
        }
    }
}

/// A problem with one object: the field (`spec.holdTime`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectError {
    pub kind: ObjectKind,
    pub name: String,
    /// `spec.…`, or empty for the object as a whole.
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for ObjectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{} {}: {}", self.kind, self.name, self.message)
        } else {
            write!(
                f,
                "{} {}: {}: {}",
                self.kind, self.name, self.path, self.message
            )
        }
    }
}

/// Every problem found, in the parser's order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct ObjectErrors(pub Vec<ObjectError>);

impl ObjectErrors {
    /// The objects named in the errors.
    pub fn objects(&self) -> Vec<(ObjectKind, &str)> {
        let mut out: Vec<(ObjectKind, &str)> =
            self.0.iter().map(|e| (e.kind, e.name.as_str())).collect();
        out.sort();
        out.dedup();
        out
    }
}

/// File keys a `BGPSpeakerConfig` does not take: node identity and the admin listener are the
/// speaker's flags, and peers are `BGPPeer` objects.
const NOT_IN_SPEAKER_CONFIG: &[(&str, &str)] = &[
    (
        "nodeName",
        "the node is the speaker's --node-name / $NODE_NAME",
    ),
    ("admin", "the admin listener is the speaker's flags"),
    ("peers", "peers are BGPPeer objects"),
];

/// `spec.asnFrom` keys and the config file's names for them under `asn`.
pub(super) const ASN_FROM_KEYS: &[(&str, &str)] = &[
    ("nodeLabel", "fromNodeLabel"),
    ("nodeAnnotation", "fromNodeAnnotation"),
    ("default", "default"),
];

/// The object's `asn`/`asnFrom` in the file's spelling (`asn: N` or `asn: {fromNodeLabel: …}`),
/// so one parser checks both. A mapping under `asn` (the first v1beta1 form, which no 1.25+
/// server accepts) is refused with where it moved.
fn local_asn_document(top: &mut Map<String, Value>, name: &str, errors: &mut Vec<ObjectError>) {
    if top.get("asn").is_some_and(Value::is_object) {
        top.remove("asn");
        errors.push(ObjectError {
            kind: ObjectKind::SpeakerConfig,
            name: name.to_owned(),
            path: "spec.asn".into(),
            message: "is a number; the AS read from a Node label or annotation is \
                      spec.asnFrom: {nodeLabel | nodeAnnotation, default}"
                .into(),
        });
        return;
    }
    let Some(from) = top.remove("asnFrom") else {
        return;
    };
    if top.contains_key("asn") {
        errors.push(ObjectError {
            kind: ObjectKind::SpeakerConfig,
            name: name.to_owned(),
            path: "spec.asnFrom".into(),
            message: "cannot be set with spec.asn: exactly one of asn, asnFrom".into(),
        });
        return;
    }
    let Value::Object(from) = from else {
        errors.push(ObjectError {
            kind: ObjectKind::SpeakerConfig,
            name: name.to_owned(),
            path: "spec.asnFrom".into(),
            message: "is {nodeLabel | nodeAnnotation, default}".into(),
        });
        return;
    };
    let mut asn = Map::new();
    for (key, value) in from {
        let file_key = ASN_FROM_KEYS
            .iter()
            .find(|(object, _)| *object == key)
            .map_or(key.clone(), |(_, file)| (*file).to_owned());
        asn.insert(file_key, value);
    }
    top.insert("asn".into(), Value::Object(asn));
}

/// A parser path under the file's `asn` mapping, named as the object spells it
/// (`asn.fromNodeLabel` → `asnFrom.nodeLabel`).
fn object_asn_path(path: &str) -> Option<String> {
    let rest = path.strip_prefix("asn")?;
    if rest.is_empty() {
        return Some("asnFrom".into());
    }
    let key = rest.strip_prefix('.')?;
    let (file_key, tail) = key.split_once('.').map_or((key, ""), |(k, t)| (k, t));
    let object_key = ASN_FROM_KEYS
        .iter()
        .find(|(_, file)| *file == file_key)
        .map_or(file_key, |(object, _)| object);
    Some(if tail.is_empty() {
        format!("asnFrom.{object_key}")
    } else {
        format!("asnFrom.{object_key}.{tail}")
    })
}

/// File keys a `BGPPeer` does not take.
const NOT_IN_PEER: &[(&str, &str)] = &[
    ("name", "the peer's name is the object's name"),
    (
        "passwordFile",
        "use passwordSecretRef: {name, key} (a Secret in the speaker's namespace)",
    ),
];

/// The config document for a node running `config` (its spec as JSON) and `peers` (name and
/// spec as JSON): `nodeSelector`s, `priority` and `rollout` dropped (they chose the node and when),
/// each peer named after its
/// object, `passwordSecretRef` replaced by `passwordFile: key_file(peer, ref)` and
/// `bfd.authentication.secretRef` by `bfd.authentication.secretFile` the same way. Keys an
/// object may not have are returned as errors.
pub fn spec_document(
    config: (&str, &Value),
    peers: &[(&str, &Value)],
    key_file: &dyn Fn(&str, &SecretKeyRef) -> PathBuf,
) -> (Value, Vec<ObjectError>) {
    let mut errors = Vec::new();
    let (config_name, config_spec) = config;
    let mut top = config_spec.as_object().cloned().unwrap_or_default();
    // They chose the node and settled conflicts; the node's config has neither.
    top.remove("nodeSelector");
    top.remove("priority");
    top.remove("rollout");
    if let Some(path) = top
        .get("source")
        .and_then(|s| s.get("path"))
        .and_then(Value::as_str)
        && let Some(problem) = podcidr_api::object_file_source_path_problem(path)
    {
        errors.push(ObjectError {
            kind: ObjectKind::SpeakerConfig,
            name: config_name.to_owned(),
            path: "spec.source.path".into(),
            message: problem,
        });
    }
    local_asn_document(&mut top, config_name, &mut errors);
    for (key, why) in NOT_IN_SPEAKER_CONFIG {
        if top.remove(*key).is_some() {
            errors.push(ObjectError {
                kind: ObjectKind::SpeakerConfig,
                name: config_name.to_owned(),
                path: format!("spec.{key}"),
                message: format!("not a BGPSpeakerConfig key ({why})"),
            });
        }
    }
    let mut list = Vec::with_capacity(peers.len());
    for (name, spec) in peers {
        let mut p: Map<String, Value> = spec.as_object().cloned().unwrap_or_default();
        p.remove("nodeSelector");
        p.remove("priority");
        p.remove("rollout");
        for (key, why) in NOT_IN_PEER {
            if p.remove(*key).is_some() {
                errors.push(ObjectError {
                    kind: ObjectKind::Peer,
                    name: (*name).to_owned(),
                    path: format!("spec.{key}"),
                    message: format!("not a BGPPeer key ({why})"),
                });
            }
        }
        if let Some(r) = p.remove("passwordSecretRef") {
            match serde_json::from_value::<SecretKeyRef>(r) {
                Ok(r) => {
                    let path = key_file(name, &r);
                    p.insert(
                        "passwordFile".into(),
                        Value::String(path.display().to_string()),
                    );
                }
                Err(e) => errors.push(ObjectError {
                    kind: ObjectKind::Peer,
                    name: (*name).to_owned(),
                    path: "spec.passwordSecretRef".into(),
                    message: format!("is not {{name, key}}: {e}"),
                }),
            }
        }
        if let Some(Value::Object(auth)) =
            p.get_mut("bfd").and_then(|b| b.get_mut("authentication"))
        {
            bfd_key_document(auth, name, key_file, &mut errors);
        }
        let mut named = Map::new();
        named.insert("name".into(), Value::String((*name).to_owned()));
        named.extend(p);
        list.push(Value::Object(named));
    }
    top.insert("peers".into(), Value::Array(list));
    (Value::Object(top), errors)
}

/// A peer's `bfd.authentication` in the file's spelling: `secretRef` replaced by
/// `secretFile: key_file(peer, ref)`. A `secretFile` in an object is refused: the node would
/// read a file the cluster does not manage.
fn bfd_key_document(
    auth: &mut Map<String, Value>,
    name: &str,
    key_file: &dyn Fn(&str, &SecretKeyRef) -> PathBuf,
    errors: &mut Vec<ObjectError>,
) {
    let error = |path: &str, message: String| ObjectError {
        kind: ObjectKind::Peer,
        name: name.to_owned(),
        path: format!("spec.bfd.authentication.{path}"),
        message,
    };
    if auth.remove("secretFile").is_some() {
        errors.push(error(
            "secretFile",
            "not a BGPPeer key (use secretRef: {name, key}, a Secret in the speaker's \
             namespace)"
                .into(),
        ));
    }
    let Some(r) = auth.remove("secretRef") else {
        return;
    };
    match serde_json::from_value::<SecretKeyRef>(r) {
        Ok(r) => {
            let path = key_file(name, &r);
            auth.insert(
                "secretFile".into(),
                Value::String(path.display().to_string()),
            );
        }
        Err(e) => errors.push(error("secretRef", format!("is not {{name, key}}: {e}"))),
    }
}

/// Maps a parser error to the object it is about: `peers[i].…` is the i-th peer's
/// `spec.…`, anything else the speaker config's (`asn.…` named as `asnFrom.…` when the object
/// wrote `asnFrom`).
fn object_error(e: &ConfigError, config: &str, asn_from: bool, peers: &[&str]) -> ObjectError {
    let (path, message) = match e {
        ConfigError::Field { path, message } => (path.clone(), message.clone()),
        other => (String::new(), other.to_string()),
    };
    if let Some(rest) = path.strip_prefix("peers[")
        && let Some((index, tail)) = rest.split_once(']')
        && let Some(name) = index.parse::<usize>().ok().and_then(|i| peers.get(i))
    {
        let tail = tail.strip_prefix('.').unwrap_or(tail);
        // The object names the BFD key by its Secret, not by the file it becomes.
        let tail = match tail.strip_prefix("bfd.authentication.secretFile") {
            Some(rest) => format!("bfd.authentication.secretRef{rest}"),
            None => tail.to_owned(),
        };
        return ObjectError {
            kind: ObjectKind::Peer,
            name: (*name).to_owned(),
            path: if tail.is_empty() {
                "spec".into()
            } else {
                format!("spec.{tail}")
            },
            message,
        };
    }
    let path = match asn_from.then(|| object_asn_path(&path)).flatten() {
        Some(p) => p,
        None => path,
    };
    ObjectError {
        kind: ObjectKind::SpeakerConfig,
        name: config.to_owned(),
        path: if path.is_empty() {
            String::new()
        } else {
            format!("spec.{path}")
        },
        message,
    }
}

/// The `Config` a node runs with `config` and `peers`, validated as a file is; every problem
/// named on its object.
pub fn assemble(
    config: &BGPSpeakerConfig,
    peers: &[&BGPPeer],
    key_file: &dyn Fn(&str, &SecretKeyRef) -> PathBuf,
) -> Result<Config, ObjectErrors> {
    let to_value = |v: Result<Value, serde_json::Error>| v.unwrap_or(Value::Null);
    let config_spec = to_value(serde_json::to_value(&config.spec));
    let peer_specs: Vec<(String, Value)> = peers
        .iter()
        .map(|p| (p.name_any(), to_value(serde_json::to_value(&p.spec))))
        .collect();
    let config_name = config.name_any();
    assemble_specs(
        (&config_name, &config_spec),
        &peer_specs
            .iter()
            .map(|(n, v)| (n.as_str(), v))
            .collect::<Vec<_>>(),
        key_file,
    )
}

/// [`assemble`] over raw specs (manifests read from files keep their unknown keys, which are
/// then errors as in a config file).
pub fn assemble_specs(
    config: (&str, &Value),
    peers: &[(&str, &Value)],
    key_file: &dyn Fn(&str, &SecretKeyRef) -> PathBuf,
) -> Result<Config, ObjectErrors> {
    let (doc, mut errors) = spec_document(config, peers, key_file);
    let names: Vec<&str> = peers.iter().map(|(n, _)| *n).collect();
    let asn_from = config.1.get("asnFrom").is_some();
    match Config::from_objects_document(&doc) {
        Ok(c) if errors.is_empty() => Ok(c),
        Ok(_) => Err(ObjectErrors(errors)),
        Err(e) => {
            errors.extend(
                e.errors()
                    .iter()
                    .map(|e| object_error(e, config.0, asn_from, &names)),
            );
            Err(ObjectErrors(errors))
        }
    }
}
