//! Chaos suite: two allocator replicas, speakers and a BIRD ToR against the fake API server
//! while a seeded random schedule injects API errors, slow answers, dropped and expired
//! watches, an API outage, a leader killed or stalled (Lease expiry) mid-write, speaker
//! SIGKILLs, BIRD restarts and node churn. Invariants are checked continuously and each
//! violation is counted; after the faults stop every node's route at the ToR must match its
//! allocation within a bound and `podcidr-bgp diff` must exit 0.
//!
//! Short mode (CI): `cargo test -p podcidr-bgp --test routers chaos::`.
//! Long mode (by hand): `CHAOS_MINUTES=30 cargo test -p podcidr-bgp --test routers -- --ignored
//! --nocapture chaos_long`; `CHAOS_SEED=N` replays a schedule.

#[path = "../chaos/cluster.rs"]
mod cluster;
use crate::common;
use integration_tests::skip::Need;
#[path = "../chaos/faults.rs"]
mod faults;
#[path = "../chaos/invariants.rs"]
mod invariants;
#[path = "../chaos/report.rs"]
mod report;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cluster::{Cluster, speaker_node};
use faults::Schedule;
use invariants::{TorView, Violations};
use ipnet::IpNet;

struct Params {
    mode: &'static str,
    speakers: usize,
    fault_time: Duration,
    outage: Duration,
    lease_secs: u64,
    /// Churn: nodes added (and as many deleted) per minute, around this many churn nodes.
    churn_per_min: u64,
    churn_keep: usize,
    /// Convergence bound after the faults stop.
    bound: Duration,
    rss_every: Duration,
}

fn seed() -> u64 {
    std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_secs() ^ u64::from(std::process::id()))
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_short() {
    integration_tests::require!(Need::Bird);
    run(Params {
        mode: "short",
        speakers: 10,
        fault_time: Duration::from_secs(45),
        outage: Duration::from_secs(10),
        lease_secs: 6,
        churn_per_min: 30,
        churn_keep: 6,
        bound: Duration::from_secs(40),
        rss_every: Duration::from_secs(5),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "soak run by hand: CHAOS_MINUTES=30 cargo test -p podcidr-bgp --test routers -- --ignored --nocapture chaos_long"]
async fn chaos_long() {
    integration_tests::require!(Need::Bird);
    let minutes: u64 = std::env::var("CHAOS_MINUTES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    run(Params {
        mode: "long",
        speakers: 10,
        fault_time: Duration::from_secs(minutes * 60),
        outage: Duration::from_secs(30),
        lease_secs: 6,
        churn_per_min: 100,
        churn_keep: 40,
        bound: Duration::from_secs(40),
        rss_every: Duration::from_secs(15),
    })
    .await;
}

async fn run(p: Params) {
    let seed = seed();
    eprintln!(
        "chaos: {} mode, seed {seed} (CHAOS_SEED={seed} replays it)",
        p.mode
    );
    let mut c = Cluster::start(p.speakers, p.lease_secs).await;
    let violations = Arc::new(Violations::default());
    let states = Arc::new(AtomicU64::new(0));
    invariants::spawn_cidr_watch(c.fake.clone(), violations.clone(), states.clone());
    let view = Arc::new(TorView::default());
    let stop = Arc::new(AtomicBool::new(false));
    let poller = invariants::spawn_tor_poller(
        c.bird.clone(),
        c.bird_epoch.clone(),
        p.speakers,
        violations.clone(),
        view.clone(),
        stop.clone(),
    );

    // Warm-up: every speaker's allocation at the ToR.
    let warm = wait_converged(&c, &view, Duration::from_secs(60), false).await;
    if warm.is_none() {
        panic!(
            "no warm-up convergence; logs kept in {}",
            keep_logs(&c, seed)
        );
    }

    let kinds = faults::enabled_kinds(&std::env::var("CHAOS_SKIP").unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut sched = Schedule::new(seed, p.outage, kinds, view.clone(), violations.clone());
    let churn = sched.churn.clone();
    let churn_stop = Arc::new(AtomicBool::new(false));
    let churn_task = {
        let (fake, stop, keep) = (c.fake.clone(), churn_stop.clone(), p.churn_keep);
        let every = Duration::from_millis(60_000 / p.churn_per_min.max(1));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            while !stop.load(Ordering::SeqCst) {
                tick.tick().await;
                churn.lock().unwrap().step(&fake, keep);
            }
        })
    };
    let mut rss = report::Rss::default();
    let start = Instant::now();
    let mut last_rss = None::<Instant>;
    let mut queue = sched.first_round();
    queue.reverse();
    while start.elapsed() < p.fault_time || !queue.is_empty() {
        if last_rss.is_none_or(|t| t.elapsed() >= p.rss_every) {
            rss.sample(start.elapsed().as_secs_f64() / 60.0, &c.pids());
            last_rss = Some(Instant::now());
        }
        let kind = queue.pop().unwrap_or_else(|| sched.random_kind());
        sched.inject(&mut c, kind).await;
        // Schedule pacing.
        let pause = sched.rng.range(300, 2000);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    let fault_time = start.elapsed();

    // Faults stop: clear rules, API up, churn stopped and its nodes deleted.
    churn_stop.store(true, Ordering::SeqCst);
    let _ = churn_task.await;
    c.fake.clear_faults();
    c.fake.set_outage(false);
    {
        let mut ch = sched.churn.lock().unwrap();
        while !ch.live.is_empty() {
            ch.delete_oldest(&c.fake);
        }
    }
    let convergence = wait_converged(&c, &view, p.bound, true).await;
    if convergence.is_none() {
        violations.record(
            invariants::UNCONVERGED,
            format!(
                "ToR {:?} vs allocations {:?}",
                view.routes.lock().unwrap(),
                c.allocations()
            ),
        );
    }
    // Recovery from a last blow with nothing else going on: BIRD restarted, every session
    // re-established and every table re-sent.
    tokio::task::block_in_place(|| c.kill_and_restart_bird());
    // Timed from the restart, judged on the new BIRD's table only.
    let restarted = Instant::now();
    let polls = view.clean_polls.load(Ordering::SeqCst);
    while view.clean_polls.load(Ordering::SeqCst) < polls + 2 && restarted.elapsed() < p.bound {
        // The poller has no event to await; it polls every 200 ms.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let recovery = wait_converged(&c, &view, p.bound, true)
        .await
        .map(|_| restarted.elapsed());
    if recovery.is_none() {
        violations.record(
            invariants::UNCONVERGED,
            format!(
                "after the final BIRD restart: ToR {:?}",
                view.routes.lock().unwrap()
            ),
        );
    }
    rss.sample(start.elapsed().as_secs_f64() / 60.0, &c.pids());
    stop.store(true, Ordering::SeqCst);
    let _ = tokio::task::spawn_blocking(move || poller.join()).await;

    let churn = sched.churn.lock().unwrap();
    let mut table = report::table(&report::Summary {
        seed,
        mode: p.mode,
        fault_time,
        injected: &sched.injected,
        churn: &churn,
        violations: &violations,
        states: states.load(Ordering::Relaxed),
        polls: view.polls.load(Ordering::Relaxed),
        convergence,
        recovery,
        removals: &sched.removal_withdrawals,
        bound: p.bound,
        rss: &rss,
    });
    let exits: Vec<String> = c
        .replicas
        .iter()
        .map(|r| format!("{} {}", r.name, r.exits.load(Ordering::SeqCst)))
        .collect();
    table.push_str(&format!(
        "Allocator exits (restarted): {}.\n",
        exits.join(", ")
    ));
    println!("{table}");
    if let Ok(path) = std::env::var("CHAOS_REPORT") {
        let _ = std::fs::write(path, &table);
    }
    c.stopping.store(true, Ordering::SeqCst);
    let kept = if violations.total() > 0 {
        keep_logs(&c, seed)
    } else {
        String::new()
    };
    assert_eq!(
        violations.total(),
        0,
        "invariant violations (seed {seed}); logs kept in {kept}"
    );
}

/// Copies every process's log (allocators, speakers, BIRD) out of the temporary directories,
/// which are removed when the cluster drops.
fn keep_logs(c: &Cluster, seed: u64) -> String {
    let to = std::env::temp_dir().join(format!("podcidr-chaos-{seed}-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&to);
    let mut dirs: Vec<(String, std::path::PathBuf)> = vec![("".into(), c.dir.0.clone())];
    for (i, s) in c.speakers.iter().enumerate() {
        dirs.push((format!("speaker{i}-"), s.dir.0.clone()));
    }
    if let Some(b) = c.bird.lock().unwrap().as_ref() {
        dirs.push(("bird-".into(), b.dir().to_path_buf()));
    }
    for (prefix, dir) in dirs {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".log") {
                let _ = std::fs::copy(e.path(), to.join(format!("{prefix}{name}")));
            }
        }
    }
    to.display().to_string()
}

/// Waits (bounded) until every speaker's node has exactly its allocated CIDR at the ToR, no
/// churn allocation is left, and, with `diff`, `podcidr-bgp diff` exits 0. Returns the time.
async fn wait_converged(
    c: &Cluster,
    view: &TorView,
    bound: Duration,
    diff: bool,
) -> Option<Duration> {
    let start = Instant::now();
    let mut last_diff = None::<Instant>;
    while start.elapsed() < bound {
        let allocs = c.allocations();
        let ok = allocs.keys().all(|n| n.starts_with("node-"))
            && (0..c.speakers.len()).all(|i| {
                let node = speaker_node(i);
                // One list per check, not one per node.
                let want: BTreeSet<IpNet> = allocs
                    .get(&node)
                    .map(|v| v.iter().copied().collect())
                    .unwrap_or_default();
                !want.is_empty() && view.routes_of(&node) == want
            });
        if ok && !diff {
            return Some(start.elapsed());
        }
        if ok && last_diff.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
            last_diff = Some(Instant::now());
            let kc = c.kubeconfig.to_str().unwrap().to_owned();
            let r = common::run(&["diff", "--kubeconfig", &kc]).await;
            if r.code == 0 {
                return Some(start.elapsed());
            }
            eprintln!(
                "chaos: diff exit {}: {}",
                r.code,
                r.stdout.lines().last().unwrap_or("")
            );
        }
        // The ToR view is refreshed by the poller every 200 ms.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}
