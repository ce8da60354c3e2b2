//! `BGPAdvertisement` (group `bgp.podcidr.io`): which Service addresses the speakers on the
//! selected nodes announce, to which peers, with which path attributes. Announce only: no
//! Service IP is allocated and no Service's status is written. Selection and attributes are
//! decided by the `podcidr-services` crate; its field schemas and CEL rules come from the
//! parent module.

use super::*;

/// What `BGPAdvertisement.spec` holds.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "bgp.podcidr.io",
    version = "v1beta1",
    kind = "BGPAdvertisement",
    plural = "bgpadvertisements",
    shortname = "bgpadv",
    category = "podcidr",
    status = "ConfigObjectStatus",
    derive = "PartialEq",
    doc = "Service addresses the podcidr-bgp speakers on the selected nodes announce.",
    printcolumn(
        name = "Addresses",
        type_ = "string",
        json_path = ".spec.addresses",
        description = "Which Service addresses"
    ),
    printcolumn(
        name = "Accepted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Accepted\")].status",
        description = "Valid and applied"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BGPAdvertisementSpec {
    /// The nodes that announce; empty or absent selects every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::label_selector")]
    pub node_selector: Option<LabelSelector>,
    /// The Services announced: a label selector over their labels and the virtual labels
    /// `podcidr.io/service-name` and `podcidr.io/service-namespace`. Absent selects none;
    /// `{}` selects every Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::label_selector")]
    pub service_selector: Option<LabelSelector>,
    /// Which of a Service's addresses: `LoadBalancerIP` (`status.loadBalancer.ingress[].ip`),
    /// `ExternalIP` (`spec.externalIPs`), `ClusterIP` (`spec.clusterIPs`).
    #[schemars(schema_with = "advertised_addresses")]
    pub addresses: Vec<AdvertisedAddressSpec>,
    /// The allow-list: an address outside every entry is refused and reported, never
    /// announced.
    #[schemars(schema_with = "advertisement_allowed_prefixes")]
    pub allowed_prefixes: Vec<String>,
    /// The BGPPeer objects that receive these routes (a label selector over them); absent
    /// sends to every peer of the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::label_selector")]
    pub peers: Option<LabelSelector>,
    /// Announce each IPv4 address as its covering prefix of this length (default 32).
    #[serde(
        default,
        rename = "aggregationLengthIPv4",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 32))]
    pub aggregation_length_ipv4: Option<u8>,
    /// Announce each IPv6 address as its covering prefix of this length (default 128).
    #[serde(
        default,
        rename = "aggregationLengthIPv6",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 128))]
    pub aggregation_length_ipv6: Option<u8>,
    /// Standard communities (`65000:100`, or a well-known name) on these routes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub communities: Vec<String>,
    /// Large communities (`4200000001:1:2`) on these routes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub large_communities: Vec<String>,
    /// LOCAL_PREF on these routes (iBGP sessions only; eBGP peers never receive it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 4_294_967_295_u64))]
    pub local_pref: Option<u64>,
    /// Absent: Services with no `spec.loadBalancerClass`; set: exactly that class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub load_balancer_class: Option<String>,
    /// ORIGIN of these routes: `IGP` (default) or `Incomplete` (what MetalLB sends: equal
    /// ORIGIN keeps ECMP across both announcers while a cluster migrates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<OriginSpec>,
    /// Opt-in datapath gate for `Local` Services: a node announces a Service's address only
    /// once its service proxy (kube-proxy, Cilium) reports a local endpoint on the Service's
    /// `healthCheckNodePort`, continuously for `holdDown`; it withdraws when the proxy
    /// reports none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check_gate: Option<HealthCheckGateSpec>,
}

/// `spec.healthCheckGate`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheckGateSpec {
    /// How long the proxy must report a local endpoint before the first announce and after
    /// a failure (default 5s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration")]
    pub hold_down: Option<IntOrString>,
}

/// A kind of Service address.
#[derive(
    Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
pub enum AdvertisedAddressSpec {
    #[serde(rename = "LoadBalancerIP")]
    LoadBalancerIp,
    #[serde(rename = "ExternalIP")]
    ExternalIp,
    #[serde(rename = "ClusterIP")]
    ClusterIp,
}

/// The ORIGIN path attribute (RFC 4271 5.1.1) of Service routes.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
pub enum OriginSpec {
    #[serde(rename = "IGP")]
    Igp,
    Incomplete,
}

fn advertised_addresses(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "description": "Which Service addresses: LoadBalancerIP, ExternalIP, ClusterIP (at least one, each once).",
        "x-kubernetes-list-type": "set",
        "minItems": 1,
        "maxItems": 3,
        "items": {"type": "string", "enum": ["LoadBalancerIP", "ExternalIP", "ClusterIP"]}
    })
}

fn advertisement_allowed_prefixes(_: &mut SchemaGenerator) -> Schema {
    let mut v = schema::cidr_array(
        "The allow-list: a Service address outside every entry is refused and reported, never announced.",
        1024,
    );
    v["minItems"] = 1.into();
    Schema::try_from(v).unwrap_or_default()
}
