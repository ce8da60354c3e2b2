//! Configuration objects (`BGPSpeakerConfig`, `BGPPeer`), pure: which objects a node runs
//! ([`select`], the oldest object wins a conflict), and the `Config` they make ([`assemble`]),
//! validated by the config file's own parser so every rule and message is shared. Used by the
//! speaker (what it runs), the status controller (what it reports) and the CLI.

mod assemble;
pub mod check;
pub mod convert;
pub mod key_files;
mod node_config;
pub mod rollout;
mod select;
pub mod status;

pub use assemble::{ObjectError, ObjectErrors, ObjectRef, assemble, assemble_specs, spec_document};
pub use key_files::KeyUse;
pub use node_config::{KeyFile, Keys, LastGood, NodeConfig, node_config};
pub use select::{Conflict, NodeSelection, ObjectKind, endpoint_key, select};

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use podcidr_api::{BGPPeer, BGPSpeakerConfig};

/// The configuration objects of the cluster, as listed, and those a speaker still runs
/// after they left the listing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Objects {
    pub configs: BTreeMap<String, BGPSpeakerConfig>,
    pub peers: BTreeMap<String, BGPPeer>,
    /// Service routes: read by every speaker for itself, so only the status writer keeps
    /// them here (for their conditions).
    pub advertisements: BTreeMap<String, podcidr_api::BGPAdvertisement>,
    /// Of those: gone from the API without [`ALLOW_DELETE`] (their CRD deleted, the delete
    /// guard bypassed). Kept running: nothing is withdrawn by accident.
    pub retained: BTreeSet<(ObjectKind, String)>,
    /// Of those: deleted on purpose ([`ALLOW_DELETE`]). Run with RFC 8326
    /// GRACEFUL_SHUTDOWN on their routes until the speaker drops them.
    pub withdrawing: BTreeSet<(ObjectKind, String)>,
}

/// The annotation that makes deleting a configuration object deliberate: the delete guard
/// (`deploy/admission/config-delete-guard.yaml`) refuses a DELETE without it, and a speaker
/// withdraws only what disappears with it (gracefully); anything else that disappears keeps
/// running.
pub const ALLOW_DELETE: &str = "bgp.podcidr.io/allow-delete";

/// Whether `o` carries `bgp.podcidr.io/allow-delete: "true"`.
pub fn deletion_allowed<K: kube::Resource>(o: &K) -> bool {
    o.meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(ALLOW_DELETE))
        .is_some_and(|v| v == "true")
}

impl Objects {
    pub fn from_lists(configs: Vec<BGPSpeakerConfig>, peers: Vec<BGPPeer>) -> Self {
        Objects {
            configs: configs.into_iter().map(|c| (c.name_any(), c)).collect(),
            peers: peers.into_iter().map(|p| (p.name_any(), p)).collect(),
            ..Objects::default()
        }
    }
}

#[cfg(test)]
mod status_tests;
#[cfg(test)]
mod tests;
