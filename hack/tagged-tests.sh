#!/usr/bin/env bash
# tagged-tests.sh TAG DIR...: the tests that only a build with TAG compiles
# (those in files constrained by "//go:build TAG"), as a `go test -run`
# pattern. make test picks its stages by build tag with it, not by lists of
# names: a renamed test stays in its stage, and a new timing test joins the
# timing stage by living in a timing-tagged file.
#   timing  deadline and containment claims: run alone, never beside another
#           test binary on the 2 cores (make test's timing stage,
#           make test-deadlines-loaded)
#   norace  tests too slow under -race that run in stages of their own
set -euo pipefail
tag=$1
shift
names=$(for d in "$@"; do
  grep -lx "//go:build $tag" "$d"/*_test.go 2>/dev/null | xargs -r grep -ho '^func Test[A-Za-z0-9_]*' | sed 's/^func //'
done | sort -u)
if [ -z "$names" ]; then
  echo "tagged-tests.sh: no test in $* is tagged $tag" >&2
  exit 1
fi
echo "^($(echo $names | tr ' ' '|'))\$"
