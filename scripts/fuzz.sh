#!/usr/bin/env bash
# Runs every fuzz target for N seconds (default 60). cargo-fuzz is installed if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}

export RUSTC_BOOTSTRAP=1
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --quiet
fi

for target in $(cargo fuzz list); do
  echo "fuzz: $target for ${seconds}s"
  cargo fuzz run "$target" -- -max_total_time="$seconds" -rss_limit_mb=2048 2>&1 | tail -n 5
  # cargo fuzz exits non-zero on a crash; pipefail carries it out.
done
