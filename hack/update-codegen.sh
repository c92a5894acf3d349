#!/usr/bin/env bash
# Regenerates the config API's deepcopy, conversion and defaulter functions
# (pkg/apis/config and its v1) with the k8s.io/code-generator pinned in
# hack/tools, as sigs.k8s.io/scheduler-plugins does. Part of `make generate`;
# hack/verify.sh fails when the committed files differ from its output.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
BIN="$(hack/install-tools.sh deepcopy-gen conversion-gen defaulter-gen)"
HEADER=hack/boilerplate.go.txt

"$BIN/deepcopy-gen" --output-file zz_generated.deepcopy.go --go-header-file "$HEADER" \
  ./pkg/apis/config ./pkg/apis/config/v1
# conversion-gen lists the fields it leaves to pkg/apis/config/v1/conversion.go
# as warnings; the hand-written functions there cover them.
"$BIN/conversion-gen" --output-file zz_generated.conversion.go --go-header-file "$HEADER" \
  ./pkg/apis/config/v1 2> >(grep -v -e 'could not find nor generate a final Conversion function' \
    -e 'the following fields need manual conversion' -e '^E[0-9].*conversion.go:[0-9]*\]       - ' >&2)
"$BIN/defaulter-gen" --output-file zz_generated.defaults.go --go-header-file "$HEADER" \
  ./pkg/apis/config/v1

# The policy.wasmsched.io API (pkg/apis/policy): deep copies and the CRDs in
# manifests/crds, with their schemas, CEL rules and printer columns, from the
# Go types and their markers (sigs.k8s.io/controller-tools).
CG="$(hack/install-tools.sh controller-gen)/controller-gen"
"$CG" object:headerFile="$HEADER" crd:crdVersions=v1,maxDescLen=1000 \
  paths=./pkg/apis/policy/... output:crd:artifacts:config=manifests/crds
