//! The `tokio_util` codec for `Framed` streams: `bgp_proto::codec::Framer` (pure framing on
//! the BGP header, decoding with the session's negotiated options) behind `Decoder` and
//! `Encoder`. Frames are split off the read buffer without copying.

use bgp_proto::codec::{CodecError, Framer};
use bgp_proto::message::{Decoded, Message, WireOptions};
use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

/// BGP message codec. Update the options after the OPEN exchange with
/// [`BgpCodec::set_options`] (through `Framed::codec_mut`).
#[derive(Debug, Clone, Default)]
pub struct BgpCodec {
    framer: Framer,
}

impl BgpCodec {
    pub fn new(opts: WireOptions) -> Self {
        BgpCodec {
            framer: Framer::new(opts),
        }
    }

    pub fn options(&self) -> &WireOptions {
        self.framer.options()
    }

    pub fn set_options(&mut self, opts: WireOptions) {
        self.framer.set_options(opts);
    }
}

impl Decoder for BgpCodec {
    type Item = Decoded;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Decoded>, CodecError> {
        self.framer.decode(src)
    }
}

impl Encoder<&Message> for BgpCodec {
    type Error = CodecError;

    fn encode(&mut self, item: &Message, dst: &mut BytesMut) -> Result<(), CodecError> {
        self.framer.encode(item, dst)
    }
}

impl Encoder<Message> for BgpCodec {
    type Error = CodecError;

    fn encode(&mut self, item: Message, dst: &mut BytesMut) -> Result<(), CodecError> {
        self.framer.encode(&item, dst)
    }
}
