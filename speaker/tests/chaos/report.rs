//! RSS sampling and the Markdown table.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use super::faults::{Churn, KINDS, Kind};
use super::invariants::{ALL, Violations};

/// VmRSS of a process in KiB.
pub fn rss_kib(pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Samples per (role, pid): (minutes since start, KiB).
#[derive(Default)]
pub struct Rss {
    pub series: BTreeMap<(String, i32), Vec<(f64, f64)>>,
}

impl Rss {
    pub fn sample(&mut self, minute: f64, pids: &[(String, i32)]) {
        for (role, pid) in pids {
            if let Some(k) = rss_kib(*pid) {
                #[allow(clippy::cast_precision_loss)]
                self.series
                    .entry((role.clone(), *pid))
                    .or_default()
                    .push((minute, k as f64));
            }
        }
    }

    /// Per role: the slope (KiB/min, least squares) of the longest-lived process, its span in
    /// minutes, and its first and last RSS.
    pub fn slopes(&self) -> BTreeMap<String, (f64, f64, f64, f64)> {
        let mut best: BTreeMap<String, &Vec<(f64, f64)>> = BTreeMap::new();
        for ((role, _), s) in &self.series {
            let span = |v: &Vec<(f64, f64)>| {
                v.last().map_or(0.0, |l| l.0) - v.first().map_or(0.0, |f| f.0)
            };
            if best.get(role).is_none_or(|b| span(s) > span(b)) {
                best.insert(role.clone(), s);
            }
        }
        best.into_iter()
            .filter(|(_, s)| s.len() >= 3)
            .map(|(role, s)| {
                let span = s.last().unwrap().0 - s.first().unwrap().0;
                (
                    role,
                    (slope(s), span, s.first().unwrap().1, s.last().unwrap().1),
                )
            })
            .collect()
    }
}

pub fn slope(points: &[(f64, f64)]) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx }
}

pub struct Summary<'a> {
    pub seed: u64,
    pub mode: &'a str,
    pub fault_time: Duration,
    pub injected: &'a BTreeMap<Kind, u64>,
    pub churn: &'a Churn,
    pub violations: &'a Violations,
    pub states: u64,
    pub polls: u64,
    pub convergence: Option<Duration>,
    /// After a final BIRD restart with no other fault.
    pub recovery: Option<Duration>,
    /// Node deletion to its route leaving the ToR.
    pub removals: &'a [Duration],
    pub bound: Duration,
    pub rss: &'a Rss,
}

pub fn table(s: &Summary<'_>) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\n### Chaos run: {} mode, seed {}, faults for {:.0} s\n",
        s.mode,
        s.seed,
        s.fault_time.as_secs_f64()
    );
    let _ = writeln!(t, "| fault | injected |\n|---|---|");
    for k in KINDS {
        let _ = writeln!(
            t,
            "| {} | {} |",
            k.label(),
            s.injected.get(&k).copied().unwrap_or(0)
        );
    }
    let _ = writeln!(t, "| node added (churn) | {} |", s.churn.added);
    let _ = writeln!(t, "| node deleted (churn) | {} |", s.churn.deleted);
    let _ = writeln!(t, "\n| invariant | violations |\n|---|---|");
    for k in ALL {
        let _ = writeln!(t, "| {k} | {} |", s.violations.count(k));
    }
    let _ = writeln!(
        t,
        "\nAPI states checked: {} NodePodCIDR changes; ToR table polls: {}.",
        s.states, s.polls
    );
    match s.convergence {
        Some(d) => {
            let _ = writeln!(
                t,
                "Convergence after the faults stopped: {:.1} s (bound {} s), `podcidr-bgp diff` exit 0.",
                d.as_secs_f64(),
                s.bound.as_secs()
            );
        }
        None => {
            let _ = writeln!(t, "Convergence: NOT within {} s.", s.bound.as_secs());
        }
    }
    match s.recovery {
        Some(d) => {
            let _ = writeln!(
                t,
                "Recovery from a final BIRD restart (every session and table again): {:.1} s, `diff` exit 0.",
                d.as_secs_f64()
            );
        }
        None => {
            let _ = writeln!(
                t,
                "Recovery from a final BIRD restart: NOT within {} s.",
                s.bound.as_secs()
            );
        }
    }
    if let Some(max) = s.removals.iter().max() {
        let mut v = s.removals.to_vec();
        v.sort();
        let _ = writeln!(
            t,
            "Node deleted → its route gone from the ToR: {} times, median {:.1} s, max {:.1} s.",
            v.len(),
            v[v.len() / 2].as_secs_f64(),
            max.as_secs_f64()
        );
    }
    let slopes = s.rss.slopes();
    if !slopes.is_empty() {
        let _ = writeln!(
            t,
            "\n| process (longest-lived) | span (min) | RSS first → last (KiB) | slope (KiB/min) |\n|---|---|---|---|"
        );
        for (role, (sl, span, first, last)) in slopes {
            let _ = writeln!(
                t,
                "| {role} | {span:.1} | {first:.0} → {last:.0} | {sl:+.1} |"
            );
        }
    }
    for v in s.violations.samples() {
        let _ = writeln!(t, "- {v}");
    }
    t
}
