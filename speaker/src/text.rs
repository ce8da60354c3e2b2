//! Text for people: strings from peers, API objects and other speakers' reports shown without
//! what a terminal or a log parser would act on. Shared by the daemon (logs, Events) and the
//! CLI (tables); JSON and YAML output keep strings exact (their encoders escape).

/// Control characters (newlines, escapes) shown as Rust escapes; plain text unchanged.
pub fn escape(text: &str) -> String {
    if text.chars().any(char::is_control) {
        text.escape_debug().to_string()
    } else {
        text.to_owned()
    }
}
