//! UPDATE decode/encode throughput: 1 and 1,000 prefixes per message.
//! Run: `cargo bench -p bgp-proto --bench wire`; numbers go to docs/benchmarks.md.

use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};

use bgp_proto::message::attribute::{AttrValue, Origin};
use bgp_proto::message::{Message, WireOptions, decode_message};
use bgp_proto::{AsPath, Family, MpNextHop, PathAttribute, builder};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};

fn attrs() -> Vec<PathAttribute> {
    vec![
        PathAttribute::new(AttrValue::Origin(Origin::Igp)),
        PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![4_200_000_001]))),
        PathAttribute::new(AttrValue::Med(10)),
        PathAttribute::new(AttrValue::Communities(vec![(65000 << 16) | 100])),
    ]
}

fn ipv4_update(n: u32, opts: &WireOptions) -> Message {
    let prefixes: Vec<Ipv4Net> = (0..n)
        .map(|i| Ipv4Net::new(Ipv4Addr::from(0x0a00_0000 + (i << 8)), 24).unwrap())
        .collect();
    let mut updates =
        builder::announce_ipv4(&attrs(), Ipv4Addr::new(192, 0, 2, 10), &prefixes, opts).unwrap();
    assert_eq!(updates.len(), 1);
    Message::Update(updates.remove(0))
}

fn ipv6_update(n: u128, opts: &WireOptions) -> Message {
    let prefixes: Vec<IpNet> = (0..n)
        .map(|i| {
            IpNet::V6(Ipv6Net::new(Ipv6Addr::from((0xfd00u128 << 112) | (i << 64)), 64).unwrap())
        })
        .collect();
    let nh = MpNextHop::Ipv6 {
        global: "2001:db8::10".parse().unwrap(),
        link_local: None,
    };
    let mut updates =
        builder::announce_mp(&attrs(), Family::IPV6_UNICAST, &nh, &prefixes, opts).unwrap();
    assert_eq!(updates.len(), 1);
    Message::Update(updates.remove(0))
}

fn bench(c: &mut Criterion) {
    // Extended messages (RFC 8654) so 1,000 prefixes fit one UPDATE.
    let opts = WireOptions {
        four_octet_as: true,
        extended_message: true,
    };
    let cases = [
        ("ipv4_1", ipv4_update(1, &opts)),
        ("ipv4_1000", ipv4_update(1000, &opts)),
        ("ipv6_1000", ipv6_update(1000, &opts)),
    ];
    let mut g = c.benchmark_group("decode_update");
    for (name, msg) in &cases {
        let bytes = msg.to_bytes(&opts).unwrap();
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(*name, |b| {
            b.iter(|| decode_message(black_box(&bytes), &opts).unwrap())
        });
    }
    g.finish();
    let mut g = c.benchmark_group("encode_update");
    for (name, msg) in &cases {
        let len = msg.to_bytes(&opts).unwrap().len();
        g.throughput(Throughput::Bytes(len as u64));
        let mut buf = bytes::BytesMut::with_capacity(65536);
        g.bench_function(*name, |b| {
            b.iter(|| {
                buf.clear();
                black_box(msg).encode(&opts, &mut buf).unwrap();
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
