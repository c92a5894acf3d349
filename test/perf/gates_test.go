package perf

import (
	"context"
	"fmt"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/native"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// gatePlugin is WasmPolicy with one example policy of toolchain tc.
func gatePlugin(b *testing.B, tc testguests.Toolchain, name, cfg string, edit func(*config.Policy)) *wasmpolicy.WasmPolicy {
	b.Helper()
	pc := configv1.DefaultPolicy(name, config.Source{File: testguests.Policy(b, tc, name)})
	pc.Config = cfg
	if edit != nil {
		edit(&pc)
	}
	sharedEngine(b)
	args := configv1.DefaultArgs(pc)
	args.CompilationCacheDir, args.FilePollInterval = cacheDir, time.Hour
	w, err := wasmpolicy.NewWithArgs(context.Background(), args, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Close() })
	if missing := w.Unloaded(); len(missing) > 0 {
		b.Fatal(missing)
	}
	return w
}

// BenchmarkPreEnqueue is a PreEnqueue gate's cost per pod: freeze-window
// as a native PreEnqueue plugin and as a wasm policy behind WasmPolicy's
// PreEnqueue (the pod's scope, its PodState, the guest call), on a pod the
// window lets in (pass) and one it holds (gate). The wasm guest reads the
// deterministic clock (2022-01-01), so the native plugin's clock reads that
// too.
func BenchmarkPreEnqueue(b *testing.B) {
	ctx := context.Background()
	pod := benchPod("p")
	clock := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name       string
		start, end time.Time
	}{
		{"pass", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 2, 1, 0, 0, 0, 0, time.UTC)},
		{"gate", time.Date(2021, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2022, 2, 1, 0, 0, 0, 0, time.UTC)},
	} {
		gated := c.name == "gate"
		cfg := fmt.Sprintf("start=%s,end=%s", c.start.Format(time.RFC3339), c.end.Format(time.RFC3339))
		nat := &native.FreezeWindow{Start: c.start, End: c.end, Approval: "freeze.wasmsched.io/approved", Now: func() time.Time { return clock }}
		want := nat.PreEnqueue(ctx, pod)
		if (want != nil) != gated {
			b.Fatalf("%s: native verdict %v", c.name, want)
		}
		b.Run(c.name+"/native", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if st := nat.PreEnqueue(ctx, pod); (st != nil) != gated {
					b.Fatal(st)
				}
			}
		})
		for _, tc := range testguests.Toolchains {
			w := gatePlugin(b, tc, "freeze-window", cfg, nil)
			if st := w.PreEnqueue(ctx, pod); (st != nil) != gated || gated && st.Message() != "gated by WasmPolicy/freeze-window: "+want.Message() {
				b.Fatalf("%s/%s: %v, want %v", c.name, tc, st, want)
			}
			b.Run(c.name+"/"+string(tc), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if st := w.PreEnqueue(ctx, pod); (st != nil) != gated {
						b.Fatal(st)
					}
				}
			})
		}
	}
}

// BenchmarkPreBind is a PreBind patch's cost per pod, the API request
// left out (it is the same request either way): placement-recorder's zone
// label and policies annotation as a native computation of the same merge
// patch, and as a wasm policy behind WasmPolicy (its prebind on the
// chosen node, the merge of the policies' writes, the patch's JSON). Both
// must produce the same bytes.
func BenchmarkPreBind(b *testing.B) {
	ctx := context.Background()
	pod := benchPod("p")
	ni := realisticNode(0)
	for _, tc := range testguests.Toolchains {
		w := gatePlugin(b, tc, "placement-recorder", "", func(pc *config.Policy) { pc.PatchPrefixes = []string{"placement.wasmsched.io/"} })
		state := intree.NewCycleState()
		if _, st := w.PreFilter(ctx, state, pod, []fwk.NodeInfo{ni}); st != nil && !st.IsSkip() {
			b.Fatal(st)
		}
		w.Reserve(ctx, state, pod, ni.Node().Name)
		got, st := w.PreBindPatch(ctx, state, ni.Node().Name)
		if st != nil {
			b.Fatal(st)
		}
		sha := testguestsDigest(b, tc, "placement-recorder")
		want, err := native.PlacementPatch(ni, [][3]string{{"placement-recorder", sha, "Enforce"}})
		if err != nil {
			b.Fatal(err)
		}
		if string(got) != string(want) {
			b.Fatalf("%s: wasm patch %s, native %s", tc, got, want)
		}
		if tc == testguests.TinyGo {
			b.Run("native", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if _, err := native.PlacementPatch(ni, [][3]string{{"placement-recorder", sha, "Enforce"}}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(string(tc), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, st := w.PreBindPatch(ctx, state, ni.Node().Name); st != nil {
					b.Fatal(st)
				}
			}
		})
	}
}

func testguestsDigest(b *testing.B, tc testguests.Toolchain, name string) string {
	_, digest, err := host.DecodeModule(testguests.PolicyBytes(b, tc, name))
	if err != nil {
		b.Fatal(err)
	}
	return digest
}
