//! Failure detection at the ToR: node and ToR in network namespaces, BIRD 2 as the ToR, our
//! speaker on the node. The link is cut with an iptables DROP in the node's namespace and
//! the time until BIRD no longer has the node's route is measured, with BFD 100 ms × 3 and
//! without BFD (BGP hold time 3 s, keepalive 1 s). BIRD is polled with `birdc show route`
//! as fast as it answers; the table reports that poll interval (the resolution).
//!
//! Run: `cargo bench -p integration-tests --bench bfd_detection -- --bench --speaker PATH
//! [--runs 10]` (root, namespaces, bird, iptables). `--quick`: one run of each. Writes a
//! Markdown table to stdout (docs/benchmarks.md). Not part of `cargo test`.
//!
//! Under load: `--stress N` runs `stress-ng --cpu N` (0: one worker per CPU) in the node's
//! namespace from the moment the session is up until the run ends, and watches BFD for
//! `--soak SECS` (default 30) before the cut: a false Down is the ToR losing the route or
//! its BFD session, or our `podcidr_bgp_bfd_session_down_total` growing, with the link up.
//! `--bfd MS[,MS...]` measures these intervals (× 3) instead of 100 ms. Each row gives the
//! load average at its end (other work on the machine included). `--soak SECS` without
//! `--stress` watches the same way on an unloaded node. Every soak also reports the
//! speaker's CPU (user + system time over the soak, `/proc/PID/stat`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use integration_tests::bfd_topology::{BfdTopology, BfdTopologyOptions};
use integration_tests::netns::netns_permitted;

const WAIT: Duration = Duration::from_secs(30);

struct Args {
    speaker: PathBuf,
    runs: u32,
    /// `stress-ng --cpu` workers in the node's namespace (0: one per CPU).
    stress: Option<usize>,
    /// Watch BFD this long before the cut (`None`: only under `--stress`, 30 s).
    soak: Option<Duration>,
    /// BFD intervals (ms, × 3) to measure.
    bfd: Vec<u32>,
}

fn parse_args() -> Option<Args> {
    let mut argv = std::env::args().skip(1);
    let mut a = Args {
        speaker: integration_tests::dist_binary(),
        runs: 10,
        stress: None,
        soak: None,
        bfd: vec![100],
    };
    let mut bench = false;
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--bench" => bench = true,
            "--speaker" => a.speaker = argv.next()?.into(),
            "--runs" => a.runs = argv.next()?.parse().ok()?,
            "--quick" => a.runs = 1,
            "--stress" => a.stress = Some(argv.next()?.parse().ok()?),
            "--soak" => a.soak = Some(Duration::from_secs(argv.next()?.parse().ok()?)),
            "--bfd" => {
                a.bfd = (argv.next()?.split(','))
                    .map(|ms| ms.parse().ok())
                    .collect::<Option<_>>()?;
            }
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
    /// Soaks: false Downs while the link was up (ToR side, our side), and the speaker's
    /// CPU over the soak (share of one CPU).
    soak: Option<(u32, u64, f64)>,
}

/// User + system CPU time of `pid` so far (clock ticks of 10 ms).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (which may hold spaces): state is the 3rd field overall.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    f.iter().sum()
}

/// Our BFD sessions that went Up → Down, from the speaker's metrics.
fn our_bfd_downs(t: &BfdTopology) -> u64 {
    t.metrics()
        .lines()
        .filter(|l| l.starts_with("podcidr_bgp_bfd_session_down_total"))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// Watches the session for `soak` with the link up: episodes in which the ToR lost the
/// route or its BFD session, and our BFD failures meanwhile.
fn soak(t: &BfdTopology, soak: Duration, bfd: bool) -> (u32, u64, f64) {
    let ours = our_bfd_downs(t);
    let pid = t.speaker_pid().unwrap_or(0);
    let cpu0 = cpu_ticks(pid);
    let start = Instant::now();
    let (mut episodes, mut down) = (0, false);
    while start.elapsed() < soak {
        let ok = t.tor_has_route() && (!bfd || t.tor_bfd_up());
        if !ok && !down {
            episodes += 1;
        }
        down = !ok;
        std::thread::sleep(Duration::from_millis(20));
    }
    let cpu = (cpu_ticks(pid) - cpu0) as f64 / 100.0 / start.elapsed().as_secs_f64();
    (episodes, our_bfd_downs(t).saturating_sub(ours), cpu)
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
    let stress = match a.stress {
        Some(n) => Some(integration_tests::stress::CpuStress::start(&t.node, n)?),
        None => None,
    };
    // Let BFD settle on its fast interval (the poll after Up) and BGP exchange keepalives.
    std::thread::sleep(Duration::from_secs(1));
    let soaked = match (&stress, a.soak) {
        (_, Some(d)) => Some(soak(&t, d, opts.bfd.is_some())),
        (Some(_), None) => Some(soak(&t, Duration::from_secs(30), opts.bfd.is_some())),
        (None, None) => None,
    };
    t.cut_link();
    let start = Instant::now();
    let mut polls = 0u32;
    loop {
        polls += 1;
        if !t.tor_has_route() {
            let detect = start.elapsed();
            drop(stress);
            return Ok(Sample {
                detect,
                poll: detect / polls,
                soak: soaked,
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
    if let (Some(_), Some(why)) = (a.stress, integration_tests::stress::unavailable()) {
        eprintln!("bfd_detection: {why}");
        std::process::exit(1);
    }
    let mut cases: Vec<(String, String, BfdTopologyOptions)> = (a.bfd.iter())
        .map(|&ms| {
            (
                format!("bfd{ms}"),
                format!("BFD {ms} ms × 3 (hold time 3 s)"),
                BfdTopologyOptions {
                    bfd: Some((ms, ms, 3)),
                    hold_time: 3,
                    restart_time: 120,
                },
            )
        })
        .collect();
    cases.push((
        "hold".into(),
        "no BFD, hold time 3 s".into(),
        BfdTopologyOptions {
            bfd: None,
            hold_time: 3,
            restart_time: 120,
        },
    ));
    let soak_secs = a.soak.map_or(30, |d| d.as_secs());
    if a.stress.is_some() || a.soak.is_some() {
        let load = match a.stress {
            Some(0) => format!(
                "`stress-ng --cpu {}` in the node's namespace",
                integration_tests::stress::cpus()
            ),
            Some(n) => format!("`stress-ng --cpu {n}` in the node's namespace"),
            None => "no stress".into(),
        };
        println!(
            "Load: {load} ({} CPUs); BFD watched {soak_secs} s before each cut.\n",
            integration_tests::stress::cpus(),
        );
        println!(
            "| detection | runs | min ms | median ms | max ms | poll interval ms | false Down (ToR / ours) | speaker CPU % (soak) | load average |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---|");
    } else {
        println!("| detection | runs | min ms | median ms | max ms | poll interval ms |");
        println!("|---|---:|---:|---:|---:|---:|");
    }
    let mut failed = false;
    for (case, label, opts) in &cases {
        let case = case.as_str();
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
        let soaks: Vec<(u32, u64, f64)> = samples.iter().filter_map(|s| s.soak).collect();
        let stressed = (!soaks.is_empty()).then(|| {
            let tor: u32 = soaks.iter().map(|s| s.0).sum();
            let ours: u64 = soaks.iter().map(|s| s.1).sum();
            let cpu = soaks.iter().map(|s| s.2).sum::<f64>() / soaks.len() as f64;
            format!(
                " {tor} / {ours} | {:.2} | {} |",
                cpu * 100.0,
                integration_tests::stress::load_average()
            )
        });
        println!(
            "| {label} | {} | {} | {} | {} | {:.1} |{}",
            d.len(),
            ms(d[0]),
            ms(d[d.len() / 2]),
            ms(d[d.len() - 1]),
            poll.as_secs_f64() * 1000.0,
            stressed.unwrap_or_default(),
        );
    }
    if failed {
        std::process::exit(1);
    }
}
