//! Text for people: strings from peers, API objects and other speakers' reports shown without
//! what a terminal or a log parser would act on. Shared by the daemon (logs, Events) and the
//! CLI (tables, durations); JSON and YAML output keep strings exact (their encoders escape).

/// Control characters (newlines, escapes) shown as Rust escapes; plain text unchanged.
pub fn escape(text: &str) -> String {
    if text.chars().any(char::is_control) {
        text.escape_debug().to_string()
    } else {
        text.to_owned()
    }
}

/// `45s`, `12m5s`, `3h4m`, `2d5h`.
pub fn human_secs(s: u64) -> String {
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        3600..86400 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86400, (s % 86400) / 3600),
    }
}

/// `1 node`, `3 nodes`: English plurals for counts in output (regular nouns only).
pub fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// Unix seconds as an RFC 3339 timestamp, UTC (the epoch for what does not fit), as the API
/// writes times and as every table and report shows them.
pub fn rfc3339(unix: u64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(i64::try_from(unix).unwrap_or(0))
        .unwrap_or_default()
        .to_string()
}

/// At most `limit` bytes of `text`, cut at a character boundary.
pub fn cut(text: &str, limit: usize) -> String {
    let mut end = text.len().min(limit);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}
