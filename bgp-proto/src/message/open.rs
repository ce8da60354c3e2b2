//! OPEN (RFC 4271 §4.2) with capabilities (RFC 5492) and extended parameters (RFC 9072).

use std::net::Ipv4Addr;

use bytes::{BufMut, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::iana::open_param;
use crate::reader::Reader;
use crate::types::{Asn, HoldTime, RouterId};

use super::capability::Capability;

pub const BGP_VERSION: u8 = 4;

/// An OPEN message. Capabilities are kept grouped by optional parameter so that a message
/// re-encodes byte for byte (some speakers send one capability per parameter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Open {
    pub version: u8,
    /// The 2-octet "My Autonomous System" field (AS_TRANS for a 4-octet AS).
    pub my_as: u16,
    pub hold_time: HoldTime,
    pub router_id: RouterId,
    /// One inner list per Capabilities optional parameter.
    pub params: Vec<Vec<Capability>>,
    /// RFC 9072 extended optional parameters length encoding.
    pub extended_params: bool,
}

impl Open {
    /// An OPEN with all capabilities in one optional parameter; the 4-octet AS capability is
    /// added here so the 2-octet field and the capability never disagree.
    pub fn new(
        asn: Asn,
        hold_time: HoldTime,
        router_id: RouterId,
        mut caps: Vec<Capability>,
    ) -> Self {
        caps.retain(|c| !matches!(c, Capability::FourOctetAs(_)));
        caps.push(Capability::FourOctetAs(asn));
        Open {
            version: BGP_VERSION,
            my_as: asn.as_two_octet(),
            hold_time,
            router_id,
            params: vec![caps],
            extended_params: false,
        }
    }

    pub fn capabilities(&self) -> impl Iterator<Item = &Capability> {
        self.params.iter().flatten()
    }

    /// The speaker's AS: from the 4-octet AS capability when present (RFC 6793 §4.1).
    pub fn asn(&self) -> Asn {
        self.capabilities()
            .find_map(|c| match c {
                Capability::FourOctetAs(asn) => Some(*asn),
                _ => None,
            })
            .unwrap_or(Asn(u32::from(self.my_as)))
    }

    pub(crate) fn decode_body(body: &[u8]) -> Result<Self, DecodeError> {
        let short = |_| DecodeError::MalformedOpen {
            reason: "truncated",
        };
        let mut r = Reader::new(body);
        let version = r.u8().map_err(short)?;
        if version != BGP_VERSION {
            return Err(DecodeError::UnsupportedVersion { version });
        }
        let my_as = r.u16().map_err(short)?;
        let hold = r.u16().map_err(short)?;
        let hold_time =
            HoldTime::new(hold).ok_or(DecodeError::UnacceptableHoldTime { hold_time: hold })?;
        let id = r.ipv4().map_err(short)?;
        let router_id = RouterId::new(id).ok_or(DecodeError::BadBgpIdentifier { id })?;
        let opt_len = r.u8().map_err(short)?;
        // RFC 9072 §2: a non-extended first parameter type of 255 marks the extended form.
        let extended_params = opt_len == 255 && body.get(10) == Some(&open_param::EXTENDED_LENGTH);
        let params_bytes = if extended_params {
            r.u8().map_err(short)?;
            let len = r.u16().map_err(short)?;
            r.take(usize::from(len))
                .map_err(|_| DecodeError::MalformedOpen {
                    reason: "optional parameters length exceeds the message",
                })?
        } else {
            r.take(usize::from(opt_len))
                .map_err(|_| DecodeError::MalformedOpen {
                    reason: "optional parameters length exceeds the message",
                })?
        };
        if !r.is_empty() {
            return Err(DecodeError::MalformedOpen {
                reason: "bytes after the optional parameters",
            });
        }
        let mut p = Reader::new(params_bytes);
        let mut params = Vec::new();
        while !p.is_empty() {
            let param_type = p.u8().map_err(short)?;
            let len = if extended_params {
                usize::from(p.u16().map_err(short)?)
            } else {
                usize::from(p.u8().map_err(short)?)
            };
            let value = p.take(len).map_err(|_| DecodeError::MalformedOpen {
                reason: "optional parameter length exceeds the parameters",
            })?;
            if param_type != open_param::CAPABILITIES {
                return Err(DecodeError::UnsupportedOptionalParameter { param_type });
            }
            let mut c = Reader::new(value);
            let mut caps = Vec::new();
            while !c.is_empty() {
                caps.push(Capability::decode(&mut c)?);
            }
            params.push(caps);
        }
        let four_octet_zero = params
            .iter()
            .flatten()
            .any(|c| matches!(c, Capability::FourOctetAs(Asn(0))));
        if my_as == 0 || four_octet_zero {
            return Err(DecodeError::PeerAsZero { my_as });
        }
        Ok(Open {
            version,
            my_as,
            hold_time,
            router_id,
            params,
            extended_params,
        })
    }

    pub(crate) fn encode_body(&self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        let mut params = BytesMut::new();
        for caps in &self.params {
            let mut value = BytesMut::new();
            for cap in caps {
                cap.encode(&mut value)?;
            }
            params.put_u8(open_param::CAPABILITIES);
            if self.extended_params {
                params.put_u16(checked_len(
                    value.len(),
                    u16::MAX.into(),
                    "optional parameter",
                )?);
            } else {
                params.put_u8(checked_len(value.len(), 255, "optional parameter")?);
            }
            params.put_slice(&value);
        }
        dst.put_u8(self.version);
        dst.put_u16(self.my_as);
        dst.put_u16(self.hold_time.seconds());
        dst.put_slice(&Ipv4Addr::octets(&self.router_id.addr()));
        if self.extended_params {
            dst.put_u8(255);
            dst.put_u8(open_param::EXTENDED_LENGTH);
            dst.put_u16(checked_len(
                params.len(),
                u16::MAX.into(),
                "optional parameters",
            )?);
        } else {
            dst.put_u8(checked_len(params.len(), 255, "optional parameters")?);
        }
        dst.put_slice(&params);
        Ok(())
    }
}

fn checked_len<T: TryFrom<usize>>(
    len: usize,
    max: usize,
    what: &'static str,
) -> Result<T, EncodeError> {
    T::try_from(len).map_err(|_| EncodeError::ValueTooLong {
        what,
        length: len,
        max,
    })
}
