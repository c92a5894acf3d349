#!/usr/bin/env bash
# Stops the control plane started by hack/cluster-up.sh (state dir as argument).
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./hack/cluster down "${1:-$PWD/_output/cluster}"
