//! The decode error model: every [`DecodeError`] maps, in [`error_handling`], to the
//! NOTIFICATION a conforming speaker sends (RFC 4271 §6.1–6.3) and to the RFC 7606 action.

use crate::iana::attr_type;
use crate::iana::notification::{self as n, header, open, update};
use crate::message::notification::{ErrorCode, Notification};
use crate::types::Family;

pub use crate::encode_error::EncodeError;

/// What the session does about an error (RFC 7606 §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Send the NOTIFICATION and close the session.
    SessionReset,
    /// Stop using one family on the session (RFC 4760 §7, RFC 7606 §2).
    AfiSafiDisable(Family),
    /// Handle every prefix of the UPDATE as withdrawn; the session stays up.
    TreatAsWithdraw,
    /// Drop the attribute; the rest of the UPDATE is processed.
    AttributeDiscard,
}

impl Action {
    /// The JSON spelling used by `podcidr-bgp decode`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::SessionReset => "session-reset",
            Action::AfiSafiDisable(_) => "afi-safi-disable",
            Action::TreatAsWithdraw => "treat-as-withdraw",
            Action::AttributeDiscard => "attribute-discard",
        }
    }

    /// Whether the message cannot be used at all (the session or family must go down).
    pub fn is_fatal(self) -> bool {
        matches!(self, Action::SessionReset | Action::AfiSafiDisable(_))
    }
}

/// The outcome of [`error_handling`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorHandling {
    pub action: Action,
    /// The NOTIFICATION RFC 4271 prescribes. With treat-as-withdraw or attribute-discard it is
    /// not sent; it still names the error for logs.
    pub notification: Notification,
}

/// A decode failure. Attribute bytes are kept because RFC 4271 §6.3 puts them in the
/// NOTIFICATION data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    // ----- message header (RFC 4271 §6.1)
    #[error("message header marker is not all ones")]
    ConnectionNotSynchronized,
    #[error("bad message length {length}")]
    BadMessageLength { length: u16 },
    #[error("bad message type {msg_type}")]
    BadMessageType { msg_type: u8 },

    // ----- OPEN (RFC 4271 §6.2, RFC 5492, RFC 9072)
    #[error("unsupported BGP version {version} (only 4)")]
    UnsupportedVersion { version: u8 },
    #[error("BGP identifier {id} is not allowed (must be non-zero)")]
    BadBgpIdentifier { id: std::net::Ipv4Addr },
    #[error("unacceptable hold time {hold_time} (0 or 3..65535)")]
    UnacceptableHoldTime { hold_time: u16 },
    #[error("unsupported optional parameter type {param_type}")]
    UnsupportedOptionalParameter { param_type: u8 },
    #[error("malformed OPEN: {reason}")]
    MalformedOpen { reason: &'static str },
    #[error("malformed capability {code}: {reason}")]
    MalformedCapability { code: u8, reason: &'static str },
    /// RFC 7607 §2: AS 0 in My Autonomous System or the 4-octet AS capability.
    #[error("peer AS 0 is not allowed (RFC 7607)")]
    PeerAsZero { my_as: u16 },

    // ----- UPDATE (RFC 4271 §6.3, RFC 7606)
    #[error("malformed attribute list: {reason}")]
    MalformedAttributeList { reason: &'static str },
    #[error("path attribute field overrun: {reason} (RFC 7606 §4)")]
    AttributeOverrun { reason: &'static str },
    #[error("unrecognized well-known attribute {type_code}")]
    UnrecognizedWellKnownAttribute { type_code: u8, attribute: Vec<u8> },
    #[error("missing well-known attribute {type_code}")]
    MissingWellKnownAttribute { type_code: u8 },
    #[error("attribute {type_code}: flags 0x{flags:02x} conflict with the type")]
    AttributeFlags {
        type_code: u8,
        flags: u8,
        attribute: Vec<u8>,
    },
    #[error("attribute {type_code}: bad length {length}")]
    AttributeLength {
        type_code: u8,
        length: usize,
        attribute: Vec<u8>,
    },
    #[error("attribute {type_code} appears more than once")]
    DuplicateAttribute { type_code: u8 },
    #[error("invalid ORIGIN value {value}")]
    InvalidOrigin { value: u8, attribute: Vec<u8> },
    #[error("malformed AS_PATH: {reason}")]
    MalformedAsPath {
        reason: &'static str,
        attribute: Vec<u8>,
    },
    #[error("malformed AS4_PATH: {reason}")]
    MalformedAs4Path {
        reason: &'static str,
        attribute: Vec<u8>,
    },
    /// RFC 7607 §2: AGGREGATOR or AS4_AGGREGATOR naming AS 0.
    #[error("attribute {type_code}: aggregator AS 0 (RFC 7607)")]
    AggregatorAsZero { type_code: u8, attribute: Vec<u8> },
    /// RFC 6793 §3: AS4_PATH or AS4_AGGREGATOR from a speaker that itself uses 4-octet AS
    /// numbers.
    #[error("attribute {type_code} on a 4-octet AS session (RFC 6793 §3)")]
    As4AttributeFromNewSpeaker { type_code: u8, attribute: Vec<u8> },
    #[error("invalid NLRI in the {field} field: {reason}")]
    InvalidNetworkField {
        field: &'static str,
        reason: &'static str,
    },
    #[error("MP_REACH_NLRI/MP_UNREACH_NLRI for {family}: {reason}")]
    MalformedMpAttribute {
        family: Family,
        reason: &'static str,
        attribute: Vec<u8>,
    },

    // ----- ROUTE-REFRESH (RFC 7313 §5)
    #[error("ROUTE-REFRESH with bad length {length}")]
    RouteRefreshLength { length: u16, message: Vec<u8> },
}

/// Per-attribute handling of a malformed attribute (RFC 7606 §7, RFC 6793 §6).
fn malformed_attribute_action(type_code: u8) -> Action {
    match type_code {
        attr_type::ATOMIC_AGGREGATE
        | attr_type::AGGREGATOR
        | attr_type::AS4_PATH
        | attr_type::AS4_AGGREGATOR => Action::AttributeDiscard,
        // A malformed MP attribute whose AFI/SAFI could not be read: no NLRI can be located.
        attr_type::MP_REACH_NLRI | attr_type::MP_UNREACH_NLRI => Action::SessionReset,
        // ORIGIN, AS_PATH, NEXT_HOP, MED, LOCAL_PREF, COMMUNITIES, ORIGINATOR_ID,
        // CLUSTER_LIST, EXTENDED/LARGE COMMUNITIES, and unknown optional attributes.
        _ => Action::TreatAsWithdraw,
    }
}

/// The one exhaustive mapping from a decode error to its NOTIFICATION and RFC 7606 action.
pub fn error_handling(err: &DecodeError) -> ErrorHandling {
    use DecodeError as E;
    let (action, code, subcode, data): (Action, u8, u8, Vec<u8>) = match err {
        E::ConnectionNotSynchronized => (
            Action::SessionReset,
            n::MESSAGE_HEADER_ERROR,
            header::CONNECTION_NOT_SYNCHRONIZED,
            Vec::new(),
        ),
        E::BadMessageLength { length } => (
            Action::SessionReset,
            n::MESSAGE_HEADER_ERROR,
            header::BAD_MESSAGE_LENGTH,
            length.to_be_bytes().to_vec(),
        ),
        E::BadMessageType { msg_type } => (
            Action::SessionReset,
            n::MESSAGE_HEADER_ERROR,
            header::BAD_MESSAGE_TYPE,
            vec![*msg_type],
        ),
        // Data: the largest locally supported version, as 2 octets (RFC 4271 §6.2).
        E::UnsupportedVersion { .. } => (
            Action::SessionReset,
            n::OPEN_MESSAGE_ERROR,
            open::UNSUPPORTED_VERSION_NUMBER,
            4u16.to_be_bytes().to_vec(),
        ),
        E::BadBgpIdentifier { .. } => (
            Action::SessionReset,
            n::OPEN_MESSAGE_ERROR,
            open::BAD_BGP_IDENTIFIER,
            Vec::new(),
        ),
        E::UnacceptableHoldTime { .. } => (
            Action::SessionReset,
            n::OPEN_MESSAGE_ERROR,
            open::UNACCEPTABLE_HOLD_TIME,
            Vec::new(),
        ),
        E::UnsupportedOptionalParameter { .. } => (
            Action::SessionReset,
            n::OPEN_MESSAGE_ERROR,
            open::UNSUPPORTED_OPTIONAL_PARAMETER,
            Vec::new(),
        ),
        E::MalformedOpen { .. } | E::MalformedCapability { .. } => (
            Action::SessionReset,
            n::OPEN_MESSAGE_ERROR,
            open::UNSPECIFIC,
            Vec::new(),
        ),
        // RFC 7607 §2, whatever the configured peer AS.
        E::PeerAsZero { my_as } => (
            Action::SessionReset,
            n::OPEN_MESSAGE_ERROR,
            open::BAD_PEER_AS,
            my_as.to_be_bytes().to_vec(),
        ),
        E::MalformedAttributeList { .. } => (
            Action::SessionReset,
            n::UPDATE_MESSAGE_ERROR,
            update::MALFORMED_ATTRIBUTE_LIST,
            Vec::new(),
        ),
        // RFC 7606 §4: the Total Attribute Length still locates the NLRI.
        E::AttributeOverrun { .. } => (
            Action::TreatAsWithdraw,
            n::UPDATE_MESSAGE_ERROR,
            update::MALFORMED_ATTRIBUTE_LIST,
            Vec::new(),
        ),
        // Not relaxed by RFC 7606.
        E::UnrecognizedWellKnownAttribute { attribute, .. } => (
            Action::SessionReset,
            n::UPDATE_MESSAGE_ERROR,
            update::UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE,
            attribute.clone(),
        ),
        // RFC 7606 §3 (d).
        E::MissingWellKnownAttribute { type_code } => (
            Action::TreatAsWithdraw,
            n::UPDATE_MESSAGE_ERROR,
            update::MISSING_WELL_KNOWN_ATTRIBUTE,
            vec![*type_code],
        ),
        // RFC 7606 §3 (c), unless the attribute's own rules say otherwise.
        E::AttributeFlags {
            type_code,
            attribute,
            ..
        } => (
            malformed_attribute_action(*type_code),
            n::UPDATE_MESSAGE_ERROR,
            update::ATTRIBUTE_FLAGS_ERROR,
            attribute.clone(),
        ),
        E::AttributeLength {
            type_code,
            attribute,
            ..
        } => (
            malformed_attribute_action(*type_code),
            n::UPDATE_MESSAGE_ERROR,
            update::ATTRIBUTE_LENGTH_ERROR,
            attribute.clone(),
        ),
        // RFC 7606 §3 (g): all but the first occurrence are discarded.
        E::DuplicateAttribute { .. } => (
            Action::AttributeDiscard,
            n::UPDATE_MESSAGE_ERROR,
            update::MALFORMED_ATTRIBUTE_LIST,
            Vec::new(),
        ),
        E::InvalidOrigin { attribute, .. } => (
            Action::TreatAsWithdraw,
            n::UPDATE_MESSAGE_ERROR,
            update::INVALID_ORIGIN_ATTRIBUTE,
            attribute.clone(),
        ),
        E::MalformedAsPath { attribute, .. } => (
            Action::TreatAsWithdraw,
            n::UPDATE_MESSAGE_ERROR,
            update::MALFORMED_AS_PATH,
            attribute.clone(),
        ),
        // RFC 6793 §6: a malformed AS4_PATH is discarded.
        E::MalformedAs4Path { attribute, .. } => (
            Action::AttributeDiscard,
            n::UPDATE_MESSAGE_ERROR,
            update::MALFORMED_AS_PATH,
            attribute.clone(),
        ),
        // RFC 7607 §2: AGGREGATOR per RFC 7606 §7.7, AS4_AGGREGATOR per RFC 6793 §6; both
        // are discarded. RFC 6793 §3: AS4_* from a 4-octet speaker are discarded. The
        // NOTIFICATION is never sent (attribute-discard); it names the attribute for logs.
        E::AggregatorAsZero { attribute, .. } | E::As4AttributeFromNewSpeaker { attribute, .. } => {
            (
                Action::AttributeDiscard,
                n::UPDATE_MESSAGE_ERROR,
                update::OPTIONAL_ATTRIBUTE_ERROR,
                attribute.clone(),
            )
        }
        // RFC 7606 §5.3: the IPv4 NLRI and withdrawn fields cannot be skipped.
        E::InvalidNetworkField { .. } => (
            Action::SessionReset,
            n::UPDATE_MESSAGE_ERROR,
            update::INVALID_NETWORK_FIELD,
            Vec::new(),
        ),
        // RFC 7606 §7.11 and RFC 4760 §7: the family is disabled; if the session is reset
        // instead, the NOTIFICATION is Optional Attribute Error.
        E::MalformedMpAttribute {
            family, attribute, ..
        } => (
            Action::AfiSafiDisable(*family),
            n::UPDATE_MESSAGE_ERROR,
            update::OPTIONAL_ATTRIBUTE_ERROR,
            attribute.clone(),
        ),
        // RFC 7313 §5: data is the complete message.
        E::RouteRefreshLength { message, .. } => (
            Action::SessionReset,
            n::ROUTE_REFRESH_MESSAGE_ERROR,
            crate::iana::notification::route_refresh::INVALID_MESSAGE_LENGTH,
            message.clone(),
        ),
    };
    ErrorHandling {
        action,
        notification: Notification {
            code: ErrorCode::from(code),
            subcode,
            data: data.into(),
        },
    }
}

impl DecodeError {
    pub fn handling(&self) -> ErrorHandling {
        error_handling(self)
    }

    pub fn action(&self) -> Action {
        error_handling(self).action
    }
}
