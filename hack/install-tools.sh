#!/usr/bin/env bash
# Builds the developer tools pinned in hack/tools (its own module, so their
# dependencies never move the main module's versions) into .cache/tools/bin,
# and prints that directory. With arguments, builds only the named tools.
# A binary newer than hack/tools/go.sum is kept; bump a pin with
# `cd hack/tools && go get <module>@<exact version> && go mod tidy`.
#
# Facts this script relies on (checked with Go 1.26):
#   - the module proxy serves exact versions; staticcheck v0.8.2 (go 1.26.0
#     in its go.mod) analyses Go 1.26 code;
#   - k8s.io/code-generator follows the k8s.io/kubernetes pin in go.mod
#     (v1.37.2 -> v0.37.2); sharing the module with staticcheck raises its
#     golang.org/x/tools from v0.47.0 to staticcheck's v0.51.0.
set -euo pipefail

ROOT_DIR="$(cd "$(dirname "$0")/.." && pwd)"
TOOLS_DIR="$ROOT_DIR/hack/tools"
BIN_DIR="${TOOLS_BIN:-$ROOT_DIR/.cache/tools/bin}"

# name=package, one per tool blank-imported by hack/tools/tools.go.
TOOLS=(
  staticcheck=honnef.co/go/tools/cmd/staticcheck
  deepcopy-gen=k8s.io/code-generator/cmd/deepcopy-gen
  conversion-gen=k8s.io/code-generator/cmd/conversion-gen
  defaulter-gen=k8s.io/code-generator/cmd/defaulter-gen
  controller-gen=sigs.k8s.io/controller-tools/cmd/controller-gen
)

wanted() {
  [ $# -eq 1 ] && return 0
  local name="$1" w
  shift
  for w in "$@"; do [ "$w" = "$name" ] && return 0; done
  return 1
}

mkdir -p "$BIN_DIR"
cd "$TOOLS_DIR"
for t in "${TOOLS[@]}"; do
  name="${t%%=*}"
  pkg="${t#*=}"
  wanted "$name" "$@" || continue
  out="$BIN_DIR/$name"
  if [ -x "$out" ] && [ "$out" -nt go.sum ]; then
    continue
  fi
  echo "hack/install-tools.sh: building $name ($pkg)" >&2
  start=$SECONDS
  go build -buildvcs=false -o "$out" "$pkg"
  echo "hack/install-tools.sh: built $out in $((SECONDS - start))s" >&2
done
echo "$BIN_DIR"
