//! Decode any bytes as a BFD Control packet. Oracle: no panic; whatever decodes re-encodes
//! to a packet that decodes the same (Authentication Section included); and the session
//! state machine takes it without panicking, whatever state it is in, with and without
//! Keyed / Meticulous Keyed SHA1 authentication (RFC 5880 §6.7.4); a packet the fuzzer
//! could not sign is never accepted by an authenticated session.
#![no_main]

use std::time::Duration;

use bgp_proto::bfd::{
    BfdAuthKey, BfdInput, BfdOutput, BfdSession, BfdSessionConfig, BfdTimer, ControlPacket,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = ControlPacket::decode(data) else {
        return;
    };
    if !(p.poll && p.final_) {
        let bytes = p.encode().expect("a decoded packet re-encodes");
        assert_eq!(ControlPacket::decode(&bytes), Ok(p));
    }
    let cfg = BfdSessionConfig {
        my_discriminator: p.your_discriminator.max(1),
        desired_min_tx: Duration::from_millis(100),
        required_min_rx: Duration::from_millis(100),
        detect_mult: 3,
        jitter_seed: u64::from(p.my_discriminator),
    };
    let key_id = p.auth.map_or(0, |a| a.key_id);
    let sessions = [
        BfdSession::new(cfg),
        BfdSession::new(cfg).with_auth(BfdAuthKey::new(false, key_id, b"fuzz").unwrap(), 7),
        BfdSession::new(cfg).with_auth(BfdAuthKey::new(true, key_id, b"fuzz").unwrap(), 7),
    ];
    for (i, mut s) in sessions.into_iter().enumerate() {
        s.handle(BfdInput::Start);
        for _ in 0..3 {
            let out = s.handle(BfdInput::Received(p));
            // Without the key the fuzzer cannot make a digest SHA1 would accept.
            if i > 0 {
                assert!(
                    out.iter().any(|o| matches!(o, BfdOutput::AuthFailed(_))),
                    "an unsigned packet passed authentication"
                );
            }
            s.handle(BfdInput::TimerFired(BfdTimer::Transmit));
        }
        s.handle(BfdInput::TimerFired(BfdTimer::Detect));
    }
});
