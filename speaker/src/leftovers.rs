//! What earlier releases installed and this one no longer needs, where keeping it widens what
//! something may do: the allocator looks for each while it runs, logs it with the command
//! that removes it, and counts them (`podcidr_allocator_leftover_objects`). `kubectl apply`
//! prunes nothing, so an upgrade by re-applying `deploy/` leaves them in place.

use std::sync::Arc;
use std::time::Duration;

use ipam_watch::allocator::AllocatorMetrics;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::{Api, Client};

/// How often the allocator looks again.
const EVERY: Duration = Duration::from_secs(3600);

/// The kinds of leftovers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeftoverKind {
    Role,
    RoleBinding,
}

impl LeftoverKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LeftoverKind::Role => "Role",
            LeftoverKind::RoleBinding => "RoleBinding",
        }
    }
}

/// One object an earlier release installed in the install's namespace (podcidr-system).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leftover {
    pub kind: LeftoverKind,
    pub name: &'static str,
    pub why: &'static str,
}

const SPEAKER_ROLE_WHY: &str = "releases before the podcidr-node-lease namespace gave the speakers a Role in their own namespace that may create and patch any Lease there, the allocator's election Lease included, outside the speaker admission policy's namespace; the speakers' Role is now in podcidr-node-lease";

/// Every leftover this release knows.
pub const LEFTOVERS: [Leftover; 2] = [
    Leftover {
        kind: LeftoverKind::Role,
        name: "podcidr-bgp-speaker",
        why: SPEAKER_ROLE_WHY,
    },
    Leftover {
        kind: LeftoverKind::RoleBinding,
        name: "podcidr-bgp-speaker",
        why: SPEAKER_ROLE_WHY,
    },
];

impl Leftover {
    /// The command that removes it.
    pub fn removal(&self, namespace: &str) -> String {
        format!(
            "kubectl -n {namespace} delete {} {}",
            self.kind.as_str().to_lowercase(),
            self.name
        )
    }
}

/// Whether `l` exists in `namespace`; `Err` when the API cannot say.
async fn exists(client: &Client, namespace: &str, l: &Leftover) -> Result<bool, kube::Error> {
    match l.kind {
        LeftoverKind::Role => Api::<Role>::namespaced(client.clone(), namespace)
            .get_opt(l.name)
            .await
            .map(|o| o.is_some()),
        LeftoverKind::RoleBinding => Api::<RoleBinding>::namespaced(client.clone(), namespace)
            .get_opt(l.name)
            .await
            .map(|o| o.is_some()),
    }
}

/// Looks for the leftovers in `namespace` (the allocator's own, where the shipped install put
/// the old speaker Role and where the allocator's Role may read it) now and every hour.
pub async fn watch(client: Client, namespace: String, metrics: Arc<AllocatorMetrics>) {
    loop {
        let mut found = 0;
        for l in &LEFTOVERS {
            match exists(&client, &namespace, l).await {
                Ok(true) => {
                    found += 1;
                    tracing::warn!(
                        kind = l.kind.as_str(),
                        name = l.name,
                        namespace = %namespace,
                        fix = %l.removal(&namespace),
                        "left over from an earlier release and no longer needed: {}",
                        l.why
                    );
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::debug!(kind = l.kind.as_str(), name = l.name, error = %e, "cannot look for a leftover of an earlier release");
                }
            }
        }
        metrics.leftover_objects.set(found);
        tokio::time::sleep(EVERY).await;
    }
}
