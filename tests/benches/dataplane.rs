//! Data-plane continuity: packets lost between a client and a pod while the node's speaker
//! restarts, crashes or loses an uplink, with real kernel forwarding in network namespaces
//! (tests/src/dataplane_topology.rs: client → two BIRD ToRs (ECMP) → node → pod). A sender in
//! the client paces UDP packets with sequence numbers over 64 flows; a receiver in the pod
//! records them; lost ms = lost packets × interval (tests/src/loss.rs).
//!
//! Run: `cargo bench -p integration-tests --bench dataplane -- --bench --speaker PATH
//! [--runs 10] [--pps 1000] [--scenarios restart,kill,...] [--write-docs docs/benchmarks.md]`
//! (root, namespaces, bird, iptables). `--quick`: one run of `restart` and `bfd-cut`. Prints
//! a Markdown table; every wait is a bounded poll of BIRD or the kernel. Not part of
//! `cargo test`. `--stress N`: each scenario runs with `stress-ng --cpu N` (0: one worker
//! per CPU) in the node's namespace from the first speaker's start on (tests/src/stress.rs),
//! and says the load average; not with `--write-docs`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use integration_tests::dataplane_topology::{
    Cut, DataplaneOptions, DataplaneTopology, Direction, FLOWS,
};
use integration_tests::loss::{LossReport, analyse, median_max};
use integration_tests::netns::netns_permitted;

/// Set by SIGINT/SIGTERM: every wait gives up, the topology is dropped (namespaces deleted,
/// our daemons stopped by PID).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

struct Args {
    speaker: PathBuf,
    runs: u32,
    pps: u32,
    scenarios: Vec<String>,
    write_docs: Option<PathBuf>,
    /// `stress-ng --cpu` workers in the node's namespace (0: one per CPU).
    stress: Option<usize>,
}

fn parse_args() -> Option<Args> {
    let mut argv = std::env::args().skip(1);
    let mut a = Args {
        speaker: integration_tests::dist_binary(),
        runs: 10,
        pps: 1000,
        scenarios: Vec::new(),
        write_docs: None,
        stress: None,
    };
    let mut bench = false;
    let mut quick = false;
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--bench" => bench = true,
            // Relative to the workspace, like --write-docs (cargo runs benches in tests/).
            "--speaker" => {
                a.speaker = integration_tests::workspace_path(std::path::Path::new(&argv.next()?))
            }
            "--runs" => a.runs = argv.next()?.parse().ok()?,
            "--pps" => a.pps = argv.next()?.parse().ok()?,
            "--scenarios" => a.scenarios = argv.next()?.split(',').map(str::to_owned).collect(),
            "--write-docs" => a.write_docs = Some(argv.next()?.into()),
            "--quick" => quick = true,
            "--stress" => a.stress = Some(argv.next()?.parse().ok()?),
            _ => {}
        }
    }
    if quick {
        a.runs = 1;
        if a.scenarios.is_empty() {
            a.scenarios = vec!["restart".into(), "bfd-cut".into()];
        }
    }
    // `cargo test --benches` runs this without --bench: do nothing then.
    bench.then_some(a)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Event {
    /// SIGTERM, then a new process.
    Restart,
    /// SIGKILL, then a new process at once.
    Kill,
    /// SIGKILL, wait until the restart time is over at both ToRs (with LLGR: the routes are
    /// LLGR-stale; without: they are gone), 1 s more, then a new process.
    KillPastRestartTime,
    Cut(Cut),
}

struct Scenario {
    id: &'static str,
    label: &'static str,
    goal: &'static str,
    /// The goal on the loss window (ms), when it has one.
    goal_ms: Option<f64>,
    event: Event,
    opts: DataplaneOptions,
    /// Cuts: streams the other way too (the pod's replies, the node's own traffic, both
    /// through the node's default route), and the cut held [`CUT_HOLD`] (see `egress`).
    both_ways: bool,
}

/// Both-ways cuts stay cut this long after the client is down to one leg: long enough that
/// a direction nothing repairs shows the whole cut.
const CUT_HOLD: Duration = Duration::from_secs(2);
/// Both-ways cuts: TCP connections client → pod, each echoing 8 bytes every [`ECHO_PERIOD`];
/// enough that ECMP hashes some onto each uplink in both directions.
const ECHO_CONNS: usize = 32;
const ECHO_PERIOD: Duration = Duration::from_millis(10);

const HOLD: u16 = 3;

fn scenarios() -> Vec<Scenario> {
    let base = DataplaneOptions {
        bfd: None,
        hold_time: HOLD,
        graceful_restart: true,
        restart_time: 30,
        llgr: None,
        egress: false,
    };
    let bfd = DataplaneOptions {
        bfd: Some((100, 100, 3)),
        ..base.clone()
    };
    vec![
        Scenario {
            id: "restart",
            label: "rolling restart: SIGTERM, new process (graceful restart 30 s, no BFD)",
            goal: "0",
            goal_ms: Some(0.0),
            event: Event::Restart,
            opts: base.clone(),
            both_ways: false,
        },
        Scenario {
            id: "restart-bfd",
            label: "rolling restart with BFD 100 ms × 3 (BFD handover)",
            goal: "0",
            goal_ms: Some(0.0),
            event: Event::Restart,
            opts: bfd.clone(),
            both_ways: false,
        },
        Scenario {
            id: "kill",
            label: "`kill -9`, new process at once (within the restart time 30 s, no BFD)",
            goal: "0",
            goal_ms: Some(0.0),
            event: Event::Kill,
            opts: base.clone(),
            both_ways: false,
        },
        Scenario {
            id: "kill-no-gr",
            label: "control: `kill -9`, new process at once, graceful restart off at the speaker",
            goal: "(control)",
            goal_ms: None,
            event: Event::Kill,
            opts: DataplaneOptions {
                graceful_restart: false,
                ..base.clone()
            },
            both_ways: false,
        },
        Scenario {
            id: "bfd-cut",
            label: "one uplink cut silently (iptables DROP at both ends), BFD 100 ms × 3",
            goal: "≤ 350",
            goal_ms: Some(350.0),
            event: Event::Cut(Cut::Silent),
            opts: bfd.clone(),
            both_ways: false,
        },
        Scenario {
            id: "hold-cut",
            label: "one uplink cut silently, no BFD (hold time 3 s)",
            goal: "hold time",
            goal_ms: None,
            event: Event::Cut(Cut::Silent),
            opts: base.clone(),
            both_ways: false,
        },
        Scenario {
            id: "link-down",
            label: "one uplink's link down at the ToR (carrier lost), no BFD",
            goal: "(reference)",
            goal_ms: None,
            event: Event::Cut(Cut::LinkDown),
            opts: base.clone(),
            both_ways: false,
        },
        Scenario {
            id: "llgr",
            label: "`kill -9`, down past the restart time (5 s) with LLGR (stale time 60 s)",
            goal: "0",
            goal_ms: Some(0.0),
            event: Event::KillPastRestartTime,
            opts: DataplaneOptions {
                restart_time: 5,
                llgr: Some(60),
                ..base.clone()
            },
            both_ways: false,
        },
        Scenario {
            id: "no-llgr",
            label: "control: the same without LLGR (routes dropped at the end of the restart time)",
            goal: "(control)",
            goal_ms: None,
            event: Event::KillPastRestartTime,
            opts: DataplaneOptions {
                restart_time: 5,
                ..base
            },
            both_ways: false,
        },
        Scenario {
            id: "egress-cut",
            label: "both ways: one uplink cut silently, BFD 100 ms × 3, `egress.followSessions`",
            goal: "≤ 350",
            goal_ms: Some(350.0),
            event: Event::Cut(Cut::Silent),
            opts: DataplaneOptions {
                egress: true,
                ..bfd.clone()
            },
            both_ways: true,
        },
        Scenario {
            id: "egress-cut-off",
            label: "control: the same without `egress.followSessions` (cut held 2 s)",
            goal: "(control)",
            goal_ms: None,
            event: Event::Cut(Cut::Silent),
            opts: bfd,
            both_ways: true,
        },
    ]
}

const READY: Duration = Duration::from_secs(60);
const TAIL: Duration = Duration::from_millis(500);
const WARM_UP: Duration = Duration::from_millis(300);

/// Polls `f` every 10 ms until it holds, at most `limit`; the time it took.
fn poll(limit: Duration, mut f: impl FnMut() -> bool) -> Result<Duration, String> {
    let start = Instant::now();
    loop {
        if INTERRUPTED.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        if f() {
            return Ok(start.elapsed());
        }
        if start.elapsed() > limit {
            return Err(format!("not within {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Both ToRs hold a fresh route over an Established session (BFD Up if configured), and the
/// client's route has both legs.
fn wait_ready(t: &mut DataplaneTopology, s: &Scenario) -> Result<(), String> {
    let bfd = s.opts.bfd.is_some();
    let mut exited = None;
    poll(READY, || {
        exited = exited.or_else(|| t.speaker_exited());
        exited.is_some()
            || (t.tor_view(0, bfd).healthy()
                && t.tor_view(1, bfd).healthy()
                && t.client_legs() == 2)
    })
    .map_err(|e| format!("not ready: {e}"))?;
    match exited {
        Some(st) => Err(format!("the speaker exited ({st})")),
        None => Ok(()),
    }
}

struct Sample {
    loss: LossReport,
    /// Share of the warm-up's packets ToR 1 forwarded to the node (the ECMP split).
    via_tor1: f64,
    /// Event → the recovery condition (restarts: both ToRs fresh and two legs again; cuts:
    /// the client's route down to one leg).
    recovered: Duration,
    /// Cuts: the cut → the cut ToR no longer has the route (`birdc` poll).
    tor_gone: Option<Duration>,
    /// Both-ways cuts: the pod → client and node → client streams.
    back: Option<[LossReport; 2]>,
    /// Both-ways cuts: per TCP echo connection, its longest stall.
    tcp: Option<Vec<Duration>>,
}

fn one_run(t: &mut DataplaneTopology, s: &Scenario, i: u32, pps: u32) -> Result<Sample, String> {
    wait_ready(t, s)?;
    let tx0 = [t.tor_tx_packets(0), t.tor_tx_packets(1)];
    let stream = t.start_stream(pps).map_err(|e| format!("stream: {e}"))?;
    std::thread::sleep(WARM_UP);
    let event = stream.now_ns();
    let split = [t.tor_tx_packets(0) - tx0[0], t.tor_tx_packets(1) - tx0[1]];
    let bfd = s.opts.bfd.is_some();
    let uplink = (i % 2) as usize;
    let recovered = match s.event {
        Event::Restart | Event::Kill => {
            if s.event == Event::Restart {
                t.stop_speaker();
            } else {
                t.kill_speaker();
            }
            t.start_speaker();
            let started = Instant::now();
            wait_ready(t, s)?;
            started.elapsed()
        }
        Event::KillPastRestartTime => {
            t.kill_speaker();
            let limit = Duration::from_secs(u64::from(s.opts.restart_time) + 10);
            let over = |v: integration_tests::dataplane_topology::TorView| match s.opts.llgr {
                Some(_) => v.llgr_stale,
                None => !v.route,
            };
            poll(limit, || {
                over(t.tor_view(0, bfd)) && over(t.tor_view(1, bfd))
            })
            .map_err(|e| format!("restart time not over at both ToRs: {e}"))?;
            std::thread::sleep(Duration::from_secs(1));
            t.start_speaker();
            let started = Instant::now();
            wait_ready(t, s)?;
            started.elapsed()
        }
        Event::Cut(how) => {
            let back = if s.both_ways {
                let pod = t.start_stream_towards(Direction::PodToClient, pps);
                let node = t.start_stream_towards(Direction::NodeToClient, pps);
                Some([
                    pod.map_err(|e| format!("pod stream: {e}"))?,
                    node.map_err(|e| format!("node stream: {e}"))?,
                ])
            } else {
                None
            };
            let echo = if s.both_ways {
                Some(
                    t.start_echo(ECHO_CONNS, ECHO_PERIOD)
                        .map_err(|e| format!("TCP echo: {e}"))?,
                )
            } else {
                None
            };
            if back.is_some() {
                std::thread::sleep(WARM_UP);
            }
            let back_event = back.as_ref().map(|b| [b[0].now_ns(), b[1].now_ns()]);
            let event = stream.now_ns();
            t.cut(uplink, how);
            let cut = Instant::now();
            let limit = Duration::from_secs(u64::from(s.opts.hold_time) + 10);
            let gone = poll(limit, || !t.tor_has_route(uplink))
                .map_err(|e| format!("the ToR kept the route: {e}"));
            let r = gone.and_then(|g| {
                poll(limit, || t.client_legs() == 1)
                    .map_err(|e| format!("the client kept both legs: {e}"))
                    .map(|_| (g, cut.elapsed()))
            });
            if back.is_some() {
                std::thread::sleep(CUT_HOLD);
            }
            std::thread::sleep(TAIL);
            let result = stream.finish();
            let interval = 1_000_000_000 / u64::from(pps);
            let back = back.zip(back_event).map(|([p, n], [pe, ne])| {
                let (p, n) = (p.finish(), n.finish());
                [
                    analyse(&p.sent_at, &p.received, interval, pe),
                    analyse(&n.sent_at, &n.received, interval, ne),
                ]
            });
            let tcp = echo.map(|e| e.finish());
            t.heal(uplink, how);
            let (g, d) = r?;
            let mut x = sample(split, &result, event, d, pps);
            x.tor_gone = Some(g);
            x.back = back;
            x.tcp = tcp;
            return Ok(x);
        }
    };
    std::thread::sleep(TAIL);
    let result = stream.finish();
    Ok(sample(split, &result, event, recovered, pps))
}

/// `split`: packets each ToR sent to the node during the warm-up (the healthy ECMP split).
fn sample(
    d: [u64; 2],
    r: &integration_tests::dataplane_topology::StreamResult,
    event: u64,
    recovered: Duration,
    pps: u32,
) -> Sample {
    let interval = 1_000_000_000 / u64::from(pps);
    Sample {
        loss: analyse(&r.sent_at, &r.received, interval, event),
        via_tor1: d[0] as f64 / (d[0] + d[1]).max(1) as f64,
        recovered,
        tor_gone: None,
        back: None,
        tcp: None,
    }
}

fn run_scenario(a: &Args, s: &Scenario) -> Result<Vec<Sample>, String> {
    let tag = format!("pcdp{}", std::process::id() % 10_000);
    let mut t = DataplaneTopology::new(&tag, &a.speaker, &s.opts);
    if let Err(e) = t.check_config() {
        if e.contains("longLivedStaleTime: unknown key") {
            return Err(
                "not measured: this speaker has no gracefulRestart.longLivedStaleTime".into(),
            );
        }
        return Err(format!("the speaker rejects its config: {e}"));
    }
    t.start_speaker();
    let stress = match a.stress {
        Some(n) => Some(integration_tests::stress::CpuStress::start(&t.node, n)?),
        None => None,
    };
    let mut out = Vec::new();
    for i in 0..a.runs {
        if stress.is_some() {
            eprintln!(
                "dataplane {} run {i}: under stress-ng --cpu {}, load average {}",
                s.id,
                a.stress.unwrap_or_default(),
                integration_tests::stress::load_average()
            );
        }
        match one_run(&mut t, s, i, a.pps) {
            Ok(x) => {
                eprintln!(
                    "dataplane {} run {i}: lost {} of {} ({:.0} ms, window {:.0} ms, {} episodes, {} before the event), via ToR 1 {:.0} %, recovered in {:.3} s, ToR route gone after {:?}",
                    s.id,
                    x.loss.lost,
                    x.loss.sent,
                    x.loss.lost_ms,
                    x.loss.window_ms,
                    x.loss.episodes,
                    x.loss.lost_before_event,
                    x.via_tor1 * 100.0,
                    x.recovered.as_secs_f64(),
                    x.tor_gone
                );
                if let Some(tcp) = &x.tcp {
                    let worst = tcp.iter().max().copied().unwrap_or_default();
                    let stalled = tcp
                        .iter()
                        .filter(|d| **d > Duration::from_millis(100))
                        .count();
                    eprintln!(
                        "dataplane {} run {i}: TCP echo: longest stall {:.0} ms, {stalled} of {} connections stalled > 100 ms",
                        s.id,
                        worst.as_secs_f64() * 1000.0,
                        tcp.len()
                    );
                }
                if let Some([p, n]) = &x.back {
                    eprintln!(
                        "dataplane {} run {i}: the way back: pod → client window {:.0} ms ({} lost), node → client window {:.0} ms ({} lost)",
                        s.id, p.window_ms, p.lost, n.window_ms, n.lost
                    );
                }
                let before = x.loss.lost_before_event
                    + x.back
                        .as_ref()
                        .map_or(0, |b| b[0].lost_before_event + b[1].lost_before_event);
                if before > 0 {
                    return Err(format!(
                        "run {i}: {} packets lost before the event (set-up problem)\n{}",
                        before,
                        t.diagnostics()
                    ));
                }
                out.push(x);
            }
            Err(e) => return Err(format!("run {i}: {e}\n{}", t.diagnostics())),
        }
    }
    Ok(out)
}

fn fmt_ms(v: f64) -> String {
    format!("{v:.0}")
}

fn main() {
    let Some(a) = parse_args() else { return };
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    if !netns_permitted("pcdp-probe", &["bird", "birdc", "iptables"]) {
        eprintln!("dataplane: needs root, network namespaces, bird and iptables");
        std::process::exit(1);
    }
    if a.stress.is_some() {
        let why = integration_tests::stress::unavailable().or_else(|| {
            (a.write_docs.is_some())
                .then(|| "--stress measures no published table: not with --write-docs".into())
        });
        if let Some(why) = why {
            eprintln!("dataplane: {why}");
            std::process::exit(1);
        }
    }
    let all = scenarios();
    let chosen: Vec<&Scenario> = if a.scenarios.is_empty() {
        all.iter().collect()
    } else {
        let unknown: Vec<&String> = a
            .scenarios
            .iter()
            .filter(|id| !all.iter().any(|s| s.id == id.as_str()))
            .collect();
        if !unknown.is_empty() {
            let ids: Vec<&str> = all.iter().map(|s| s.id).collect();
            eprintln!(
                "dataplane: unknown scenario {unknown:?}; known: {}",
                ids.join(",")
            );
            std::process::exit(2);
        }
        all.iter()
            .filter(|s| a.scenarios.iter().any(|id| id == s.id))
            .collect()
    };
    let started = Instant::now();
    let mut table = String::from(
        "| scenario | goal ms | runs | lost ms median | lost ms max | loss window ms median | loss window ms max | episodes max | via ToR 1 % | ToR route gone ms median | recovered s median | goal |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    let mut both = String::from(
        "| scenario | goal ms | runs | client → pod window ms median | max | pod → client window ms median | max | node → client window ms median | max | TCP longest stall ms median | max | TCP connections stalled > 100 ms median | cut held s median | goal |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    let mut targets = Targets::default();
    let mut failed = false;
    let mut notes = Vec::new();
    for s in chosen {
        if INTERRUPTED.load(Ordering::Relaxed) {
            break;
        }
        match run_scenario(&a, s) {
            Ok(v) if !v.is_empty() => {
                let col = |f: &dyn Fn(&Sample) -> f64| {
                    median_max(&v.iter().map(f).collect::<Vec<_>>()).unwrap_or_default()
                };
                let lost = col(&|x| x.loss.lost_ms);
                let win = col(&|x| x.loss.window_ms);
                let eps = col(&|x| f64::from(x.loss.episodes));
                let via = col(&|x| x.via_tor1 * 100.0);
                let rec = col(&|x| x.recovered.as_secs_f64());
                let gone = v
                    .iter()
                    .map(|x| x.tor_gone.map(|g| g.as_secs_f64() * 1000.0))
                    .collect::<Option<Vec<f64>>>()
                    .and_then(|g| median_max(&g))
                    .map_or(String::new(), |g| fmt_ms(g.0));
                let back: Option<Vec<[LossReport; 2]>> = v.iter().map(|x| x.back.clone()).collect();
                let back_cols = back.as_ref().map(|b| {
                    let c = |k: usize| {
                        median_max(&b.iter().map(|r| r[k].window_ms).collect::<Vec<_>>())
                            .unwrap_or_default()
                    };
                    (c(0), c(1))
                });
                let worst = back_cols.map_or(win.1, |(p, n)| win.1.max(p.1).max(n.1));
                let verdict = match s.goal_ms {
                    Some(g) if worst <= g => "met",
                    Some(_) => "**missed**",
                    None => "reported",
                };
                let tcp = v
                    .iter()
                    .map(|x| x.tcp.clone())
                    .collect::<Option<Vec<_>>>()
                    .map(|runs| {
                        let worst: Vec<f64> = runs
                            .iter()
                            .map(|c| {
                                c.iter().max().copied().unwrap_or_default().as_secs_f64() * 1000.0
                            })
                            .collect();
                        let stalled: Vec<f64> = runs
                            .iter()
                            .map(|c| {
                                c.iter()
                                    .filter(|d| **d > Duration::from_millis(100))
                                    .count() as f64
                            })
                            .collect();
                        (
                            median_max(&worst).unwrap_or_default(),
                            median_max(&stalled).unwrap_or_default(),
                        )
                    })
                    .unwrap_or_default();
                targets.record(TargetRow {
                    id: s.id,
                    runs: v.len(),
                    window: win,
                    lost,
                    back: back_cols,
                    tcp: back_cols.map(|_| tcp.0),
                    verdict,
                });
                if let Some((p, n)) = back_cols {
                    both += &format!(
                        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} of {ECHO_CONNS} | {:.2} | {verdict} |\n",
                        s.label,
                        s.goal,
                        v.len(),
                        fmt_ms(win.0),
                        fmt_ms(win.1),
                        fmt_ms(p.0),
                        fmt_ms(p.1),
                        fmt_ms(n.0),
                        fmt_ms(n.1),
                        fmt_ms(tcp.0.0),
                        fmt_ms(tcp.0.1),
                        tcp.1.0,
                        rec.0 + CUT_HOLD.as_secs_f64() + TAIL.as_secs_f64(),
                    );
                }
                table += &format!(
                    "| {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.0} | {gone} | {:.2} | {verdict} |\n",
                    s.label,
                    s.goal,
                    v.len(),
                    fmt_ms(lost.0),
                    fmt_ms(lost.1),
                    fmt_ms(win.0),
                    fmt_ms(win.1),
                    eps.1,
                    via.0,
                    rec.0,
                );
            }
            Ok(_) => {}
            Err(e) if e.starts_with("not measured") => {
                table += &format!("| {} | {} | 0 | | | | | | | | | {e} |\n", s.label, s.goal);
            }
            Err(e) => {
                eprintln!("dataplane {}: {e}", s.id);
                notes.push(format!(
                    "{}: {}",
                    s.id,
                    e.lines().next().unwrap_or_default()
                ));
                table += &format!(
                    "| {} | {} | 0 | | | | | | | | | failed |\n",
                    s.label, s.goal
                );
                failed = true;
            }
        }
    }
    print!("{table}");
    let both_ran = both.lines().count() > 2;
    if both_ran {
        print!("\nBoth ways (the way back through the node's default route):\n\n{both}");
    }
    let targets = targets.render();
    print!("\nTargets rows:\n\n{targets}");
    for n in &notes {
        println!("- failed: {n}");
    }
    eprintln!(
        "dataplane: done in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if let Some(path) = &a.write_docs {
        let run = format!(
            "{}. {} runs per scenario, {} packets/s over {FLOWS} flows, speaker `{}` at commit {}.",
            machine(),
            a.runs,
            a.pps,
            short_path(&a.speaker),
            commit()
        );
        let mut body = format!("{run}\n\n{table}");
        if both_ran {
            body += &format!(
                "\nBoth ways: each stream {} packets/s over {FLOWS} flows at once, the way back \
                 through the node's ECMP default route.\n\n{both}",
                a.pps
            );
        }
        // The Targets rows of the continuity goals, from this same run.
        if let Err(e) = integration_tests::write_docs_section(
            path,
            "<!-- dataplane-targets:begin -->",
            "<!-- dataplane-targets:end -->",
            &format!("{targets}\n{run}\n"),
        ) {
            eprintln!("dataplane: {e}");
            failed = true;
        }
        if let Err(e) = integration_tests::write_docs_section(
            path,
            "<!-- dataplane:begin -->",
            "<!-- dataplane:end -->",
            &body,
        ) {
            eprintln!("dataplane: {e}");
            failed = true;
        }
    }
    if failed || INTERRUPTED.load(Ordering::Relaxed) {
        std::process::exit(1);
    }
}

/// One scenario's figures for the Targets rows.
struct TargetRow {
    id: &'static str,
    runs: usize,
    /// Client → pod loss window (median, max), ms.
    window: (f64, f64),
    /// Lost ms (median, max).
    lost: (f64, f64),
    /// Both-ways cuts: pod → client and node → client windows (median, max), ms.
    back: Option<((f64, f64), (f64, f64))>,
    /// Both-ways cuts: the TCP echo connections' longest stall (median, max over runs), ms.
    tcp: Option<(f64, f64)>,
    verdict: &'static str,
}

/// The continuity goals' rows of the Targets table in docs/benchmarks.md, from one run.
#[derive(Default)]
struct Targets {
    rows: Vec<TargetRow>,
}

impl Targets {
    fn record(&mut self, row: TargetRow) {
        self.rows.push(row);
    }

    fn get(&self, id: &str) -> Option<&TargetRow> {
        self.rows.iter().find(|r| r.id == id)
    }

    /// The rows, as a table of their own (the Targets table continues with it); a goal whose
    /// scenarios were not in this run says so.
    fn render(&self) -> String {
        let mut out =
            String::from("| target (data-plane continuity) | result | |\n|---|---|---|\n");
        let zero: Vec<_> = ["restart", "restart-bfd", "kill", "llgr"]
            .iter()
            .filter_map(|id| self.get(id))
            .collect();
        if zero.is_empty() {
            out += "| data plane: speaker rolling restart, `kill -9` within the restart time, down past the restart time with LLGR: 0 packets lost | not in this run | |\n";
        } else {
            let worst = zero.iter().map(|r| r.lost.1).fold(0.0, f64::max);
            let runs: Vec<String> = zero
                .iter()
                .map(|r| format!("{} {}", r.id, r.runs))
                .collect();
            out += &format!(
                "| data plane: speaker rolling restart, `kill -9` within the restart time, down past the restart time with LLGR: 0 packets lost | max {} ms lost ({} runs) | {} |\n",
                fmt_ms(worst),
                runs.join(", "),
                if worst == 0.0 { "met" } else { "**missed**" }
            );
        }
        match (self.get("bfd-cut"), self.get("hold-cut")) {
            (Some(b), hold) => {
                let hold = hold.map_or(String::new(), |h| {
                    format!(
                        "; without BFD (hold time 3 s) median {} ms, max {} ms",
                        fmt_ms(h.window.0),
                        fmt_ms(h.window.1)
                    )
                });
                out += &format!(
                    "| data plane: one uplink silently cut with BFD 100 ms × 3: the flows towards the node dark ≤ 350 ms | loss window median {} ms, max {} ms ({} cuts){hold} | {} |\n",
                    fmt_ms(b.window.0),
                    fmt_ms(b.window.1),
                    b.runs,
                    b.verdict
                );
            }
            (None, _) => {
                out += "| data plane: one uplink silently cut with BFD 100 ms × 3: the flows towards the node dark ≤ 350 ms | not in this run | |\n";
            }
        }
        match self.get("egress-cut") {
            Some(e) => {
                let (p, n) = e.back.unwrap_or_default();
                let control = self
                    .get("egress-cut-off")
                    .and_then(|c| c.back.zip(c.tcp))
                    .map_or(String::new(), |((cp, cn), ct)| {
                        format!(
                            "; without `egress.followSessions` pod → client max {} ms, node → client max {} ms, TCP stall max {} ms (the whole cut, held {} s)",
                            fmt_ms(cp.1),
                            fmt_ms(cn.1),
                            fmt_ms(ct.1),
                            CUT_HOLD.as_secs()
                        )
                    });
                let tcp = e.tcp.unwrap_or_default();
                out += &format!(
                    "| data plane, both ways: one uplink silently cut with BFD 100 ms × 3 and `egress.followSessions`: dark ≤ 350 ms towards the pod, for the pod's replies and for node-originated traffic | loss windows max: client → pod {} ms, pod → client {} ms, node → client {} ms ({} cuts); TCP echo connections' longest stall median {} ms, max {} ms{control} | {} |\n",
                    fmt_ms(e.window.1),
                    fmt_ms(p.1),
                    fmt_ms(n.1),
                    e.runs,
                    fmt_ms(tcp.0),
                    fmt_ms(tcp.1),
                    e.verdict
                );
            }
            None => {
                out += "| data plane, both ways: one uplink silently cut with BFD 100 ms × 3 and `egress.followSessions`: dark ≤ 350 ms in every direction | not in this run | |\n";
            }
        }
        out
    }
}

/// The binary's last two path components (`release/podcidr-bgp`): no local paths in the docs.
fn short_path(p: &std::path::Path) -> String {
    let parts: Vec<_> = p.iter().map(|c| c.to_string_lossy()).collect();
    parts[parts.len().saturating_sub(2)..].join("/")
}

fn commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// Date, kernel, CPU and load, as one sentence for the docs.
fn machine() -> String {
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!(
        "Run {date}, kernel {}, {cpu} × {cores}, load average at the end {}",
        kernel.trim(),
        load.join(" ")
    )
}
