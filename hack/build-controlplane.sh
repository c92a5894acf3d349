#!/usr/bin/env bash
# Builds the local control plane from the module versions pinned in go.mod
# (no Docker, no release downloads): etcd, kube-apiserver and kubectl, into
# .cache/bin/<name>-<version>. A binary that exists is not rebuilt, so only
# the first run pays (about 5-8 minutes on 2 cores; the Go build cache makes
# later rebuilds fast). Prints the bin directory.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
K8S_VERSION="${K8S_VERSION:-v1.34.10}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.4}"
BIN="$ROOT/.cache/bin"
mkdir -p "$BIN"

ldflags=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=34 -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

build() { # name version package ldflags
  local out="$BIN/$1-$2"
  if [ -x "$out" ]; then return; fi
  echo "hack/build-controlplane.sh: building $1 $2" >&2
  (cd "$ROOT" && go build -ldflags "$4" -o "$out.tmp" "$3")
  mv "$out.tmp" "$out"
}

build etcd "$ETCD_VERSION" go.etcd.io/etcd/server/v3 "-X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION"
build kube-apiserver "$K8S_VERSION" k8s.io/kubernetes/cmd/kube-apiserver "$ldflags"
build kubectl "$K8S_VERSION" k8s.io/kubernetes/cmd/kubectl "$ldflags"
# The unmodified upstream scheduler, for extender mode's end-to-end test.
build kube-scheduler-upstream "$K8S_VERSION" k8s.io/kubernetes/cmd/kube-scheduler "$ldflags"
echo "$BIN"
