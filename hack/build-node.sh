#!/usr/bin/env bash
# Builds what a real node needs beside the control plane of
# hack/build-controlplane.sh, from Go modules (no release downloads), into
# .cache/bin/<k8s version>/: the kubelet, kube-proxy and
# kube-controller-manager of the version go.mod pins. containerd, runc and
# the CNI plugins come from Debian (hack/install-node-deps.sh).
#
# The kubelet pulls in cadvisor and the container runtime clients, which
# the control plane's module does not need, so it is built in a module of
# its own under .cache/node/<version>, with the same staging replace block
# (hack/lib/k8s.sh). A binary that exists is not rebuilt. Prints the bin
# directory.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
. hack/lib/k8s.sh

V="$(modfile_k8s go.mod)"
BIN="$ROOT/.cache/bin/$V"
MOD="$ROOT/.cache/node/$V"
missing=0
for b in kubelet kube-proxy kube-controller-manager; do [ -x "$BIN/$b" ] || missing=1; done
if [ $missing = 1 ]; then
  mkdir -p "$BIN" "$MOD"
  if [ ! -f "$MOD/go.sum" ] || ! grep -q cmd/kube-proxy "$MOD/go.mod"; then
    echo "hack/build-node.sh: module for the node's binaries of k8s.io/kubernetes $V" >&2
    tools_module "$MOD" "$V" hack/build-node.sh -- \
      k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-proxy
  fi
  for b in kube-controller-manager kubelet kube-proxy; do
    build_tool "$MOD" "$BIN" "$b" "k8s.io/kubernetes/cmd/$b" "$(version_ldflags "$V")"
  done
fi
echo "$BIN"
