#!/usr/bin/env bash
# Heap profile (and optionally a CPU profile) of podcidr-bgp in one convergence case: N IPv4
# /26 announced to and withdrawn from a BIRD receiver on loopback (bench/convergence.py,
# podcidr sender only, one run), with the speaker under valgrind.
#
#   bench/profile.sh [--n 100000] [--callgrind]
#
# Prints ms_print's graph of the massif profile and the peak snapshot attributed to the
# innermost frame of this workspace's crates (bench/massif_summary.py); with --callgrind, a
# second run under callgrind and callgrind_annotate's top 30 functions. Output files go to
# bench/results/profile-<UTC time>/. Builds the release binary (honours CARGO_TARGET_DIR).
# Loopback only; every process is started here and stopped by PID. Numbers under valgrind are
# for finding where memory and time go, not for comparison with docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."

n=100000
callgrind=0
while (($#)); do
    case $1 in
        --n) n=$2; shift ;;
        --callgrind) callgrind=1 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "--n wants a positive integer, not '$n'" >&2; exit 2; }

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
bash bench/install-deps.sh --profilers
for tool in valgrind ms_print callgrind_annotate; do
    command -v "$tool" >/dev/null || { echo "profile: $tool is not installed" >&2; exit 1; }
done
cargo build --release --locked -p podcidr-bgp
bin=$(cd "$CARGO_TARGET_DIR/release" && pwd)/podcidr-bgp

out=bench/results/profile-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
out=$(cd "$out" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One convergence case with the speaker under `valgrind --tool=$1 [$2...]`: a wrapper passed
# to convergence.py as --speaker runs only the `speaker` subcommand under valgrind.
run_under() {
    local tool=$1 wrapper=$tmp/speaker-$1
    shift
    {
        echo '#!/bin/sh'
        echo 'if [ "$1" = speaker ]; then'
        printf '    exec valgrind --tool=%q' "$tool"
        printf ' %q' "$@" "$bin"
        echo ' "$@"'
        echo 'fi'
        printf 'exec %q "$@"\n' "$bin"
    } >"$wrapper"
    chmod +x "$wrapper"
    echo "profile: $n IPv4 /26 with the speaker under valgrind --tool=$tool"
    # Generous bounds: valgrind slows the speaker 20-50x, and massif writes its file at exit.
    /usr/bin/python3 bench/convergence.py --speaker "$wrapper" \
        --out "$out/convergence-$tool.jsonl" --senders podcidr --sizes "$n" --v6-sizes '' \
        --runs 1 --skip-idle --strict --timeout 600 --stop-timeout 60
}

start=$(date +%s)
run_under massif --massif-out-file="$out/massif.%p" --threshold=0.1 --depth=50
shopt -s nullglob
massif=("$out"/massif.*)
if ((${#massif[@]} != 1)); then
    echo "profile: expected one massif file in $out, found ${#massif[@]}" >&2
    exit 1
fi
# ms_print's Perl warns about deep recursion on deep Rust stacks: keep that out of the way.
ms_print "${massif[0]}" >"$out/ms_print.txt" 2>"$out/ms_print.stderr" \
    || { cat "$out/ms_print.stderr" >&2; exit 1; }
echo
echo "== massif: heap over time (ms_print; full output in $out/ms_print.txt)"
# The header and the graph, up to the list of detailed snapshots.
awk '{print} /^ Detailed snapshots:/ {exit}' "$out/ms_print.txt"
echo
echo "== massif: peak snapshot by innermost workspace frame"
/usr/bin/python3 bench/massif_summary.py "${massif[0]}" | tee "$out/massif-summary.txt"

if ((callgrind)); then
    echo
    run_under callgrind --callgrind-out-file="$out/callgrind.%p"
    cg=("$out"/callgrind.*)
    if ((${#cg[@]} != 1)); then
        echo "profile: expected one callgrind file in $out, found ${#cg[@]}" >&2
        exit 1
    fi
    callgrind_annotate "${cg[0]}" >"$out/callgrind_annotate.txt" \
        2>"$out/callgrind_annotate.stderr" || { cat "$out/callgrind_annotate.stderr" >&2; exit 1; }
    echo
    echo "== callgrind: top 30 functions by instructions, self cost" \
        "(full output in $out/callgrind_annotate.txt)"
    # The totals, then the first 30 rows of the per-function table.
    awk '/PROGRAM TOTALS/ {print; next}
         /file:function/ {table = 1; print; next}
         table && /^-+$/ && !rows {next}
         table && NF {print; if (++rows == 30) exit}' "$out/callgrind_annotate.txt"
fi
echo
echo "profile: done in $(($(date +%s) - start)) s; files in $out"
