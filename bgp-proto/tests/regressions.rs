//! Replays every input under tests/regressions/ (fuzz finds and hand-made edge cases) through
//! the fuzz oracle: no panic, and whatever decodes re-encodes to the same message.
//! File format: one options byte (bit 0: 4-octet AS, bit 1: extended messages), then bytes.

use std::fs;
use std::path::Path;

use bgp_proto::message::{WireOptions, decode_message, decode_stream};

#[test]
fn regression_inputs_decode_without_panic_and_round_trip() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/regressions");
    let mut n = 0;
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let data = fs::read(&path).unwrap();
        let Some((&flags, bytes)) = data.split_first() else {
            continue;
        };
        let opts = WireOptions {
            four_octet_as: flags & 1 != 0,
            extended_message: flags & 2 != 0,
        };
        for decoded in decode_stream(bytes, &opts).into_iter().flatten() {
            let again = decoded
                .message
                .to_bytes(&opts)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let twice = decode_message(&again, &opts).unwrap();
            assert_eq!(twice.message, decoded.message, "{}", path.display());
        }
        n += 1;
    }
    assert!(n > 0);
}
