#!/usr/bin/env bash
# Installs the system packages the test suite needs (real BGP peers, namespaces, capture tools).
# Idempotent: does nothing when everything is already present.
set -euo pipefail

need=()
command -v bird >/dev/null 2>&1 || need+=(bird2)
command -v gobgpd >/dev/null 2>&1 || need+=(gobgpd)
# The CNI reference plugins (bridge, ptp, host-local, loopback) for speaker/tests/netns_cni.rs.
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || need+=(containernetworking-plugins)
# FRR's bgpd runs standalone (no zebra) for the ToR snippets of docs/tor.md.
[ -x /usr/lib/frr/bgpd ] && command -v vtysh >/dev/null 2>&1 || need+=(frr)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
# setpriv applies the DaemonSet's run model in speaker/tests/run_model.rs.
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
command -v ping >/dev/null 2>&1 || need+=(iputils-ping)
command -v tcpdump >/dev/null 2>&1 || need+=(tcpdump)
command -v python3 >/dev/null 2>&1 || need+=(python3)

# kubectl (its built-in kustomize renders deploy/ in speaker/tests/manifests_kustomize.rs).
# There is no Debian package for a current one: bookworm's kubernetes-client is kubectl 1.20
# with kustomize v2, which cannot read this layout. kubectl ships on the project's machine
# image; without it that test fails under CI (and is skipped elsewhere) with this advice.
if ! command -v kubectl >/dev/null 2>&1; then
  echo "install-test-deps: kubectl not found: install a current kubectl (kustomize v5) on PATH;" \
    "Debian's kubernetes-client is too old" >&2
fi

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-test-deps: missing ${need[*]} and not root; install them or run as root" >&2
  exit 1
fi

echo "install-test-deps: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
# The packages start nothing here (no systemd, policy-rc.d); the tests start each daemon themselves.
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
