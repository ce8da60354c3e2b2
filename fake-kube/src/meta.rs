//! Small helpers for server-owned metadata: timestamps, uids, generated names.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

/// Current time as RFC 3339 with second precision (`metav1.Time`).
pub(crate) fn now_rfc3339() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format_rfc3339(secs)
}

fn format_rfc3339(unix_secs: u64) -> String {
    let days = i64::try_from(unix_secs / 86_400).unwrap_or(0);
    let rem = unix_secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A UUID-shaped uid, unique within this process run.
pub(crate) fn make_uid(seed: u64, counter: u64) -> String {
    let hi = seed ^ counter.rotate_left(17);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        (hi >> 32) as u32,
        (hi >> 16) & 0xffff,
        hi & 0xfff,
        counter >> 48 & 0xfff,
        counter & 0xffff_ffff_ffff
    )
}

/// `generateName` suffix: five lower-case alphanumerics, like the real server.
pub(crate) fn name_suffix(n: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = n.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    (0..5)
        .map(|_| {
            let c = ALPHABET[usize::try_from(x % 27).unwrap_or(0)];
            x /= 27;
            char::from(c)
        })
        .collect()
}

/// `obj.metadata`, created if missing; `None` if `obj` is not an object.
pub(crate) fn metadata_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let map = obj.as_object_mut()?;
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut()
}

/// `obj.metadata.<field>` as a string, empty when absent.
pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj["metadata"][field].as_str().unwrap_or("")
}

/// The `metadata.finalizers` list.
pub(crate) fn finalizers(obj: &Value) -> Vec<&str> {
    obj["metadata"]["finalizers"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// An object reduced to its metadata, as the API serves it for a metadata-only request.
pub(crate) fn partial_object(obj: &Value) -> Value {
    json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_unix_times() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_rfc3339(1_795_000_000), "2026-11-18T11:06:40Z");
    }

    #[test]
    fn uids_and_suffixes_differ() {
        assert_ne!(make_uid(7, 1), make_uid(7, 2));
        assert_eq!(make_uid(7, 1).len(), 36);
        assert_ne!(name_suffix(1), name_suffix(2));
        assert_eq!(name_suffix(3).len(), 5);
    }
}
