//! Allocator benchmarks: fill a /8 with /24s, restore 65,536 records in random order,
//! 100,000 /64s from an IPv6 /32, and a full reconciler restore with zero writes.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ipam_watch::allocator::*;

const N: u32 = 65_536;

fn v4_slash8() -> Vec<PodCidrPool> {
    vec![PodCidrPool::default_from_flags(
        &["10.0.0.0/8".into()],
        24,
        &[],
        64,
    )]
}

fn v4_config() -> AllocatorConfig {
    AllocatorConfig {
        families: vec![Family::V4],
        quarantine_secs: DEFAULT_QUARANTINE_SECS,
    }
}

/// 65,536 existing records (uid, name, "10.a.b.0/24") in a random but fixed order.
fn shuffled_records() -> Vec<(NodeUid, String, String)> {
    let mut v: Vec<(NodeUid, String, String)> = (0..N)
        .map(|i| {
            (
                NodeUid(format!("uid-{i}")),
                format!("node-{i}"),
                format!("10.{}.{}.0/24", i >> 8, i & 0xff),
            )
        })
        .collect();
    // A fixed seed: the same order every run.
    fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15).shuffle(&mut v);
    v
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("allocator");
    g.sample_size(10);
    let none = BTreeMap::new();

    let uids: Vec<NodeUid> = (0..N).map(|i| NodeUid(format!("uid-{i}"))).collect();
    g.bench_function("alloc_all_65536_slash24_of_slash8", |b| {
        b.iter_batched(
            || {
                let mut a = Allocator::new(v4_config(), v4_slash8());
                a.mark_restored();
                a
            },
            |mut a| {
                for u in &uids {
                    black_box(a.allocate(u, "n", &none, &[Family::V4]).ok());
                }
                assert!(a.allocate(&"x".into(), "x", &none, &[Family::V4]).is_err());
                a
            },
            BatchSize::PerIteration,
        )
    });

    let records = shuffled_records();
    g.bench_function("restore_65536_random_order_with_parsing", |b| {
        b.iter_batched(
            || Allocator::new(v4_config(), v4_slash8()),
            |mut a| {
                for (uid, name, cidr) in &records {
                    if let Ok(c) = PodCidr::parse(cidr) {
                        black_box(a.occupy(uid, name, c, HeldState::Confirmed));
                    }
                }
                a.mark_restored();
                a
            },
            BatchSize::PerIteration,
        )
    });

    let v6_pool = vec![PodCidrPool::default_from_flags(
        &[],
        24,
        &["2001:db8::/32".into()],
        64,
    )];
    let v6_config = AllocatorConfig {
        families: vec![Family::V6],
        quarantine_secs: DEFAULT_QUARANTINE_SECS,
    };
    let v6_uids: Vec<NodeUid> = (0..100_000).map(|i| NodeUid(format!("uid-{i}"))).collect();
    g.bench_function("ipv6_slash32_alloc_100k_slash64", |b| {
        b.iter_batched(
            || {
                let mut a = Allocator::new(v6_config.clone(), v6_pool.clone());
                a.mark_restored();
                a
            },
            |mut a| {
                for u in &v6_uids {
                    black_box(a.allocate(u, "n", &none, &[Family::V6]).ok());
                }
                a
            },
            BatchSize::PerIteration,
        )
    });

    // Restart of a fully allocated cluster: restore every record, plan, zero writes.
    let mut nodes = Vec::new();
    let mut recs = Vec::new();
    for (uid, name, cidr) in &records {
        nodes.push(ObservedNode {
            name: name.clone(),
            uid: uid.clone(),
            labels: BTreeMap::new(),
            deleting: false,
        });
        let cond = NodeOutcome {
            reason: AllocatedReason::Allocated,
            message: cidr.clone(),
        }
        .condition();
        recs.push(ObservedRecord {
            name: name.clone(),
            owner_uid: uid.clone(),
            pod_cidrs: vec![cidr.clone()],
            resource_version: "1".into(),
            allocated: Some(cond),
        });
    }
    let obs = Observed::new(nodes, recs);
    g.bench_function("reconcile_restart_65536_zero_writes", |b| {
        b.iter_batched(
            || Reconciler::new(Allocator::new(v4_config(), v4_slash8())),
            |mut r| {
                let actions = r.plan(&obs, Timestamp(0));
                assert!(actions.is_empty());
                r
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(allocator, benches);
criterion_main!(allocator);
