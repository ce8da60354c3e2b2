//! Encoding failures. A leaf module so that message encoders (NOTIFICATION included) can
//! name [`EncodeError`] without depending on the decode error model in [`crate::error`],
//! which re-exports it.

/// An encoding failure. Nothing is ever truncated to make a message fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("message of {length} bytes exceeds the maximum of {max}")]
    MessageTooLong { length: usize, max: usize },
    #[error("attribute {type_code} value of {length} bytes exceeds 65535")]
    AttributeTooLong { type_code: u8, length: usize },
    #[error("{field} has {count} entries, more than the {max} its length field can carry")]
    TooManyEntries {
        field: &'static str,
        count: usize,
        max: usize,
    },
    #[error("AS {asn} needs the 4-octet AS capability (use AS_TRANS with AS4_PATH)")]
    AsnNeedsFourOctets { asn: u32 },
    #[error("{what} of {length} bytes exceeds {max}")]
    ValueTooLong {
        what: &'static str,
        length: usize,
        max: usize,
    },
    #[error("path attributes alone ({length} bytes) leave no room for any prefix")]
    AttributesTooLarge { length: usize },
    #[error("next hop does not fit the family: {reason}")]
    NextHopFamily { reason: &'static str },
}
