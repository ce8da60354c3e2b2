//! The node's Lease, renewed off the loop: one small write a minute, the liveness `diff`
//! reads. The core decides when; this decides how.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

use super::status::{FIELD_MANAGER, node_owner};

use podcidr_api::contract::LEASE_LABEL;

/// Renews the node's Lease: one server-side apply (it creates the Lease the first time).
#[derive(Debug)]
pub struct LeaseWriter {
    api: Api<Lease>,
    namespace: String,
    /// The pod (or process) in `holderIdentity` = `<node>/<pod>`.
    pod: String,
    /// `acquireTime`: when this process first held the Lease of this node.
    acquired: Mutex<Option<(String, u64)>>,
}

fn micro_time(unix: u64) -> MicroTime {
    MicroTime(crate::daemon::core::report::timestamp(unix))
}

impl LeaseWriter {
    pub fn new(client: Client, namespace: &str, pod: &str) -> Self {
        LeaseWriter {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            pod: pod.to_owned(),
            acquired: Mutex::new(None),
        }
    }

    /// The Lease as applied: a few hundred bytes, owned by the Node when its UID is known
    /// (deleting the Node deletes it, like the kubelet's node Lease).
    pub fn lease(
        &self,
        node: &str,
        node_uid: Option<&str>,
        duration: Duration,
        unix: u64,
    ) -> Lease {
        let acquired = {
            let mut a = self.acquired.lock().unwrap_or_else(PoisonError::into_inner);
            match &*a {
                Some((n, t)) if n == node => *t,
                _ => {
                    *a = Some((node.to_owned(), unix));
                    unix
                }
            }
        };
        Lease {
            metadata: ObjectMeta {
                name: Some(node.to_owned()),
                namespace: Some(self.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    LEASE_LABEL.to_owned(),
                    "true".to_owned(),
                )])),
                owner_references: node_owner(node, node_uid),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(format!("{node}/{}", self.pod)),
                lease_duration_seconds: Some(i32::try_from(duration.as_secs()).unwrap_or(i32::MAX)),
                acquire_time: Some(micro_time(acquired)),
                renew_time: Some(micro_time(unix)),
                ..LeaseSpec::default()
            }),
        }
    }

    pub async fn renew(
        &self,
        node: &str,
        node_uid: Option<&str>,
        duration: Duration,
        unix: u64,
    ) -> kube::Result<()> {
        let lease = self.lease(node, node_uid, duration, unix);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.api.patch(node, &params, &Patch::Apply(&lease)).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bound: at most one write of at most 1 KiB per node per minute. The body
    /// sent is this; the stored object adds uid, resourceVersion, creationTimestamp and
    /// managedFields (about 400 bytes more on a real API server).
    #[tokio::test]
    async fn lease_body_stays_far_below_one_kib() {
        let uri: http::Uri = "http://127.0.0.1:1".parse().unwrap();
        let client = Client::try_from(kube::Config::new(uri)).unwrap();
        let w = LeaseWriter::new(client, "podcidr-system", "podcidr-bgp-speaker-x7k2q");
        let node = "ip-10-250-112-201.eu-central-1.compute.internal";
        let lease = w.lease(
            node,
            Some("0b6f1c2e-8f4a-4c1e-9d3b-2a7e5f6c8d90"),
            Duration::from_secs(180),
            1_767_225_600,
        );
        let body = serde_json::to_vec(&lease).unwrap();
        assert!(
            body.len() < 600,
            "{} bytes: {}",
            body.len(),
            String::from_utf8_lossy(&body)
        );
        let spec = lease.spec.unwrap();
        assert_eq!(
            spec.holder_identity.as_deref(),
            Some(format!("{node}/podcidr-bgp-speaker-x7k2q").as_str())
        );
        assert_eq!(spec.lease_duration_seconds, Some(180));
        // acquireTime stays while the renewTime moves.
        let later = w.lease(node, None, Duration::from_secs(180), 1_767_225_660);
        let later = later.spec.unwrap();
        assert_eq!(later.acquire_time, spec.acquire_time);
        assert_ne!(later.renew_time, spec.renew_time);
    }
}
