//! The forwarding gate's read of the main routing table on a node with a full table (issue 31
//! item 7): 100,000 routes outside the pod pool plus a few pod routes, in a network namespace
//! of its own. Measured: the time of one read (`dump_main` of both families) and the most heap
//! it holds at once (a counting allocator), reading every route as before and reading only the
//! routes the gate needs (`kernel::RouteFilter`: inside `allowedPrefixes`, towards a peer, the
//! default routes).
//!
//! Needs root and `ip` (it creates and deletes the namespace `podcidr-rt-bench-<pid>`). Run:
//! `cargo bench -p podcidr-bgp --bench route_table -- [--routes 100000] [--write-docs
//! docs/benchmarks.md]`. Not part of `cargo test` (without `--bench` it does nothing).

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use podcidr_bgp::daemon::core::kernel::RouteFilter;
use podcidr_bgp::daemon::host::netlink::route;

const BEGIN: &str = "<!-- route-table:begin -->";
const END: &str = "<!-- route-table:end -->";

/// Heap in use now and the most since the last reset.
struct Counting;
static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes to the system allocator unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let n = NOW.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(n, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(p, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

struct Args {
    routes: u32,
    docs: Option<PathBuf>,
}

fn parse_args() -> Option<Args> {
    let mut argv = std::env::args().skip(1);
    let mut a = Args {
        routes: 100_000,
        docs: None,
    };
    let mut bench = false;
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--bench" => bench = true,
            "--routes" => a.routes = argv.next()?.parse().ok()?,
            "--write-docs" => a.docs = Some(argv.next()?.into()),
            _ => {}
        }
    }
    bench.then_some(a)
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// One read of both families through `keep`: (routes kept, time, peak heap above the start).
fn read(keep: &dyn Fn(&route::RouteEntry) -> bool) -> (usize, Duration, usize) {
    let base = NOW.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let t0 = Instant::now();
    let mut kept = 0;
    for family in [libc::AF_INET, libc::AF_INET6] {
        kept += route::dump_main(family, keep).map(|v| v.len()).unwrap_or(0);
    }
    (kept, t0.elapsed(), PEAK.load(Ordering::Relaxed) - base)
}

fn run(args: &Args) -> Result<String, String> {
    let ns = format!("podcidr-rt-bench-{}", std::process::id());
    ip(&["netns", "add", &ns])?;
    let cleanup = scopeguard(ns.clone());
    // veth pairs (the kernel here may lack the dummy driver); only their routes matter.
    ip(&[
        "-n",
        &ns,
        "link",
        "add",
        "eth0",
        "type",
        "veth",
        "peer",
        "name",
        "eth0-peer",
    ])?;
    ip(&[
        "-n",
        &ns,
        "link",
        "add",
        "cni0",
        "type",
        "veth",
        "peer",
        "name",
        "cni0-peer",
    ])?;
    for dev in ["eth0", "eth0-peer", "cni0", "cni0-peer", "lo"] {
        ip(&["-n", &ns, "link", "set", dev, "up"])?;
    }
    ip(&["-n", &ns, "addr", "add", "198.18.0.10/24", "dev", "eth0"])?;
    ip(&["-n", &ns, "route", "add", "default", "via", "198.18.0.1"])?;
    // The full feed: /32s in 172.16.0.0/12, none inside the pod pool.
    let batch = std::env::temp_dir().join(format!("{ns}.batch"));
    {
        let mut f = std::fs::File::create(&batch).map_err(|e| e.to_string())?;
        for i in 0..args.routes {
            let a = std::net::Ipv4Addr::from(0xAC10_0000_u32 + i);
            writeln!(f, "route add {a}/32 via 198.18.0.1 dev eth0").map_err(|e| e.to_string())?;
        }
        for i in 0..8 {
            writeln!(f, "route add 10.244.{i}.0/24 dev cni0").map_err(|e| e.to_string())?;
        }
    }
    ip(&["-n", &ns, "-batch", batch.to_str().unwrap_or_default()])?;
    let _ = std::fs::remove_file(&batch);
    let routes = args.routes;
    let table = integration_tests::netns::in_netns(&ns, move || {
        let filter = RouteFilter {
            within: vec!["10.244.0.0/16".parse().unwrap()],
            towards: vec!["198.18.0.1".parse().unwrap()],
        };
        let keep_all = |_: &route::RouteEntry| true;
        let keep_needed = |e: &route::RouteEntry| {
            let unspecified = match e.dst {
                Some(std::net::IpAddr::V6(_)) => std::net::Ipv6Addr::UNSPECIFIED.into(),
                _ => std::net::Ipv4Addr::UNSPECIFIED.into(),
            };
            ipnet::IpNet::new(e.dst.unwrap_or(unspecified), e.dst_len)
                .is_ok_and(|d| filter.keeps(&d.trunc()))
        };
        let mut rows = Vec::new();
        for (what, keep) in [
            ("every route (before)", &keep_all as &dyn Fn(&route::RouteEntry) -> bool),
            ("the routes the gate needs (now)", &keep_needed),
        ] {
            read(keep); // warm the kernel's and our caches
            let runs: Vec<(usize, Duration, usize)> = (0..5).map(|_| read(keep)).collect();
            let mut times: Vec<Duration> = runs.iter().map(|r| r.1).collect();
            times.sort();
            let peak = runs.iter().map(|r| r.2).max().unwrap_or(0);
            rows.push(format!(
                "| {what} | {} | {:.0} | {:.1} |",
                runs[0].0,
                times[2].as_secs_f64() * 1000.0,
                peak as f64 / (1024.0 * 1024.0)
            ));
        }
        let mut out = format!(
            "A network namespace whose main table holds {routes} IPv4 /32 routes outside the pod pool (a full feed), 8 pod routes on `cni0` and a default route: one read of both families by the forwarding gate's reader (`route::dump_main`), median of 5, and the most heap held at once during a read.\n\n"
        );
        out.push_str("| read | routes kept | ms per read | peak heap MiB |\n|---|---:|---:|---:|\n");
        for r in rows {
            out.push_str(&r);
            out.push('\n');
        }
        out
    })
    .map_err(|e| e.to_string())?;
    drop(cleanup);
    Ok(table)
}

/// Deletes the namespace when dropped.
struct Guard(String);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.0]);
    }
}
fn scopeguard(ns: String) -> Guard {
    Guard(ns)
}

fn main() {
    let Some(args) = parse_args() else {
        return;
    };
    match run(&args) {
        Ok(table) => {
            println!("{table}");
            if let Some(docs) = &args.docs
                && let Err(e) = integration_tests::write_docs_section(docs, BEGIN, END, &table)
            {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("route_table: {e} (needs root and ip)");
            std::process::exit(1);
        }
    }
}
