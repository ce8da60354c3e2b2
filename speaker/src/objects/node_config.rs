//! The config one node runs from the objects, last good: an object that is (or becomes)
//! unusable on this node keeps its last accepted version running here, or, if it never had
//! one, is left out; the node says which objects it runs at which generation, and why not
//! the others.

use std::collections::BTreeMap;
use std::path::PathBuf;

use kube::ResourceExt;
use podcidr_api::{BGPPeer, BGPSpeakerConfig, SecretKeyRef};
use podcidr_config::Config;

use super::key_files::{KeyUse, peer_key_refs};
use super::rollout::Rollout;
use super::{ObjectErrors, ObjectKind, ObjectRef, Objects, assemble, select};

/// The versions this node last ran successfully, by name. Kept by the speaker in its state
/// directory, so a restart while an object is unusable runs what ran before, not less.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LastGood {
    #[serde(default)]
    configs: BTreeMap<String, BGPSpeakerConfig>,
    #[serde(default)]
    peers: BTreeMap<String, BGPPeer>,
}

/// A copy worth keeping: without `managedFields`, which say who wrote what and are most of
/// an object's size.
fn kept<K: kube::Resource + Clone>(o: &K) -> K {
    let mut o = o.clone();
    o.meta_mut().managed_fields = None;
    o
}

impl LastGood {
    /// Forgets the objects that no longer exist: a deleted object is not run again (the
    /// listing says so; see `daemon::kube::config_objects` for how deletion is guarded).
    pub fn retain_existing(&mut self, objects: &Objects) {
        self.configs.retain(|n, _| objects.configs.contains_key(n));
        self.peers.retain(|n, _| objects.peers.contains_key(n));
    }

    /// The Secrets the kept peer versions name (MD5 and BFD keys): watched too, so a last
    /// good version whose key the current one renamed still gets its key after a restart.
    pub fn secret_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.peers
            .values()
            .flat_map(|p| peer_key_refs(&p.spec))
            .map(|(_, r)| r.name.as_str())
    }

    pub fn configs(&self) -> &BTreeMap<String, BGPSpeakerConfig> {
        &self.configs
    }

    pub fn peers(&self) -> &BTreeMap<String, BGPPeer> {
        &self.peers
    }

    pub fn is_empty(&self) -> bool {
        self.configs.is_empty() && self.peers.is_empty()
    }

    /// Which objects, at which generation: for a log line.
    pub fn summary(&self) -> String {
        let g = |m: Option<i64>| m.map_or_else(|| "?".into(), |g| g.to_string());
        self.configs
            .iter()
            .map(|(n, c)| {
                format!(
                    "BGPSpeakerConfig {n} generation {}",
                    g(c.metadata.generation)
                )
            })
            .chain(
                self.peers
                    .iter()
                    .map(|(n, p)| format!("BGPPeer {n} generation {}", g(p.metadata.generation))),
            )
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What the node runs, and what it says about it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfig {
    /// `None`: no usable `BGPSpeakerConfig` selects this node; it announces nothing.
    pub config: Option<Config>,
    pub speaker_config: Option<ObjectRef>,
    pub peers: Vec<ObjectRef>,
    /// Objects running an older version than the current one, with why.
    pub last_good: Vec<(ObjectRef, String)>,
    /// Objects selecting this node but not run here, with why (conflicts, unusable with no
    /// earlier version, a missing Secret, a selector that cannot be evaluated).
    pub not_applied: Vec<(ObjectKind, String, String)>,
    /// Those of `not_applied` that select this node and cannot run here, with no last good
    /// version to run instead: the node is not Ready (a rollout stops here, not a fleet
    /// later). Conflicts and selectors that cannot be evaluated are decisions, not this.
    pub cannot_run: Vec<(ObjectKind, String)>,
    /// The Secret key each running peer's version names, per use (a last good version may
    /// name another key than the current one: its own is written for its session).
    pub key_refs: BTreeMap<(String, KeyUse), SecretKeyRef>,
}

impl NodeConfig {
    /// Why the node cannot run what selects it, one line per object; `None`: it can.
    pub fn cannot_run_reason(&self) -> Option<String> {
        if self.cannot_run.is_empty() {
            return None;
        }
        let lines: Vec<String> = self
            .cannot_run
            .iter()
            .map(|(kind, name)| {
                let why = self
                    .not_applied
                    .iter()
                    .find(|(k, n, _)| k == kind && n == name)
                    .map_or("", |(_, _, w)| w.as_str());
                format!("{kind} {name}: {why}")
            })
            .collect();
        Some(lines.join("; "))
    }
}

/// Where a peer's Secret key is written for the session to read.
pub type KeyFile<'a> = &'a dyn Fn(&str, &SecretKeyRef) -> PathBuf;

/// What the node knows of the keys `passwordSecretRef` and `bfd.authentication.secretRef`
/// name.
pub struct Keys<'a> {
    /// Why the key cannot be used now for that use (no Secret, no such key, not a usable
    /// key); `None`: it can, and it is written to its file before the config runs.
    pub problem: &'a dyn Fn(&SecretKeyRef, KeyUse) -> Option<String>,
    /// The key's file still holds the key an earlier version ran with (a Secret deleted
    /// under a running peer: its last good version goes on with it).
    pub kept: &'a dyn Fn(&SecretKeyRef) -> bool,
    pub file: KeyFile<'a>,
}

impl std::fmt::Debug for Keys<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys").finish_non_exhaustive()
    }
}

/// Which version of an object is checked: the current one needs its Secret now; the last
/// good one may run on the key file it already has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    Current,
    LastGood,
}

/// Why a peer's keys cannot be used, naming the field of the first that cannot.
fn key_problem(p: &BGPPeer, keys: &Keys, version: Version) -> Option<String> {
    peer_key_refs(&p.spec).find_map(|(key_use, r)| {
        let why = (keys.problem)(r, key_use)?;
        (version == Version::Current || !(keys.kept)(r))
            .then(|| format!("{}: {why}", key_use.field()))
    })
}

/// How the version to run is chosen for one object.
struct Choice<'a, T> {
    kind: ObjectKind,
    /// Whether a version is usable here now.
    check: &'a dyn Fn(&T, Version) -> Result<(), String>,
    /// Whether the node may move from the last good version to the current one now:
    /// `Err` (why not) while an edit that resets sessions waits for this node's wave.
    rollout: &'a dyn Fn(&T, &T) -> Result<(), String>,
}

/// The version of `current` to run: the current one if it is usable (`check`) and the
/// node's rollout wave admits it, else the last good one if that still is, else none.
/// Records the outcome.
fn pick<T: Clone + kube::Resource>(
    current: &T,
    last: Option<&T>,
    choice: &Choice<T>,
    out: &mut NodeConfig,
) -> Option<T> {
    let kind = choice.kind;
    let name = current.meta().name.clone().unwrap_or_default();
    let last = last.filter(|l| (choice.check)(l, Version::LastGood).is_ok());
    match (choice.check)(current, Version::Current) {
        Ok(()) => match last {
            Some(l) if l.meta().generation != current.meta().generation => {
                match (choice.rollout)(current, l) {
                    Ok(()) => Some(current.clone()),
                    Err(why) => {
                        out.last_good.push((ObjectRef::of(kind, l), why));
                        Some(l.clone())
                    }
                }
            }
            _ => Some(current.clone()),
        },
        Err(why) => match last {
            Some(l) => {
                out.last_good.push((
                    ObjectRef::of(kind, l),
                    format!("the current version is not usable: {why}"),
                ));
                Some(l.clone())
            }
            None => {
                out.cannot_run.push((kind, name.clone()));
                out.not_applied.push((kind, name, why));
                None
            }
        },
    }
}

/// Whether running `to` instead of `from` resets a session (the reload diff of the config
/// file: a session setting of a kept peer, or the local identity). A pair that does not
/// assemble counts as resetting: when in doubt, wait for the wave.
fn resets(from: Result<Config, ObjectErrors>, to: Result<Config, ObjectErrors>) -> bool {
    match (from, to) {
        (Ok(from), Ok(to)) => {
            let d = podcidr_config::diff_peers(&from, &to);
            !d.changed.is_empty() || d.settings.identity
        }
        _ => true,
    }
}

/// The config node `node_name` with `labels` runs from `objects`, falling back per object to
/// `last` (updated with what is accepted now), and keeping it while an edit that would
/// reset sessions waits for this node's rollout wave ([`super::rollout`]).
pub fn node_config(
    objects: &Objects,
    labels: &BTreeMap<String, String>,
    node_name: &str,
    last: &mut LastGood,
    keys: &Keys,
) -> NodeConfig {
    let key_file = keys.file;
    let selection = select(objects, labels);
    let mut out = NodeConfig {
        config: None,
        speaker_config: None,
        peers: Vec::new(),
        last_good: Vec::new(),
        not_applied: Vec::new(),
        cannot_run: Vec::new(),
        key_refs: BTreeMap::new(),
    };
    for c in &selection.conflicts {
        out.not_applied
            .push((c.kind, c.loser.clone(), c.to_string()));
    }
    for (kind, name, why) in &selection.bad_selectors {
        out.not_applied.push((*kind, name.clone(), why.clone()));
    }
    let Some(current) = selection.config else {
        return out;
    };
    let config_check = |c: &BGPSpeakerConfig, _: Version| {
        assemble(c, &[], key_file)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let config_rollout = |cur: &BGPSpeakerConfig, before: &BGPSpeakerConfig| {
        let with_peers = |c| assemble(c, &selection.peers, key_file);
        let alone = |c| assemble(c, &[], key_file);
        let reset = match (with_peers(before), with_peers(cur)) {
            (Ok(a), Ok(b)) => resets(Ok(a), Ok(b)),
            _ => resets(alone(before), alone(cur)),
        };
        if !reset {
            return Ok(());
        }
        Rollout::of_config(cur).admits(node_name, labels)
    };
    let config_choice = Choice {
        kind: ObjectKind::SpeakerConfig,
        check: &config_check,
        rollout: &config_rollout,
    };
    let Some(config) = pick(
        current,
        last.configs.get(&current.name_any()),
        &config_choice,
        &mut out,
    ) else {
        return out;
    };
    last.configs.insert(config.name_any(), kept(&config));
    let mut peers = Vec::new();
    for p in selection.peers {
        let peer_check = |p: &BGPPeer, version: Version| {
            if let Some(why) = key_problem(p, keys, version) {
                return Err(why);
            }
            assemble(&config, &[p], key_file)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        let peer_rollout = |cur: &BGPPeer, before: &BGPPeer| {
            if !resets(
                assemble(&config, &[before], key_file),
                assemble(&config, &[cur], key_file),
            ) {
                return Ok(());
            }
            Rollout::of_peer(cur).admits(node_name, labels)
        };
        let peer_choice = Choice {
            kind: ObjectKind::Peer,
            check: &peer_check,
            rollout: &peer_rollout,
        };
        if let Some(p) = pick(p, last.peers.get(&p.name_any()), &peer_choice, &mut out) {
            last.peers.insert(p.name_any(), kept(&p));
            peers.push(p);
        }
    }
    let refs: Vec<&BGPPeer> = peers.iter().collect();
    let out = run_together(&config, &refs, key_file, out);
    departing(objects, out)
}

/// Why an object runs that the API no longer lists: kept, or being withdrawn.
pub const RETAINED: &str = "deleted without the bgp.podcidr.io/allow-delete annotation (a CRD deleted, the delete guard bypassed): still running, nothing is withdrawn by accident; re-create it, or annotate and delete it to withdraw it";
pub const WITHDRAWING: &str = "deleted on purpose (bgp.podcidr.io/allow-delete): routes carry GRACEFUL_SHUTDOWN (RFC 8326) for gracefulShutdown.wait, then the session ends";

/// Objects that left the API but still run here: said so, and those deleted on purpose
/// announce with GRACEFUL_SHUTDOWN (all peers, when it is the config) so routers move
/// traffic away before the Cease.
fn departing(objects: &Objects, mut out: NodeConfig) -> NodeConfig {
    let running: Vec<ObjectRef> = out
        .speaker_config
        .iter()
        .chain(&out.peers)
        .cloned()
        .collect();
    let mut gshut_all = false;
    let mut gshut: Vec<String> = Vec::new();
    for r in running {
        let key = (r.kind, r.name.clone());
        if objects.withdrawing.contains(&key) {
            match r.kind {
                ObjectKind::SpeakerConfig => gshut_all = true,
                ObjectKind::Peer => gshut.push(r.name.clone()),
                // Not part of a node's config: never in `running`.
                ObjectKind::Advertisement => {}
            }
            out.last_good.push((r, WITHDRAWING.to_owned()));
        } else if objects.retained.contains(&key) {
            out.last_good.push((r, RETAINED.to_owned()));
        }
    }
    if let Some(c) = &mut out.config {
        let g = podcidr_config::Community::GRACEFUL_SHUTDOWN;
        for p in &mut c.peers {
            if (gshut_all || gshut.contains(&p.name)) && !p.communities.contains(&g) {
                p.communities.push(g);
            }
        }
    }
    out
}

/// The config with its peers, or, if they do not fit together, without them.
fn run_together(
    config: &BGPSpeakerConfig,
    refs: &[&BGPPeer],
    key_file: KeyFile,
    mut out: NodeConfig,
) -> NodeConfig {
    match assemble(config, refs, key_file) {
        Ok(c) => {
            out.config = Some(c);
            out.speaker_config = Some(ObjectRef::of(ObjectKind::SpeakerConfig, config));
            out.peers = refs
                .iter()
                .map(|p| ObjectRef::of(ObjectKind::Peer, *p))
                .collect();
            out.key_refs = refs
                .iter()
                .flat_map(|p| {
                    peer_key_refs(&p.spec).map(|(key_use, r)| ((p.name_any(), key_use), r.clone()))
                })
                .collect();
        }
        // Each object passes alone but not together (a rule across peers): run the config
        // without its peers rather than nothing, and say so on each peer.
        Err(e) => {
            for (kind, name) in e.objects() {
                out.cannot_run.push((kind, name.to_owned()));
                out.not_applied.push((kind, name.to_owned(), e.to_string()));
            }
            if let Ok(c) = assemble(config, &[], key_file) {
                out.config = Some(c);
                out.speaker_config = Some(ObjectRef::of(ObjectKind::SpeakerConfig, config));
            }
        }
    }
    out
}
