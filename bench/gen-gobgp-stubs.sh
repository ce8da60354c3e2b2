#!/usr/bin/env bash
# Generates Python gRPC stubs for GoBGP's API from golang-github-osrg-gobgp-dev into
# bench/gobgp_api/ (not committed). Uses Debian's grpc_tools.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=/usr/share/gocode/src/github.com/osrg/gobgp/api
out=$here/gobgp_api
mkdir -p "$out"
/usr/bin/python3 -m grpc_tools.protoc -I"$src" --python_out="$out" --grpc_python_out="$out" \
    "$src/gobgp.proto" "$src/attribute.proto" "$src/capability.proto"
# The generated modules import each other by bare name; make them importable as a package.
touch "$out/__init__.py"
echo "stubs in $out"
