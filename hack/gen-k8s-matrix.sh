#!/usr/bin/env bash
# Writes the build-line matrix (which kube-scheduler build serves which
# cluster minors, with which scheduler-plugins plugins) into README.md and
# docs/kubernetes.md, between their "BEGIN/END GENERATED k8s-matrix" markers,
# from the module files and the generated plugin registrations.
# With --stdout, prints the table instead (hack/verify-k8s.sh compares).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
. hack/lib/k8s.sh

table() {
  echo "| build | made from | Kubernetes | serves kube-apiserver | e2e against kube-apiserver | e2e's etcd | scheduler-plugins plugins registered |"
  echo "|---|---|---|---|---|---|---|"
  local f v m skew tags pf sp reg left etcd main
  main="$(modfile_k8s go.mod)"
  for f in $(line_modfiles); do
    v="$(modfile_k8s "$f")"; m="$(k8s_minor "$v")"; skew="$(skew_version "$f")"
    tags="$(line_tag "$f")"
    pf="$(plugins_file "$f")"
    sp="$(sed -n 's|^// scheduler-plugins: ||p' "$pf" | head -1)"
    reg="$(sed -n 's|^// registered: pkg/||p' "$pf" | sed 's|.*/||' | paste -sd, - | sed 's/,/, /g')"
    left="$(grep -c '^// left out: ' "$pf" || true)"
    if [ -z "$reg" ]; then reg="none ($sp compiles against none of them: $left left out)"
    elif [ "$left" != 0 ]; then reg="$reg ($sp; $left left out)"
    else reg="all $(grep -c '^// registered: ' "$pf") ($sp): $reg"; fi
    # Older lines' control planes run on the main line's etcd
    # (hack/build-controlplane.sh).
    etcd="$(etcd_version "$main")"
    [ "$v" = "$main" ] || etcd="$etcd (the main line's; $v pins $(etcd_version "$v"))"
    echo "| \`$(line_binary "$f")\` | \`$f\`${tags:+, \`-tags $tags\`} | $v | 1.$m, 1.$((m + 1)) | $v${skew:+, $skew} | $etcd | $reg |"
  done
}

if [ "${1:-}" = "--stdout" ]; then table; exit 0; fi
t="$(mktemp)"; table > "$t"
for doc in README.md docs/kubernetes.md; do
  grep -q 'BEGIN GENERATED k8s-matrix' "$doc" || { echo "$doc has no BEGIN GENERATED k8s-matrix marker" >&2; exit 1; }
  awk -v tf="$t" '
    /BEGIN GENERATED k8s-matrix/ {print; while ((getline l < tf) > 0) print l; skip=1; next}
    /END GENERATED k8s-matrix/ {skip=0}
    !skip' "$doc" > "$doc.tmp" && mv "$doc.tmp" "$doc"
done
rm -f "$t"
