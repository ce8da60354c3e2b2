//! BFD authentication, Keyed SHA1 and Meticulous Keyed SHA1 (RFC 5880 §6.7.4): the key,
//! signing and checking a packet's digest, and the sequence-number window. The session
//! ([`super::session`]) keeps `bfd.XmitAuthSeq`, `bfd.RcvAuthSeq` and `bfd.AuthSeqKnown`.

use sha1::{Digest, Sha1};

use super::packet::{ControlPacket, MANDATORY_LEN, PacketEncodeError, Sha1Auth};

/// A SHA1 Auth Key is 20 bytes; a shorter one is padded with zeros (§4.4).
pub const SHA1_KEY_MAX_LEN: usize = 20;

/// A session's key: the type, the Auth Key ID and the secret. `Debug` never shows the
/// secret.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct BfdAuthKey {
    /// Meticulous Keyed SHA1 (type 5): the sequence number rises with every packet.
    pub meticulous: bool,
    pub key_id: u8,
    secret: [u8; SHA1_KEY_MAX_LEN],
}

impl std::fmt::Debug for BfdAuthKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BfdAuthKey")
            .field("meticulous", &self.meticulous)
            .field("key_id", &self.key_id)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// Why bytes are not a SHA1 key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthKeyError {
    #[error("BFD SHA1 key is empty")]
    Empty,
    #[error("BFD SHA1 key is {0} bytes, the limit is 20 (RFC 5880 §4.4)")]
    TooLong(usize),
}

impl BfdAuthKey {
    pub fn new(meticulous: bool, key_id: u8, secret: &[u8]) -> Result<Self, AuthKeyError> {
        if secret.is_empty() {
            return Err(AuthKeyError::Empty);
        }
        if secret.len() > SHA1_KEY_MAX_LEN {
            return Err(AuthKeyError::TooLong(secret.len()));
        }
        let mut padded = [0u8; SHA1_KEY_MAX_LEN];
        for (d, s) in padded.iter_mut().zip(secret) {
            *d = *s;
        }
        Ok(Self {
            meticulous,
            key_id,
            secret: padded,
        })
    }
}

/// Why an authenticated session discards a packet (§6.7.4, §6.8.6); a stable label each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("BFD packet without authentication on a session that requires it")]
    Missing,
    #[error("BFD packet with authentication on a session without it")]
    Unexpected,
    #[error("BFD Auth Type differs from the session's")]
    WrongType,
    #[error("BFD Auth Key ID {got}, the session's is {want}")]
    WrongKeyId { got: u8, want: u8 },
    #[error("BFD sequence number {got} outside the window after {last}")]
    Sequence { got: u32, last: u32 },
    #[error("BFD authentication digest does not match")]
    Digest,
}

impl AuthError {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Missing => "auth_missing",
            Self::Unexpected => "auth_unexpected",
            Self::WrongType => "auth_type",
            Self::WrongKeyId { .. } => "auth_key_id",
            Self::Sequence { .. } => "auth_sequence",
            Self::Digest => "auth_digest",
        }
    }
}

/// The SHA1 over the packet with the key in the digest field (§6.7.4). `None` if the
/// packet cannot be encoded (Poll and Final both set: a receiver discards it anyway).
fn digest(p: &ControlPacket, key: &BfdAuthKey) -> Option<[u8; 20]> {
    let mut bytes = p.encode().ok()?;
    let field = bytes.get_mut(MANDATORY_LEN + 8..)?;
    field.copy_from_slice(&key.secret);
    Some(Sha1::digest(&*bytes).into())
}

/// `p` with its SHA1 section for `sequence`, signed with `key`.
pub fn sign(
    mut p: ControlPacket,
    key: &BfdAuthKey,
    sequence: u32,
) -> Result<ControlPacket, PacketEncodeError> {
    p.auth = Some(Sha1Auth {
        meticulous: key.meticulous,
        key_id: key.key_id,
        reserved: 0,
        sequence,
        digest: [0; 20],
    });
    let d = digest(&p, key).ok_or(PacketEncodeError::PollAndFinal)?;
    if let Some(a) = &mut p.auth {
        a.digest = d;
    }
    Ok(p)
}

/// Seconds per step of the wall-clock sequence floor (see [`sequence_floor`]).
pub const SEQUENCE_CLOCK_STEP_SECS: u64 = 15;

/// The lowest `bfd.XmitAuthSeq` at `unix_secs` (circular): one step every 15 s. Keyed SHA1
/// sends it as it is, so the next process after a planned restart continues the sequence
/// without stored state: a peer accepts a jump of up to 3 × its multiplier (§6.7.4), so a
/// gap of up to 45 s with a multiplier of 1, 135 s with 3. A replayed packet is accepted
/// for at most one step. Meticulous Keyed SHA1 runs ahead of it (one per packet) and
/// cannot continue across a restart (docs/bgp.md).
pub fn sequence_floor(unix_secs: u64) -> u32 {
    (unix_secs / SEQUENCE_CLOCK_STEP_SECS) as u32
}

/// Whether `seq` may follow `last` (§6.7.4, circular): Keyed SHA1 accepts
/// `last ..= last + 3 × detect_mult`, Meticulous Keyed SHA1 `last + 1 ..= last + 3 × detect_mult`.
/// `detect_mult` is our `bfd.DetectMult`, as BIRD and FRR read it.
pub fn sequence_in_window(seq: u32, last: u32, meticulous: bool, detect_mult: u8) -> bool {
    let ahead = seq.wrapping_sub(last);
    let max = 3 * u32::from(detect_mult);
    if meticulous {
        (1..=max).contains(&ahead)
    } else {
        ahead <= max
    }
}

/// Checks type, key ID, the sequence window (while `last` is known) and the digest, in
/// that order (the digest last: it is the costly one). Returns the packet's sequence.
pub fn check(
    p: &ControlPacket,
    key: &BfdAuthKey,
    last: Option<u32>,
    detect_mult: u8,
) -> Result<u32, AuthError> {
    let a = p.auth.as_ref().ok_or(AuthError::Missing)?;
    if a.meticulous != key.meticulous {
        return Err(AuthError::WrongType);
    }
    if a.key_id != key.key_id {
        return Err(AuthError::WrongKeyId {
            got: a.key_id,
            want: key.key_id,
        });
    }
    if let Some(last) = last
        && !sequence_in_window(a.sequence, last, key.meticulous, detect_mult)
    {
        return Err(AuthError::Sequence {
            got: a.sequence,
            last,
        });
    }
    let want = digest(p, key).ok_or(AuthError::Digest)?;
    // Compare every byte, not up to the first difference.
    let diff = want
        .iter()
        .zip(a.digest.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y));
    if diff != 0 {
        return Err(AuthError::Digest);
    }
    Ok(a.sequence)
}
