//! BFD Control packet (RFC 5880 §4.1) and the packet-level reception checks of §6.8.6.
//!
//! Intervals are microseconds on the wire. Authentication is not supported: a packet with
//! the A bit is rejected ([`PacketError::AuthenticationNotSupported`]), as §6.8.6 requires
//! of a session without authentication. Demand mode is not supported either: we never set
//! D, and a peer's D bit is only recorded (a peer may not enter demand mode unless we do).

use thiserror::Error;

/// Protocol version (RFC 5880 §4.1).
pub const VERSION: u8 = 1;
/// Length of the mandatory section; we send nothing else.
pub const MANDATORY_LEN: usize = 24;
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

/// One BFD Control packet, mandatory section only.
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
    #[error("BFD authentication (A bit) is not supported")]
    AuthenticationNotSupported,
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
            Self::AuthenticationNotSupported => "authentication",
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
        if auth {
            return Err(PacketError::AuthenticationNotSupported);
        }
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
        })
    }

    /// The 24-byte mandatory section. Refuses what a receiver must discard.
    pub fn encode(&self) -> Result<[u8; MANDATORY_LEN], PacketEncodeError> {
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
        ] {
            if set {
                flags |= bit;
            }
        }
        let mut out = [0u8; MANDATORY_LEN];
        let words = [
            [
                (VERSION << 5) | self.diag.code(),
                flags,
                self.detect_mult,
                MANDATORY_LEN as u8,
            ],
            self.my_discriminator.to_be_bytes(),
            self.your_discriminator.to_be_bytes(),
            self.desired_min_tx.to_be_bytes(),
            self.required_min_rx.to_be_bytes(),
            self.required_min_echo_rx.to_be_bytes(),
        ];
        for (chunk, word) in out.chunks_exact_mut(4).zip(words) {
            chunk.copy_from_slice(&word);
        }
        Ok(out)
    }
}
