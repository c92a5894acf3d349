#!/usr/bin/env bash
# Prints the replace block that pins every k8s.io staging module to the
# release that matches k8s.io/kubernetes, generated from the "=> ./staging/..."
# lines of k8s.io/kubernetes' own go.mod. Usage: hack/gen-replaces.sh v1.34.10
set -euo pipefail
K8S="${1:-v1.34.10}"
STAGING="v0.${K8S#v1.}"
MOD="$(cd /tmp && go mod download -json "k8s.io/kubernetes@$K8S" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
echo "replace ("
grep -E '=> \./staging/' "$MOD" | awk -v v="$STAGING" '{print "\t" $1 " => " $1 " " v}'
echo ")"
