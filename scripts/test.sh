#!/usr/bin/env bash
# The whole test suite: system packages for the interop tests, then every workspace test.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-test-deps.sh
cargo test --workspace --locked "$@"
