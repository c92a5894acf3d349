// Package policies replays every example policy's case table (the one its
// native test uses) against the policy compiled with TinyGo and with Go,
// through the real host and real NodeInfos, with the conformance kit that
// `wasmsched test --cases` runs: expectations, and batch forms against
// single forms on every case's pod and node; and the same verdicts and
// scores from the module instrumented (how the host runs it) and as
// uploaded.
package policies

import (
	"encoding/json"
	"testing"

	"github.com/wasmsched/wasmsched/pkg/casetable"
)

func reportJSON(t *testing.T, r *casetable.Report) string {
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
