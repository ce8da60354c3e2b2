//! `speaker --config-source kubernetes --check-config --objects FILE…`: validates object
//! manifests offline, as a node with the given labels would run them. Documents of other
//! kinds (a Secret, say) are skipped; each object's errors name the object and its field,
//! unknown keys included (the raw specs are assembled, as a config file is read).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kube::ResourceExt;
use podcidr_api::{BGPPeer, BGPSpeakerConfig, SecretKeyRef};
use serde_json::Value;

use super::{Objects, assemble_specs, select};

/// What a node runs from a set of manifests.
#[derive(Debug)]
pub struct ObjectsCheck {
    /// The `BGPSpeakerConfig` the node runs (`None`: none selects it).
    pub config: Option<String>,
    /// The `BGPPeer`s it runs.
    pub peers: Vec<String>,
    /// Objects selecting the node that it does not run, with why (collisions, bad selectors).
    pub not_applied: Vec<String>,
    /// Every problem of the objects it runs, one line each, and of every
    /// `BGPAdvertisement` (whichever node it selects: one that cannot be read announces
    /// nothing anywhere).
    pub errors: Vec<String>,
    /// The `BGPAdvertisement`s that select the node.
    pub advertisements: Vec<String>,
    /// What a valid config announces to no one, or only from some nodes (a family whose
    /// `self` next hop the session cannot supply): printed, not an error.
    pub warnings: Vec<String>,
}

/// Reads every YAML document of `files`; an unreadable file or an object that is not of its
/// kind's shape is an error naming the file.
pub fn read_manifests(files: &[PathBuf]) -> Result<(Objects, BTreeMap<String, Value>), String> {
    let mut read = Manifests::default();
    for file in files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        read.add(&file.display().to_string(), &text)?;
    }
    Ok(read.done())
}

/// The objects of one multi-document manifest `text` (as [`read_manifests`] reads a file).
pub fn parse_manifests(text: &str) -> Result<(Objects, BTreeMap<String, Value>), String> {
    let mut read = Manifests::default();
    read.add("manifest", text)?;
    Ok(read.done())
}

/// The configuration objects read so far, and each one's spec as written.
#[derive(Default)]
struct Manifests {
    configs: Vec<BGPSpeakerConfig>,
    peers: Vec<BGPPeer>,
    advertisements: Vec<podcidr_api::BGPAdvertisement>,
    raw: BTreeMap<String, Value>,
}

impl Manifests {
    fn add(&mut self, origin: &str, text: &str) -> Result<(), String> {
        let docs: Vec<Value> =
            serde_saphyr::from_str_multiple(text).map_err(|e| format!("{origin}: {e}"))?;
        for doc in docs.into_iter().filter(|d| !d.is_null()) {
            let name = doc["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
            let shape = |e: serde_json::Error| format!("{origin}: {kind} {name}: {e}");
            match kind.as_str() {
                "BGPSpeakerConfig" => {
                    self.raw
                        .insert(format!("{kind}/{name}"), doc["spec"].clone());
                    self.configs
                        .push(serde_json::from_value::<BGPSpeakerConfig>(doc).map_err(shape)?);
                }
                "BGPPeer" => {
                    self.raw
                        .insert(format!("{kind}/{name}"), doc["spec"].clone());
                    self.peers
                        .push(serde_json::from_value::<BGPPeer>(doc).map_err(shape)?);
                }
                "BGPAdvertisement" => {
                    self.advertisements
                        .push(serde_json::from_value(doc).map_err(shape)?);
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn done(self) -> (Objects, BTreeMap<String, Value>) {
        let mut objects = Objects::from_lists(self.configs, self.peers);
        objects.advertisements = self
            .advertisements
            .into_iter()
            .map(|a| (a.name_any(), a))
            .collect();
        (objects, self.raw)
    }
}

/// What a node with `labels` runs from `objects`, and every problem with it. MD5 keys are
/// not read: `key_dir` only names where the speaker would write them.
pub fn check(
    objects: &Objects,
    raw: &BTreeMap<String, Value>,
    labels: &BTreeMap<String, String>,
    key_dir: &Path,
) -> ObjectsCheck {
    let selection = select(objects, labels);
    let mut not_applied: Vec<String> = selection.conflicts.iter().map(|c| c.to_string()).collect();
    not_applied.extend(
        selection
            .bad_selectors
            .iter()
            .map(|(kind, name, why)| format!("{kind} {name}: {why}")),
    );
    let peers: Vec<String> = selection.peers.iter().map(|p| p.name_any()).collect();
    let mut ad_errors = Vec::new();
    let mut advertisements = Vec::new();
    for (name, a) in &objects.advertisements {
        match podcidr_services::Advertisement::from_spec(name, &a.spec) {
            Ok(ad) if ad.selects_node(labels) => advertisements.push(name.clone()),
            Ok(_) => {}
            Err(problems) => ad_errors.extend(
                problems
                    .into_iter()
                    .map(|p| format!("BGPAdvertisement {name}: {p}")),
            ),
        }
    }
    let Some(config) = selection.config else {
        return ObjectsCheck {
            config: None,
            peers,
            not_applied,
            errors: ad_errors,
            advertisements,
            warnings: Vec::new(),
        };
    };
    let spec = |key: String| raw.get(&key).cloned().unwrap_or(Value::Null);
    let config_name = config.name_any();
    let config_spec = spec(format!("BGPSpeakerConfig/{config_name}"));
    let peer_specs: Vec<(String, Value)> = peers
        .iter()
        .map(|n| (n.clone(), spec(format!("BGPPeer/{n}"))))
        .collect();
    let key_file = |_: &str, r: &SecretKeyRef| key_dir.join(&r.name).join(&r.key);
    let mut warnings = Vec::new();
    let mut errors = match assemble_specs(
        (&config_name, &config_spec),
        &peer_specs
            .iter()
            .map(|(n, v)| (n.as_str(), v))
            .collect::<Vec<_>>(),
        &key_file,
    ) {
        Ok(c) => {
            warnings = c.next_hop_gaps().iter().map(ToString::to_string).collect();
            Vec::new()
        }
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    };
    errors.extend(ad_errors);
    ObjectsCheck {
        config: Some(config_name),
        peers,
        not_applied,
        errors,
        advertisements,
        warnings,
    }
}

/// `key=value[,key=value…]` node labels.
pub fn parse_labels(s: &str) -> Result<BTreeMap<String, String>, String> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| format!("{p:?} is not key=value"))?;
            Ok((k.trim().to_owned(), v.trim().to_owned()))
        })
        .collect()
}
