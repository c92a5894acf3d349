#!/usr/bin/env bash
# Fails when the build lines disagree with each other or with what
# hack/bump-k8s.sh would write: each module file's replace block and staging
# requirements against k8s.io/kubernetes' own go.mod at its pin, the generated
# scheduler-plugins registration of each line, go mod tidy, each older line's
# kube-scheduler type-checked with its module file and tag, and the matrix in
# README.md and docs/kubernetes.md. Part of make verify (and so make test).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
. hack/lib/k8s.sh

fail=0
problem() { echo "hack/verify-k8s.sh: $*" >&2; fail=1; }

notags=""
for f in $(line_modfiles); do t="$(line_tag "$f")"; [ -n "$t" ] && notags+="${notags:+ && }!$t"; done

for f in $(line_modfiles); do
  v="$(modfile_k8s "$f")"
  [ -n "$v" ] || { problem "$f requires no k8s.io/kubernetes"; continue; }
  s="$(staging_version "$v")"
  fix="run hack/bump-k8s.sh $( [ "$f" = go.mod ] || echo "--line $f ")${v#v}"
  if [ "$(current_replace_block "$f")" != "$(replace_block "$v")" ]; then
    problem "$f: the staging replace block is not the one for k8s.io/kubernetes $v; $fix"
  fi
  for m in $(staging_modules "$v"); do
    got="$(awk -v m="$m" '$1==m && $2 ~ /^v/ && $3 != "=>" && $0 !~ /\/\/ indirect/ {print $2; exit}' "$f")"
    [ -z "$got" ] || [ "$got" = "$s" ] || problem "$f requires $m $got, not $s; $fix"
  done
  for d in $(sed -n 's|^[[:space:]]*\(k8s.io/[^ ]*\) => \./hack/stub/.*|\1|p' "$f"); do
    [ -f "hack/stub/$d/go.mod" ] || problem "$f points $d at hack/stub/$d, which has no go.mod; $fix"
  done
  pf="$(plugins_file "$f")"
  if [ ! -f "$pf" ]; then
    problem "$pf is missing; $fix"
  else
    gv="$(sed -n 's|^// Kubernetes: ||p' "$pf" | head -1)"
    [ "$gv" = "$v" ] || problem "$pf was generated for Kubernetes $gv, $f pins $v; $fix"
    want="$(line_tag "$f")"; want="${want:-$notags}"
    got="$(sed -n 's|^//go:build ||p' "$pf" | head -1)"
    [ "$got" = "$want" ] || problem "$pf has build constraint '$got', want '$want'; $fix"
  fi
  if ! out="$(GOFLAGS="-modfile=$f" go mod tidy -e -diff 2>&1)"; then
    problem "$f is not tidy (run: GOFLAGS=-modfile=$f go mod tidy -e):"; echo "$out" | head -20 >&2
  fi
done

# Each older line's kube-scheduler type-checked against its own module file
# and build tag (hack/tools/typecheck: no compile, seconds per line). make
# test builds only the main line; this is what it checks of the others
# (make test-lines compiles them and runs their e2e).
for f in $(line_modfiles); do
  [ "$f" = go.mod ] && continue
  go run -C hack/tools ./typecheck -C "$ROOT" -modfile "$f" -tags "$(line_tag "$f")" ./cmd/kube-scheduler ||
    problem "the $(line_name "$f") line does not compile (errors above): code shared by every line must build against each line's Kubernetes; put what differs in a file of the line's build tag (internal/framework)"
done

main="$(modfile_k8s go.mod)"
cg="$(awk '$1=="k8s.io/code-generator" {print $2; exit}' hack/tools/go.mod)"
[ "$cg" = "$(staging_version "$main")" ] || problem "hack/tools pins k8s.io/code-generator $cg, the main line needs $(staging_version "$main"); run hack/bump-k8s.sh ${main#v}"
for m in $(grep -rlE 'wasmsched/(kube-scheduler|wasm-extender):v[0-9.]+-wasmsched' manifests); do
  if grep -E 'wasmsched/(kube-scheduler|wasm-extender):v[0-9.]+-wasmsched' "$m" | grep -vqE "wasmsched/(kube-scheduler|wasm-extender):$main-wasmsched"; then
    problem "$m deploys another image than the main line's $main (make image tags IMAGE_VERSION); run hack/bump-k8s.sh ${main#v}"
  fi
done
# Each older line has its kustomize overlay, on the line's image.
for f in $(line_modfiles); do
  [ "$f" = go.mod ] && continue
  v="$(modfile_k8s "$f")"; o="manifests/overlays/$(line_name "$f")/kustomization.yaml"
  grep -q "newTag: $v-wasmsched" "$o" 2>/dev/null || problem "$o does not deploy the $(line_name "$f") line's image $v-wasmsched; run hack/bump-k8s.sh --line $f ${v#v}"
done
for o in manifests/overlays/k8s-*/kustomization.yaml; do
  [ -f "go.$(basename "$(dirname "$o")").mod" ] || problem "$o is the overlay of a build line that no longer exists; remove it"
done
# Every supported minor has a build it may run.
for m in $(hack/gen-k8s-matrix.sh --unserved); do
  problem "hack/k8s-minors.txt supports Kubernetes $m, and no build line serves it (the line of $m, or of the minor before it): add one (docs/kubernetes.md, Adding a line)"
done

want="$(hack/gen-k8s-matrix.sh --stdout)"
for doc in README.md docs/kubernetes.md; do
  got="$(awk '/BEGIN GENERATED k8s-matrix/ {on=1; next} /END GENERATED k8s-matrix/ {on=0} on' "$doc")"
  [ "$got" = "$want" ] || problem "$doc: the build-line matrix is stale; run hack/gen-k8s-matrix.sh"
done

[ $fail = 0 ] && echo "hack/verify-k8s.sh: build lines consistent" >&2
exit $fail
