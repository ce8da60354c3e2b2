#!/usr/bin/env bash
# Installs what bench/run.sh needs (Debian bookworm, root). Idempotent.
#   bench/install-deps.sh [--profilers]   # --profilers: also valgrind and perf (bench/profile.sh)
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
profilers=0
if [[ ${1:-} == --profilers ]]; then profilers=1; fi
# time: GNU time, the peak RSS of `diff` in the control-plane bench.
pkgs=(bird2 gobgpd python3-grpcio python3-protobuf python3-grpc-tools golang-github-osrg-gobgp-dev time)
missing=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Profilers for bench/profile.sh only (not needed by run.sh, so not installed for CI's
# --quick run); bench/profile.sh checks for valgrind itself, so failures here are not fatal.
if ((profilers)) && ! { command -v perf && command -v valgrind; } >/dev/null; then
    apt-get update -qq || true
    command -v valgrind >/dev/null || apt-get install -y -qq valgrind || true
    command -v perf >/dev/null || apt-get install -y -qq --no-install-recommends linux-perf || true
fi
# Python stubs for GoBGP's gRPC API, generated from the Debian protos.
"$(dirname "$0")/gen-gobgp-stubs.sh"
