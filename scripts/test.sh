#!/usr/bin/env bash
# The test suite, whole or one tier at a time (docs/architecture.md, "Test tiers"):
#
#   scripts/test.sh              every tier: what the README and CI run
#   scripts/test.sh quick        unit tests, doc tests and the pure integration tests
#   scripts/test.sh fake         against the in-process fake Kubernetes API
#   scripts/test.sh tools        deploy/ under kubectl's kustomize, helm, promtool, Argo CD's Lua
#   scripts/test.sh routers      BIRD 2, GoBGP and FRR peering with us on loopback
#   scripts/test.sh netns        topologies in network namespaces (root)
#   scripts/test.sh apiserver    a real kube-apiserver and etcd, oldest and newest supported
#
# Arguments after the tier go to `cargo test` (`scripts/test.sh routers -- interop_bird::`).
# A test that needs something the machine lacks skips with one line on a developer machine
# and fails under CI (`CI` set); the skips are counted at the end, and any skip fails CI.
set -euo pipefail
cd "$(dirname "$0")/.."

tier=all
case "${1:-}" in
  all|quick|fake|tools|routers|netns|apiserver) tier=$1; shift ;;
  -*|"") ;;
  *) echo "scripts/test.sh: unknown tier '$1' (all, quick, fake, tools, routers, netns, apiserver)" >&2; exit 2 ;;
esac

# The pure tiers need nothing installed (and no root); every other one gets the system
# packages and the Go-built tools first.
if [[ $tier != quick && $tier != fake ]]; then
  bash scripts/install-test-deps.sh
fi
# A kubectl built by the script (on a machine that has none) comes first.
export PATH="$PWD/target/test-tools/bin:$PATH"

skips="${CARGO_TARGET_DIR:-target}/test-skips.log"
mkdir -p "$(dirname "$skips")"
rm -f "$skips"

rc=0
case $tier in
  all) cargo test --workspace --locked "$@" || rc=$? ;;
  quick)
    cargo test --workspace --locked --lib --bins --test quick "$@" || rc=$?
    if ((rc == 0)); then cargo test --workspace --locked --doc || rc=$?; fi
    ;;
  *) cargo test --workspace --locked --test "$tier" "$@" || rc=$? ;;
esac

if [[ -s $skips ]]; then
  count=$(wc -l < "$skips")
  echo "test.sh: $count test(s) skipped for want of something on this machine:" >&2
  sed 's/^/  /' "$skips" >&2
  if [[ -n ${CI:-} ]]; then
    echo "test.sh: a skip fails CI" >&2
    rc=${rc/#0/1}
  fi
else
  echo "test.sh: tier '$tier': no test skipped"
fi
exit "$rc"
