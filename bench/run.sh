#!/usr/bin/env bash
# Regenerates the tables of docs/benchmarks.md (by hand; not part of scripts/test.sh or CI).
#
#   bench/run.sh [--runs 3] [--quick] [--skip-criterion] [--skip-latency]
#
# Convergence/footprint (bench/convergence.py), change→wire latency (cargo bench
# --bench latency) and the criterion micro benchmarks. Output: bench/results/<UTC time>/.
# Loopback only; every daemon is started here and stopped by PID.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=3
sizes=1000,10000,100000
v6_sizes=10000
criterion=1
latency=1
while (($#)); do
    case $1 in
        --runs) runs=$2; shift ;;
        --quick) sizes=1000,10000; v6_sizes=1000 ;;
        --skip-criterion) criterion=0 ;;
        --skip-latency) latency=0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
out=bench/results/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"

bash bench/install-deps.sh
cargo build --release --locked -p podcidr-bgp
speaker=$CARGO_TARGET_DIR/release/podcidr-bgp

{
    echo "date: $(date -u +%FT%TZ)"
    echo "kernel: $(uname -r)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(nproc)"
    echo "memory: $(free -m | awk '/Mem:/ {print $2}') MiB"
    echo "rustc: $(rustc --version)"
    dpkg-query -W -f='${Package} ${Version}\n' bird2 gobgpd python3-grpcio
    echo "podcidr-bgp: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
} | tee "$out/machine.txt"

/usr/bin/python3 bench/convergence.py --speaker "$speaker" --out "$out/convergence.jsonl" \
    --runs "$runs" --sizes "$sizes" --v6-sizes "$v6_sizes"
/usr/bin/python3 bench/report.py "$out/convergence.jsonl" | tee "$out/convergence.md"

if ((latency)); then
    cargo bench --locked -p integration-tests --bench latency -- --speaker "$speaker" \
        --changes 1000 | tee "$out/latency.md"
fi
if ((criterion)); then
    for b in wire planner; do
        cargo bench --locked -p bgp-proto --bench "$b" -- --noplot 2>&1 | tee "$out/criterion-$b.txt"
    done
    cargo bench --locked -p ipam-watch --bench allocator -- --noplot 2>&1 | tee "$out/criterion-allocator.txt"
fi
echo "results in $out"
