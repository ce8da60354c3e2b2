//! RFC 7606 errors in received UPDATEs: a stable name per error for counting them (the
//! driver in `bgp-io` summarises them per interval), and the RFC 8950 next-hop check.

use crate::error::DecodeError;
use crate::message::WireOptions;
use crate::message::attribute::{AttrValue, PathAttribute};
use crate::message::update::{MpNextHop, Update};
use crate::types::Family;

// Kept here, not in `error.rs`: counting is a session concern.
impl DecodeError {
    /// A short stable name per variant, for counting errors without their (peer-chosen)
    /// details: a fixed set, so it can key metrics and status maps.
    pub fn kind(&self) -> &'static str {
        use DecodeError as E;
        match self {
            E::ConnectionNotSynchronized => "connection-not-synchronized",
            E::BadMessageLength { .. } => "bad-message-length",
            E::BadMessageType { .. } => "bad-message-type",
            E::UnsupportedVersion { .. } => "unsupported-version",
            E::BadBgpIdentifier { .. } => "bad-bgp-identifier",
            E::UnacceptableHoldTime { .. } => "unacceptable-hold-time",
            E::UnsupportedOptionalParameter { .. } => "unsupported-optional-parameter",
            E::MalformedOpen { .. } => "malformed-open",
            E::MalformedCapability { .. } => "malformed-capability",
            E::PeerAsZero { .. } => "peer-as-zero",
            E::MalformedAttributeList { .. } => "malformed-attribute-list",
            E::AttributeOverrun { .. } => "attribute-overrun",
            E::UnrecognizedWellKnownAttribute { .. } => "unrecognized-well-known-attribute",
            E::MissingWellKnownAttribute { .. } => "missing-well-known-attribute",
            E::AttributeFlags { .. } => "attribute-flags",
            E::AttributeLength { .. } => "attribute-length",
            E::DuplicateAttribute { .. } => "duplicate-attribute",
            E::InvalidOrigin { .. } => "invalid-origin",
            E::MalformedAsPath { .. } => "malformed-as-path",
            E::MalformedAs4Path { .. } => "malformed-as4-path",
            E::AggregatorAsZero { .. } => "aggregator-as-zero",
            E::As4AttributeFromNewSpeaker { .. } => "as4-attribute-from-new-speaker",
            E::InvalidNetworkField { .. } => "invalid-network-field",
            E::MalformedMpAttribute { .. } => "malformed-mp-attribute",
            E::RouteRefreshLength { .. } => "route-refresh-length",
        }
    }
}

/// An IPv6 next hop for IPv4 NLRI is only valid when RFC 8950 was negotiated (RFC 8950 §3).
/// Otherwise the next hop length is not the one expected for the family, which RFC 7606
/// §7.11 makes an AFI/SAFI disable or session reset.
pub(crate) fn unnegotiated_next_hop(
    update: &Update,
    extended_next_hop_ipv4: bool,
    wire: &WireOptions,
) -> Option<DecodeError> {
    let attr = update.attributes.iter().find(|a| {
        matches!(&a.value, AttrValue::MpReach(m)
            if m.family == Family::IPV4_UNICAST && matches!(m.next_hop, MpNextHop::Ipv6 { .. }))
    })?;
    if extended_next_hop_ipv4 {
        return None;
    }
    Some(DecodeError::MalformedMpAttribute {
        family: Family::IPV4_UNICAST,
        reason: "IPv6 next hop for IPv4 NLRI, but extended next hop (RFC 8950) was not negotiated",
        attribute: raw_attribute(attr, wire),
    })
}

fn raw_attribute(attr: &PathAttribute, wire: &WireOptions) -> Vec<u8> {
    let mut buf = bytes::BytesMut::new();
    match attr.encode(wire, &mut buf) {
        Ok(()) => buf.to_vec(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_via_ipv6() -> Update {
        use crate::message::update::{MpNlri, MpReach};
        Update {
            attributes: vec![PathAttribute::new(AttrValue::MpReach(MpReach {
                family: Family::IPV4_UNICAST,
                next_hop: MpNextHop::Ipv6 {
                    global: "2001:db8::1".parse().unwrap(),
                    link_local: None,
                },
                nlri: MpNlri::Ipv4(vec!["198.18.0.0/24".parse().unwrap()]),
            }))],
            ..Update::default()
        }
    }

    #[test]
    fn ipv6_next_hop_for_ipv4_accepted_only_when_negotiated_rfc8950_3() {
        let wire = WireOptions::default();
        assert_eq!(unnegotiated_next_hop(&ipv4_via_ipv6(), true, &wire), None);
        let err = unnegotiated_next_hop(&ipv4_via_ipv6(), false, &wire).unwrap();
        assert_eq!(err.kind(), "malformed-mp-attribute");
        // The NOTIFICATION data is the attribute itself: flags 0x90, type 14.
        let DecodeError::MalformedMpAttribute { attribute, .. } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(attribute.get(..2), Some(&[0x90, 14][..]));
        assert!(err.handling().action.is_fatal());
    }

    #[test]
    fn ipv4_next_hop_or_ipv6_nlri_is_not_an_extended_next_hop_rfc8950_3() {
        let wire = WireOptions::default();
        let v6 = Update::end_of_rib(Family::IPV6_UNICAST);
        assert_eq!(unnegotiated_next_hop(&v6, false, &wire), None);
        assert_eq!(
            unnegotiated_next_hop(&Update::default(), false, &wire),
            None
        );
    }
}
