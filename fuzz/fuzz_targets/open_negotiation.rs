//! Any bytes as the peer's OPEN, taken by a session in OpenSent (issue 31 item 9: `negotiate`
//! was only property-tested). The first byte picks our side's settings (families, graceful
//! restart, `asn: auto` ranges, passive). Oracle: no panic; a session that accepts the OPEN
//! negotiated what RFC 4271 §4.2 and RFC 5492 allow (hold time 0 or at least 3 and never above
//! ours, keepalive a third of it at most, only families both offered, the peer AS inside the
//! configured ones); one that refuses it sent a NOTIFICATION and went Idle.
#![no_main]

use std::net::Ipv4Addr;
use std::time::Duration;

use bgp_proto::message::{Message, WireOptions, decode_message};
use bgp_proto::session::{GracefulRestartConfig, Input, Output, Session, SessionConfig, State};
use bgp_proto::{Asn, Family, RouterId};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, frame)) = data.split_first() else {
        return;
    };
    let opts = WireOptions {
        four_octet_as: true,
        extended_message: false,
    };
    let Ok(decoded) = decode_message(frame, &opts) else {
        return;
    };
    if !matches!(decoded.message, Message::Open(_)) {
        return;
    }
    let Some(rid) = RouterId::new(Ipv4Addr::new(192, 0, 2, 10)) else {
        return;
    };
    let mut cfg = SessionConfig::new(Asn(4_200_000_001), rid, Asn(65000));
    cfg.families = if flags & 1 != 0 {
        vec![Family::IPV4_UNICAST, Family::IPV6_UNICAST]
    } else {
        vec![Family::IPV4_UNICAST]
    };
    if flags & 2 != 0 {
        cfg.graceful_restart = Some(GracefulRestartConfig {
            restart_time: 120,
            preserve_forwarding: flags & 4 != 0,
            long_lived_stale_time: 0,
        });
    }
    if flags & 8 != 0 {
        cfg.peer_asn_ranges = Some(vec![64512..=65534, 4_200_000_000..=4_294_967_294]);
    }
    cfg.passive = flags & 16 != 0;
    let ours = cfg.hold_time;
    let wanted = cfg.families.clone();
    let ranges = cfg.peer_asn_ranges.clone();
    let mut s = Session::new(cfg);
    s.handle(Input::Start);
    s.handle(Input::TcpConnected);
    if s.state() != State::OpenSent {
        return;
    }
    let out = s.handle(Input::Received(decoded));
    match s.state() {
        State::OpenConfirm => {
            let n = s.negotiated().expect("OpenConfirm has negotiated");
            let hold = n.hold_time.seconds();
            assert!(hold == 0 || (3..=ours.seconds()).contains(&hold), "hold {hold}");
            if hold > 0 {
                assert!(n.keepalive <= Duration::from_secs(u64::from(hold) / 3).max(Duration::from_secs(1)));
            }
            assert!(n.families.iter().all(|f| wanted.contains(f)), "{:?}", n.families);
            match &ranges {
                Some(r) => assert!(r.iter().any(|r| r.contains(&n.peer_asn.0)), "{:?}", n.peer_asn),
                None => assert_eq!(n.peer_asn, Asn(65000)),
            }
        }
        _ => {
            let notified = out
                .iter()
                .any(|o| matches!(o, Output::Send(Message::Notification(_))));
            assert!(notified, "a refused OPEN gets a NOTIFICATION: {out:?}");
        }
    }
});
