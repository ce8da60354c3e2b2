//! The speaker's `NodeBGPStatus`, written off the loop: one request per change. The core
//! decides when to write; this decides how.

use std::sync::{Mutex, PoisonError};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource};
use podcidr_api::{NodeBGPStatus, NodeBGPStatusSpec, SpeakerReport};

/// Field manager for server-side apply (and the reporting controller of our Events).
pub const FIELD_MANAGER: &str = super::events::REPORTER;
/// The owner reference to this node's Node (deleting the Node deletes what it owns).
pub(super) fn node_owner(node: &str, uid: Option<&str>) -> Option<Vec<OwnerReference>> {
    uid.map(|uid| {
        vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: node.to_owned(),
            uid: uid.to_owned(),
            ..OwnerReference::default()
        }]
    })
}

/// What this process knows of its status object.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Known {
    node: String,
    /// The Node UID the object was applied with (its owner reference).
    owner_uid: Option<String>,
    generation: Option<i64>,
}

/// Writes the `NodeBGPStatus`. The object (owned by the Node) is applied once per process,
/// per Node UID, or after it disappeared; every other write is one server-side apply of the
/// status subresource: one request per change.
#[derive(Debug)]
pub struct StatusWriter {
    api: Api<NodeBGPStatus>,
    known: Mutex<Option<Known>>,
}

impl StatusWriter {
    pub fn new(client: Client) -> Self {
        StatusWriter {
            api: Api::all(client),
            known: Mutex::new(None),
        }
    }

    fn known(&self) -> Option<Known> {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_known(&self, known: Option<Known>) {
        *self.known.lock().unwrap_or_else(PoisonError::into_inner) = known;
    }

    pub async fn write(
        &self,
        node: &str,
        node_uid: Option<&str>,
        report: &SpeakerReport,
    ) -> kube::Result<()> {
        let generation = match self.known() {
            Some(k) if k.node == node && k.owner_uid.as_deref() == node_uid => k.generation,
            _ => self.apply_object(node, node_uid).await?,
        };
        match self.apply_status(node, node_uid, generation, report).await {
            // Deleted since (by hand, or the CRD was reinstalled): create it again.
            Err(kube::Error::Api(e)) if e.code == 404 => {
                self.set_known(None);
                let generation = self.apply_object(node, node_uid).await?;
                self.apply_status(node, node_uid, generation, report).await
            }
            other => other,
        }
    }

    /// Server-side apply of the object; returns its generation.
    async fn apply_object(&self, node: &str, node_uid: Option<&str>) -> kube::Result<Option<i64>> {
        let mut obj = NodeBGPStatus::new(
            node,
            NodeBGPStatusSpec {
                node_name: node.to_owned(),
            },
        );
        obj.meta_mut().owner_references = node_owner(node, node_uid);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let applied = self.api.patch(node, &params, &Patch::Apply(&obj)).await?;
        let generation = applied.metadata.generation;
        self.set_known(Some(Known {
            node: node.to_owned(),
            owner_uid: node_uid.map(str::to_owned),
            generation,
        }));
        Ok(generation)
    }

    /// Server-side apply of the status subresource (404 when the object does not exist).
    async fn apply_status(
        &self,
        node: &str,
        node_uid: Option<&str>,
        generation: Option<i64>,
        report: &SpeakerReport,
    ) -> kube::Result<()> {
        // Conditions say which generation of the object they describe (API conventions).
        let mut report = report.clone();
        report.observed_generation = generation;
        for c in &mut report.conditions {
            c.observed_generation = generation;
        }
        let status = serde_json::json!({
            "apiVersion": "podcidr.io/v1alpha1",
            "kind": "NodeBGPStatus",
            "status": report,
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let applied = self
            .api
            .patch_status(node, &params, &Patch::Apply(&status))
            .await?;
        // Someone changed the spec: the next report names the new generation.
        if applied.metadata.generation != generation {
            self.set_known(Some(Known {
                node: node.to_owned(),
                owner_uid: node_uid.map(str::to_owned),
                generation: applied.metadata.generation,
            }));
        }
        Ok(())
    }
}
