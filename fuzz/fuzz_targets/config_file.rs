//! Any text as a speaker config file (issue 31 item 9: one bad config reaches a node). The
//! parser and every validation rule run on it. Oracle: no panic, and the same text gives the
//! same answer twice (no hidden state); every error names a field path or the document.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podcidr_config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The reader refuses files above 1 MiB before parsing; stay in what it parses.
    if text.len() > 64 * 1024 {
        return;
    }
    let first = Config::from_yaml_str(text);
    let second = Config::from_yaml_str(text);
    match (&first, &second) {
        (Ok(a), Ok(b)) => assert_eq!(format!("{a:?}"), format!("{b:?}")),
        (Err(a), Err(b)) => {
            assert_eq!(a.to_string(), b.to_string());
            assert!(!a.to_string().is_empty());
        }
        _ => panic!("two answers for one text"),
    }
});
