//! Any text as the `file` pod-CIDR source (issue 31 item 9): what an operator's tooling writes
//! on the node, read by every speaker that uses it. Oracle: no panic; the same text gives the
//! same answer twice; every CIDR kept for announcement is a network address (no host bits),
//! not a default route, and not listed twice for its node.
#![no_main]

use std::collections::HashSet;

use ipam_watch::source::parse_file;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The reader refuses files above its cap before parsing; stay well inside it.
    if text.len() > 64 * 1024 {
        return;
    }
    let first = parse_file(text);
    match (&first, &parse_file(text)) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(a), Err(b)) => {
            assert_eq!(a.to_string(), b.to_string());
            assert!(!a.to_string().is_empty());
        }
        _ => panic!("two answers for one text"),
    }
    let Ok(nodes) = first else {
        return;
    };
    for (node, cidrs) in &nodes {
        let mut seen = HashSet::new();
        for net in &cidrs.valid {
            assert_eq!(net.trunc(), *net, "{node}: {net} has host bits");
            assert!(net.prefix_len() > 0, "{node}: default route kept");
            assert!(seen.insert(*net), "{node}: {net} kept twice");
        }
    }
});
