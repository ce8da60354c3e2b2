//! ROUTE-REFRESH (RFC 2918) with the enhanced route refresh subtypes (RFC 7313).

use bytes::{BufMut, BytesMut};

use crate::error::DecodeError;
use crate::reader::Reader;
use crate::types::Family;

use super::HEADER_LEN;

/// RFC 7313 §3 message subtype; values other than 0–2 are kept and ignored by the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteRefreshSubtype {
    Normal,
    BeginningOfRouteRefresh,
    EndOfRouteRefresh,
    Reserved(u8),
}

impl RouteRefreshSubtype {
    pub fn as_u8(self) -> u8 {
        match self {
            RouteRefreshSubtype::Normal => 0,
            RouteRefreshSubtype::BeginningOfRouteRefresh => 1,
            RouteRefreshSubtype::EndOfRouteRefresh => 2,
            RouteRefreshSubtype::Reserved(v) => v,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RouteRefreshSubtype::Normal => "normal",
            RouteRefreshSubtype::BeginningOfRouteRefresh => "BoRR",
            RouteRefreshSubtype::EndOfRouteRefresh => "EoRR",
            RouteRefreshSubtype::Reserved(_) => "reserved",
        }
    }
}

impl From<u8> for RouteRefreshSubtype {
    fn from(v: u8) -> Self {
        match v {
            0 => RouteRefreshSubtype::Normal,
            1 => RouteRefreshSubtype::BeginningOfRouteRefresh,
            2 => RouteRefreshSubtype::EndOfRouteRefresh,
            other => RouteRefreshSubtype::Reserved(other),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteRefresh {
    pub family: Family,
    pub subtype: RouteRefreshSubtype,
}

impl RouteRefresh {
    pub fn new(family: Family) -> Self {
        RouteRefresh {
            family,
            subtype: RouteRefreshSubtype::Normal,
        }
    }

    /// Takes the whole frame: a bad length returns the complete message (RFC 7313 §5).
    pub(crate) fn decode_body(frame: &[u8]) -> Result<Self, DecodeError> {
        let bad_len = || DecodeError::RouteRefreshLength {
            length: u16::try_from(frame.len()).unwrap_or(u16::MAX),
            message: frame.to_vec(),
        };
        if frame.len() != HEADER_LEN + 4 {
            return Err(bad_len());
        }
        let mut r = Reader::new(frame.get(HEADER_LEN..).unwrap_or_default());
        let afi = r.u16().map_err(|_| bad_len())?;
        let subtype = r.u8().map_err(|_| bad_len())?;
        let safi = r.u8().map_err(|_| bad_len())?;
        Ok(RouteRefresh {
            family: Family::new(afi, safi),
            subtype: subtype.into(),
        })
    }

    pub(crate) fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u16(self.family.afi.0);
        dst.put_u8(self.subtype.as_u8());
        dst.put_u8(self.family.safi.0);
    }
}
