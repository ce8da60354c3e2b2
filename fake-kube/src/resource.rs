//! Resource types (api group/version + plural) and API path parsing.

use std::fmt;

/// A resource type: `apiVersion` (`v1`, `cilium.io/v2`) plus the plural (`nodes`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gvr {
    /// `v1` for the core group, else `group/version`.
    pub api_version: String,
    /// Lower-case plural as in the URL.
    pub plural: String,
}

impl Gvr {
    /// A resource type from its `apiVersion` and plural.
    pub fn new(api_version: impl Into<String>, plural: impl Into<String>) -> Self {
        Self {
            api_version: api_version.into(),
            plural: plural.into(),
        }
    }

    /// Core `v1` nodes.
    pub fn nodes() -> Self {
        Self::new("v1", "nodes")
    }

    /// `coordination.k8s.io/v1` leases.
    pub fn leases() -> Self {
        Self::new("coordination.k8s.io/v1", "leases")
    }

    /// `events.k8s.io/v1` events (what `kube::runtime::events::Recorder` writes; the core/v1
    /// `Event` type is `Gvr::new("v1", "events")`).
    pub fn events() -> Self {
        Self::new("events.k8s.io/v1", "events")
    }

    /// `cilium.io/v2` ciliumnodes.
    pub fn cilium_nodes() -> Self {
        Self::new("cilium.io/v2", "ciliumnodes")
    }

    /// The type of a kube resource, e.g. `Gvr::of::<Node>()`.
    pub fn of<K: kube::Resource<DynamicType = ()>>() -> Self {
        Self::new(K::api_version(&()), K::plural(&()))
    }

    /// The type described by a kube `ApiResource`.
    pub fn from_api_resource(ar: &kube::core::ApiResource) -> Self {
        Self::new(ar.api_version.clone(), ar.plural.clone())
    }

    /// Base path of the collection, without namespace: `/api/v1/nodes`.
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        let prefix = if self.api_version.contains('/') {
            format!("/apis/{}", self.api_version)
        } else {
            format!("/api/{}", self.api_version)
        };
        match namespace {
            Some(ns) => format!("{prefix}/namespaces/{ns}/{}", self.plural),
            None => format!("{prefix}/{}", self.plural),
        }
    }

    /// The `kind` for objects of this type, for lists and bookmarks.
    pub(crate) fn guess_kind(&self) -> String {
        let known = [
            ("nodes", "Node"),
            ("namespaces", "Namespace"),
            ("pods", "Pod"),
            ("events", "Event"),
            ("leases", "Lease"),
            ("configmaps", "ConfigMap"),
            ("secrets", "Secret"),
            ("services", "Service"),
            ("endpoints", "Endpoints"),
            ("ciliumnodes", "CiliumNode"),
            ("podcidrpools", "PodCIDRPool"),
            ("nodepodcidrs", "NodePodCIDR"),
            ("customresourcedefinitions", "CustomResourceDefinition"),
        ];
        if let Some((_, kind)) = known.iter().find(|(p, _)| *p == self.plural) {
            return (*kind).to_owned();
        }
        let singular = self.plural.strip_suffix('s').unwrap_or(&self.plural);
        let mut chars = singular.chars();
        chars
            .next()
            .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
            .unwrap_or_default()
    }
}

impl fmt::Display for Gvr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.api_version, self.plural)
    }
}

/// Where a request points, parsed from its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub gvr: Gvr,
    /// `Some` for a namespaced path.
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Parses `/api/v1/...` and `/apis/{group}/{version}/...` resource paths.
pub(crate) fn parse_path(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (api_version, rest) = match segs.as_slice() {
        ["api", version, rest @ ..] => ((*version).to_owned(), rest),
        ["apis", group, version, rest @ ..] => (format!("{group}/{version}"), rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        // `/api/v1/namespaces/{name}` and its `status`/`finalize` are the Namespace itself.
        ["namespaces", ns, plural, tail @ ..] if !matches!(*plural, "status" | "finalize") => {
            (Some((*ns).to_owned()), [&[*plural][..], tail].concat())
        }
        _ => (None, rest.to_vec()),
    };
    let (plural, name, subresource) = match rest.as_slice() {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(*name), None),
        [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
        _ => return None,
    };
    if plural.is_empty() || name.is_some_and(str::is_empty) {
        return None;
    }
    Some(Target {
        gvr: Gvr::new(api_version, plural),
        namespace,
        name: name.map(str::to_owned),
        subresource: subresource.map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_core_group_namespaced_and_subresource_paths() {
        let t = parse_path("/api/v1/nodes").unwrap();
        assert_eq!((t.gvr, t.namespace, t.name), (Gvr::nodes(), None, None));
        let t = parse_path("/api/v1/namespaces/kube-system/events/e1").unwrap();
        assert_eq!(t.gvr, Gvr::new("v1", "events"));
        assert_eq!(
            (t.namespace.as_deref(), t.name.as_deref()),
            (Some("kube-system"), Some("e1"))
        );
        let t = parse_path("/apis/cilium.io/v2/ciliumnodes/n1/status").unwrap();
        assert_eq!(
            (t.gvr, t.subresource.as_deref()),
            (Gvr::cilium_nodes(), Some("status"))
        );
        let t = parse_path("/api/v1/namespaces/default").unwrap();
        assert_eq!(
            (t.gvr.plural.as_str(), t.name.as_deref(), t.namespace),
            ("namespaces", Some("default"), None)
        );
        let t = parse_path("/api/v1/namespaces/default/status").unwrap();
        assert_eq!(t.subresource.as_deref(), Some("status"));
        assert_eq!(
            Gvr::leases().collection_path(Some("ns")),
            "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
        );
        assert!(parse_path("/version").is_none());
        assert!(parse_path("/api/v1/a/b/c/d").is_none());
    }
}
