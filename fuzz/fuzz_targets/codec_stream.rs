//! Feed any bytes to the codec in chunks. Oracle: no panic, and the messages are the same
//! as when the whole buffer arrives at once.
#![no_main]

use bgp_proto::Framer;
use bgp_proto::message::{Message, WireOptions};
use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;

fn run(chunks: &[&[u8]], opts: WireOptions) -> Vec<Message> {
    let mut codec = Framer::new(opts);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(d)) => out.push(d.message),
                Ok(None) => break,
                // A session ends on any error; so does this run.
                Err(_) => return out,
            }
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, bytes)) = data.split_first() else {
        return;
    };
    let opts = WireOptions::four_octet();
    let step = usize::from(split.max(1));
    let chunks: Vec<&[u8]> = bytes.chunks(step).collect();
    assert_eq!(run(&chunks, opts), run(&[bytes], opts));
});
