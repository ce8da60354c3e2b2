//! Golden vectors captured from BIRD 2 and GoBGP (scripts/capture-vectors.sh) and written from
//! RFC definitions: each decodes cleanly and re-encodes to the same bytes.
//! Provenance: tests/vectors/PROVENANCE.md.

use std::fs;
use std::path::{Path, PathBuf};

use bgp_proto::message::{Message, WireOptions, decode_message};

struct Vector {
    path: PathBuf,
    bytes: Vec<u8>,
    opts: WireOptions,
    /// RFC 7911 path identifiers in the NLRI: we never advertise ADD-PATH, so no peer sends
    /// them to us; such captures are kept only for their OPENs.
    add_path: bool,
}

fn header(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix('#'))
        .find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_owned()))
}

fn load(path: &Path) -> Vector {
    let text = fs::read_to_string(path).unwrap();
    let hex: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.chars().filter(char::is_ascii_hexdigit))
        .collect();
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let four = header(&text, "four-octet-as:").is_none_or(|v| v == "yes");
    let extended = header(&text, "extended-message:").is_some_and(|v| v == "yes");
    let add_path = header(&text, "add-path:").is_some_and(|v| v != "none");
    Vector {
        path: path.to_owned(),
        bytes,
        opts: WireOptions {
            four_octet_as: four,
            extended_message: extended,
        },
        add_path,
    }
}

fn all_vectors() -> Vec<Vector> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
    let mut out = Vec::new();
    for dir in ["bird", "gobgp", "rfc"] {
        let mut files: Vec<PathBuf> = fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "hex"))
            .collect();
        files.sort();
        out.extend(files.iter().map(|p| load(p)));
    }
    out
}

#[test]
fn every_vector_decodes_cleanly_and_reencodes_byte_for_byte() {
    let vectors = all_vectors();
    assert!(vectors.len() >= 40, "only {} vectors", vectors.len());
    let mut checked = 0;
    for v in &vectors {
        if v.add_path && v.bytes.get(18) == Some(&2) {
            continue;
        }
        let d = decode_message(&v.bytes, &v.opts)
            .unwrap_or_else(|e| panic!("{}: {e}", v.path.display()));
        assert!(d.errors.is_empty(), "{}: {:?}", v.path.display(), d.errors);
        let again = d.message.to_bytes(&v.opts).unwrap();
        assert_eq!(again.as_ref(), v.bytes.as_slice(), "{}", v.path.display());
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} vectors checked");
}

#[test]
fn captures_cover_every_message_type_from_both_daemons() {
    for dir in ["bird", "gobgp"] {
        let mut seen = std::collections::BTreeSet::new();
        for v in all_vectors()
            .iter()
            .filter(|v| v.path.to_string_lossy().contains(&format!("/{dir}/")))
        {
            if let Ok(d) = decode_message(&v.bytes, &v.opts) {
                seen.insert(d.message.type_name());
            }
        }
        for t in ["OPEN", "UPDATE", "KEEPALIVE", "NOTIFICATION"] {
            assert!(seen.contains(t), "{dir} has no {t} vector");
        }
    }
}

#[test]
fn end_of_rib_vectors_are_recognised_rfc4724_2() {
    let mut families = Vec::new();
    for v in all_vectors() {
        if let Ok(d) = decode_message(&v.bytes, &v.opts)
            && let Message::Update(u) = d.message
            && let Some(f) = u.end_of_rib_family()
        {
            families.push(f.name());
        }
    }
    assert!(families.contains(&"ipv4-unicast".to_owned()));
    assert!(families.contains(&"ipv6-unicast".to_owned()));
}

/// tests/vectors/errors/: messages a conforming speaker must refuse, each with the RFC rule
/// and `# expect: <action> <code>/<subcode> …` (the most severe outcome).
#[test]
fn error_vectors_get_the_action_and_notification_they_state() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/errors");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hex"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "{files:?}");
    for path in files {
        let v = load(&path);
        let text = fs::read_to_string(&path).unwrap();
        let expect = header(&text, "expect:").expect("an expect: header");
        let mut words = expect.split_whitespace();
        let (action, code) = (words.next().unwrap(), words.next().unwrap());
        let worst = match decode_message(&v.bytes, &v.opts) {
            Err(e) => e,
            Ok(d) => d
                .errors
                .into_iter()
                .min_by_key(|e| match e.action() {
                    bgp_proto::Action::SessionReset => 0,
                    bgp_proto::Action::AfiSafiDisable(_) => 1,
                    bgp_proto::Action::TreatAsWithdraw => 2,
                    bgp_proto::Action::AttributeDiscard => 3,
                })
                .unwrap_or_else(|| panic!("{}: decoded cleanly", path.display())),
        };
        let h = worst.handling();
        let got = format!(
            "{} {}/{}",
            h.action.as_str(),
            u8::from(h.notification.code),
            h.notification.subcode
        );
        assert_eq!(got, format!("{action} {code}"), "{}", path.display());
    }
}
