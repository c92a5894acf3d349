package host

import (
	"context"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"testing"
)

// BenchmarkCallOverhead measures a Filter call on the minimal fixture (two
// host calls, no allocation in the guest): the host's own cost per call.
func BenchmarkCallOverhead(b *testing.B) {
	p := newPolicy(b, newEngine(b), PolicySpec{MaxInstances: 16})
	v := load(b, p, testguests.Fixture(b, "ok"))
	ni := nodeInfo("n", map[string]string{"verdict": "accept"}, false)
	pod := testPod()
	blob := new([]byte)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, r, err := v.Call(ctx, CallFilter, pod, ni, blob, nil); err != nil || r.Code != 0 {
			b.Fatal(err, r)
		}
	}
}
