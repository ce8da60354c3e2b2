#!/usr/bin/env bash
# Installs what the test suite needs: system packages (real BGP peers, namespaces, CNI plugins,
# capture tools) and, in a venv under target/, the Kubernetes schema validator.
# Idempotent: does nothing when everything is already present.
set -euo pipefail
cd "$(dirname "$0")/.."

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
# promtool (Debian ships it in prometheus) checks and unit-tests the alerts.
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v ping >/dev/null 2>&1 || need+=(iputils-ping)
# iptables cuts the node–ToR link for BFD (speaker/tests/netns_bfd.rs, the bfd_detection bench).
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v tcpdump >/dev/null 2>&1 || need+=(tcpdump)
command -v python3 >/dev/null 2>&1 || need+=(python3)
# The real control plane (tests/src/control_plane.rs): etcd, etcdctl for compactions, openssl
# for the API server's certificates and service-account keys. kube-apiserver is built below.
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || need+=(etcd-client)
command -v openssl >/dev/null 2>&1 || need+=(openssl)

# kubectl (its built-in kustomize renders deploy/ in speaker/tests/manifests_kustomize.rs).
# There is no Debian package for a current one: bookworm's kubernetes-client is kubectl 1.20
# with kustomize v2, which cannot read this layout. kubectl ships on the project's machine
# image; without it that test fails under CI (and is skipped elsewhere) with this advice.
if ! command -v kubectl >/dev/null 2>&1; then
  echo "install-test-deps: kubectl not found: install a current kubectl (kustomize v5) on PATH;" \
    "Debian's kubernetes-client is too old" >&2
fi

# python3's venv module, for the Kubernetes schema validator below.
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  need+=(python3-venv)
fi

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-test-deps: missing ${need[*]} and not root; install them or run as root" >&2
    exit 1
  fi
  echo "install-test-deps: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  # The packages start nothing here (no systemd, policy-rc.d); the tests start each daemon
  # themselves.
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# kubernetes-validate (PyPI) bundles the Kubernetes JSON schemas of 1.25 to 1.37: the rendered
# manifests are checked against the minimum supported version (speaker/tests/manifests_schema.rs).
# In a venv under target/, so nothing is installed system-wide.
kv="target/test-tools/kv"
kv_version="1.37.0"
if ! "$kv/bin/kubernetes-validate" --version 2>/dev/null | grep -q "$kv_version"; then
  echo "install-test-deps: installing kubernetes-validate $kv_version into $kv" >&2
  rm -rf "$kv"
  python3 -m venv "$kv"
  "$kv/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==$kv_version"
fi

# kube-apiserver 1.20.2, built once from Debian's `kubernetes` source package and cached by
# version and patch set (about 4 minutes on 2 cores the first time; see the script). The tests
# find it through target/test-tools/kube-apiserver.
start=$(date +%s)
apiserver="$(bash scripts/build-kube-apiserver.sh)"
mkdir -p target/test-tools
ln -sfn "$apiserver" target/test-tools/kube-apiserver
echo "install-test-deps: kube-apiserver ready in $(( $(date +%s) - start )) s: $apiserver" >&2
