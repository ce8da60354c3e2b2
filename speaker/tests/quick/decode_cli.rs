//! `podcidr-bgp decode` as a network engineer runs it: JSON lines and exit codes.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_podcidr-bgp");
const MARKER: &str = "ffffffffffffffffffffffffffffffff";

fn decode(args: &[&str], stdin: Option<&str>) -> (Vec<Value>, i32, String) {
    let mut child = Command::new(BIN)
        .arg("decode")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().unwrap();
    let lines = String::from_utf8(stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (
        lines,
        status.code().unwrap(),
        String::from_utf8(stderr).unwrap(),
    )
}

/// ORIGIN IGP, AS_PATH [65001 4200000001], NEXT_HOP 192.0.2.1, MED 10, LOCAL_PREF 100,
/// COMMUNITIES 65000:100, LARGE 4200000001:1:1, NLRI 198.51.100.0/24.
fn update_hex() -> String {
    let attrs = [
        "400101 00",
        "40020a 0202 0000fde9 fa56ea01",
        "400304 c0000201",
        "800404 0000000a",
        "400504 00000064",
        "c00804 fde80064",
        "c0200c fa56ea01 00000001 00000001",
    ]
    .concat()
    .replace(' ', "");
    let body = format!("0000{:04x}{attrs}18c63364", attrs.len() / 2);
    format!("{MARKER}{:04x}02{body}", 19 + body.len() / 2)
}

#[test]
fn update_json_has_the_documented_keys() {
    let (lines, code, _) = decode(&["--hex", &update_hex()], None);
    assert_eq!(code, 0);
    let u = &lines[0];
    assert_eq!(u["type"], "UPDATE");
    assert_eq!(u["announced"], serde_json::json!(["198.51.100.0/24"]));
    assert_eq!(u["withdrawn"], serde_json::json!([]));
    assert_eq!(u["end_of_rib"], Value::Null);
    assert_eq!(u["next_hop"], "192.0.2.1");
    assert_eq!(u["origin"], "igp");
    assert_eq!(u["as_path"], serde_json::json!([65001, 4_200_000_001u32]));
    assert_eq!(u["communities"], serde_json::json!(["65000:100"]));
    assert_eq!(
        u["large_communities"],
        serde_json::json!(["4200000001:1:1"])
    );
    assert_eq!(u["med"], 10);
    assert_eq!(u["local_pref"], 100);
    assert_eq!(u["attributes"].as_array().unwrap().len(), 7);
    assert_eq!(u["attributes"][0]["name"], "ORIGIN");
    assert_eq!(u["attributes"][0]["flags"], 0x40);
}

#[test]
fn several_messages_in_one_hex_and_on_stdin() {
    let two = format!("0x{MARKER}001304 {MARKER}:00:17:02:00:00:00:00");
    let (lines, code, _) = decode(&["--hex", &two], None);
    assert_eq!(code, 0);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["type"], "KEEPALIVE");
    assert_eq!(lines[1]["end_of_rib"], "ipv4-unicast");
    let (lines, code, _) = decode(&[], Some(&format!("# a comment\n{MARKER}001304\n")));
    assert_eq!((lines.len(), code), (1, 0));
}

#[test]
fn decode_error_prints_action_and_notification_and_continues() {
    // A KEEPALIVE, an UPDATE whose withdrawn prefix is /33, then a KEEPALIVE.
    let bad = format!("{MARKER}001c02 0005 2101020304 0000");
    let input = format!("{MARKER}001304{bad}{MARKER}001304").replace(' ', "");
    let (lines, code, _) = decode(&["--hex", &input], None);
    assert_eq!(code, 1);
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[1]["action"], "session-reset");
    assert_eq!(
        lines[1]["notification"],
        serde_json::json!({"code": 3, "subcode": 10})
    );
    assert!(lines[1]["error"].as_str().unwrap().contains("withdrawn"));
    assert_eq!(lines[2]["type"], "KEEPALIVE");
}

#[test]
fn treat_as_withdraw_update_lists_prefixes_as_withdrawn() {
    // NLRI 198.51.100.0/24 with ORIGIN missing.
    let attrs = "40020602010000fde9400304c0000201";
    let body = format!("0000{:04x}{attrs}18c63364", attrs.len() / 2);
    let hex = format!("{MARKER}{:04x}02{body}", 19 + body.len() / 2);
    let (lines, code, _) = decode(&["--hex", &hex], None);
    assert_eq!(code, 1);
    assert_eq!(lines[0]["type"], "UPDATE");
    assert_eq!(lines[0]["action"], "treat-as-withdraw");
    assert_eq!(lines[0]["announced"], serde_json::json!([]));
    assert_eq!(
        lines[0]["withdrawn"],
        serde_json::json!(["198.51.100.0/24"])
    );
}

#[test]
fn two_octet_as_flag_changes_as_path_decoding() {
    // AS_PATH with 2-octet ASNs [65001, 23456] and AS4_PATH [4200000001].
    let attrs = "400101004002060202fde95ba0400304c0000201c011060201fa56ea01";
    let body = format!("0000{:04x}{attrs}18c63364", attrs.len() / 2);
    let hex = format!("{MARKER}{:04x}02{body}", 19 + body.len() / 2);
    let (lines, code, _) = decode(&["--two-octet-as", "--hex", &hex], None);
    assert_eq!(code, 0);
    assert_eq!(
        lines[0]["as_path"],
        serde_json::json!([65001, 4_200_000_001u32])
    );
}

#[test]
fn notification_shows_the_shutdown_message() {
    let text = "rack r1 maintenance";
    let data: String = text.bytes().map(|b| format!("{b:02x}")).collect();
    let hex = format!(
        "{MARKER}{:04x}030602{:02x}{data}",
        21 + 1 + text.len(),
        text.len()
    );
    let (lines, code, _) = decode(&["--hex", &hex], None);
    assert_eq!(code, 0);
    assert_eq!(lines[0]["name"], "Cease/Administrative Shutdown");
    assert_eq!(lines[0]["shutdown_message"], text);
    assert_eq!(
        (lines[0]["code"].as_u64(), lines[0]["subcode"].as_u64()),
        (Some(6), Some(2))
    );
}

#[test]
fn route_refresh_fields() {
    let (lines, code, _) = decode(&["--hex", &format!("{MARKER}00170500020101")], None);
    assert_eq!(code, 0);
    assert_eq!(lines[0]["afi"], 2);
    assert_eq!(lines[0]["safi"], 1);
    assert_eq!(lines[0]["subtype"], "BoRR");
}

#[test]
fn input_that_is_not_hex_exits_2_with_a_reason() {
    let (lines, code, stderr) = decode(&["--hex", "ffgg"], None);
    assert_eq!((lines.len(), code), (0, 2));
    assert!(stderr.contains("not hex"), "{stderr}");
}

/// The hex of a vector file of bgp-proto/tests/vectors/errors/ (comments stripped).
fn error_vector(name: &str) -> String {
    let path = format!(
        "{}/../bgp-proto/tests/vectors/errors/{name}.hex",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Our sessions never negotiate extended messages, so `decode` by default does not either.
#[test]
fn message_over_4096_octets_needs_extended_message_rfc8654() {
    let hex = error_vector("08-update-4097-octets-without-extended-messages");
    let (lines, code, _) = decode(&["--hex", &hex], None);
    assert_eq!(code, 1);
    assert_eq!(lines[0]["action"], "session-reset");
    assert_eq!(
        (
            lines[0]["notification"]["code"].as_u64(),
            lines[0]["notification"]["subcode"].as_u64()
        ),
        (Some(1), Some(2))
    );
    let (lines, code, _) = decode(&["--extended-message", "--hex", &hex], None);
    assert_eq!(code, 0, "{lines:?}");
    assert_eq!(lines[0]["type"], "UPDATE");
}

#[test]
fn as_zero_is_reported_rfc7607() {
    let (lines, code, _) = decode(&["--hex", &error_vector("01-open-peer-as-zero")], None);
    assert_eq!(code, 1);
    assert_eq!(lines[0]["notification"]["subcode"], 2, "{lines:?}");
    let (lines, code, _) = decode(&["--hex", &error_vector("03-update-as-path-as-zero")], None);
    assert_eq!(code, 1);
    assert_eq!(lines[0]["action"], "treat-as-withdraw");
    let (lines, code, _) = decode(
        &["--hex", &error_vector("04-update-aggregator-as-zero")],
        None,
    );
    assert_eq!(code, 1);
    assert_eq!(lines[0]["action"], "attribute-discard");
}

#[test]
fn as4_path_between_four_octet_speakers_is_discarded_rfc6793_3() {
    let hex = error_vector("07-update-as4-path-between-four-octet-speakers");
    let (lines, code, _) = decode(&["--hex", &hex], None);
    assert_eq!(code, 1);
    assert_eq!(lines[0]["action"], "attribute-discard");
    assert_eq!(
        lines[0]["announced"],
        serde_json::json!(["198.51.100.0/24"]),
        "the route stands"
    );
}
