#!/usr/bin/env bash
# hack/filtered.sh NAME PATTERN COMMAND...: runs COMMAND, shows the lines of
# its output (stdout and stderr) that match PATTERN (grep -E) as they come,
# and keeps the whole output in _output/logs/NAME.log. When COMMAND fails,
# the last lines of that log are shown as well: a TestMain that fails before
# any test runs prints nothing a test-result pattern matches, and make test
# would otherwise report only FAIL.
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: hack/filtered.sh NAME PATTERN COMMAND..." >&2; exit 2; }
name=$1 pattern=$2
shift 2
logs="$(cd "$(dirname "$0")/.." && pwd)/_output/logs"
mkdir -p "$logs"
log="$logs/$name.log"
"$@" 2>&1 | tee "$log" | grep --line-buffered -E "$pattern"
rc=${PIPESTATUS[0]}
if [ "$rc" != 0 ]; then
  echo "hack/filtered.sh: $name failed (exit $rc); the last 60 lines of its output ($log):"
  tail -n 60 "$log"
fi
exit "$rc"
