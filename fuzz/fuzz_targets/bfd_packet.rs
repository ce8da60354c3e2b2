//! Decode any bytes as a BFD Control packet. Oracle: no panic; whatever decodes re-encodes
//! to a packet that decodes the same; and the session state machine takes it without
//! panicking, whatever state it is in.
#![no_main]

use std::time::Duration;

use bgp_proto::bfd::{BfdInput, BfdSession, BfdSessionConfig, BfdTimer, ControlPacket};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = ControlPacket::decode(data) else {
        return;
    };
    if !(p.poll && p.final_) {
        let bytes = p.encode().expect("a decoded packet re-encodes");
        assert_eq!(ControlPacket::decode(&bytes), Ok(p));
    }
    let mut s = BfdSession::new(BfdSessionConfig {
        my_discriminator: p.your_discriminator.max(1),
        desired_min_tx: Duration::from_millis(100),
        required_min_rx: Duration::from_millis(100),
        detect_mult: 3,
        jitter_seed: u64::from(p.my_discriminator),
    });
    s.handle(BfdInput::Start);
    for _ in 0..3 {
        s.handle(BfdInput::Received(p));
        s.handle(BfdInput::TimerFired(BfdTimer::Transmit));
    }
    s.handle(BfdInput::TimerFired(BfdTimer::Detect));
});
