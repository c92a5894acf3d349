#!/usr/bin/env bash
# Runs a command while busy loops keep every core loaded (CPU_BURNERS of
# them, default one per core), the way a shared CI machine can be: the
# deadline tests must hold there too (make test-deadlines-loaded).
set -euo pipefail
n="${CPU_BURNERS:-$(nproc)}"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
for _ in $(seq "$n"); do
  ( while :; do :; done ) &
  pids+=($!)
done
echo "hack/with-cpu-load.sh: $n busy loops running" >&2
"$@"
