//! `tokio_util` codec: frames on the BGP header, decodes with the session's negotiated
//! options. Frames are split off the read buffer without copying.

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

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

/// BGP message codec. Update the options after the OPEN exchange with
/// [`BgpCodec::set_options`] (through `Framed::codec_mut`).
#[derive(Debug, Clone, Default)]
pub struct BgpCodec {
    opts: WireOptions,
}

impl BgpCodec {
    pub fn new(opts: WireOptions) -> Self {
        BgpCodec { opts }
    }

    pub fn options(&self) -> &WireOptions {
        &self.opts
    }

    pub fn set_options(&mut self, opts: WireOptions) {
        self.opts = opts;
    }
}

impl Decoder for BgpCodec {
    type Item = Decoded;
    type Error = CodecError;

    /// One message per call; `Ok(None)` until a whole message is buffered. A body error
    /// consumes its frame, so a caller may continue; a header error leaves the stream
    /// unsynchronised.
    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Decoded>, CodecError> {
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
}

impl Encoder<&Message> for BgpCodec {
    type Error = CodecError;

    fn encode(&mut self, item: &Message, dst: &mut BytesMut) -> Result<(), CodecError> {
        Ok(item.encode(&self.opts, dst)?)
    }
}

impl Encoder<Message> for BgpCodec {
    type Error = CodecError;

    fn encode(&mut self, item: Message, dst: &mut BytesMut) -> Result<(), CodecError> {
        Ok(item.encode(&self.opts, dst)?)
    }
}
