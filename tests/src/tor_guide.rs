//! The router configurations of docs/tor.md that tests run as written: the fenced block after
//! each `<!-- tested: NAME -->` marker.

/// docs/tor.md as it is in this checkout.
pub fn text() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/tor.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The names of every `<!-- tested: NAME -->` marker.
pub fn tested_names(doc: &str) -> std::collections::BTreeSet<String> {
    doc.match_indices("<!-- tested: ")
        .filter_map(|(i, m)| {
            doc[i + m.len()..]
                .split_once(" -->")
                .map(|(n, _)| n.to_owned())
        })
        .collect()
}

/// The fenced block after `<!-- tested: NAME -->`.
pub fn snippet(name: &str) -> String {
    let doc = text();
    let marker = format!("<!-- tested: {name} -->");
    let after = doc
        .split_once(&marker)
        .unwrap_or_else(|| panic!("docs/tor.md has no {marker}"))
        .1;
    let body = after
        .trim_start()
        .strip_prefix("```")
        .and_then(|s| s.split_once('\n'))
        .unwrap_or_else(|| panic!("{marker} is not followed by a fenced block"))
        .1;
    body.split_once("\n```")
        .unwrap_or_else(|| panic!("{marker}: unterminated block"))
        .0
        .to_owned()
}
