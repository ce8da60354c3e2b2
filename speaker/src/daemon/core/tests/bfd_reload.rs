//! Reloading `bfd` of a running peer: applied beside the BGP session; only strict mode (in the
//! OPEN) resets it.

use super::*;

const BFD: &str = "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000, bfd: {minTx: 100}}\n";

fn set_bfd(out: &[Effect]) -> Vec<&PeerConfig> {
    out.iter()
        .filter_map(|e| match e {
            Effect::SetBfd(c) => Some(&**c),
            _ => None,
        })
        .collect()
}

/// RFC 5880 §6.8.3: timers change with a Poll Sequence while Up, so the BGP session stays.
#[test]
fn bfd_timer_reload_keeps_the_bgp_session_rfc5880_6_8_3() {
    let (mut core, _) = file_core(config("", BFD));
    let changed = BFD.replace("{minTx: 100}", "{minTx: 300, multiplier: 5}");
    let out = core.handle(reload(config("", &changed)));
    assert!(resets(&out).is_empty(), "{out:?}");
    let set = set_bfd(&out);
    assert_eq!(set.len(), 1);
    let bfd = set[0].bfd.clone().unwrap();
    assert_eq!(
        (bfd.min_tx, bfd.multiplier),
        (Duration::from_millis(300), 5)
    );
}

#[test]
fn bfd_on_or_off_by_reload_keeps_the_bgp_session() {
    let (mut core, _) = file_core(config("", PEERS));
    let on = PEERS.replace(
        "asn: 65000}\n  - {name: tor2",
        "asn: 65000, bfd: {}}\n  - {name: tor2",
    );
    let out = core.handle(reload(config("", &on)));
    assert!(resets(&out).is_empty());
    assert_eq!(set_bfd(&out).len(), 1);
    assert!(set_bfd(&out)[0].bfd.is_some());
    let out = core.handle(reload(config("", PEERS)));
    assert!(resets(&out).is_empty());
    assert!(set_bfd(&out)[0].bfd.is_none());
}

/// Strict mode is capability 74 in the OPEN: turning it on (or BFD off under it) resets.
#[test]
fn bfd_strict_change_resets_the_session_draft_bfd_strict_3() {
    let (mut core, _) = file_core(config("", BFD));
    let strict = BFD.replace("{minTx: 100}", "{minTx: 100, strict: true}");
    let out = core.handle(reload(config("", &strict)));
    assert_eq!(resets(&out).len(), 1, "{out:?}");
    let off = BFD.replace(", bfd: {minTx: 100}", "");
    let out = core.handle(reload(config("", &off)));
    assert_eq!(resets(&out).len(), 1, "{out:?}");
}
