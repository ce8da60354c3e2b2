#!/usr/bin/env bash
# Installs what bench/run.sh needs (Debian bookworm, root). Idempotent.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
pkgs=(bird2 gobgpd python3-grpcio python3-protobuf python3-grpc-tools golang-github-osrg-gobgp-dev)
missing=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Optional profilers (bench/profile.sh); failures here are not fatal.
command -v perf >/dev/null || apt-get install -y -qq linux-perf || true
command -v valgrind >/dev/null || apt-get install -y -qq valgrind || true
# Python stubs for GoBGP's gRPC API, generated from the Debian protos.
"$(dirname "$0")/gen-gobgp-stubs.sh"
