//! Capabilities advertised in OPEN (RFC 5492 and the capability RFCs).

use bytes::{BufMut, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::iana::capability_code as code;
use crate::reader::Reader;
use crate::types::{Asn, Family};

/// One (AFI, SAFI) entry of the graceful restart capability (RFC 4724 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrFamily {
    pub family: Family,
    /// Flags octet; bit 0x80 is the Forwarding State (F) bit.
    pub flags: u8,
}

impl GrFamily {
    pub const FORWARDING_STATE: u8 = 0x80;

    pub fn forwarding_preserved(&self) -> bool {
        self.flags & Self::FORWARDING_STATE != 0
    }
}

/// Graceful restart capability (RFC 4724 §3, N bit from RFC 8538).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GracefulRestart {
    /// The upper four bits of the first octet: R (0x8), N (0x4), reserved.
    pub restart_flags: u8,
    /// Restart time in seconds (12 bits).
    pub restart_time: u16,
    pub families: Vec<GrFamily>,
}

impl GracefulRestart {
    pub const RESTART_STATE: u8 = 0x8;
    pub const NOTIFICATION: u8 = 0x4;

    pub fn restarting(&self) -> bool {
        self.restart_flags & Self::RESTART_STATE != 0
    }
}

/// One (AFI, SAFI) entry of the long-lived graceful restart capability (RFC 9494 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlgrFamily {
    pub family: Family,
    /// Flags octet; bit 0x80 is the Forwarding State (F) bit, the rest is reserved.
    pub flags: u8,
    /// Long-lived Stale Time in seconds, a 24-bit field.
    pub stale_time: u32,
}

impl LlgrFamily {
    pub const FORWARDING_STATE: u8 = 0x80;
    /// The largest Long-lived Stale Time (24 bits, about 194 days).
    pub const MAX_STALE_TIME: u32 = 0x00ff_ffff;
}

/// An ADD-PATH entry (RFC 7911 §4); decoded for display only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddPathFamily {
    pub family: Family,
    /// 1 = receive, 2 = send, 3 = both.
    pub send_receive: u8,
}

/// An extended next hop entry (RFC 8950 §3): NLRI family and next-hop AFI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtendedNextHopEntry {
    pub nlri_afi: u16,
    /// 16 bits on the wire (RFC 8950), unlike elsewhere.
    pub nlri_safi: u16,
    pub next_hop_afi: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Capability {
    /// RFC 4760 §8. The reserved octet is kept for exact re-encoding.
    Multiprotocol { family: Family, reserved: u8 },
    /// RFC 2918.
    RouteRefresh,
    /// RFC 7313.
    EnhancedRouteRefresh,
    /// RFC 8950.
    ExtendedNextHop(Vec<ExtendedNextHopEntry>),
    /// RFC 8654.
    ExtendedMessage,
    /// RFC 4724.
    GracefulRestart(GracefulRestart),
    /// RFC 9494; sent only next to [`Capability::GracefulRestart`].
    LongLivedGracefulRestart(Vec<LlgrFamily>),
    /// RFC 6793.
    FourOctetAs(Asn),
    /// RFC 7911.
    AddPath(Vec<AddPathFamily>),
    /// draft-walton-bgp-hostname-capability.
    Fqdn { hostname: Vec<u8>, domain: Vec<u8> },
    /// Anything else, kept byte for byte.
    Unknown { code: u8, value: Vec<u8> },
}

impl Capability {
    pub fn code(&self) -> u8 {
        match self {
            Capability::Multiprotocol { .. } => code::MULTIPROTOCOL,
            Capability::RouteRefresh => code::ROUTE_REFRESH,
            Capability::EnhancedRouteRefresh => code::ENHANCED_ROUTE_REFRESH,
            Capability::ExtendedNextHop(_) => code::EXTENDED_NEXT_HOP,
            Capability::ExtendedMessage => code::EXTENDED_MESSAGE,
            Capability::GracefulRestart(_) => code::GRACEFUL_RESTART,
            Capability::LongLivedGracefulRestart(_) => code::LONG_LIVED_GRACEFUL_RESTART,
            Capability::FourOctetAs(_) => code::FOUR_OCTET_AS,
            Capability::AddPath(_) => code::ADD_PATH,
            Capability::Fqdn { .. } => code::FQDN,
            Capability::Unknown { code, .. } => *code,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Capability::Multiprotocol { .. } => "multiprotocol",
            Capability::RouteRefresh => "route-refresh",
            Capability::EnhancedRouteRefresh => "enhanced-route-refresh",
            Capability::ExtendedNextHop(_) => "extended-next-hop",
            Capability::ExtendedMessage => "extended-message",
            Capability::GracefulRestart(_) => "graceful-restart",
            Capability::LongLivedGracefulRestart(_) => "long-lived-graceful-restart",
            Capability::FourOctetAs(_) => "four-octet-as",
            Capability::AddPath(_) => "add-path",
            Capability::Fqdn { .. } => "fqdn",
            Capability::Unknown { code: 128, .. } => "route-refresh-cisco",
            Capability::Unknown { code: 71, .. } => "long-lived-graceful-restart",
            Capability::Unknown { code: 9, .. } => "bgp-role",
            Capability::Unknown { .. } => "unknown",
        }
    }

    pub fn multiprotocol(family: Family) -> Self {
        Capability::Multiprotocol {
            family,
            reserved: 0,
        }
    }

    /// Decodes one capability TLV (code, length, value).
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let malformed = |code, reason| DecodeError::MalformedCapability { code, reason };
        let cap_code = r.u8().map_err(|_| DecodeError::MalformedOpen {
            reason: "truncated capability",
        })?;
        let len = r
            .u8()
            .map_err(|_| malformed(cap_code, "truncated length"))?;
        let value = r
            .take(usize::from(len))
            .map_err(|_| malformed(cap_code, "length exceeds the parameter"))?;
        let mut v = Reader::new(value);
        let bad_len = || malformed(cap_code, "wrong length");
        let cap = match cap_code {
            code::MULTIPROTOCOL => {
                if value.len() != 4 {
                    return Err(bad_len());
                }
                let afi = v.u16().map_err(|_| bad_len())?;
                let reserved = v.u8().map_err(|_| bad_len())?;
                let safi = v.u8().map_err(|_| bad_len())?;
                Capability::Multiprotocol {
                    family: Family::new(afi, safi),
                    reserved,
                }
            }
            code::ROUTE_REFRESH | code::ENHANCED_ROUTE_REFRESH | code::EXTENDED_MESSAGE => {
                if !value.is_empty() {
                    return Err(bad_len());
                }
                match cap_code {
                    code::ROUTE_REFRESH => Capability::RouteRefresh,
                    code::ENHANCED_ROUTE_REFRESH => Capability::EnhancedRouteRefresh,
                    _ => Capability::ExtendedMessage,
                }
            }
            code::EXTENDED_NEXT_HOP => {
                if value.len() % 6 != 0 {
                    return Err(bad_len());
                }
                let mut entries = Vec::with_capacity(value.len() / 6);
                while !v.is_empty() {
                    entries.push(ExtendedNextHopEntry {
                        nlri_afi: v.u16().map_err(|_| bad_len())?,
                        nlri_safi: v.u16().map_err(|_| bad_len())?,
                        next_hop_afi: v.u16().map_err(|_| bad_len())?,
                    });
                }
                Capability::ExtendedNextHop(entries)
            }
            code::GRACEFUL_RESTART => {
                if value.len() < 2 || (value.len() - 2) % 4 != 0 {
                    return Err(bad_len());
                }
                let head = v.u16().map_err(|_| bad_len())?;
                let mut families = Vec::with_capacity((value.len() - 2) / 4);
                while !v.is_empty() {
                    let afi = v.u16().map_err(|_| bad_len())?;
                    let safi = v.u8().map_err(|_| bad_len())?;
                    let flags = v.u8().map_err(|_| bad_len())?;
                    families.push(GrFamily {
                        family: Family::new(afi, safi),
                        flags,
                    });
                }
                Capability::GracefulRestart(GracefulRestart {
                    restart_flags: u8::try_from(head >> 12).unwrap_or_default(),
                    restart_time: head & 0x0fff,
                    families,
                })
            }
            // We only ever show the peer's LLGR: a malformed one is kept as unknown rather
            // than failing the OPEN (RFC 5492 §3 lets a speaker ignore a capability).
            code::LONG_LIVED_GRACEFUL_RESTART if value.len() % 7 == 0 => {
                let mut families = Vec::with_capacity(value.len() / 7);
                while !v.is_empty() {
                    let afi = v.u16().map_err(|_| bad_len())?;
                    let safi = v.u8().map_err(|_| bad_len())?;
                    let flags = v.u8().map_err(|_| bad_len())?;
                    let time = v.take(3).map_err(|_| bad_len())?;
                    families.push(LlgrFamily {
                        family: Family::new(afi, safi),
                        flags,
                        stale_time: time.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b)),
                    });
                }
                Capability::LongLivedGracefulRestart(families)
            }
            code::FOUR_OCTET_AS => {
                if value.len() != 4 {
                    return Err(bad_len());
                }
                Capability::FourOctetAs(Asn(v.u32().map_err(|_| bad_len())?))
            }
            code::ADD_PATH => {
                if value.len() % 4 != 0 {
                    return Err(bad_len());
                }
                let mut entries = Vec::with_capacity(value.len() / 4);
                while !v.is_empty() {
                    let afi = v.u16().map_err(|_| bad_len())?;
                    let safi = v.u8().map_err(|_| bad_len())?;
                    let send_receive = v.u8().map_err(|_| bad_len())?;
                    entries.push(AddPathFamily {
                        family: Family::new(afi, safi),
                        send_receive,
                    });
                }
                Capability::AddPath(entries)
            }
            code::FQDN => {
                let hlen = v.u8().map_err(|_| bad_len())?;
                let hostname = v.take(usize::from(hlen)).map_err(|_| bad_len())?.to_vec();
                let dlen = v.u8().map_err(|_| bad_len())?;
                let domain = v.take(usize::from(dlen)).map_err(|_| bad_len())?.to_vec();
                if !v.is_empty() {
                    return Err(bad_len());
                }
                Capability::Fqdn { hostname, domain }
            }
            other => Capability::Unknown {
                code: other,
                value: value.to_vec(),
            },
        };
        Ok(cap)
    }

    pub(crate) fn encode(&self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        let mut value = BytesMut::new();
        match self {
            Capability::Multiprotocol { family, reserved } => {
                value.put_u16(family.afi.0);
                value.put_u8(*reserved);
                value.put_u8(family.safi.0);
            }
            Capability::RouteRefresh
            | Capability::EnhancedRouteRefresh
            | Capability::ExtendedMessage => {}
            Capability::ExtendedNextHop(entries) => {
                for e in entries {
                    value.put_u16(e.nlri_afi);
                    value.put_u16(e.nlri_safi);
                    value.put_u16(e.next_hop_afi);
                }
            }
            Capability::GracefulRestart(gr) => {
                if gr.restart_time > 0x0fff || gr.restart_flags > 0xf {
                    return Err(EncodeError::ValueTooLong {
                        what: "graceful restart time (12 bits)",
                        length: usize::from(gr.restart_time),
                        max: 0x0fff,
                    });
                }
                value.put_u16((u16::from(gr.restart_flags) << 12) | gr.restart_time);
                for f in &gr.families {
                    value.put_u16(f.family.afi.0);
                    value.put_u8(f.family.safi.0);
                    value.put_u8(f.flags);
                }
            }
            Capability::LongLivedGracefulRestart(families) => {
                for f in families {
                    if f.stale_time > LlgrFamily::MAX_STALE_TIME {
                        return Err(EncodeError::ValueTooLong {
                            what: "long-lived stale time (24 bits)",
                            length: usize::try_from(f.stale_time).unwrap_or(usize::MAX),
                            max: 0x00ff_ffff,
                        });
                    }
                    value.put_u16(f.family.afi.0);
                    value.put_u8(f.family.safi.0);
                    value.put_u8(f.flags);
                    value.put_slice(&f.stale_time.to_be_bytes()[1..]);
                }
            }
            Capability::FourOctetAs(asn) => value.put_u32(asn.0),
            Capability::AddPath(entries) => {
                for e in entries {
                    value.put_u16(e.family.afi.0);
                    value.put_u8(e.family.safi.0);
                    value.put_u8(e.send_receive);
                }
            }
            Capability::Fqdn { hostname, domain } => {
                for part in [hostname, domain] {
                    let len = u8::try_from(part.len()).map_err(|_| EncodeError::ValueTooLong {
                        what: "FQDN capability name",
                        length: part.len(),
                        max: 255,
                    })?;
                    value.put_u8(len);
                    value.put_slice(part);
                }
            }
            Capability::Unknown { value: v, .. } => value.put_slice(v),
        }
        let len = u8::try_from(value.len()).map_err(|_| EncodeError::ValueTooLong {
            what: "capability value",
            length: value.len(),
            max: 255,
        })?;
        dst.put_u8(self.code());
        dst.put_u8(len);
        dst.put_slice(&value);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(bytes: &[u8]) -> Result<Capability, DecodeError> {
        Capability::decode(&mut Reader::new(bytes))
    }

    fn encode(c: &Capability) -> Result<Vec<u8>, EncodeError> {
        let mut b = BytesMut::new();
        c.encode(&mut b).map(|()| b.to_vec())
    }

    /// Code 71, two 7-octet tuples: AFI, SAFI, flags (F = 0x80), 24-bit stale time.
    const LLGR_BOTH_FAMILIES: [u8; 16] = [
        71, 14, 0, 1, 1, 0x80, 0x00, 0x0e, 0x10, 0, 2, 1, 0x00, 0xff, 0xff, 0xff,
    ];

    #[test]
    fn llgr_capability_tuples_are_afi_safi_flags_and_24_bit_stale_time_rfc9494_3() {
        let cap = decode(&LLGR_BOTH_FAMILIES).unwrap();
        let want = Capability::LongLivedGracefulRestart(vec![
            LlgrFamily {
                family: Family::IPV4_UNICAST,
                flags: LlgrFamily::FORWARDING_STATE,
                stale_time: 3600,
            },
            LlgrFamily {
                family: Family::IPV6_UNICAST,
                flags: 0,
                stale_time: LlgrFamily::MAX_STALE_TIME,
            },
        ]);
        assert_eq!(cap, want);
        assert_eq!(cap.name(), "long-lived-graceful-restart");
        assert_eq!(encode(&cap).unwrap(), LLGR_BOTH_FAMILIES);
        // No tuple at all is legal too (a helper-only speaker).
        let empty = Capability::LongLivedGracefulRestart(Vec::new());
        assert_eq!(decode(&encode(&empty).unwrap()).unwrap(), empty);
    }

    #[test]
    fn llgr_stale_time_over_24_bits_is_an_encode_error_rfc9494_3() {
        let cap = Capability::LongLivedGracefulRestart(vec![LlgrFamily {
            family: Family::IPV4_UNICAST,
            flags: 0,
            stale_time: LlgrFamily::MAX_STALE_TIME + 1,
        }]);
        assert!(matches!(
            encode(&cap),
            Err(EncodeError::ValueTooLong {
                max: 0x00ff_ffff,
                ..
            })
        ));
    }

    #[test]
    fn malformed_llgr_capability_is_kept_as_unknown_without_failing_rfc5492_3() {
        // Every truncation of a tuple: never a panic, never an error, the bytes kept.
        for len in 1..7 {
            let mut bytes = vec![71, len];
            bytes.extend_from_slice(&LLGR_BOTH_FAMILIES[2..2 + usize::from(len)]);
            let cap = decode(&bytes).unwrap();
            assert!(
                matches!(&cap, Capability::Unknown { code: 71, value } if value.len() == usize::from(len)),
                "{cap:?}"
            );
            assert_eq!(encode(&cap).unwrap(), bytes);
        }
        // A length beyond the buffer is still a framing error of the parameter.
        assert!(decode(&[71, 7, 0, 1, 1]).is_err());
    }
}
