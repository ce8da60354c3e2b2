//! Replays every input under tests/regressions/ (fuzz finds and hand-made edge cases) through
//! the fuzz oracle. File format: one options byte (bit 0: 4-octet AS, bit 1: extended
//! messages), then the bytes.

use std::fs;
use std::path::Path;

use bgp_proto::message::{WireOptions, check_round_trip};

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
        if let Err(e) = check_round_trip(bytes, &opts) {
            panic!("{}: {e}", path.display());
        }
        n += 1;
    }
    assert!(n > 0);
}
