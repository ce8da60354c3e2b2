//! BFD Control packet (RFC 5880 §4.1) and the packet-level reception checks of §6.8.6.
//!
//! Intervals are microseconds on the wire. Of the Authentication Section (§4.2–§4.4) the two
//! SHA1 types are decoded and encoded ([`Sha1Auth`]); any other type is discarded here
//! ([`PacketError::UnsupportedAuthType`]). Whether a packet must, may or must not carry
//! one, its digest and its sequence number are the session's (§6.7, [`super::auth`]).
//! Demand mode is not supported: we never set D, and a peer's D bit is only recorded (a
//! peer may not enter demand mode unless we do).

use thiserror::Error;

/// Protocol version (RFC 5880 §4.1).
pub const VERSION: u8 = 1;
/// Length of the mandatory section.
pub const MANDATORY_LEN: usize = 24;
/// Auth Len of a Keyed SHA1 / Meticulous Keyed SHA1 section (RFC 5880 §4.4).
pub const SHA1_AUTH_LEN: usize = 28;
/// The longest packet we send or decode: the mandatory section and a SHA1 section.
pub const MAX_LEN: usize = MANDATORY_LEN + SHA1_AUTH_LEN;
/// Auth Type of Keyed SHA1 (RFC 5880 §4.1).
pub const AUTH_TYPE_KEYED_SHA1: u8 = 4;
/// Auth Type of Meticulous Keyed SHA1 (RFC 5880 §4.1).
pub const AUTH_TYPE_METICULOUS_KEYED_SHA1: u8 = 5;
/// Single-hop control packets (RFC 5881 §4).
pub const CONTROL_PORT: u16 = 3784;
/// Source ports a single-hop session must use (RFC 5881 §4).
pub const SOURCE_PORTS: std::ops::RangeInclusive<u16> = 49152..=65535;
/// TTL / hop limit sent and the only one accepted on receive (RFC 5881 §5, GTSM).
pub const SINGLE_HOP_TTL: u8 = 255;

/// `bfd.SessionState` / the Sta field (RFC 5880 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BfdState {
    AdminDown = 0,
    Down = 1,
    Init = 2,
    Up = 3,
}

impl BfdState {
    fn from_bits(bits: u8) -> Self {
        match bits & 0b11 {
            0 => Self::AdminDown,
            1 => Self::Down,
            2 => Self::Init,
            _ => Self::Up,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::AdminDown => "AdminDown",
            Self::Down => "Down",
            Self::Init => "Init",
            Self::Up => "Up",
        }
    }
}

impl std::fmt::Display for BfdState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The Diag field (RFC 5880 §4.1); values 9–31 are reserved and kept as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Diag {
    None,
    ControlDetectionTimeExpired,
    EchoFunctionFailed,
    NeighborSignaledSessionDown,
    ForwardingPlaneReset,
    PathDown,
    ConcatenatedPathDown,
    AdministrativelyDown,
    ReverseConcatenatedPathDown,
    Reserved(u8),
}

impl Diag {
    pub fn from_code(code: u8) -> Self {
        match code & 0x1f {
            0 => Self::None,
            1 => Self::ControlDetectionTimeExpired,
            2 => Self::EchoFunctionFailed,
            3 => Self::NeighborSignaledSessionDown,
            4 => Self::ForwardingPlaneReset,
            5 => Self::PathDown,
            6 => Self::ConcatenatedPathDown,
            7 => Self::AdministrativelyDown,
            8 => Self::ReverseConcatenatedPathDown,
            other => Self::Reserved(other),
        }
    }

    pub fn code(self) -> u8 {
        match self {
            Self::None => 0,
            Self::ControlDetectionTimeExpired => 1,
            Self::EchoFunctionFailed => 2,
            Self::NeighborSignaledSessionDown => 3,
            Self::ForwardingPlaneReset => 4,
            Self::PathDown => 5,
            Self::ConcatenatedPathDown => 6,
            Self::AdministrativelyDown => 7,
            Self::ReverseConcatenatedPathDown => 8,
            Self::Reserved(c) => c & 0x1f,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "no diagnostic",
            Self::ControlDetectionTimeExpired => "control detection time expired",
            Self::EchoFunctionFailed => "echo function failed",
            Self::NeighborSignaledSessionDown => "neighbor signaled session down",
            Self::ForwardingPlaneReset => "forwarding plane reset",
            Self::PathDown => "path down",
            Self::ConcatenatedPathDown => "concatenated path down",
            Self::AdministrativelyDown => "administratively down",
            Self::ReverseConcatenatedPathDown => "reverse concatenated path down",
            Self::Reserved(_) => "reserved diagnostic",
        }
    }
}

/// The Authentication Section of Keyed SHA1 and Meticulous Keyed SHA1 (RFC 5880 §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sha1Auth {
    /// Auth Type 5 rather than 4.
    pub meticulous: bool,
    pub key_id: u8,
    /// The byte after Auth Key ID: zero when we send, kept as received because the digest
    /// covers it.
    pub reserved: u8,
    pub sequence: u32,
    /// Auth Key/Digest: the SHA1 over the packet with the key in this field (§6.7.4).
    pub digest: [u8; 20],
}

/// One BFD Control packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlPacket {
    pub diag: Diag,
    pub state: BfdState,
    pub poll: bool,
    pub final_: bool,
    /// C: our BFD is independent of the control plane. Always false from us (we share
    /// fate with the speaker process; RFC 5882 §4.3).
    pub control_plane_independent: bool,
    pub demand: bool,
    pub detect_mult: u8,
    pub my_discriminator: u32,
    pub your_discriminator: u32,
    /// Microseconds.
    pub desired_min_tx: u32,
    /// Microseconds.
    pub required_min_rx: u32,
    /// Microseconds; we never take part in echo, so we send 0.
    pub required_min_echo_rx: u32,
    /// The A bit and its section; `None`: a packet of the mandatory section only.
    pub auth: Option<Sha1Auth>,
}

/// Why a received packet is discarded (RFC 5880 §6.8.6, in the order the RFC checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PacketError {
    #[error("BFD packet too short: {len} bytes, the mandatory section is 24")]
    Truncated { len: usize },
    #[error("BFD version {version}, only version 1 is supported")]
    BadVersion { version: u8 },
    #[error("BFD Length field {length} is below the minimum {min}")]
    LengthTooSmall { length: u8, min: u8 },
    #[error("BFD Length field {length} exceeds the {payload} bytes received")]
    LengthExceedsPayload { length: u8, payload: usize },
    #[error("BFD Detect Mult is zero")]
    ZeroDetectMult,
    #[error("BFD Multipoint (M) bit is set")]
    Multipoint,
    #[error("BFD My Discriminator is zero")]
    ZeroMyDiscriminator,
    #[error("BFD Your Discriminator is zero in state {state}")]
    ZeroYourDiscriminator { state: BfdState },
    #[error(
        "BFD Auth Type {auth_type} is not supported (only 4 Keyed SHA1 and 5 Meticulous Keyed SHA1)"
    )]
    UnsupportedAuthType { auth_type: u8 },
    #[error(
        "BFD Auth Len {auth_len} with packet Length {length}: a SHA1 section is 28 bytes after the 24 of the mandatory section"
    )]
    AuthLength { auth_len: u8, length: u8 },
}

impl PacketError {
    /// Stable label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Truncated { .. } => "truncated",
            Self::BadVersion { .. } => "bad_version",
            Self::LengthTooSmall { .. } => "length_too_small",
            Self::LengthExceedsPayload { .. } => "length_exceeds_payload",
            Self::ZeroDetectMult => "zero_detect_mult",
            Self::Multipoint => "multipoint",
            Self::ZeroMyDiscriminator => "zero_my_discriminator",
            Self::ZeroYourDiscriminator { .. } => "zero_your_discriminator",
            Self::UnsupportedAuthType { .. } => "auth_type",
            Self::AuthLength { .. } => "auth_length",
        }
    }
}

/// Encoding refused: a value the packet cannot carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PacketEncodeError {
    #[error("BFD Detect Mult must not be zero")]
    ZeroDetectMult,
    #[error("BFD My Discriminator must not be zero")]
    ZeroMyDiscriminator,
    #[error("BFD Poll and Final must not both be set")]
    PollAndFinal,
}

const FLAG_P: u8 = 0x20;
const FLAG_F: u8 = 0x10;
const FLAG_C: u8 = 0x08;
const FLAG_A: u8 = 0x04;
const FLAG_D: u8 = 0x02;
const FLAG_M: u8 = 0x01;

fn be_u32(buf: &[u8], at: usize) -> Option<u32> {
    let b = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes(b.try_into().ok()?))
}

impl ControlPacket {
    /// Decodes one packet (the UDP payload) and applies the packet-level checks of
    /// RFC 5880 §6.8.6. Matching Your Discriminator against a session is the caller's.
    pub fn decode(buf: &[u8]) -> Result<Self, PacketError> {
        let truncated = PacketError::Truncated { len: buf.len() };
        let (&b0, &b1) = (buf.first().ok_or(truncated)?, buf.get(1).ok_or(truncated)?);
        let version = b0 >> 5;
        if version != VERSION {
            return Err(PacketError::BadVersion { version });
        }
        let length = *buf.get(3).ok_or(truncated)?;
        let auth = b1 & FLAG_A != 0;
        // §6.8.6: at least 24, or 26 with the A bit.
        let min: u8 = if auth { 26 } else { 24 };
        if length < min {
            return Err(PacketError::LengthTooSmall { length, min });
        }
        if usize::from(length) > buf.len() {
            return Err(PacketError::LengthExceedsPayload {
                length,
                payload: buf.len(),
            });
        }
        let detect_mult = *buf.get(2).ok_or(truncated)?;
        if detect_mult == 0 {
            return Err(PacketError::ZeroDetectMult);
        }
        if b1 & FLAG_M != 0 {
            return Err(PacketError::Multipoint);
        }
        let my_discriminator = be_u32(buf, 4).ok_or(truncated)?;
        if my_discriminator == 0 {
            return Err(PacketError::ZeroMyDiscriminator);
        }
        let your_discriminator = be_u32(buf, 8).ok_or(truncated)?;
        let state = BfdState::from_bits(b1 >> 6);
        if your_discriminator == 0 && !matches!(state, BfdState::Down | BfdState::AdminDown) {
            return Err(PacketError::ZeroYourDiscriminator { state });
        }
        let auth = if auth {
            Some(decode_sha1_auth(buf, length)?)
        } else {
            None
        };
        Ok(Self {
            diag: Diag::from_code(b0),
            state,
            poll: b1 & FLAG_P != 0,
            final_: b1 & FLAG_F != 0,
            control_plane_independent: b1 & FLAG_C != 0,
            demand: b1 & FLAG_D != 0,
            detect_mult,
            my_discriminator,
            your_discriminator,
            desired_min_tx: be_u32(buf, 12).ok_or(truncated)?,
            required_min_rx: be_u32(buf, 16).ok_or(truncated)?,
            required_min_echo_rx: be_u32(buf, 20).ok_or(truncated)?,
            auth,
        })
    }

    /// The packet: the 24-byte mandatory section and, with [`ControlPacket::auth`], the
    /// 28-byte SHA1 section as it is (signing is [`super::auth`]'s). Refuses what a
    /// receiver must discard.
    pub fn encode(&self) -> Result<Encoded, PacketEncodeError> {
        if self.detect_mult == 0 {
            return Err(PacketEncodeError::ZeroDetectMult);
        }
        if self.my_discriminator == 0 {
            return Err(PacketEncodeError::ZeroMyDiscriminator);
        }
        // RFC 5880 §6.5: a packet never carries both.
        if self.poll && self.final_ {
            return Err(PacketEncodeError::PollAndFinal);
        }
        let mut flags = (self.state as u8) << 6;
        for (set, bit) in [
            (self.poll, FLAG_P),
            (self.final_, FLAG_F),
            (self.control_plane_independent, FLAG_C),
            (self.demand, FLAG_D),
            (self.auth.is_some(), FLAG_A),
        ] {
            if set {
                flags |= bit;
            }
        }
        let len = if self.auth.is_some() {
            MAX_LEN
        } else {
            MANDATORY_LEN
        };
        let mut out = Encoded {
            buf: [0u8; MAX_LEN],
            len,
        };
        let words = [
            [
                (VERSION << 5) | self.diag.code(),
                flags,
                self.detect_mult,
                len as u8,
            ],
            self.my_discriminator.to_be_bytes(),
            self.your_discriminator.to_be_bytes(),
            self.desired_min_tx.to_be_bytes(),
            self.required_min_rx.to_be_bytes(),
            self.required_min_echo_rx.to_be_bytes(),
        ];
        for (chunk, word) in out.buf.chunks_exact_mut(4).zip(words) {
            chunk.copy_from_slice(&word);
        }
        if let Some(a) = &self.auth {
            let auth_type = if a.meticulous {
                AUTH_TYPE_METICULOUS_KEYED_SHA1
            } else {
                AUTH_TYPE_KEYED_SHA1
            };
            let header = [auth_type, SHA1_AUTH_LEN as u8, a.key_id, a.reserved];
            let sequence = a.sequence.to_be_bytes();
            let section = header.iter().chain(sequence.iter()).chain(a.digest.iter());
            for (b, v) in out.buf.iter_mut().skip(MANDATORY_LEN).zip(section) {
                *b = *v;
            }
        }
        Ok(out)
    }
}

/// An encoded packet: 24 bytes, or 52 with a SHA1 section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encoded {
    buf: [u8; MAX_LEN],
    len: usize,
}

impl std::ops::Deref for Encoded {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&self.buf)
    }
}

impl std::ops::DerefMut for Encoded {
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.len.min(MAX_LEN);
        self.buf.get_mut(..len).unwrap_or_default()
    }
}

/// The SHA1 section after the mandatory one (§4.4); `length` is the packet's Length field,
/// already checked against the payload. Only the two SHA1 types are accepted, and only
/// with Auth Len 28 and nothing after the section (the digest covers exactly Length bytes).
fn decode_sha1_auth(buf: &[u8], length: u8) -> Result<Sha1Auth, PacketError> {
    let truncated = PacketError::Truncated { len: buf.len() };
    let auth_type = *buf.get(MANDATORY_LEN).ok_or(truncated)?;
    let meticulous = match auth_type {
        AUTH_TYPE_KEYED_SHA1 => false,
        AUTH_TYPE_METICULOUS_KEYED_SHA1 => true,
        other => return Err(PacketError::UnsupportedAuthType { auth_type: other }),
    };
    let auth_len = *buf.get(MANDATORY_LEN + 1).ok_or(truncated)?;
    if usize::from(auth_len) != SHA1_AUTH_LEN || usize::from(length) != MAX_LEN {
        return Err(PacketError::AuthLength { auth_len, length });
    }
    let digest = buf
        .get(MANDATORY_LEN + 8..MAX_LEN)
        .and_then(|d| <[u8; 20]>::try_from(d).ok())
        .ok_or(truncated)?;
    Ok(Sha1Auth {
        meticulous,
        key_id: *buf.get(MANDATORY_LEN + 2).ok_or(truncated)?,
        reserved: *buf.get(MANDATORY_LEN + 3).ok_or(truncated)?,
        sequence: be_u32(buf, MANDATORY_LEN + 4).ok_or(truncated)?,
        digest,
    })
}
