//! Pool configuration (`PodCidrPool`), validation and slot math of one pool CIDR.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::cidr::{Family, PodCidr, host_mask};
use super::free_runs::FreeRuns;
use super::selector::NodeSelector;

/// Name of the pool materialized from command-line flags.
pub const DEFAULT_POOL: &str = "default";

/// CIDRs of one family and the node mask they are split into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyPoolSpec {
    /// Pool CIDRs as written by the user (validated, never guessed).
    pub cidrs: Vec<String>,
    /// Prefix length handed to each node.
    pub mask_size: u8,
}

/// A pod-CIDR pool: per family a list of CIDRs and a node mask size, optional selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCidrPool {
    /// Unique name.
    pub name: String,
    /// IPv4 part.
    pub ipv4: Option<FamilyPoolSpec>,
    /// IPv6 part.
    pub ipv6: Option<FamilyPoolSpec>,
    /// Nodes served; `None` serves every node.
    pub node_selector: Option<NodeSelector>,
}

impl PodCidrPool {
    /// The `default` pool from `--cluster-pool-ipv4-cidr`/`-mask-size` style flags.
    /// Empty lists leave that family out.
    pub fn default_from_flags(
        ipv4_cidrs: &[String],
        ipv4_mask_size: u8,
        ipv6_cidrs: &[String],
        ipv6_mask_size: u8,
    ) -> Self {
        let spec = |cidrs: &[String], mask_size| {
            (!cidrs.is_empty()).then(|| FamilyPoolSpec {
                cidrs: cidrs.to_vec(),
                mask_size,
            })
        };
        PodCidrPool {
            name: DEFAULT_POOL.to_string(),
            ipv4: spec(ipv4_cidrs, ipv4_mask_size),
            ipv6: spec(ipv6_cidrs, ipv6_mask_size),
            node_selector: None,
        }
    }

    /// The spec of one family.
    pub fn spec(&self, f: Family) -> Option<&FamilyPoolSpec> {
        match f {
            Family::V4 => self.ipv4.as_ref(),
            Family::V6 => self.ipv6.as_ref(),
        }
    }

    /// True if the pool serves a node with these labels.
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.node_selector
            .as_ref()
            .is_none_or(|s| s.matches(labels))
    }
}

fn field(f: Family) -> &'static str {
    match f {
        Family::V4 => "ipv4",
        Family::V6 => "ipv6",
    }
}

/// One accepted pool CIDR.
#[derive(Debug, Clone)]
pub(crate) struct PoolEntry {
    pub(crate) pool: Arc<str>,
    pub(crate) cidr: PodCidr,
    pub(crate) node_len: u8,
    /// Position in the pool's CIDR list (allocation order).
    pub(crate) index: usize,
}

/// Validation findings of one pool.
#[derive(Debug, Clone, Default)]
pub(crate) struct PoolReport {
    pub(crate) invalid: Vec<String>,
    pub(crate) overlapping: Vec<String>,
}

/// Result of validating a whole pool set.
#[derive(Debug, Default)]
pub(crate) struct Validated {
    pub(crate) entries: Vec<PoolEntry>,
    pub(crate) reports: BTreeMap<String, PoolReport>,
}

/// Validates pools. Invalid pools are rejected whole; overlapping CIDRs are rejected one by
/// one. The winner depends only on the configuration (pool name, then list order), so a
/// restart makes the same choice; a displaced CIDR drains, it is never double-issued.
pub(crate) fn validate(pools: &[PodCidrPool]) -> Validated {
    let mut out = Validated::default();
    let mut sorted: Vec<&PodCidrPool> = pools.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut candidates = Vec::new();
    for pool in sorted {
        if out.reports.contains_key(&pool.name) {
            let r = out
                .reports
                .entry(format!("{} (duplicate)", pool.name))
                .or_default();
            r.invalid
                .push(format!("duplicate pool name {:?}", pool.name));
            continue;
        }
        let report = out.reports.entry(pool.name.clone()).or_default();
        if pool.name.is_empty() {
            report.invalid.push("empty pool name".into());
        }
        let name: Arc<str> = Arc::from(pool.name.as_str());
        let mut mine = Vec::new();
        for fam in Family::ALL {
            let Some(spec) = pool.spec(fam) else { continue };
            let fname = field(fam);
            if spec.mask_size > fam.bits() {
                report.invalid.push(format!(
                    "{fname}.maskSize {} exceeds {}",
                    spec.mask_size,
                    fam.bits()
                ));
                continue;
            }
            for (i, s) in spec.cidrs.iter().enumerate() {
                let at = format!("{fname}.cidrs[{i}] {s:?}");
                match PodCidr::parse(s) {
                    Err(e) => report.invalid.push(format!("{at}: {e}")),
                    Ok(c) if c.family() != fam => report
                        .invalid
                        .push(format!("{at}: is {}", c.family().name())),
                    Ok(c) if spec.mask_size < c.prefix_len() => report.invalid.push(format!(
                        "{at}: maskSize {} is shorter than the CIDR",
                        spec.mask_size
                    )),
                    Ok(c) if spec.mask_size - c.prefix_len() > 127 => report
                        .invalid
                        .push(format!("{at}: a split into 2^128 slots is not supported")),
                    Ok(c) => mine.push((name.clone(), fam, i, c, spec.mask_size, at)),
                }
            }
        }
        if report.invalid.is_empty() {
            candidates.extend(mine);
        }
    }
    candidates.sort_by(|a, b| (&a.0, a.1, a.2).cmp(&(&b.0, b.1, b.2)));
    let mut taken: [BTreeMap<u128, (PodCidr, Arc<str>)>; 2] = Default::default();
    for (pool, fam, index, c, mask, at) in candidates {
        let t = &mut taken[fam.index()];
        let clash = t
            .range(..=c.addr())
            .next_back()
            .filter(|(_, (o, _))| o.last() >= c.addr())
            .or_else(|| t.range(c.addr()..=c.last()).next())
            .map(|(_, v)| v.clone());
        if let Some((other, owner)) = clash {
            let r = out.reports.entry(pool.to_string()).or_default();
            r.overlapping
                .push(format!("{at} overlaps {other} of pool {owner:?}"));
            continue;
        }
        t.insert(c.addr(), (c, pool.clone()));
        out.entries.push(PoolEntry {
            pool,
            cidr: c,
            node_len: mask,
            index,
        });
    }
    out
}

/// One active pool CIDR split into node-size slots; slot `i` = `base + (i << shift)`.
#[derive(Debug, Clone)]
pub(crate) struct SlotRange {
    pub(crate) pool: Arc<str>,
    pub(crate) cidr: PodCidr,
    pub(crate) node_len: u8,
    pub(crate) free: FreeRuns,
}

impl SlotRange {
    pub(crate) fn new(pool: Arc<str>, cidr: PodCidr, node_len: u8) -> Self {
        let mut r = SlotRange {
            pool,
            cidr,
            node_len,
            free: FreeRuns::empty(),
        };
        r.free = FreeRuns::full(r.last_slot());
        r
    }

    fn shift(&self) -> u32 {
        u32::from(self.cidr.family().bits() - self.node_len)
    }

    /// Highest slot index (`2^(node_len - len) - 1`).
    pub(crate) fn last_slot(&self) -> u128 {
        host_mask(self.cidr.prefix_len(), self.node_len)
    }

    pub(crate) fn capacity(&self) -> u128 {
        self.last_slot() + 1
    }

    /// The node CIDR of slot `i`.
    pub(crate) fn slot_cidr(&self, i: u128) -> PodCidr {
        let off = i.checked_shl(self.shift()).unwrap_or(0);
        PodCidr::from_raw(self.cidr.family(), self.cidr.addr() + off, self.node_len)
    }

    /// Slots touched by `c` (partially covered slots included).
    pub(crate) fn slot_span(&self, c: &PodCidr) -> Option<(u128, u128)> {
        if !self.cidr.overlaps(c) {
            return None;
        }
        let lo = c.addr().max(self.cidr.addr()) - self.cidr.addr();
        let hi = c.last().min(self.cidr.last()) - self.cidr.addr();
        Some((
            lo.checked_shr(self.shift()).unwrap_or(0),
            hi.checked_shr(self.shift()).unwrap_or(0),
        ))
    }

    /// True if `c` is exactly one slot of this range.
    pub(crate) fn is_slot(&self, c: &PodCidr) -> bool {
        c.prefix_len() == self.node_len && self.cidr.contains(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str, v4: &[&str], mask: u8) -> PodCidrPool {
        PodCidrPool {
            name: name.into(),
            ipv4: Some(FamilyPoolSpec {
                cidrs: v4.iter().map(|s| s.to_string()).collect(),
                mask_size: mask,
            }),
            ipv6: None,
            node_selector: None,
        }
    }

    #[test]
    fn slot_math_v4_and_v6() {
        let r = SlotRange::new("p".into(), PodCidr::parse("10.0.0.0/8").unwrap(), 24);
        assert_eq!(r.capacity(), 65_536);
        assert_eq!(r.slot_cidr(0).to_string(), "10.0.0.0/24");
        assert_eq!(r.slot_cidr(65_535).to_string(), "10.255.255.0/24");
        assert_eq!(
            r.slot_span(&PodCidr::parse("10.1.2.0/24").unwrap()),
            Some((258, 258))
        );
        assert_eq!(
            r.slot_span(&PodCidr::parse("10.1.2.128/25").unwrap()),
            Some((258, 258))
        );
        assert_eq!(
            r.slot_span(&PodCidr::parse("10.1.0.0/16").unwrap()),
            Some((256, 511))
        );
        assert_eq!(
            r.slot_span(&PodCidr::parse("0.0.0.0/0").unwrap()),
            Some((0, 65_535))
        );
        assert_eq!(r.slot_span(&PodCidr::parse("11.0.0.0/24").unwrap()), None);
        let v6 = SlotRange::new("p".into(), PodCidr::parse("2001:db8::/32").unwrap(), 64);
        assert_eq!(v6.capacity(), 1 << 32);
        assert_eq!(v6.slot_cidr(1).to_string(), "2001:db8:0:1::/64");
        let one = SlotRange::new("p".into(), PodCidr::parse("10.0.0.0/24").unwrap(), 24);
        assert_eq!(
            one.capacity(),
            1,
            "a /24 pool with /24 nodes has room for one node"
        );
        let all = SlotRange::new("p".into(), PodCidr::parse("::/0").unwrap(), 127);
        assert_eq!(all.capacity(), 1 << 127);
        assert_eq!(
            all.slot_span(&PodCidr::parse("::/0").unwrap()),
            Some((0, (1 << 127) - 1))
        );
    }

    #[test]
    fn invalid_pools_are_reported_not_fatal() {
        let v = validate(&[
            pool("bad", &["10.0.0.1/16"], 24),
            pool("short", &["10.1.0.0/16"], 8),
            pool("fam", &["fd00::/48"], 64),
        ]);
        assert!(v.entries.is_empty());
        for name in ["bad", "short", "fam"] {
            assert_eq!(
                v.reports[name].invalid.len(),
                1,
                "{name}: {:?}",
                v.reports[name]
            );
        }
    }

    #[test]
    fn overlap_rejects_cidr_of_later_pool_deterministically() {
        let pools = [
            pool("b", &["10.0.0.0/8"], 24),
            pool("a", &["10.0.0.0/16", "10.2.0.0/16", "10.0.0.0/16"], 24),
        ];
        let v = validate(&pools);
        assert_eq!(v.entries.len(), 2);
        assert_eq!(v.reports["b"].overlapping.len(), 1);
        assert_eq!(
            v.reports["a"].overlapping.len(),
            1,
            "a CIDR listed twice overlaps itself"
        );
        let mut rev = pools.clone();
        rev.reverse();
        assert_eq!(
            validate(&rev).entries.len(),
            2,
            "input order does not matter"
        );
    }

    #[test]
    fn default_pool_from_flags() {
        let p = PodCidrPool::default_from_flags(&["10.0.0.0/8".into()], 24, &[], 64);
        assert_eq!(p.name, DEFAULT_POOL);
        assert!(p.ipv6.is_none());
        assert_eq!(p.spec(Family::V4).unwrap().mask_size, 24);
    }
}
