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

# name=package[@module dir under hack/tools], one per tool blank-imported by
# a tools.go there. Helm and cosign have modules of their own
# (hack/tools/helm, hack/tools/cosign): their dependencies would move the
# others'. cosign is built only for make cosign-interop. Helm reports the version its
# release ldflags set, here from its module's pin.
TOOLS=(
  staticcheck=honnef.co/go/tools/cmd/staticcheck
  deepcopy-gen=k8s.io/code-generator/cmd/deepcopy-gen
  conversion-gen=k8s.io/code-generator/cmd/conversion-gen
  defaulter-gen=k8s.io/code-generator/cmd/defaulter-gen
  controller-gen=sigs.k8s.io/controller-tools/cmd/controller-gen
  helm=helm.sh/helm/v4/cmd/helm@helm
  cosign=github.com/sigstore/cosign/v2/cmd/cosign@cosign
)

wanted() {
  [ $# -eq 1 ] && return 0
  local name="$1" w
  shift
  for w in "$@"; do [ "$w" = "$name" ] && return 0; done
  return 1
}

mkdir -p "$BIN_DIR"
for t in "${TOOLS[@]}"; do
  name="${t%%=*}"
  pkg="${t#*=}"
  dir="$TOOLS_DIR"
  case "$pkg" in *@*) dir="$TOOLS_DIR/${pkg#*@}"; pkg="${pkg%@*}" ;; esac
  wanted "$name" "$@" || continue
  out="$BIN_DIR/$name"
  if [ -x "$out" ] && [ "$out" -nt "$dir/go.sum" ]; then
    continue
  fi
  ldflags=""
  if [ "$name" = helm ]; then
    ldflags="-X helm.sh/helm/v4/internal/version.version=$(cd "$dir" && go list -m -f '{{.Version}}' helm.sh/helm/v4)"
  fi
  echo "hack/install-tools.sh: building $name ($pkg)" >&2
  start=$SECONDS
  (cd "$dir" && go build -buildvcs=false -ldflags "$ldflags" -o "$out" "$pkg")
  echo "hack/install-tools.sh: built $out in $((SECONDS - start))s" >&2
done
echo "$BIN_DIR"
