//! `PodCIDRPool` objects <-> the pure pool model: spec conversion and status rendering.

use std::collections::BTreeSet;
use std::time::SystemTime;

use super::Family;
use super::kube_store::to_k8s_condition;
use super::pool::{FamilyPoolSpec, PodCidrPool};
use super::selector::NodeSelector;
use super::status::{FamilyAccounting, PoolStatus};
use podcidr_api::{FamilyUsage, PodCIDRPool, PodCIDRPoolStatus, PoolFamily};

fn family_spec(f: &Option<PoolFamily>) -> Option<FamilyPoolSpec> {
    f.as_ref().map(|f| FamilyPoolSpec {
        cidrs: f.cidrs.clone(),
        mask_size: f.mask_size,
    })
}

/// The pure pool of a `PodCIDRPool` object.
pub fn pool_from_crd(obj: &PodCIDRPool) -> PodCidrPool {
    PodCidrPool {
        name: obj.metadata.name.clone().unwrap_or_default(),
        ipv4: family_spec(&obj.spec.ipv4),
        ipv6: family_spec(&obj.spec.ipv6),
        node_selector: obj
            .spec
            .node_selector
            .as_ref()
            .map(NodeSelector::from_label_selector),
    }
}

fn usage(a: &FamilyAccounting) -> FamilyUsage {
    let c = |v: u128| u64::try_from(v).unwrap_or(u64::MAX);
    FamilyUsage {
        capacity: c(a.capacity),
        allocated: c(a.allocated),
        free: c(a.free),
        quarantined: c(a.quarantined),
    }
}

/// The status to write for `status`, keeping transition times of unchanged conditions.
pub fn render_status(
    status: &PoolStatus,
    previous: Option<&PodCIDRPoolStatus>,
    generation: Option<i64>,
    now: SystemTime,
) -> PodCIDRPoolStatus {
    let prev = previous.map(|p| p.conditions.as_slice()).unwrap_or(&[]);
    let conditions = status
        .conditions
        .iter()
        .map(|c| {
            let mut k = to_k8s_condition(c, prev.iter().find(|p| p.type_ == c.type_), now);
            k.observed_generation = generation;
            k
        })
        .collect();
    PodCIDRPoolStatus {
        ipv4: status.family(Family::V4).map(usage),
        ipv6: status.family(Family::V6).map(usage),
        conditions,
        observed_generation: generation,
    }
}

/// Equal up to condition order and transition times (what decides whether to write).
pub fn same_status(a: &PodCIDRPoolStatus, b: &PodCIDRPoolStatus) -> bool {
    let key = |s: &PodCIDRPoolStatus| -> BTreeSet<(String, String, String, String, Option<i64>)> {
        s.conditions
            .iter()
            .map(|c| {
                (
                    c.type_.clone(),
                    c.status.clone(),
                    c.reason.clone(),
                    c.message.clone(),
                    c.observed_generation,
                )
            })
            .collect()
    };
    a.ipv4 == b.ipv4
        && a.ipv6 == b.ipv6
        && a.observed_generation == b.observed_generation
        && key(a) == key(b)
}

/// True if the condition `type_` is `True` in `s`.
pub fn condition_true(s: Option<&PodCIDRPoolStatus>, type_: &str) -> bool {
    s.is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocator::{Allocator, AllocatorConfig};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    use podcidr_api::PodCIDRPoolSpec;
    use std::collections::BTreeMap;
    use std::time::Duration;

    #[test]
    fn crd_pool_converts_and_status_round_trips() {
        let mut obj = PodCIDRPool::new(
            "p",
            PodCIDRPoolSpec {
                ipv4: Some(PoolFamily {
                    cidrs: vec!["10.0.0.0/30".into()],
                    mask_size: 31,
                }),
                ipv6: None,
                node_selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([("a".into(), "b".into())])),
                    match_expressions: Some(vec![LabelSelectorRequirement {
                        key: "k".into(),
                        operator: "Bogus".into(),
                        values: None,
                    }]),
                }),
            },
        );
        obj.metadata.generation = Some(3);
        let pool = pool_from_crd(&obj);
        let sel = pool.node_selector.clone().unwrap();
        let labels = BTreeMap::from([("a".into(), "b".into()), ("k".into(), "v".into())]);
        assert!(!sel.matches(&labels), "unknown operator matches nothing");
        let alloc = Allocator::new(AllocatorConfig::default(), vec![pool]);
        let ps = alloc.pool_status("p").unwrap();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let s1 = render_status(&ps, None, Some(3), t0);
        assert_eq!(s1.ipv4.unwrap().capacity, 2);
        assert_eq!(s1.ipv4.unwrap().free, 2);
        let s2 = render_status(&ps, Some(&s1), Some(3), t0 + Duration::from_secs(5));
        assert_eq!(s1, s2, "unchanged conditions keep their transition time");
        assert!(same_status(&s1, &s2));
        assert!(!same_status(&s1, &render_status(&ps, None, Some(4), t0)));
        assert!(!condition_true(Some(&s1), "Exhausted"));
    }
}
