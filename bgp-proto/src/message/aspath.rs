//! AS_PATH and AS4_PATH (RFC 4271 §4.3, RFC 5065, RFC 6793).

use bytes::{BufMut, BytesMut};

use crate::error::EncodeError;
use crate::iana::as_segment;
use crate::reader::Reader;
use crate::types::AS_TRANS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsSegmentType {
    Set,
    Sequence,
    ConfedSequence,
    ConfedSet,
}

impl AsSegmentType {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            as_segment::AS_SET => AsSegmentType::Set,
            as_segment::AS_SEQUENCE => AsSegmentType::Sequence,
            as_segment::AS_CONFED_SEQUENCE => AsSegmentType::ConfedSequence,
            as_segment::AS_CONFED_SET => AsSegmentType::ConfedSet,
            _ => return None,
        })
    }

    fn as_u8(self) -> u8 {
        match self {
            AsSegmentType::Set => as_segment::AS_SET,
            AsSegmentType::Sequence => as_segment::AS_SEQUENCE,
            AsSegmentType::ConfedSequence => as_segment::AS_CONFED_SEQUENCE,
            AsSegmentType::ConfedSet => as_segment::AS_CONFED_SET,
        }
    }

    fn is_confed(self) -> bool {
        matches!(
            self,
            AsSegmentType::ConfedSequence | AsSegmentType::ConfedSet
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsSegment {
    pub kind: AsSegmentType,
    pub asns: Vec<u32>,
}

/// An AS path. ASNs are always held as 4-octet values; the wire width is an encode option.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AsPath {
    pub segments: Vec<AsSegment>,
}

impl AsPath {
    pub fn sequence(asns: Vec<u32>) -> Self {
        if asns.is_empty() {
            return AsPath::default();
        }
        AsPath {
            segments: vec![AsSegment {
                kind: AsSegmentType::Sequence,
                asns,
            }],
        }
    }

    /// ASNs of the AS_SEQUENCE segments, in order.
    pub fn sequence_asns(&self) -> Vec<u32> {
        self.segments
            .iter()
            .filter(|s| s.kind == AsSegmentType::Sequence)
            .flat_map(|s| s.asns.iter().copied())
            .collect()
    }

    /// Path length for route selection (RFC 4271 §9.1.2.2; RFC 5065 §5.3): a set counts as
    /// one, confederation segments count as zero.
    pub fn path_length(&self) -> usize {
        self.segments
            .iter()
            .map(|s| match s.kind {
                AsSegmentType::Sequence => s.asns.len(),
                AsSegmentType::Set => 1,
                _ => 0,
            })
            .sum()
    }

    pub(crate) fn decode(bytes: &[u8], four_octet: bool) -> Result<Self, &'static str> {
        let mut r = Reader::new(bytes);
        let mut segments = Vec::new();
        while !r.is_empty() {
            let kind = r.u8().map_err(|_| "truncated segment type")?;
            let kind = AsSegmentType::from_u8(kind).ok_or("unknown segment type")?;
            let count = r.u8().map_err(|_| "truncated segment length")?;
            if count == 0 {
                return Err("zero-length segment");
            }
            let mut asns = Vec::with_capacity(usize::from(count));
            for _ in 0..count {
                let asn = if four_octet {
                    r.u32()
                } else {
                    r.u16().map(u32::from)
                };
                asns.push(asn.map_err(|_| "segment runs past the attribute")?);
            }
            segments.push(AsSegment { kind, asns });
        }
        Ok(AsPath { segments })
    }

    pub(crate) fn encode(&self, dst: &mut BytesMut, four_octet: bool) -> Result<(), EncodeError> {
        for seg in &self.segments {
            let count = u8::try_from(seg.asns.len()).map_err(|_| EncodeError::TooManyEntries {
                field: "AS_PATH segment",
                count: seg.asns.len(),
                max: 255,
            })?;
            dst.put_u8(seg.kind.as_u8());
            dst.put_u8(count);
            for &asn in &seg.asns {
                if four_octet {
                    dst.put_u32(asn);
                } else {
                    let two =
                        u16::try_from(asn).map_err(|_| EncodeError::AsnNeedsFourOctets { asn })?;
                    dst.put_u16(two);
                }
            }
        }
        Ok(())
    }

    /// The path a 2-octet session really carried: AS_PATH with AS4_PATH merged in
    /// (RFC 6793 §4.2.3). Confederation segments of AS4_PATH are ignored.
    pub fn merge_as4(&self, as4: &AsPath) -> AsPath {
        let as4 = AsPath {
            segments: as4
                .segments
                .iter()
                .filter(|s| !s.kind.is_confed())
                .cloned()
                .collect(),
        };
        let n = self.path_length();
        let m = as4.path_length();
        if n < m {
            return self.clone();
        }
        let mut keep = n - m;
        let mut segments = Vec::new();
        for seg in &self.segments {
            if keep == 0 {
                break;
            }
            match seg.kind {
                AsSegmentType::Sequence => {
                    let take = keep.min(seg.asns.len());
                    segments.push(AsSegment {
                        kind: seg.kind,
                        asns: seg.asns.iter().take(take).copied().collect(),
                    });
                    keep -= take;
                }
                AsSegmentType::Set => {
                    segments.push(seg.clone());
                    keep -= 1;
                }
                _ => segments.push(seg.clone()),
            }
        }
        segments.extend(as4.segments);
        AsPath { segments }
    }

    /// Whether a 2-octet encoding of this path needs AS4_PATH alongside (RFC 6793 §4.2.2).
    pub fn needs_as4_path(&self) -> bool {
        self.segments
            .iter()
            .flat_map(|s| s.asns.iter())
            .any(|&a| a > u32::from(u16::MAX))
    }

    /// The 2-octet rendering: every 4-octet ASN replaced by AS_TRANS.
    pub fn with_as_trans(&self) -> AsPath {
        AsPath {
            segments: self
                .segments
                .iter()
                .map(|s| AsSegment {
                    kind: s.kind,
                    asns: s
                        .asns
                        .iter()
                        .map(|&a| u16::try_from(a).map_or(u32::from(AS_TRANS), u32::from))
                        .collect(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(a: &[u32]) -> AsSegment {
        AsSegment {
            kind: AsSegmentType::Sequence,
            asns: a.to_vec(),
        }
    }

    #[test]
    fn as4_path_replaces_the_trailing_as_trans_hops_rfc6793_4_2_3() {
        let as_path = AsPath {
            segments: vec![seq(&[65001, 23456, 23456])],
        };
        let as4 = AsPath {
            segments: vec![seq(&[4_200_000_001, 4_200_000_002])],
        };
        assert_eq!(
            as_path.merge_as4(&as4).sequence_asns(),
            vec![65001, 4_200_000_001, 4_200_000_002]
        );
    }

    #[test]
    fn longer_as4_path_is_ignored_rfc6793_4_2_3() {
        let as_path = AsPath::sequence(vec![65001]);
        let as4 = AsPath::sequence(vec![1, 2]);
        assert_eq!(as_path.merge_as4(&as4), as_path);
    }

    #[test]
    fn zero_length_segment_is_malformed_rfc7606_7_2() {
        assert!(AsPath::decode(&[2, 0], true).is_err());
    }

    #[test]
    fn four_octet_asn_cannot_be_encoded_in_two_octets() {
        let p = AsPath::sequence(vec![4_200_000_001]);
        let mut b = BytesMut::new();
        assert_eq!(
            p.encode(&mut b, false),
            Err(EncodeError::AsnNeedsFourOctets { asn: 4_200_000_001 })
        );
        assert!(p.with_as_trans().encode(&mut b, false).is_ok());
    }
}
