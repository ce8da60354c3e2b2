//! Configuration objects (`BGPSpeakerConfig`, `BGPPeer`), pure: which objects a node runs
//! ([`select`], the oldest object wins a conflict), and the `Config` they make ([`assemble`]),
//! validated by the config file's own parser so every rule and message is shared. Used by the
//! speaker (what it runs), the status controller (what it reports) and the CLI.

mod assemble;
pub mod check;
pub mod convert;
mod node_config;
mod select;
pub mod status;

pub use assemble::{ObjectError, ObjectErrors, ObjectRef, assemble, assemble_specs, spec_document};
pub use node_config::{KeyFile, Keys, LastGood, NodeConfig, node_config};
pub use select::{Conflict, NodeSelection, ObjectKind, endpoint_key, select};

use std::collections::BTreeMap;

use ipam_watch::crd::{BGPPeer, BGPSpeakerConfig};
use kube::ResourceExt;

/// The configuration objects of the cluster, as listed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Objects {
    pub configs: BTreeMap<String, BGPSpeakerConfig>,
    pub peers: BTreeMap<String, BGPPeer>,
}

impl Objects {
    pub fn from_lists(configs: Vec<BGPSpeakerConfig>, peers: Vec<BGPPeer>) -> Self {
        Objects {
            configs: configs.into_iter().map(|c| (c.name_any(), c)).collect(),
            peers: peers.into_iter().map(|p| (p.name_any(), p)).collect(),
        }
    }
}

#[cfg(test)]
mod status_tests;
#[cfg(test)]
mod tests;
