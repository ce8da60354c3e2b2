#!/usr/bin/env bash
# Regenerates the tables of docs/benchmarks.md (full mode, by hand) and checks that the harness
# still works (--quick, run by .ci/run).
#
#   bench/run.sh [--runs 3] [--quick] [--skip-criterion] [--skip-latency]
#                [--skip-allocator-scale] [--skip-bfd] [--skip-real-api] [--skip-config-objects]
#                [--skip-dataplane]
#
# Convergence/footprint (bench/convergence.py), change→wire latency and, in full runs, one
# speaker among 10,000 Services under churn (cargo bench
# --bench latency), the allocator at cluster scale (cargo bench --bench allocator_scale:
# 5,000 nodes at 20 and 200 requests/s, 50,000 at 1,000/s, a restart; ~12 min, most of it
# 10,000 writes at the default 20/s), failure detection with and without BFD against BIRD in
# network namespaces (cargo bench --bench bfd_detection, 10 link cuts each; needs root) and
# data-plane continuity (cargo bench --bench dataplane: packets lost client → pod over two
# BIRD ToRs while the speaker restarts or an uplink is cut, 10 runs of 7 scenarios, ~6 min;
# needs root; rewrites its section of docs/benchmarks.md) and
# the criterion micro benchmarks. Output:
# bench/results/<UTC time>/.
# Loopback only; every daemon is started here and stopped by PID.
#
# --quick: 1,000 IPv4 /26 and 1,000 IPv6 /64, one run, all three senders, the idle footprint,
# 100 latency changes per source, 300 allocator nodes at 1,000/s and their restart, one link
# cut with and one without BFD (about 10 s), the real API server's cost with 10 nodes and 2
# speakers idle for 5 s, 50 speakers' config-object watches and two edits, one data-plane
# run each of a rolling restart and a BFD uplink cut (about 10 s), and the
# criterion benches in test mode (each benchmark run
# once, not timed). The latency and criterion harnesses are built by `cargo test` (the debug
# build scripts/test.sh already made), the speaker in profile.release (the demo build).
# It checks that the harness works, not the targets.
#
# Exit status: non-zero if any convergence run failed (convergence.py --strict), if the latency
# bench did not receive every change of both sources (it exits 1), or if a criterion bench
# failed. Every part still runs and writes its output first.
set -euo pipefail
cd "$(dirname "$0")/.."
# A kubectl that scripts/install-test-deps.sh built, where the machine has none.
export PATH="$PWD/target/test-tools/bin:$PATH"

runs=3
sizes=1000,10000,100000
v6_sizes=10000
changes=1000
timeout=300
criterion_args=(--noplot)
quick=0
criterion=1
latency=1
allocator_scale=1
allocator_cases=5000@20,5000@200,50000@1000
bfd=1
bfd_runs=10
real_api=1
real_api_args=()
config_objects=1
config_objects_args=()
dataplane=1
dataplane_args=(--runs 10 --write-docs docs/benchmarks.md)
while (($#)); do
    case $1 in
        --runs) runs=$2; shift ;;
        --quick)
            quick=1; runs=1; sizes=1000; v6_sizes=1000; changes=100; timeout=60
            criterion_args=(--test)
            allocator_cases=300@1000
            bfd_runs=1
            real_api_args=(--nodes 10 --speakers 2 --idle 5)
            config_objects_args=(--speakers 50 --edits 2)
            dataplane_args=(--quick)
            ;;
        --skip-criterion) criterion=0 ;;
        --skip-latency) latency=0 ;;
        --skip-allocator-scale) allocator_scale=0 ;;
        --skip-bfd) bfd=0 ;;
        --skip-real-api) real_api=0 ;;
        --skip-config-objects) config_objects=0 ;;
        --skip-dataplane) dataplane=0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

start=$(date +%s)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
out=bench/results/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
failed=()

bash bench/install-deps.sh
# The shipped profile (profile.dist, fat LTO) for measurements; --quick, which checks the
# harness and not the numbers, builds the same code as `cargo run --release` does (no
# whole-program link, dependencies at opt-level 1).
profile=dist
((quick)) && profile=release
cargo build --profile "$profile" --locked -p podcidr-bgp
speaker=$CARGO_TARGET_DIR/$profile/podcidr-bgp
# The full run measures with `cargo bench`; --quick only runs the harnesses, through
# `cargo test --workspace` (the features and debug build of scripts/test.sh, reused).
bench_cmd() {
    local pkg=$1 bench=$2
    shift 2
    if ((quick)); then
        cargo test --locked --workspace --bench "$bench" "$@"
    else
        cargo bench --locked -p "$pkg" --bench "$bench" "$@"
    fi
}

{
    echo "date: $(date -u +%FT%TZ)"
    echo "kernel: $(uname -r)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(nproc)"
    echo "memory: $(awk '/MemTotal:/ {print int($2 / 1024)}' /proc/meminfo) MiB"
    echo "rustc: $(rustc --version)"
    dpkg-query -W -f='${Package} ${Version}\n' bird2 gobgpd python3-grpcio
    echo "podcidr-bgp: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
} | tee "$out/machine.txt"

t=$(date +%s)
/usr/bin/python3 bench/convergence.py --speaker "$speaker" --out "$out/convergence.jsonl" \
    --runs "$runs" --sizes "$sizes" --v6-sizes "$v6_sizes" --timeout "$timeout" --strict \
    || failed+=("convergence (see FAILED above)")
/usr/bin/python3 bench/report.py "$out/convergence.jsonl" | tee "$out/convergence.md" \
    || failed+=("report.py")
echo "bench: convergence and report took $(($(date +%s) - t)) s"

if ((latency)); then
    t=$(date +%s)
    bench_cmd integration-tests latency -- --bench --speaker "$speaker" \
        --changes "$changes" | tee "$out/latency.md" || failed+=("latency (see above)")
    if ((!quick)); then
        # One speaker among 5,000 nodes and 10,000 Services under 50 changes/s (docs/benchmarks.md,
        # "Service routes at fleet scale"); about 80 s, so not in --quick.
        bench_cmd integration-tests latency -- --bench --speaker "$speaker" \
            --mode service-scale --window-s 60 | tee -a "$out/latency.md" \
            || failed+=("service-scale latency (see above)")
    fi
    echo "bench: latency took $(($(date +%s) - t)) s"
fi
if ((allocator_scale)); then
    t=$(date +%s)
    bench_cmd integration-tests allocator_scale -- --bench --allocator "$speaker" \
        --cases "$allocator_cases" | tee "$out/allocator-scale.md" \
        || failed+=("allocator scale (see above)")
    echo "bench: allocator scale took $(($(date +%s) - t)) s"
fi
if ((bfd)); then
    t=$(date +%s)
    bench_cmd integration-tests bfd_detection -- --bench --speaker "$speaker" \
        --runs "$bfd_runs" | tee "$out/bfd-detection.md" || failed+=("bfd detection (see above)")
    echo "bench: bfd detection took $(($(date +%s) - t)) s"
fi
if ((real_api)); then
    # The allocator and idle speakers against the test suite's newest kube-apiserver + etcd 3.6
    # (scripts/install-test-deps.sh builds them); --quick: 10 nodes, 2 speakers for 5 s.
    t=$(date +%s)
    bench_cmd integration-tests real_api_cost -- --bench --bin "$speaker" "${real_api_args[@]}" \
        | tee "$out/real-api-cost.md" || failed+=("real API cost (see above)")
    echo "bench: real API cost took $(($(date +%s) - t)) s"
fi
if ((config_objects)); then
    # 5,000 speakers' config-object watches on the fake API (--quick: 50, two edits).
    t=$(date +%s)
    bench_cmd podcidr-bgp config_objects_scale -- --bench "${config_objects_args[@]}" \
        | tee "$out/config-objects.md" || failed+=("config objects scale (see above)")
    echo "bench: config objects scale took $(($(date +%s) - t)) s"
fi
if ((dataplane)); then
    # Packets lost client → pod through two BIRD ToRs (namespaces, kernel forwarding).
    t=$(date +%s)
    bench_cmd integration-tests dataplane -- --bench --speaker "$speaker" "${dataplane_args[@]}" \
        | tee "$out/dataplane.md" || failed+=("data-plane continuity (see above)")
    echo "bench: data-plane continuity took $(($(date +%s) - t)) s"
fi
if ((criterion)); then
    t=$(date +%s)
    for pb in bgp-proto:wire bgp-proto:planner ipam-watch:allocator; do
        p=${pb%:*} b=${pb#*:}
        bench_cmd "$p" "$b" -- "${criterion_args[@]}" 2>&1 \
            | tee "$out/criterion-$b.txt" || failed+=("criterion bench $p/$b")
    done
    echo "bench: criterion ${criterion_args[*]} took $(($(date +%s) - t)) s"
fi
echo "results in $out"
echo "bench: done in $(($(date +%s) - start)) s"
if ((${#failed[@]})); then
    echo "bench: FAILED:" >&2
    printf '  %s\n' "${failed[@]}" >&2
    exit 1
fi
