//! The speaker's Kubernetes I/O: its pod-CIDR source and Node watch, the configuration objects,
//! the Service watch, and its writes (the NodeBGPStatus, the node's Lease, Events about the
//! Node). Decisions are the core's.

pub mod config_objects;
pub mod events;
pub mod lease;
pub mod node;
mod node_store;
pub mod services;
pub mod source;
pub mod status;

use super::core::errors::ApiWriteError;

/// A failed write as the core sees it: the API server's answer, or none.
pub fn write_error(e: kube::Error) -> ApiWriteError {
    match e {
        kube::Error::Api(s) => ApiWriteError::Api {
            code: s.code,
            reason: s.reason,
            message: s.message,
        },
        other => ApiWriteError::Unreachable(other.to_string()),
    }
}
