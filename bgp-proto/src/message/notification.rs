//! NOTIFICATION (RFC 4271 §4.5) with the RFC 9003 shutdown communication.

use bytes::{BufMut, Bytes, BytesMut};

use crate::encode_error::EncodeError;
use crate::iana::notification as code;

/// A NOTIFICATION error code; unknown codes round-trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    MessageHeader,
    OpenMessage,
    UpdateMessage,
    HoldTimerExpired,
    FiniteStateMachine,
    Cease,
    RouteRefreshMessage,
    SendHoldTimerExpired,
    Unknown(u8),
}

impl From<u8> for ErrorCode {
    fn from(v: u8) -> Self {
        match v {
            code::MESSAGE_HEADER_ERROR => ErrorCode::MessageHeader,
            code::OPEN_MESSAGE_ERROR => ErrorCode::OpenMessage,
            code::UPDATE_MESSAGE_ERROR => ErrorCode::UpdateMessage,
            code::HOLD_TIMER_EXPIRED => ErrorCode::HoldTimerExpired,
            code::FSM_ERROR => ErrorCode::FiniteStateMachine,
            code::CEASE => ErrorCode::Cease,
            code::ROUTE_REFRESH_MESSAGE_ERROR => ErrorCode::RouteRefreshMessage,
            code::SEND_HOLD_TIMER_EXPIRED => ErrorCode::SendHoldTimerExpired,
            other => ErrorCode::Unknown(other),
        }
    }
}

impl From<ErrorCode> for u8 {
    fn from(c: ErrorCode) -> u8 {
        match c {
            ErrorCode::MessageHeader => code::MESSAGE_HEADER_ERROR,
            ErrorCode::OpenMessage => code::OPEN_MESSAGE_ERROR,
            ErrorCode::UpdateMessage => code::UPDATE_MESSAGE_ERROR,
            ErrorCode::HoldTimerExpired => code::HOLD_TIMER_EXPIRED,
            ErrorCode::FiniteStateMachine => code::FSM_ERROR,
            ErrorCode::Cease => code::CEASE,
            ErrorCode::RouteRefreshMessage => code::ROUTE_REFRESH_MESSAGE_ERROR,
            ErrorCode::SendHoldTimerExpired => code::SEND_HOLD_TIMER_EXPIRED,
            ErrorCode::Unknown(v) => v,
        }
    }
}

/// A NOTIFICATION message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub code: ErrorCode,
    pub subcode: u8,
    pub data: Bytes,
}

/// RFC 9003 §2: at most 255 octets of UTF-8.
pub const MAX_SHUTDOWN_MESSAGE_LEN: usize = 255;

impl Notification {
    pub fn new(code: u8, subcode: u8) -> Self {
        Notification {
            code: ErrorCode::from(code),
            subcode,
            data: Bytes::new(),
        }
    }

    /// Cease with an RFC 9003 shutdown communication (subcode Administrative Shutdown,
    /// Administrative Reset, or another Cease subcode that allows it).
    pub fn cease_with_message(subcode: u8, message: &str) -> Result<Self, EncodeError> {
        let len = message.len();
        let len_byte = u8::try_from(len).map_err(|_| EncodeError::ValueTooLong {
            what: "shutdown communication",
            length: len,
            max: MAX_SHUTDOWN_MESSAGE_LEN,
        })?;
        let mut data = BytesMut::with_capacity(1 + len);
        data.put_u8(len_byte);
        data.put_slice(message.as_bytes());
        Ok(Notification {
            code: ErrorCode::Cease,
            subcode,
            data: data.freeze(),
        })
    }

    /// This NOTIFICATION encapsulated in RFC 8538's Hard Reset (Cease subcode 9, §3): the
    /// data is its error code, its subcode, then its data. Sent where the N bit is
    /// negotiated and the peer must drop our routes at once rather than keep them as a
    /// graceful restart's.
    pub fn hard_reset(self) -> Self {
        let mut data = BytesMut::with_capacity(2 + self.data.len());
        data.put_u8(self.code.into());
        data.put_u8(self.subcode);
        data.put_slice(&self.data);
        Notification {
            code: ErrorCode::Cease,
            subcode: code::cease::HARD_RESET,
            data: data.freeze(),
        }
    }

    /// The NOTIFICATION a Hard Reset encapsulates (RFC 8538 §3), when this is one with at
    /// least its error code and subcode.
    pub fn hard_reset_of(&self) -> Option<Notification> {
        if self.code != ErrorCode::Cease || self.subcode != code::cease::HARD_RESET {
            return None;
        }
        let (&code, rest) = self.data.split_first()?;
        let (&subcode, data) = rest.split_first()?;
        Some(Notification {
            code: ErrorCode::from(code),
            subcode,
            data: Bytes::copy_from_slice(data),
        })
    }

    pub(crate) fn decode_body(body: &[u8]) -> Self {
        // frame_length guarantees at least code and subcode.
        let code = body.first().copied().unwrap_or_default();
        let subcode = body.get(1).copied().unwrap_or_default();
        let data = Bytes::copy_from_slice(body.get(2..).unwrap_or_default());
        Notification {
            code: ErrorCode::from(code),
            subcode,
            data,
        }
    }

    pub(crate) fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u8(self.code.into());
        dst.put_u8(self.subcode);
        dst.put_slice(&self.data);
    }

    /// The RFC 9003 shutdown communication, when this is a Cease Administrative Shutdown or
    /// Reset carrying a well-formed one.
    pub fn shutdown_message(&self) -> Option<String> {
        if let Some(inner) = self.hard_reset_of() {
            return inner.shutdown_message();
        }
        if self.code != ErrorCode::Cease
            || !matches!(
                self.subcode,
                code::cease::ADMINISTRATIVE_SHUTDOWN | code::cease::ADMINISTRATIVE_RESET
            )
        {
            return None;
        }
        let (&len, text) = self.data.split_first()?;
        let text = text.get(..usize::from(len))?;
        if len == 0 {
            return None;
        }
        std::str::from_utf8(text).ok().map(str::to_owned)
    }

    /// "Cease/Administrative Shutdown", "UPDATE Message Error/Malformed AS_PATH", …
    pub fn name(&self) -> String {
        if let Some(inner) = self.hard_reset_of() {
            return format!("Cease/Hard Reset ({})", inner.name());
        }
        let (c, s) = names(self.code, self.subcode);
        match s {
            Some(s) => format!("{c}/{s}"),
            None => format!("{c}/subcode {}", self.subcode),
        }
    }
}

fn names(code: ErrorCode, subcode: u8) -> (String, Option<&'static str>) {
    use crate::iana::notification::{cease, fsm, header, open, update};
    let unspecific = (subcode == 0).then_some("Unspecific");
    match code {
        ErrorCode::MessageHeader => (
            "Message Header Error".into(),
            match subcode {
                header::CONNECTION_NOT_SYNCHRONIZED => Some("Connection Not Synchronized"),
                header::BAD_MESSAGE_LENGTH => Some("Bad Message Length"),
                header::BAD_MESSAGE_TYPE => Some("Bad Message Type"),
                _ => unspecific,
            },
        ),
        ErrorCode::OpenMessage => (
            "OPEN Message Error".into(),
            match subcode {
                open::UNSUPPORTED_VERSION_NUMBER => Some("Unsupported Version Number"),
                open::BAD_PEER_AS => Some("Bad Peer AS"),
                open::BAD_BGP_IDENTIFIER => Some("Bad BGP Identifier"),
                open::UNSUPPORTED_OPTIONAL_PARAMETER => Some("Unsupported Optional Parameter"),
                open::UNACCEPTABLE_HOLD_TIME => Some("Unacceptable Hold Time"),
                open::UNSUPPORTED_CAPABILITY => Some("Unsupported Capability"),
                _ => unspecific,
            },
        ),
        ErrorCode::UpdateMessage => (
            "UPDATE Message Error".into(),
            match subcode {
                update::MALFORMED_ATTRIBUTE_LIST => Some("Malformed Attribute List"),
                update::UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE => {
                    Some("Unrecognized Well-known Attribute")
                }
                update::MISSING_WELL_KNOWN_ATTRIBUTE => Some("Missing Well-known Attribute"),
                update::ATTRIBUTE_FLAGS_ERROR => Some("Attribute Flags Error"),
                update::ATTRIBUTE_LENGTH_ERROR => Some("Attribute Length Error"),
                update::INVALID_ORIGIN_ATTRIBUTE => Some("Invalid ORIGIN Attribute"),
                update::INVALID_NEXT_HOP_ATTRIBUTE => Some("Invalid NEXT_HOP Attribute"),
                update::OPTIONAL_ATTRIBUTE_ERROR => Some("Optional Attribute Error"),
                update::INVALID_NETWORK_FIELD => Some("Invalid Network Field"),
                update::MALFORMED_AS_PATH => Some("Malformed AS_PATH"),
                _ => unspecific,
            },
        ),
        ErrorCode::HoldTimerExpired => ("Hold Timer Expired".into(), unspecific),
        ErrorCode::FiniteStateMachine => (
            "Finite State Machine Error".into(),
            match subcode {
                fsm::UNEXPECTED_IN_OPENSENT => Some("Unexpected Message in OpenSent State"),
                fsm::UNEXPECTED_IN_OPENCONFIRM => Some("Unexpected Message in OpenConfirm State"),
                fsm::UNEXPECTED_IN_ESTABLISHED => Some("Unexpected Message in Established State"),
                _ => (subcode == fsm::UNSPECIFIED).then_some("Unspecified Error"),
            },
        ),
        ErrorCode::Cease => (
            "Cease".into(),
            match subcode {
                cease::MAXIMUM_PREFIXES_REACHED => Some("Maximum Number of Prefixes Reached"),
                cease::ADMINISTRATIVE_SHUTDOWN => Some("Administrative Shutdown"),
                cease::PEER_DECONFIGURED => Some("Peer De-configured"),
                cease::ADMINISTRATIVE_RESET => Some("Administrative Reset"),
                cease::CONNECTION_REJECTED => Some("Connection Rejected"),
                cease::OTHER_CONFIGURATION_CHANGE => Some("Other Configuration Change"),
                cease::CONNECTION_COLLISION_RESOLUTION => Some("Connection Collision Resolution"),
                cease::OUT_OF_RESOURCES => Some("Out of Resources"),
                cease::HARD_RESET => Some("Hard Reset"),
                cease::BFD_DOWN => Some("BFD Down"),
                _ => None,
            },
        ),
        ErrorCode::RouteRefreshMessage => (
            "ROUTE-REFRESH Message Error".into(),
            (subcode == 1).then_some("Invalid Message Length"),
        ),
        ErrorCode::SendHoldTimerExpired => ("Send Hold Timer Expired".into(), unspecific),
        ErrorCode::Unknown(c) => (format!("error code {c}"), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shutdown_communication_round_trips_rfc9003_2() {
        let n = Notification::cease_with_message(2, "maintenance: rack r1").unwrap();
        // RFC 8538 §3: a Hard Reset encapsulates the whole NOTIFICATION, code first.
        let hard = n.clone().hard_reset();
        assert_eq!((hard.code, hard.subcode), (ErrorCode::Cease, 9));
        assert_eq!(hard.data.get(..2), Some(&[6_u8, 2][..]));
        assert_eq!(hard.hard_reset_of().as_ref(), Some(&n));
        assert_eq!(
            hard.shutdown_message().as_deref(),
            Some("maintenance: rack r1")
        );
        assert_eq!(
            hard.name(),
            "Cease/Hard Reset (Cease/Administrative Shutdown)"
        );
        // Too short to carry one: a plain Hard Reset, decoded without panicking.
        let short = Notification {
            code: ErrorCode::Cease,
            subcode: 9,
            data: Bytes::from_static(&[3]),
        };
        assert_eq!(short.hard_reset_of(), None);
        assert_eq!(short.name(), "Cease/Hard Reset");
        assert_eq!(
            n.shutdown_message().as_deref(),
            Some("maintenance: rack r1")
        );
        assert_eq!(n.name(), "Cease/Administrative Shutdown");
    }

    #[test]
    fn shutdown_communication_over_255_octets_is_an_error_not_a_truncation() {
        let long = "x".repeat(256);
        assert!(Notification::cease_with_message(2, &long).is_err());
        assert!(Notification::cease_with_message(2, &long[..255]).is_ok());
    }

    #[test]
    fn shutdown_length_beyond_data_is_ignored_not_panicking() {
        let n = Notification {
            code: ErrorCode::Cease,
            subcode: 2,
            data: Bytes::from_static(&[10, b'a']),
        };
        assert_eq!(n.shutdown_message(), None);
    }
}
