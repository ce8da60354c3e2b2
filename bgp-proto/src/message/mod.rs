//! BGP messages (RFC 4271 §4) and their framing.

mod aspath;
pub mod attribute;
pub mod capability;
mod mp;
pub mod notification;
pub mod open;
pub(crate) mod prefix;
pub mod route_refresh;
pub mod update;

use bytes::{BufMut, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::iana::msg_type;
use crate::reader::Reader;

use self::notification::Notification;
use self::open::Open;
use self::route_refresh::RouteRefresh;
use self::update::Update;

/// Length of the fixed header: marker (16), length (2), type (1).
pub const HEADER_LEN: usize = 19;
/// RFC 4271 §4.1 maximum message size.
pub const MAX_MESSAGE_LEN: usize = 4096;
/// RFC 8654 maximum once extended messages are negotiated.
pub const MAX_EXTENDED_MESSAGE_LEN: usize = 65535;

const MARKER: [u8; 16] = [0xff; 16];

/// What the session negotiated that changes the encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireOptions {
    /// RFC 6793: AS numbers in AS_PATH and AGGREGATOR are 4 octets.
    pub four_octet_as: bool,
    /// RFC 8654: messages up to 65535 octets.
    pub extended_message: bool,
}

impl Default for WireOptions {
    /// Before the OPEN exchange: 2-octet AS, 4096-octet messages.
    fn default() -> Self {
        WireOptions {
            four_octet_as: false,
            extended_message: false,
        }
    }
}

impl WireOptions {
    /// What a modern session normally negotiates: 4-octet AS, standard size.
    pub fn four_octet() -> Self {
        WireOptions {
            four_octet_as: true,
            extended_message: false,
        }
    }

    pub fn max_message_len(&self) -> usize {
        if self.extended_message {
            MAX_EXTENDED_MESSAGE_LEN
        } else {
            MAX_MESSAGE_LEN
        }
    }
}

/// A BGP message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Open(Open),
    Update(Update),
    Notification(Notification),
    Keepalive,
    RouteRefresh(RouteRefresh),
}

impl Message {
    pub fn type_name(&self) -> &'static str {
        match self {
            Message::Open(_) => "OPEN",
            Message::Update(_) => "UPDATE",
            Message::Notification(_) => "NOTIFICATION",
            Message::Keepalive => "KEEPALIVE",
            Message::RouteRefresh(_) => "ROUTE-REFRESH",
        }
    }

    fn type_code(&self) -> u8 {
        match self {
            Message::Open(_) => msg_type::OPEN,
            Message::Update(_) => msg_type::UPDATE,
            Message::Notification(_) => msg_type::NOTIFICATION,
            Message::Keepalive => msg_type::KEEPALIVE,
            Message::RouteRefresh(_) => msg_type::ROUTE_REFRESH,
        }
    }

    /// Appends the encoded message to `dst`. On error `dst` is left as it was.
    pub fn encode(&self, opts: &WireOptions, dst: &mut BytesMut) -> Result<(), EncodeError> {
        let start = dst.len();
        let result = self.encode_unchecked(opts, dst, start);
        if result.is_err() {
            dst.truncate(start);
        }
        result
    }

    fn encode_unchecked(
        &self,
        opts: &WireOptions,
        dst: &mut BytesMut,
        start: usize,
    ) -> Result<(), EncodeError> {
        dst.put_slice(&MARKER);
        dst.put_u16(0); // patched below
        dst.put_u8(self.type_code());
        match self {
            Message::Open(m) => m.encode_body(dst)?,
            Message::Update(m) => m.encode_body(opts, dst)?,
            Message::Notification(m) => m.encode_body(dst),
            Message::Keepalive => {}
            Message::RouteRefresh(m) => m.encode_body(dst),
        }
        let length = dst.len() - start;
        let max = opts.max_message_len();
        if length > max {
            return Err(EncodeError::MessageTooLong { length, max });
        }
        let len_field =
            u16::try_from(length).map_err(|_| EncodeError::MessageTooLong { length, max })?;
        if let Some(field) = dst.get_mut(start + 16..start + 18) {
            field.copy_from_slice(&len_field.to_be_bytes());
        }
        Ok(())
    }

    /// Encodes into a fresh buffer.
    pub fn to_bytes(&self, opts: &WireOptions) -> Result<BytesMut, EncodeError> {
        let mut buf = BytesMut::new();
        self.encode(opts, &mut buf)?;
        Ok(buf)
    }
}

/// A decoded message plus the errors that leave the session up (RFC 7606 treat-as-withdraw,
/// attribute-discard, and AFI/SAFI disable, whose MP attribute is left out of the message).
/// Errors that need a session reset are returned as `Err` instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub message: Message,
    /// Length of the message on the wire, from its header.
    pub length: usize,
    pub errors: Vec<DecodeError>,
}

impl Decoded {
    /// True when RFC 7606 says every prefix of this UPDATE is to be handled as withdrawn.
    pub fn treat_as_withdraw(&self) -> bool {
        self.errors
            .iter()
            .any(|e| e.action() == crate::error::Action::TreatAsWithdraw)
    }
}

/// Checks the header at the start of `buf`. `Ok(None)`: not enough bytes for a header yet.
/// `Ok(Some(len))`: the whole message is `len` bytes (which may not all be present yet).
pub fn frame_length(buf: &[u8], max_len: usize) -> Result<Option<usize>, DecodeError> {
    let Some(header) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let mut r = Reader::new(header);
    let marker: [u8; 16] = r
        .array()
        .map_err(|_| DecodeError::ConnectionNotSynchronized)?;
    if marker != MARKER {
        return Err(DecodeError::ConnectionNotSynchronized);
    }
    let length = r
        .u16()
        .map_err(|_| DecodeError::ConnectionNotSynchronized)?;
    let msg_type = r.u8().map_err(|_| DecodeError::ConnectionNotSynchronized)?;
    let len = usize::from(length);
    if len < HEADER_LEN || len > max_len {
        return Err(DecodeError::BadMessageLength { length });
    }
    let min = match msg_type {
        msg_type::OPEN => 29,
        msg_type::UPDATE => 23,
        msg_type::NOTIFICATION => 21,
        msg_type::KEEPALIVE => HEADER_LEN,
        // A bad ROUTE-REFRESH length has its own error (RFC 7313 §5), checked on decode.
        msg_type::ROUTE_REFRESH => HEADER_LEN,
        other => return Err(DecodeError::BadMessageType { msg_type: other }),
    };
    if len < min || (msg_type == msg_type::KEEPALIVE && len != HEADER_LEN) {
        return Err(DecodeError::BadMessageLength { length });
    }
    Ok(Some(len))
}

/// Decodes exactly one whole message (header included).
pub fn decode_message(frame: &[u8], opts: &WireOptions) -> Result<Decoded, DecodeError> {
    let len = frame_length(frame, opts.max_message_len())?
        .ok_or(DecodeError::BadMessageLength { length: 0 })?;
    if len != frame.len() {
        let length = u16::try_from(frame.len()).unwrap_or(u16::MAX);
        return Err(DecodeError::BadMessageLength { length });
    }
    let msg_type = frame.get(18).copied().unwrap_or_default();
    let body = frame.get(HEADER_LEN..).unwrap_or_default();
    let mut errors = Vec::new();
    let message = match msg_type {
        msg_type::OPEN => Message::Open(Open::decode_body(body)?),
        msg_type::UPDATE => Message::Update(Update::decode_body(body, opts, &mut errors)?),
        msg_type::NOTIFICATION => Message::Notification(Notification::decode_body(body)),
        msg_type::KEEPALIVE => Message::Keepalive,
        msg_type::ROUTE_REFRESH => Message::RouteRefresh(RouteRefresh::decode_body(frame)?),
        other => return Err(DecodeError::BadMessageType { msg_type: other }),
    };
    Ok(Decoded {
        message,
        length: len,
        errors,
    })
}

/// Splits a byte stream into whole messages and decodes each, for tools that read captures.
/// Stops at the first framing error (the stream cannot be resynchronised after it).
pub fn decode_stream(mut buf: &[u8], opts: &WireOptions) -> Vec<Result<Decoded, DecodeError>> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        match frame_length(buf, opts.max_message_len()) {
            Ok(Some(len)) if len <= buf.len() => {
                let (frame, rest) = buf.split_at(len);
                out.push(decode_message(frame, opts));
                buf = rest;
            }
            Ok(_) => {
                let length = u16::try_from(buf.len()).unwrap_or(u16::MAX);
                out.push(Err(DecodeError::BadMessageLength { length }));
                break;
            }
            Err(e) => {
                out.push(Err(e));
                break;
            }
        }
    }
    out
}

/// The fuzzing oracle, shared by the fuzz targets and the regression tests: decoding `bytes`
/// must not panic, and every message that decodes must re-encode to bytes that decode to
/// the same message. `Err` describes the first violation.
pub fn check_round_trip(bytes: &[u8], opts: &WireOptions) -> Result<usize, String> {
    let mut decoded = 0;
    for d in decode_stream(bytes, opts).into_iter().flatten() {
        let again = d
            .message
            .to_bytes(opts)
            .map_err(|e| format!("a decoded {} does not encode: {e}", d.message.type_name()))?;
        let twice = decode_message(&again, opts).map_err(|e| {
            format!(
                "a re-encoded {} does not decode: {e}",
                d.message.type_name()
            )
        })?;
        if twice.message != d.message {
            return Err(format!(
                "{} changed across a round trip",
                d.message.type_name()
            ));
        }
        decoded += 1;
    }
    Ok(decoded)
}
