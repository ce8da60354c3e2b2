//! Framing on the BGP header: splits one message off a read buffer (without copying) and
//! decodes it with the session's negotiated options; encodes into a write buffer. Pure: the
//! `tokio_util` codec in `bgp-io` wraps it.

use bytes::BytesMut;

use crate::error::{DecodeError, EncodeError};
use crate::message::{Decoded, HEADER_LEN, Message, WireOptions, decode_message, frame_length};

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("decode: {0}")]
    Decode(#[from] DecodeError),
    #[error("encode: {0}")]
    Encode(#[from] EncodeError),
}

/// BGP message framing. Update the options after the OPEN exchange with
/// [`Framer::set_options`].
#[derive(Debug, Clone, Default)]
pub struct Framer {
    opts: WireOptions,
}

impl Framer {
    pub fn new(opts: WireOptions) -> Self {
        Framer { opts }
    }

    pub fn options(&self) -> &WireOptions {
        &self.opts
    }

    pub fn set_options(&mut self, opts: WireOptions) {
        self.opts = opts;
    }

    /// One message per call; `Ok(None)` until a whole message is buffered. A body error
    /// consumes its frame, so a caller may continue; a header error leaves the stream
    /// unsynchronised.
    pub fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Decoded>, CodecError> {
        match frame_length(src, self.opts.max_message_len())? {
            None => {
                src.reserve(HEADER_LEN - src.len());
                Ok(None)
            }
            Some(len) if src.len() < len => {
                src.reserve(len - src.len());
                Ok(None)
            }
            Some(len) => {
                let frame = src.split_to(len).freeze();
                Ok(Some(decode_message(&frame, &self.opts)?))
            }
        }
    }

    pub fn encode(&mut self, item: &Message, dst: &mut BytesMut) -> Result<(), CodecError> {
        Ok(item.encode(&self.opts, dst)?)
    }
}
