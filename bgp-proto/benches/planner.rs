//! Adj-RIB-Out planning and UPDATE packing for 100,000-prefix diffs.
//! Run: `cargo bench -p bgp-proto --bench planner`; numbers go to docs/benchmarks.md.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use bgp_proto::message::WireOptions;
use bgp_proto::session::rib_out::{self, AdjRibOut, ExportContext, RouteAttributes, RouteSet};
use bgp_proto::{Asn, Family};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};

const N: u32 = 100_000;

fn ctx() -> ExportContext {
    ExportContext {
        local_asn: Asn(4_200_000_001),
        ibgp: false,
        families: vec![Family::IPV4_UNICAST, Family::IPV6_UNICAST],
        extended_next_hop_ipv4: false,
        link_local_next_hop: None,
        wire: WireOptions {
            four_octet_as: true,
            extended_message: false,
        },
    }
}

fn v4_set(n: u32, offset: u32) -> Arc<RouteSet> {
    let attrs = Arc::new(RouteAttributes::with_next_hop(IpAddr::V4(Ipv4Addr::new(
        192, 0, 2, 10,
    ))));
    (offset..offset + n)
        .map(|i| {
            let net = Ipv4Net::new(Ipv4Addr::from(0x0a00_0000 + (i << 6)), 26).unwrap();
            (IpNet::V4(net), Arc::clone(&attrs))
        })
        .collect::<RouteSet>()
        .into()
}

fn v6_set(n: u32) -> Arc<RouteSet> {
    let nh: Ipv6Addr = "2001:db8::10".parse().unwrap();
    let attrs = Arc::new(RouteAttributes::with_next_hop(IpAddr::V6(nh)));
    (0..u128::from(n))
        .map(|i| {
            let a = Ipv6Addr::from((0xfd00_0001u128 << 96) | (i << 64));
            (IpNet::V6(Ipv6Net::new(a, 64).unwrap()), Arc::clone(&attrs))
        })
        .collect::<RouteSet>()
        .into()
}

fn rib_with(set: &Arc<RouteSet>, ctx: &ExportContext) -> AdjRibOut {
    let mut rib = AdjRibOut::default();
    let plan = rib.plan(set, ctx);
    rib.apply(&plan);
    rib
}

fn bench(c: &mut Criterion) {
    let ctx = ctx();
    let full = v4_set(N, 0);
    let empty = Arc::new(RouteSet::new());
    let announced = rib_with(&full, &ctx);
    // Half of the table replaced: 50,000 withdrawals and 50,000 announcements.
    let shifted = v4_set(N, N / 2);
    let v6 = v6_set(N);

    let mut g = c.benchmark_group("plan_100k");
    g.throughput(Throughput::Elements(u64::from(N)));
    g.sample_size(20);
    g.bench_function("announce_v4", |b| {
        let rib = AdjRibOut::default();
        b.iter(|| rib.plan(black_box(&full), &ctx))
    });
    g.bench_function("withdraw_v4", |b| {
        b.iter(|| announced.plan(black_box(&empty), &ctx))
    });
    g.bench_function("replace_half_v4", |b| {
        b.iter(|| announced.plan(black_box(&shifted), &ctx))
    });
    g.bench_function("unchanged_v4", |b| {
        b.iter(|| announced.plan(black_box(&full), &ctx))
    });
    // The speaker rebuilds route sets with new `Arc`s on every source change.
    let fresh = v4_set(N, 0);
    g.bench_function("unchanged_fresh_arcs_v4", |b| {
        b.iter(|| announced.plan(black_box(&fresh), &ctx))
    });
    g.bench_function("apply_announce_v4", |b| {
        let plan = AdjRibOut::default().plan(&full, &ctx);
        b.iter_batched(
            AdjRibOut::default,
            |mut rib| {
                rib.apply(black_box(&plan));
                rib
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();

    // Planning plus packing into UPDATEs and encoding to wire bytes (what one batch costs).
    let mut g = c.benchmark_group("plan_encode_100k");
    g.throughput(Throughput::Elements(u64::from(N)));
    g.sample_size(20);
    let mut buf = bytes::BytesMut::with_capacity(1 << 20);
    for (name, rib, desired) in [
        ("announce_v4", AdjRibOut::default(), &full),
        ("withdraw_v4", announced.clone(), &empty),
        ("announce_v6", AdjRibOut::default(), &v6),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let plan = rib.plan(black_box(desired), &ctx);
                let updates = rib_out::plan_updates(&plan, &ctx).unwrap();
                buf.clear();
                for u in updates {
                    bgp_proto::Message::Update(u)
                        .encode(&ctx.wire, &mut buf)
                        .unwrap();
                }
                buf.len()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
