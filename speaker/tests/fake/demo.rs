//! `podcidr-bgp demo` runs to completion on a machine with nothing installed, and its output
//! shows the allocations, the ToR table, `diff` catching the mismatch, and a node removal
//! that withdraws only that node's routes.

use crate::common;

use std::time::Duration;

use common::{Proc, TempDir};

#[test]
fn demo_runs_to_completion_and_shows_the_caught_mismatch() {
    let dir = TempDir::new("demo");
    let mut p = Proc::spawn(&["demo", "--nodes", "3"], &dir.path("demo.log"));
    let status = p
        .wait_exit(Duration::from_secs(120))
        .expect("the demo finishes");
    let out = p.log();
    assert!(status.success(), "{out}");
    for expected in [
        "node-1 → 10.244.0.0/24, fd00:244::/64",
        "node-2 → 10.244.1.0/24, fd00:244:0:1::/64",
        "3 sessions Established",
        "10.244.2.0/24          198.18.0.3       node-3",
        "fd00:244:0:1::/64      fd00:18::2       node-2",
        // Each node's conflist hands out exactly what that node announces.
        "node-1 pods get addresses from 10.244.0.0/24, fd00:244::/64",
        "node-3 pods get addresses from 10.244.2.0/24, fd00:244:0:2::/64",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in\n{out}");
    }
    // The diff table catches the injected incident on node-2 and nothing else.
    let diff: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("source-mismatch"))
        .collect();
    assert!(
        diff.iter()
            .any(|l| l.contains("node-2") && l.contains("10.244.200.0/24")),
        "{out}"
    );
    assert!(
        diff.iter()
            .all(|l| l.contains("node-2") || l.contains("rows:")),
        "{out}"
    );
    // Only node-3's routes are withdrawn; node-1's and node-2's stay.
    let withdrawn: Vec<&str> = out.lines().filter(|l| l.contains("withdrawn:")).collect();
    assert_eq!(withdrawn.len(), 2, "{out}");
    assert!(
        withdrawn
            .iter()
            .all(|l| l.contains("10.244.2.0/24") || l.contains("fd00:244:0:2::/64")),
        "{out}"
    );
    // The LoadBalancer Service: from the nodes with a ready pod only, then one fewer.
    assert!(
        out.contains("198.51.100.10/32 announced from node-1, node-2"),
        "{out}"
    );
    assert!(
        out.contains("node-2 withdraws the route, node-1 keeps it"),
        "{out}"
    );
    let service_rows: Vec<&str> = out
        .lines()
        .filter(|l| l.trim_start().starts_with("shop/web"))
        .collect();
    assert_eq!(
        service_rows.len(),
        3,
        "one diff --services row per node\n{out}"
    );
    assert!(
        service_rows
            .iter()
            .any(|l| l.contains("node-1") && l.contains(" ok ") && l.contains("tor")),
        "{out}"
    );
    // Four pod CIDRs and the Service address from node-1.
    assert!(out.contains("5 routes remain"), "{out}");
}
