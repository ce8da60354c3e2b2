#!/usr/bin/env bash
# Builds one real Kubernetes-side tool from its published Go modules, once per machine, for the
# test suite: the modern control plane (kube-apiserver, etcd) and the install tools (kubectl,
# kustomize, helm).
#
#   scripts/build-go-tool.sh kube-apiserver 1.37.2
#   scripts/build-go-tool.sh kubectl 1.37.2
#   scripts/build-go-tool.sh etcd 3.6.16        (etcd and etcdctl)
#   scripts/build-go-tool.sh kustomize 5.8.0
#   scripts/build-go-tool.sh helm 3.19.5
#   scripts/build-go-tool.sh glua 1.1.2         (gopher-lua: the Lua VM Argo CD runs
#                                                 resource health checks in)
#
# Prints the directory holding the binaries on stdout; everything else goes to stderr, with how
# long the build took. Nothing of the tools' code lives in this repository: the script writes a
# throw-away build module under the cache, asks the Go module proxy for the released modules and
# builds them with the machine's own Go (GOTOOLCHAIN=local: a module that needs a newer Go fails
# here with Go's own message instead of fetching another toolchain).
#
# Why a build module: k8s.io/kubernetes cannot be `go install`ed, because its go.mod replaces
# every staging module (k8s.io/api, apimachinery, apiserver, ...) with a local path. Our module
# requires k8s.io/kubernetes at the version and replaces each staging module with its published
# v0.MINOR.PATCH instead. etcd's server module has no main package; the build module's main calls
# etcdmain.Main, as etcd's own main does.
#
# Cached under $PODCIDR_CACHE_DIR (default /var/cache/podcidr-bgp)/go-tools/NAME-VERSION-KEY,
# the key hashing the recipe revision below and the Go version, so an unchanged machine builds
# nothing. Bump `recipe` whenever a change here changes what is built.
set -euo pipefail

name="${1:?usage: build-go-tool.sh NAME VERSION}"
version="${2:?usage: build-go-tool.sh NAME VERSION}"
version="${version#v}"
cache_root="${PODCIDR_CACHE_DIR:-/var/cache/podcidr-bgp}"

log() { echo "build-go-tool: $*" >&2; }

# The machine's Go (the image puts it in /usr/local/go); never Debian's golang-go over it.
command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || { log "no go on PATH: the machine's Go builds the control plane"; exit 1; }
export GOTOOLCHAIN=local
# Module and build caches beside the binaries, whatever HOME is (CI's environment differs).
export GOMODCACHE="${GOMODCACHE:-$cache_root/go-mod}"
export GOCACHE="${GOCACHE:-$cache_root/go-build}"
export CGO_ENABLED=0
export GOFLAGS="-mod=mod"

recipe=1
key="$( { echo "recipe $recipe"; go version; } | sha256sum | cut -c1-12)"
out_dir="$cache_root/go-tools/$name-$version-$key"
case "$name" in
  kube-apiserver | kubectl | kustomize | helm | glua) bins=("$name") ;;
  etcd) bins=(etcd etcdctl) ;;
  *) log "unknown tool '$name' (kube-apiserver, kubectl, etcd, kustomize, helm, glua)"; exit 2 ;;
esac

have_all=1
for b in "${bins[@]}"; do [ -x "$out_dir/$b" ] || have_all=0; done
if ((have_all)); then
  log "cached: $name $version in $out_dir"
  echo "$out_dir"
  exit 0
fi

start=$(date +%s)
mkdir -p "$cache_root/go-tools"
work="$(mktemp -d "$cache_root/go-tools/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cd "$work"
log "building $name $version with $(go version | awk '{print $3}') in $work"

# Writes go.mod for k8s.io/kubernetes vVERSION with every staging module replaced by its
# published v0.MINOR.PATCH.
kubernetes_module() {
  local kv="v$version" sv="v0.${version#*.}"
  go mod download -json "k8s.io/kubernetes@$kv" >dl.json || {
    cat dl.json >&2
    log "the module proxy has no k8s.io/kubernetes $kv"
    exit 1
  }
  local upstream
  upstream="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' dl.json)"
  {
    echo "module podcidr-bgp.test/kube-build"
    echo
    grep -m1 '^go ' "$upstream"
    echo
    echo "require k8s.io/kubernetes $kv"
    echo
    echo "replace ("
    sed -n 's|^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*$|\t\1 => \1 '"$sv"'|p' "$upstream"
    echo ")"
  } >go.mod
}

# -X flags so /version reports the release (discovery and kubectl's skew check read it).
kube_ldflags() {
  local minor="${version#*.}"
  minor="${minor%%.*}"
  local p=k8s.io/component-base/version
  echo "-s -w -X $p.gitVersion=v$version -X $p.gitMajor=1 -X $p.gitMinor=$minor" \
    "-X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z" \
    "-X k8s.io/client-go/pkg/version.gitVersion=v$version"
}

build_log="$work/build.log"
run() { "$@" >>"$build_log" 2>&1 || { tail -40 "$build_log" >&2; log "failed: $*"; exit 1; }; }

case "$name" in
  kube-apiserver | kubectl)
    kubernetes_module
    printf 'package tools\n\nimport _ "k8s.io/kubernetes/cmd/%s"\n' "$name" >tools.go
    sed -i '1i //go:build tools\n' tools.go
    run go mod tidy
    run go build -trimpath -ldflags "$(kube_ldflags)" -o "$work/bin/$name" "k8s.io/kubernetes/cmd/$name"
    ;;
  etcd)
    cat >go.mod <<EOF
module podcidr-bgp.test/etcd-build

go 1.24
EOF
    cat >main.go <<'EOF'
// The etcd server binary: etcd's own main does exactly this.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
    run go get "go.etcd.io/etcd/server/v3@v$version" "go.etcd.io/etcd/etcdctl/v3@v$version"
    run go mod tidy
    run go build -trimpath -ldflags "-s -w" -o "$work/bin/etcd" .
    run go build -trimpath -ldflags "-s -w" -o "$work/bin/etcdctl" "go.etcd.io/etcd/etcdctl/v3"
    ;;
  kustomize)
    run env GOBIN="$work/bin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kustomize/kustomize/v5@v$version"
    ;;
  glua)
    run env GOBIN="$work/bin" go install -trimpath -ldflags "-s -w" "github.com/yuin/gopher-lua/cmd/glua@v$version"
    ;;
  helm)
    run env GOBIN="$work/bin" go install -trimpath \
      -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$version" "helm.sh/helm/v3/cmd/helm@v$version"
    ;;
esac

mkdir -p "$out_dir"
for b in "${bins[@]}"; do
  cp "$work/bin/$b" "$out_dir/$b.tmp"
  mv "$out_dir/$b.tmp" "$out_dir/$b"
done
log "built $name $version in $(( $(date +%s) - start )) s: $out_dir"
echo "$out_dir"
