//! Text output: aligned tables (ANSI colour only on a terminal) and the `diff` JSON document.

use std::fmt::Write as _;

use super::DiffReport;
use super::diff::{DiffRow, Verdict, summarize};
pub use crate::text::human_secs;

const RESET: &str = "\x1b[0m";

/// How to render the `diff` table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableStyle {
    /// More columns: IPAM and Node.spec values, per-peer state, next hop, status age,
    /// speaker liveness.
    pub wide: bool,
    /// ANSI colours for verdicts (only when writing to a terminal).
    pub color: bool,
    /// Leave out `ok` rows (the summary still counts them).
    pub only_problems: bool,
}

/// A table cell: text plus an optional ANSI colour code, applied after padding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub text: String,
    pub color: Option<&'static str>,
}

impl From<String> for Cell {
    fn from(text: String) -> Self {
        Cell { text, color: None }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Self {
        Cell {
            text: text.to_owned(),
            color: None,
        }
    }
}

/// Columns separated by three spaces, the last one unpadded (like kubectl). Every cell is
/// escaped ([`crate::text::escape`]): its text may come from a peer (an RFC 9003 shutdown
/// message) or another speaker's report, and a terminal must not act on it.
pub fn table(header: &[&str], rows: &[Vec<Cell>], color: bool) -> String {
    let rows: Vec<Vec<Cell>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|c| Cell {
                    text: crate::text::escape(&c.text),
                    color: c.color,
                })
                .collect()
        })
        .collect();
    let rows = rows.as_slice();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, c) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(c.text.chars().count());
            }
        }
    }
    let mut out = String::new();
    let head: Vec<Cell> = header.iter().map(|h| Cell::from(*h)).collect();
    for row in std::iter::once(&head).chain(rows) {
        let mut line = String::new();
        for (i, c) in row.iter().enumerate() {
            let last = i + 1 == row.len();
            let pad = if last {
                0
            } else {
                widths[i].saturating_sub(c.text.chars().count())
            };
            match c.color.filter(|_| color) {
                Some(code) => {
                    let _ = write!(line, "{code}{}{RESET}", c.text);
                }
                None => line.push_str(&c.text),
            }
            if !last {
                line.push_str(&" ".repeat(pad + 3));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn verdict_color(v: Verdict) -> &'static str {
    match v {
        Verdict::Ok => "\x1b[32m",
        Verdict::StaleStatus | Verdict::NoSpeaker => "\x1b[33m",
        _ => "\x1b[1;31m",
    }
}

fn list_or_dash(v: &[String]) -> String {
    if v.is_empty() {
        "-".to_owned()
    } else {
        v.join(",")
    }
}

fn verdict_cell(r: &DiffRow) -> Cell {
    let mut text = r.verdict.to_string();
    if !r.also.is_empty() {
        let also: Vec<&str> = r.also.iter().map(|v| v.as_str()).collect();
        let _ = write!(text, " (+{})", also.join(","));
    }
    Cell {
        text,
        color: Some(verdict_color(r.verdict)),
    }
}

pub(crate) fn peers_cell(r: &DiffRow) -> String {
    let cells: Vec<String> = r
        .peers
        .iter()
        .map(
            |p| match (p.state == "Established", p.announced, &p.refused) {
                (true, true, _) => format!("{}=Established(sent)", p.name),
                // Whatever the state: the speaker would not send it once Established either.
                (_, false, Some(why)) if r.allocated.contains(&r.prefix) => {
                    format!("{}={}(refused: {why})", p.name, p.state)
                }
                // "missing" only where the prefix should be there.
                (true, false, _) if r.allocated.contains(&r.prefix) => {
                    format!("{}=Established(missing)", p.name)
                }
                _ => format!("{}={}", p.name, p.state),
            },
        )
        .collect();
    list_or_dash(&cells)
}

fn next_hop_cell(r: &DiffRow) -> String {
    let mut hops: Vec<String> = r.peers.iter().filter_map(|p| p.next_hop.clone()).collect();
    hops.sort();
    hops.dedup();
    list_or_dash(&hops)
}

/// The `diff` table with a one-line summary under it.
pub fn render_table(report: &DiffReport, style: TableStyle) -> String {
    let shown: Vec<&DiffRow> = report
        .rows
        .iter()
        .filter(|r| !style.only_problems || !r.is_ok())
        .collect();
    let mut out = String::new();
    if !shown.is_empty() {
        let (header, rows): (&[&str], Vec<Vec<Cell>>) = if style.wide {
            (
                &[
                    "NODE",
                    "PREFIX",
                    "VERDICT",
                    "IPAM",
                    "NODE.SPEC",
                    "PEERS",
                    "NEXT-HOP",
                    "AGE",
                    "SPEAKER",
                    "DETAIL",
                ],
                shown
                    .iter()
                    .map(|r| {
                        vec![
                            r.node.as_str().into(),
                            r.prefix.as_str().into(),
                            verdict_cell(r),
                            list_or_dash(&r.allocated).into(),
                            list_or_dash(&r.node_spec).into(),
                            peers_cell(r).into(),
                            next_hop_cell(r).into(),
                            r.status_age_seconds
                                .map_or_else(|| "-".to_owned(), human_secs)
                                .into(),
                            r.liveness.as_str().into(),
                            r.detail.as_str().into(),
                        ]
                    })
                    .collect(),
            )
        } else {
            (
                &["NODE", "PREFIX", "VERDICT", "DETAIL"],
                shown
                    .iter()
                    .map(|r| {
                        vec![
                            r.node.as_str().into(),
                            r.prefix.as_str().into(),
                            verdict_cell(r),
                            r.detail.as_str().into(),
                        ]
                    })
                    .collect(),
            )
        };
        out.push_str(&table(header, &rows, style.color));
        out.push('\n');
    }
    out.push_str(&summary_line(report));
    out.push('\n');
    out
}

pub use crate::text::count;

/// e.g. `3 nodes, 5 rows: 3 ok, 1 not-announced, 1 source-mismatch (source ipam-crd)`.
pub fn summary_line(report: &DiffReport) -> String {
    let s = summarize(&report.rows);
    if s.rows == 0 {
        return format!(
            "no pod CIDRs found: no allocations, Node spec values or announcements (source {})",
            report.source
        );
    }
    let counts: Vec<String> = Verdict::ALL
        .iter()
        .filter(|v| s.verdicts.get(**v) > 0)
        .map(|v| format!("{} {v}", s.verdicts.get(*v)))
        .collect();
    format!(
        "{}, {}: {} (source {})",
        count(s.nodes, "node"),
        count(s.rows, "row"),
        if s.problems == 0 {
            "all ok".to_owned()
        } else {
            counts.join(", ")
        },
        report.source
    )
}

/// The `diff` JSON document, typed so it is written straight out (10,000 rows are ~16 MB of
/// text; a `serde_json::Value` tree of them would be ~25 MB more).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonDoc<'a> {
    source: &'a str,
    generated_at: String,
    stale_after_seconds: u64,
    rows: Vec<&'a DiffRow>,
    summary: super::diff::Summary,
}

fn json_doc(report: &DiffReport, only_problems: bool) -> JsonDoc<'_> {
    JsonDoc {
        source: report.source.as_str(),
        generated_at: super::rfc3339(report.now),
        stale_after_seconds: report.stale_after_secs,
        rows: report
            .rows
            .iter()
            .filter(|r| !only_problems || !r.is_ok())
            .collect(),
        summary: summarize(&report.rows),
    }
}

/// Writes the JSON document (see [`render_json`]) to `out`, pretty-printed, newline-ended.
pub fn write_json(
    report: &DiffReport,
    only_problems: bool,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &json_doc(report, only_problems))?;
    out.write_all(b"\n")
}

/// One JSON document: `source`, `generatedAt`, `staleAfterSeconds`, `rows`, `summary`.
/// `only_problems` drops `ok` rows; the summary still counts every row.
pub fn render_json(report: &DiffReport, only_problems: bool) -> String {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail, nor can serializing these types.
    let _ = write_json(report, only_problems, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_colour_does_not_count() {
        let rows = vec![
            vec![
                "a".into(),
                Cell {
                    text: "ok".into(),
                    color: Some("\x1b[32m"),
                },
                "x".into(),
            ],
            vec!["long-name".into(), "conflict".into(), "y".into()],
        ];
        let plain = table(&["N", "V", "D"], &rows, false);
        assert_eq!(
            plain,
            "N           V          D\na           ok         x\nlong-name   conflict   y\n"
        );
        let colored = table(&["N", "V", "D"], &rows, true);
        assert!(colored.contains("\x1b[32mok\x1b[0m         x"));
        assert!(!plain.contains('\x1b'));
    }

    #[test]
    fn counts_are_singular_for_one_only() {
        assert_eq!(count(1, "peer"), "1 peer");
        assert_eq!(count(0, "peer"), "0 peers");
        assert_eq!(count(2, "node"), "2 nodes");
    }
}
