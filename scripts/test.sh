#!/usr/bin/env bash
# The whole test suite: system packages for the interop tests, then every workspace test.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-test-deps.sh
# A kubectl built by the script (on a machine that has none) comes first.
export PATH="$PWD/target/test-tools/bin:$PATH"
cargo test --workspace --locked "$@"
