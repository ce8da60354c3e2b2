#!/usr/bin/env bash
# The documented long fuzz run (by hand, not CI): every target until it has executed RUNS
# inputs (default 10 million), seeded like scripts/fuzz.sh plus the kept corpus in
# fuzz/seeds/. Afterwards each target's corpus is minimised (cargo fuzz cmin) back into
# fuzz/seeds/<target>/, which is committed, and the executions per target are printed as a
# Markdown table for docs/fuzzing.md. A crash fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10000000}
# Upper bound per target, so a slow machine cannot run forever.
max_seconds=${MAX_SECONDS:-3600}

export RUSTC_BOOTSTRAP=1
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --quiet
fi
# Same seeding as the CI run (vectors, regression inputs, kept seeds).
bash scripts/fuzz.sh seed-only

rows=()
# TARGETS="a b" runs only those (a run for new targets).
for target in ${TARGETS:-$(cargo fuzz list)}; do
  corpus=fuzz/corpus/$target
  seeds=fuzz/seeds/$target
  mkdir -p "$seeds"
  log=$(mktemp)
  start=$(date +%s)
  cargo fuzz run "$target" "$corpus" -- -runs="$runs" -max_total_time="$max_seconds" \
    -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1
  took=$(( $(date +%s) - start ))
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -n 1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+')
  rm -f "$log"
  # Minimise into the kept seeds.
  rm -rf "$seeds.new" && mkdir -p "$seeds.new"
  cargo fuzz cmin "$target" "$corpus" >/dev/null 2>&1
  cp "$corpus"/* "$seeds.new"/
  rm -rf "$seeds" && mv "$seeds.new" "$seeds"
  kept=$(find "$seeds" -type f | wc -l)
  rows+=("| \`$target\` | $execs | $took | $cov | $kept |")
done

echo "| target | executions | seconds | coverage (edges) | corpus kept (files) |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
