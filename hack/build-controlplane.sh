#!/usr/bin/env bash
# Builds a local control plane from Go modules (no Docker, no release
# downloads) into .cache/bin/<k8s version>/: etcd at the release that
# Kubernetes version requires, kube-apiserver, kubectl, and for the main
# line's version the unmodified upstream kube-scheduler (the extender e2e
# runs it). An older line's version gets a link to the main line's etcd
# instead of a build of its own: every supported kube-apiserver speaks
# etcd's v3 API, and a cold CI run saves two etcd builds (about two
# minutes each on 2 cores). Each version is built
# in its own generated module under .cache/controlplane/<version>, with the
# same staging replace block as our module files (hack/lib/k8s.sh).
#
#   hack/build-controlplane.sh                 the version go.mod pins (main)
#   hack/build-controlplane.sh v1.35.4 ...     other versions (an older line's e2e)
#
# A binary that exists is not rebuilt, so only the first run pays (about
# 5-8 minutes per version on 2 cores). Prints the bin directory of the last
# version.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
. hack/lib/k8s.sh

MAIN="$(modfile_k8s go.mod)"
[ $# -gt 0 ] || set -- "$MAIN"
for V in "$@"; do
  V="v${V#v}"
  BIN="$ROOT/.cache/bin/$V"
  MOD="$ROOT/.cache/controlplane/$V"
  ETCD="$(etcd_version "$V")"
  if [ "$V" != "$MAIN" ] && [ ! -e "$BIN/etcd" ]; then
    "$0" "$MAIN" >/dev/null
    mkdir -p "$BIN"
    ln -s "../$MAIN/etcd" "$BIN/etcd"
  fi
  want=(etcd kube-apiserver kubectl)
  # The upstream scheduler runs the extender e2e, on the main line only.
  [ "$V" != "$(modfile_k8s go.mod)" ] || want+=(kube-scheduler-upstream)
  missing=0
  for b in "${want[@]}"; do [ -x "$BIN/$b" ] || missing=1; done
  if [ $missing = 1 ]; then
    mkdir -p "$BIN" "$MOD"
    if [ ! -f "$MOD/go.sum" ]; then
      echo "hack/build-controlplane.sh: module for k8s.io/kubernetes $V and etcd $ETCD" >&2
      tools_module "$MOD" "$V" hack/build-controlplane.sh "go.etcd.io/etcd/server/v3 $ETCD" -- \
        go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
    fi
    build_tool "$MOD" "$BIN" etcd go.etcd.io/etcd/server/v3 "-X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD"
    build_tool "$MOD" "$BIN" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$(version_ldflags "$V")"
    build_tool "$MOD" "$BIN" kubectl k8s.io/kubernetes/cmd/kubectl "$(version_ldflags "$V")"
    [ "${want[3]:-}" = "" ] || build_tool "$MOD" "$BIN" kube-scheduler-upstream k8s.io/kubernetes/cmd/kube-scheduler "$(version_ldflags "$V")"
  fi
done
echo "$BIN"
