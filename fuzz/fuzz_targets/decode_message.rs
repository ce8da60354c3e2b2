//! Decode any bytes as BGP messages. Oracle: no panic, and whatever decodes re-encodes to
//! bytes that decode to the same message.
#![no_main]

use bgp_proto::message::{WireOptions, decode_message, decode_stream};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, bytes)) = data.split_first() else {
        return;
    };
    let opts = WireOptions {
        four_octet_as: flags & 1 != 0,
        extended_message: flags & 2 != 0,
    };
    for decoded in decode_stream(bytes, &opts).into_iter().flatten() {
        let again = decoded
            .message
            .to_bytes(&opts)
            .expect("a decoded message encodes");
        let twice = decode_message(&again, &opts).expect("a re-encoded message decodes");
        assert_eq!(twice.message, decoded.message);
    }
});
