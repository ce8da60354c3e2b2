//! Decode any bytes as BGP messages. Oracle (`check_round_trip`): no panic, and whatever
//! decodes re-encodes to bytes that decode to the same message.
#![no_main]

use bgp_proto::message::{WireOptions, check_round_trip};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, bytes)) = data.split_first() else {
        return;
    };
    let opts = WireOptions {
        four_octet_as: flags & 1 != 0,
        extended_message: flags & 2 != 0,
    };
    if let Err(e) = check_round_trip(bytes, &opts) {
        panic!("{e}");
    }
});
