//! What the one status writer of the cluster says on each configuration object, pure: the
//! same selection the speakers run ([`select`], the oldest object wins) and the same
//! validation ([`assemble`]), over every node's labels at once. Per object: `Accepted` True
//! (reason `Valid`), or False with `Invalid` (the object, or a peer with the config of a node
//! it selects, does not validate; a selector that cannot be evaluated), `SecretNotFound` (its
//! `passwordSecretRef` or `bfd.authentication.secretRef` names no readable key) or `Conflict` (an older object takes its place
//! on some node); how many nodes it selects; and where it is not applied, with why.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use podcidr_api::{
    BGPPeer, BGPSpeakerConfig, ConfigObjectStatus, RolloutStatus, SecretKeyRef, config_condition,
    rollout_state,
};

use super::key_files::{KeyUse, peer_key_refs};
use super::{ObjectKind, Objects, assemble, select};

/// Nodes listed in `status.notApplied` at most; the message counts them all. A status must
/// stay small with thousands of nodes (every speaker watches these objects).
pub const NOT_APPLIED_LIMIT: usize = 20;
/// Bound on a condition message (the API allows 32 KiB).
const MESSAGE_LIMIT: usize = 4096;

/// Why a `passwordSecretRef` or `bfd.authentication.secretRef` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyProblem {
    /// No such Secret or key, or the Secret cannot be read (`SecretNotFound`).
    Missing(String),
    /// The key is there but is no usable key for its use (`Invalid`).
    Invalid(String),
}

impl std::fmt::Display for KeyProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyProblem::Missing(s) | KeyProblem::Invalid(s) => f.write_str(s),
        }
    }
}

/// A node as far as selection goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLabels {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// What is said on one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub kind: ObjectKind,
    pub name: String,
    pub generation: Option<i64>,
    /// One of [`config_condition`]'s reasons; `Valid` is the only accepted one.
    pub reason: &'static str,
    pub message: String,
    pub selected_nodes: u32,
    /// At most [`NOT_APPLIED_LIMIT`] nodes (by name) where it is not applied, with why.
    pub not_applied: BTreeMap<String, String>,
}

impl Verdict {
    pub fn accepted(&self) -> bool {
        self.reason == config_condition::VALID
    }
}

/// What is learned about one object while walking the nodes.
#[derive(Default)]
struct Findings {
    invalid: Vec<String>,
    /// The first key problem, with what the key is for.
    key: Option<(KeyUse, KeyProblem)>,
    selected: u32,
    conflicts: u32,
    not_applied: BTreeMap<String, String>,
    not_applied_total: u32,
    /// Whether some node ran it with a config (a peer with no such node is checked against
    /// every usable config instead).
    checked: bool,
}

impl Findings {
    fn not_applied(&mut self, node: &str, why: String) {
        self.not_applied_total += 1;
        if self.not_applied.len() < NOT_APPLIED_LIMIT {
            self.not_applied.insert(node.to_owned(), why);
        }
    }

    fn invalid(&mut self, why: String) {
        if !self.invalid.contains(&why) {
            self.invalid.push(why);
        }
    }
}

type Key = (ObjectKind, String);
/// A node's config and running peers, and the objects that fail together there, with why.
type Together = BTreeMap<(String, BTreeSet<String>), Vec<(Key, String)>>;

fn key_file(_: &str, r: &SecretKeyRef) -> PathBuf {
    PathBuf::from("/keys").join(&r.name).join(&r.key)
}

/// The verdict on every object, from the objects, every node's labels and what is known of
/// the Secrets the peers name.
pub fn verdicts(
    objects: &Objects,
    nodes: &[NodeLabels],
    key_problem: &dyn Fn(&SecretKeyRef, KeyUse) -> Option<KeyProblem>,
) -> Vec<Verdict> {
    let mut found: BTreeMap<Key, Findings> = BTreeMap::new();
    // Each object on its own.
    let mut usable_configs: Vec<&BGPSpeakerConfig> = Vec::new();
    for (name, c) in &objects.configs {
        let f = found
            .entry((ObjectKind::SpeakerConfig, name.clone()))
            .or_default();
        match assemble(c, &[], &key_file) {
            Ok(_) => usable_configs.push(c),
            Err(e) => f.invalid(e.to_string()),
        }
    }
    for (name, p) in &objects.peers {
        let f = found.entry((ObjectKind::Peer, name.clone())).or_default();
        f.key = peer_key_refs(&p.spec)
            .find_map(|(key_use, r)| Some((key_use, key_problem(r, key_use)?)));
    }
    // An advertisement stands alone: the speakers read it with the rules of
    // `podcidr_services::Advertisement` (which node, Service and peer it selects is each
    // speaker's business, reported in its NodeBGPStatus and in `diff --services`).
    for (name, a) in &objects.advertisements {
        let f = found
            .entry((ObjectKind::Advertisement, name.clone()))
            .or_default();
        if let Err(problems) = podcidr_services::Advertisement::from_spec(name, &a.spec) {
            f.invalid = problems;
        }
    }
    // Peer with config, and all of a node's peers together, once per distinct combination.
    let mut with_config: BTreeMap<(String, String), Result<(), String>> = BTreeMap::new();
    let mut together: Together = BTreeMap::new();
    for node in nodes {
        let sel = select(objects, &node.labels);
        for (kind, name, why) in &sel.bad_selectors {
            found
                .entry((*kind, name.clone()))
                .or_default()
                .invalid(why.clone());
        }
        for c in &sel.conflicts {
            let f = found.entry((c.kind, c.loser.clone())).or_default();
            f.selected += 1;
            f.conflicts += 1;
            f.not_applied(&node.name, c.to_string());
        }
        let config = sel.config.filter(|c| {
            let f = found
                .entry((ObjectKind::SpeakerConfig, c.name_any()))
                .or_default();
            f.selected += 1;
            f.invalid.is_empty()
        });
        let mut running: Vec<&BGPPeer> = Vec::new();
        for p in &sel.peers {
            let name = p.name_any();
            let f = found.entry((ObjectKind::Peer, name.clone())).or_default();
            f.selected += 1;
            let Some(config) = config else {
                let why = match sel.config {
                    Some(c) => format!("BGPSpeakerConfig {} is not usable", c.name_any()),
                    None => "no BGPSpeakerConfig selects this node".to_owned(),
                };
                f.not_applied(&node.name, why);
                continue;
            };
            f.checked = true;
            let checked = with_config
                .entry((config.name_any(), name.clone()))
                .or_insert_with(|| {
                    assemble(config, &[p], &key_file)
                        .map(|_| ())
                        .map_err(|e| format!("with BGPSpeakerConfig {}: {e}", config.name_any()))
                });
            match checked {
                Ok(()) if f.key.is_none() => running.push(p),
                Ok(()) => {}
                Err(why) => f.invalid(why.clone()),
            }
        }
        let Some(config) = config else {
            continue;
        };
        let names: BTreeSet<String> = running.iter().map(|p| p.name_any()).collect();
        let failed = together
            .entry((config.name_any(), names))
            .or_insert_with(|| match assemble(config, &running, &key_file) {
                Ok(_) => Vec::new(),
                Err(e) => e
                    .objects()
                    .into_iter()
                    .map(|(kind, name)| ((kind, name.to_owned()), e.to_string()))
                    .collect(),
            });
        for (key, why) in failed.iter() {
            found
                .entry(key.clone())
                .or_default()
                .not_applied(&node.name, why.clone());
        }
    }
    // A peer no node runs with a config is checked against every usable one: invalid only
    // if it fits none.
    for (name, p) in &objects.peers {
        let f = found.entry((ObjectKind::Peer, name.clone())).or_default();
        if f.checked || !f.invalid.is_empty() {
            continue;
        }
        let errors: Vec<String> = usable_configs
            .iter()
            .filter_map(|c| {
                assemble(c, &[p], &key_file)
                    .err()
                    .map(|e| format!("with BGPSpeakerConfig {}: {e}", c.name_any()))
            })
            .collect();
        if !usable_configs.is_empty() && errors.len() == usable_configs.len() {
            f.invalid = errors;
        }
    }
    let generation = |key: &Key| match key.0 {
        ObjectKind::SpeakerConfig => objects
            .configs
            .get(&key.1)
            .and_then(|c| c.metadata.generation),
        ObjectKind::Peer => objects
            .peers
            .get(&key.1)
            .and_then(|p| p.metadata.generation),
        ObjectKind::Advertisement => objects
            .advertisements
            .get(&key.1)
            .and_then(|a| a.metadata.generation),
    };
    found
        .into_iter()
        .map(|(key, f)| {
            let generation = generation(&key);
            verdict(key, generation, f)
        })
        .collect()
}

fn verdict((kind, name): Key, generation: Option<i64>, f: Findings) -> Verdict {
    use config_condition::{CONFLICT, INVALID, SECRET_NOT_FOUND, VALID};
    let n = f.selected;
    let kept = if kind == ObjectKind::Advertisement {
        "; speakers announce nothing for it until it is fixed"
    } else {
        "; speakers that ran an earlier generation keep running it"
    };
    let (reason, message) = if !f.invalid.is_empty() {
        (INVALID, format!("{}{kept}", f.invalid.join("\n")))
    } else if let Some((key_use, k)) = &f.key {
        let reason = match k {
            KeyProblem::Missing(_) => SECRET_NOT_FOUND,
            KeyProblem::Invalid(_) => INVALID,
        };
        (reason, format!("{}: {k}{kept}", key_use.field()))
    } else if f.conflicts > 0 {
        // The conflict, not how many nodes it is on: the status must not change with every
        // node that joins, leaves or is relabelled (each write is a watch event to every
        // speaker). The nodes are on each node's NodeBGPStatus and in `podcidr-bgp diff`.
        let first = f.not_applied.values().next().cloned().unwrap_or_default();
        (
            CONFLICT,
            format!("not applied on some nodes it selects: {first}"),
        )
    } else {
        (VALID, "valid".to_owned())
    };
    Verdict {
        kind,
        name,
        generation,
        reason,
        message: cut(message),
        selected_nodes: n,
        not_applied: f.not_applied,
    }
}

fn cut(mut s: String) -> String {
    if s.len() > MESSAGE_LIMIT {
        let mut end = MESSAGE_LIMIT - 3;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("...");
    }
    s
}

/// The status for `v`: `Accepted`, and kstatus's `Ready` (GitOps tools read it as the
/// object's health) saying the same, or, for an accepted object whose session-resetting
/// edit still rolls out in waves, False with `RolloutProgressing` or `RolloutStalled`. Each
/// condition keeps its transition time from `previous` while its status stays the same.
pub fn status(
    v: &Verdict,
    previous: Option<&ConfigObjectStatus>,
    rollout: Option<&RolloutStatus>,
    now: Time,
) -> ConfigObjectStatus {
    let accepted = if v.accepted() { "True" } else { "False" };
    let condition = |type_: &str, status: &str, reason: &str, message: String| {
        let before = previous.and_then(|p| p.conditions.iter().find(|c| c.type_ == type_));
        let last_transition_time = match before {
            Some(c) if c.status == status => c.last_transition_time.clone(),
            _ => now.clone(),
        };
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message,
            last_transition_time,
            observed_generation: v.generation,
        }
    };
    let ready = match rollout.filter(|_| v.accepted()) {
        Some(r) if r.state == rollout_state::PROGRESSING => condition(
            config_condition::READY,
            "False",
            config_condition::ROLLOUT_PROGRESSING,
            format!(
                "generation {} rolls out in waves: wave {} admitted ({} of {} selected nodes)",
                r.generation, r.wave, r.nodes_admitted, r.nodes_selected
            ),
        ),
        Some(r) if r.state == rollout_state::STALLED => condition(
            config_condition::READY,
            "False",
            config_condition::ROLLOUT_STALLED,
            cut(r.message.clone().unwrap_or_default()),
        ),
        _ => condition(
            config_condition::READY,
            accepted,
            v.reason,
            v.message.clone(),
        ),
    };
    ConfigObjectStatus {
        observed_generation: v.generation,
        conditions: vec![
            condition(
                config_condition::ACCEPTED,
                accepted,
                v.reason,
                v.message.clone(),
            ),
            ready,
        ],
        // No longer written: both changed with node churn, a write per node event to every
        // speaker's watch (server-side apply removes what an earlier version wrote).
        selected_nodes: None,
        not_applied: BTreeMap::new(),
        rollout: rollout.cloned(),
    }
}
