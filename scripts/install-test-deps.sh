#!/usr/bin/env bash
# Installs what the test suite needs: system packages (real BGP peers, namespaces, CNI plugins,
# capture tools) and, in a venv under target/, the Kubernetes schema validator.
# Idempotent: does nothing when everything is already present.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v bird >/dev/null 2>&1 || need+=(bird2)
command -v gobgpd >/dev/null 2>&1 || need+=(gobgpd)
# The CNI reference plugins (bridge, ptp, host-local, loopback) for speaker/tests/netns/netns_cni.rs.
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || need+=(containernetworking-plugins)
# FRR's bgpd runs standalone (no zebra) for the ToR snippets of docs/tor.md.
[ -x /usr/lib/frr/bgpd ] && command -v vtysh >/dev/null 2>&1 || need+=(frr)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
# setpriv applies the DaemonSet's run model in speaker/tests/netns/run_model.rs.
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
# promtool (Debian ships it in prometheus) checks and unit-tests the alerts.
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v ping >/dev/null 2>&1 || need+=(iputils-ping)
# iptables cuts the node–ToR link for BFD (speaker/tests/netns/netns_bfd.rs, the bfd_detection bench).
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v tcpdump >/dev/null 2>&1 || need+=(tcpdump)
command -v python3 >/dev/null 2>&1 || need+=(python3)
# The real control plane (tests/src/control_plane.rs): openssl for the API server's
# certificates and service-account keys. kube-apiserver and etcd are built below.
command -v openssl >/dev/null 2>&1 || need+=(openssl)

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
# manifests are checked against the minimum supported version (speaker/tests/tools/manifests_schema.rs).
# In a venv under target/, so nothing is installed system-wide.
kv="target/test-tools/kv"
kv_version="1.37.0"
if ! "$kv/bin/kubernetes-validate" --version 2>/dev/null | grep -q "$kv_version"; then
  echo "install-test-deps: installing kubernetes-validate $kv_version into $kv" >&2
  rm -rf "$kv"
  python3 -m venv "$kv"
  "$kv/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==$kv_version"
fi

# The modern control plane and the install tools, built from their Go modules with the
# machine's Go and cached by version (scripts/build-go-tool.sh; versions in
# scripts/kube-versions.env): kube-apiserver of the oldest supported and the newest Kubernetes,
# etcd and etcdctl, helm, and kubectl (with its built-in kustomize, which renders deploy/)
# where the machine has none. The tests find them through links under target/test-tools/. A
# fresh machine builds them once (about 12 minutes on 2 cores in all); a later run finds them.
# shellcheck source=kube-versions.env
. scripts/kube-versions.env
mkdir -p target/test-tools
tools_start=$(date +%s)
link_tool() { # NAME VERSION LINK
  local t0 dir
  t0=$(date +%s)
  dir="$(bash scripts/build-go-tool.sh "$1" "$2")"
  ln -sfn "$dir" "target/test-tools/$3"
  echo "install-test-deps: $1 $2 ready in $(( $(date +%s) - t0 )) s: target/test-tools/$3" >&2
}
link_tool kube-apiserver "$KUBE_NEWEST" "kube-$KUBE_NEWEST"
link_tool kube-apiserver "$KUBE_OLDEST" "kube-$KUBE_OLDEST"
link_tool etcd "$ETCD_VERSION" etcd
link_tool helm "$HELM_VERSION" helm
link_tool glua "$GOPHER_LUA_VERSION" glua
# kubectl renders deploy/ (its built-in kustomize) and drives the control plane. A machine
# image may bring one; where there is none, it is built at the newest version, and the tests
# find it on PATH through target/test-tools/bin (scripts/test.sh puts it first).
mkdir -p target/test-tools/bin
if ! command -v kubectl >/dev/null 2>&1 || [ -L target/test-tools/bin/kubectl ]; then
  link_tool kubectl "$KUBE_NEWEST" kubectl
  ln -sfn ../kubectl/kubectl target/test-tools/bin/kubectl
fi
echo "install-test-deps: Go-built tools ready in $(( $(date +%s) - tools_start )) s" >&2
