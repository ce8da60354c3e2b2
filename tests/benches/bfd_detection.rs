//! Failure detection at the ToR: node and ToR in network namespaces, BIRD 2 as the ToR, our
//! speaker on the node. The link is cut with an iptables DROP in the node's namespace and
//! the time until BIRD no longer has the node's route is measured, with BFD 100 ms × 3 and
//! without BFD (BGP hold time 3 s, keepalive 1 s). BIRD is polled with `birdc show route`
//! as fast as it answers; the table reports that poll interval (the resolution).
//!
//! Run: `cargo bench -p integration-tests --bench bfd_detection -- --bench --speaker PATH
//! [--runs 10]` (root, namespaces, bird, iptables). `--quick`: one run of each. Writes a
//! Markdown table to stdout (docs/benchmarks.md). Not part of `cargo test`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use integration_tests::bfd_topology::{BfdTopology, BfdTopologyOptions};
use integration_tests::netns::netns_permitted;

const WAIT: Duration = Duration::from_secs(30);

struct Args {
    speaker: PathBuf,
    runs: u32,
}

fn parse_args() -> Option<Args> {
    let mut argv = std::env::args().skip(1);
    let mut a = Args {
        speaker: integration_tests::dist_binary(),
        runs: 10,
    };
    let mut bench = false;
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--bench" => bench = true,
            "--speaker" => a.speaker = argv.next()?.into(),
            "--runs" => a.runs = argv.next()?.parse().ok()?,
            "--quick" => a.runs = 1,
            _ => {}
        }
    }
    // `cargo test --benches` runs this without --bench: do nothing then.
    bench.then_some(a)
}

struct Sample {
    detect: Duration,
    /// Mean time between two `birdc` polls during this run.
    poll: Duration,
}

fn one_run(a: &Args, case: &str, i: u32, opts: &BfdTopologyOptions) -> Result<Sample, String> {
    let tag = format!("pcbd{}{case}{i}", std::process::id() % 10_000);
    let mut t = BfdTopology::new(&tag, &a.speaker, opts);
    t.start_speaker();
    let ready = t.poll_until(Duration::from_millis(20), WAIT, |t| {
        t.tor_has_route() && (opts.bfd.is_none() || t.tor_bfd_up())
    });
    if ready.is_none() {
        return Err(format!("no route at the ToR\n{}", t.diagnostics()));
    }
    // Let BFD settle on its fast interval (the poll after Up) and BGP exchange keepalives.
    std::thread::sleep(Duration::from_secs(1));
    t.cut_link();
    let start = Instant::now();
    let mut polls = 0u32;
    loop {
        polls += 1;
        if !t.tor_has_route() {
            let detect = start.elapsed();
            return Ok(Sample {
                detect,
                poll: detect / polls,
            });
        }
        if start.elapsed() > WAIT {
            return Err(format!(
                "route still at the ToR after {WAIT:?}\n{}",
                t.diagnostics()
            ));
        }
    }
}

fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1000.0)
}

fn main() {
    let Some(a) = parse_args() else { return };
    if !netns_permitted("pcbd-probe", &["bird", "iptables"]) {
        eprintln!("bfd_detection: needs root, network namespaces, bird and iptables");
        std::process::exit(1);
    }
    let cases = [
        (
            "bfd",
            "BFD 100 ms × 3 (hold time 3 s)",
            BfdTopologyOptions {
                bfd: Some((100, 100, 3)),
                hold_time: 3,
                restart_time: 120,
            },
        ),
        (
            "hold",
            "no BFD, hold time 3 s",
            BfdTopologyOptions {
                bfd: None,
                hold_time: 3,
                restart_time: 120,
            },
        ),
    ];
    println!("| detection | runs | min ms | median ms | max ms | poll interval ms |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mut failed = false;
    for (case, label, opts) in &cases {
        let mut samples = Vec::new();
        for i in 0..a.runs {
            match one_run(&a, case, i, opts) {
                Ok(s) => samples.push(s),
                Err(e) => {
                    eprintln!("bfd_detection {case} run {i}: {e}");
                    failed = true;
                }
            }
        }
        if samples.is_empty() {
            continue;
        }
        let mut d: Vec<Duration> = samples.iter().map(|s| s.detect).collect();
        d.sort();
        let poll = samples.iter().map(|s| s.poll).sum::<Duration>() / samples.len() as u32;
        println!(
            "| {label} | {} | {} | {} | {} | {:.1} |",
            d.len(),
            ms(d[0]),
            ms(d[d.len() / 2]),
            ms(d[d.len() - 1]),
            poll.as_secs_f64() * 1000.0,
        );
    }
    if failed {
        std::process::exit(1);
    }
}
