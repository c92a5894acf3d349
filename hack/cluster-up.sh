#!/usr/bin/env bash
# Starts etcd and kube-apiserver on 127.0.0.1 (free ports, TLS from a
# generated CA, token auth, RBAC) with state in ${1:-_output/cluster}, building
# the binaries first if needed. Prints the admin kubeconfig to export.
set -euo pipefail
cd "$(dirname "$0")/.."
./hack/build-controlplane.sh >/dev/null
exec go run ./hack/cluster up "${1:-$PWD/_output/cluster}"
