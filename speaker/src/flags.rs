//! Flag values shared by every subcommand: durations in the config's syntax.

/// Seconds from `300`, `300s`, `5m` or `1h`: the same syntax as the config's duration keys
/// (`podcidr_config::parse_seconds`), for every seconds flag.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    podcidr_config::parse_seconds(s)
}

/// Milliseconds from `500` (bare: milliseconds), `500ms`, or `2s`, `1m`, `1h`.
pub fn parse_millis(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if let Some(ms) = t.strip_suffix("ms") {
        return ms
            .parse()
            .map_err(|_| format!("{s:?} is not a duration (e.g. 500, 500ms, 2s)"));
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse().map_err(|_| format!("{s:?} is too large"));
    }
    parse_duration(t)?
        .checked_mul(1000)
        .ok_or_else(|| format!("{s:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::{parse_duration, parse_millis};

    #[test]
    fn durations() {
        assert_eq!(parse_duration("300"), Ok(300));
        assert_eq!(parse_duration("90s"), Ok(90));
        assert_eq!(parse_duration("5m"), Ok(300));
        assert_eq!(parse_duration("1h"), Ok(3600));
        assert!(parse_duration("5d").is_err());
        assert!(parse_duration("m").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(parse_millis("500"), Ok(500));
        assert_eq!(parse_millis("500ms"), Ok(500));
        assert_eq!(parse_millis("2s"), Ok(2000));
        assert!(parse_millis("2x").is_err());
    }
}
