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
    e2e="$(e2e_versions "$f" | sed 's/ /, /g')"
    echo "| \`$(line_binary "$f")\` | \`$f\`${tags:+, \`-tags $tags\`} | $v | 1.$m, 1.$((m + 1)) | $e2e | $etcd | $reg |"
  done
}

# supported_minors: the minors of hack/k8s-minors.txt (35 36 ...).
supported_minors() { sed 's/#.*//' hack/k8s-minors.txt | awk 'NF {sub(/^1\./, "", $1); print $1}' | sort -n; }

# serving_line MINOR: the module file of the line a MINOR cluster runs: the
# line of that minor, or else the one a minor older ("" when none).
serving_line() {
  local f same="" older=""
  for f in $(line_modfiles); do
    case "$(k8s_minor "$(modfile_k8s "$f")")" in
      "$1") same="$f" ;;
      "$(($1 - 1))") older="$f" ;;
    esac
  done
  echo "${same:-$older}"
}

# which: per supported minor, the build to run and the image the Helm chart
# picks; then the lines no supported minor picks, and why they exist.
which() {
  echo
  echo "**Which build to run** (the supported minors of hack/k8s-minors.txt):"
  echo
  echo "| your cluster (kube-apiserver) | run | image the Helm chart picks | why |"
  echo "|---|---|---|---|"
  local m f v why picked=""
  for m in $(supported_minors); do
    f="$(serving_line "$m")"
    [ -n "$f" ] || { echo "| 1.$m | **no build** | refused | add a line (hack/bump-k8s.sh --line) |"; continue; }
    v="$(modfile_k8s "$f")"; picked+=" $f"
    if [ "$(k8s_minor "$v")" = "$m" ]; then why="same minor"; else why="one minor older, which the skew policy allows"; fi
    echo "| 1.$m | \`$(line_binary "$f")\` ($v) | \`kube-scheduler:$v-wasmsched\` | $why |"
  done
  for f in $(line_modfiles); do
    case " $picked " in *" $f "*) continue ;; esac
    v="$(modfile_k8s "$f")"; m="$(k8s_minor "$v")"
    echo "| 1.$m or 1.$((m + 1)), only to run the scheduler-plugins plugins | \`$(line_binary "$f")\` ($v) | none: pin \`image.tag: $v-wasmsched\` | 1.$m is not a supported minor; this line is kept because it is the newest on which sigs.k8s.io/scheduler-plugins compiles |"
  done
}

if [ "${1:-}" = "--stdout" ]; then table; which; exit 0; fi
if [ "${1:-}" = "--unserved" ]; then
  for m in $(supported_minors); do [ -n "$(serving_line "$m")" ] || echo "1.$m"; done
  exit 0
fi
t="$(mktemp)"; { table; which; } > "$t"
for doc in README.md docs/kubernetes.md; do
  grep -q 'BEGIN GENERATED k8s-matrix' "$doc" || { echo "$doc has no BEGIN GENERATED k8s-matrix marker" >&2; exit 1; }
  awk -v tf="$t" '
    /BEGIN GENERATED k8s-matrix/ {print; while ((getline l < tf) > 0) print l; skip=1; next}
    /END GENERATED k8s-matrix/ {skip=0}
    !skip' "$doc" > "$doc.tmp" && mv "$doc.tmp" "$doc"
done
rm -f "$t"
