#!/usr/bin/env bash
# Runs every fuzz target for N seconds (default 60), seeded with the golden vectors and the
# regression inputs. cargo-fuzz is installed if missing. A crash fails the run; keep its input
# under bgp-proto/tests/regressions/ so `cargo test` replays it.
#
# Without AddressSanitizer: every path the targets reach is safe Rust (the netlink module's
# `unsafe` is its socket, which no target calls), where ASan finds nothing the panics and
# assertions do not, and building the object and netlink targets' kube/rustls dependencies
# with it cost minutes of every CI run.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}

export RUSTC_BOOTSTRAP=1
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --quiet
fi

# Seed: each vector as raw bytes behind the options byte the targets read first
# (bit 0: 4-octet AS, bit 1: extended messages); the config parser gets the shipped example
# configs instead.
seed() {
  local dir=fuzz/corpus/$1
  mkdir -p "$dir"
  python3 - "$dir" <<'PY'
import pathlib, sys
out = pathlib.Path(sys.argv[1])
if out.name in ("config_objects", "pod_cidr_file", "netlink_dump"):
    # Their inputs are not BGP messages: only their own seeds (fuzz/seeds/<target>/: the
    # shipped example objects as JSON, pod-CIDR files, rtnetlink dump buffers).
    for f in sorted((pathlib.Path("fuzz/seeds") / out.name).iterdir()):
        (out / f"seed-{f.name}").write_bytes(f.read_bytes())
    sys.exit(0)
if out.name == "config_file":
    for f in sorted(pathlib.Path("deploy/examples").glob("*.yaml")):
        (out / f"example-{f.stem}").write_bytes(f.read_bytes())
    seeds = pathlib.Path("fuzz/seeds") / out.name
    if seeds.is_dir():
        for f in sorted(seeds.iterdir()):
            (out / f"seed-{f.name}").write_bytes(f.read_bytes())
    sys.exit(0)
for f in sorted(pathlib.Path("bgp-proto/tests/vectors").rglob("*.hex")):
    text = f.read_text()
    hexs = "".join(c for l in text.splitlines() if not l.lstrip().startswith("#") for c in l if c in "0123456789abcdefABCDEF")
    four = "# four-octet-as: no" not in text
    (out / f"vector-{f.parent.name}-{f.stem}").write_bytes(bytes([1 if four else 0]) + bytes.fromhex(hexs))
for f in sorted(pathlib.Path("bgp-proto/tests/regressions").glob("*.bin")):
    (out / f"regression-{f.stem}").write_bytes(f.read_bytes())
# The minimised corpus of the last long run (scripts/fuzz-long.sh).
seeds = pathlib.Path("fuzz/seeds") / out.name
if seeds.is_dir():
    for f in sorted(seeds.iterdir()):
        (out / f"seed-{f.name}").write_bytes(f.read_bytes())
PY
}

# Seeding only (scripts/fuzz-long.sh): no run.
if [[ "$seconds" == "seed-only" ]]; then
  for target in $(cargo fuzz list); do seed "$target"; done
  exit 0
fi

for target in $(cargo fuzz list); do
  seed "$target"
  echo "fuzz: $target for ${seconds}s"
  # cargo fuzz exits non-zero on a crash; pipefail carries it out.
  cargo fuzz run --sanitizer none "$target" "fuzz/corpus/$target" -- -max_total_time="$seconds" -rss_limit_mb=2048 2>&1 | tail -n 3
done
