#!/usr/bin/env bash
# Builds kube-apiserver 1.20.2 from Debian bookworm's `kubernetes` source package, once per
# machine, for the real-control-plane tests (tests/src/control_plane/). Prints the binary's path
# on stdout; everything else goes to stderr.
#
# The binary is cached by version and patch set under $PODCIDR_CACHE_DIR (default
# /var/cache/podcidr-bgp): the cache key hashes the source package version, this script's mends
# (scripts/kube-apiserver/*.patch) and the versions of the two Debian Go libraries swapped in,
# so a change to any of them builds again and an unchanged machine builds nothing.
#
# Needs root for apt (a deb-src entry and golang-go, rsync, the two -dev packages); the build
# itself takes about 4 minutes on 2 cores and leaves nothing behind but the binary.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

cache_root="${PODCIDR_CACHE_DIR:-/var/cache/podcidr-bgp}"
k8s_version="1.20.2"
src_package="kubernetes"

log() { echo "build-kube-apiserver: $*" >&2; }

apt_install() {
  local need=()
  command -v go >/dev/null 2>&1 || need+=(golang-go)
  command -v rsync >/dev/null 2>&1 || need+=(rsync)
  command -v patch >/dev/null 2>&1 || need+=(patch)
  command -v dpkg-source >/dev/null 2>&1 || need+=(dpkg-dev)
  [ -d /usr/share/gocode/src/github.com/modern-go/reflect2 ] || need+=(golang-github-modern-go-reflect2-dev)
  [ -d /usr/share/gocode/src/github.com/json-iterator/go ] || need+=(golang-github-json-iterator-go-dev)
  # `apt-get source` needs a deb-src entry; mirror the machine's own Debian source list.
  local src_list=/etc/apt/sources.list.d/podcidr-bgp-deb-src.sources
  local have_src=0
  if grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ || grep -qs '^deb-src ' /etc/apt/sources.list; then
    have_src=1
  fi
  if [ ${#need[@]} -eq 0 ] && [ "$have_src" -eq 1 ]; then
    return
  fi
  if [ "$(id -u)" -ne 0 ]; then
    log "missing ${need[*]:-a deb-src entry} and not root; install them or run as root"
    exit 1
  fi
  if [ "$have_src" -eq 0 ]; then
    local uri suite
    uri="$(awk '/^URIs:/ && /debian\/?$/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)"
    suite="$(awk '/^Suites:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)"
    uri="${uri:-http://deb.debian.org/debian}"
    suite="${suite:-bookworm}"
    log "adding a deb-src entry for $uri $suite"
    cat >"$src_list" <<EOF
Types: deb-src
URIs: $uri
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
}

apt_install

src_version="$(apt-cache showsrc "$src_package" 2>/dev/null | awk '/^Version:/ {print $2}' | sort -V | tail -1)"
if [ -z "$src_version" ]; then
  log "apt knows no source package '$src_package' (is the deb-src entry there?)"
  exit 1
fi
case "$src_version" in
  *"$k8s_version"*) ;;
  *) log "source package $src_package is $src_version, expected kube-apiserver $k8s_version"; exit 1 ;;
esac
dep_versions="$(dpkg-query -W -f='${Package}=${Version}\n' golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev)"
key="$( { echo "$src_version"; echo "$dep_versions"; go version; cat "$here"/kube-apiserver/*.patch; } | sha256sum | cut -c1-16)"
out_dir="$cache_root/kube-apiserver/$k8s_version-$key"
bin="$out_dir/kube-apiserver"
if [ -x "$bin" ]; then
  log "cached: $bin"
  echo "$bin"
  exit 0
fi

start=$(date +%s)
mkdir -p "$cache_root/kube-apiserver"
work="$(mktemp -d "$cache_root/kube-apiserver/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
log "building kube-apiserver $k8s_version ($src_version, key $key) in $work"

cd "$work"
apt-get source -qq --download-only "$src_package=$src_version" >/dev/null 2>&1
dpkg-source -x --no-check ./*.dsc src >/dev/null
cd src

# Mend 1: github.com/modern-go/reflect2 1.0.1 reads Go's internal map layout; built with Go
# 1.18+ it crashes (SIGSEGV in map iteration, e.g. while encoding any map). 1.0.2, Debian's
# golang-github-modern-go-reflect2-dev, no longer does.
rsync -a --delete --exclude '.git*' /usr/share/gocode/src/github.com/modern-go/reflect2/ vendor/github.com/modern-go/reflect2/
# Mend 2: github.com/json-iterator/go 1.1.10 calls reflect2 in the ways 1.0.2 replaced; 1.1.12
# (golang-github-json-iterator-go-dev) is the release made for reflect2 1.0.2.
rsync -a --delete --exclude '.git*' /usr/share/gocode/src/github.com/json-iterator/go/ vendor/github.com/json-iterator/go/
# Mend 3: the OpenAPI type validators treat every zero value as null on Go 1.18+; see the patch.
for p in "$here"/kube-apiserver/*.patch; do
  patch -p1 -s <"$p"
done

# The package's own method (debian/rules): a GOPATH with k8s.io/kubernetes linked to the tree.
export GOPATH="$work/src/.go"
export GOCACHE="$work/gocache"
export CGO_ENABLED=0
export HOME="$work/home"
mkdir -p .go/src/k8s.io "$HOME"
ln -s ../../.. .go/src/k8s.io/kubernetes
make WHAT=cmd/kube-apiserver >"$work/build.log" 2>&1 || {
  tail -40 "$work/build.log" >&2
  log "make failed"
  exit 1
}

mkdir -p "$out_dir"
cp _output/bin/kube-apiserver "$out_dir/kube-apiserver.tmp"
mv "$out_dir/kube-apiserver.tmp" "$bin"
log "built $bin in $(( $(date +%s) - start )) s"
echo "$bin"
