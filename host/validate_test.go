package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// TestCallKindsCoverPoints loads a guest that registers a function for every
// extension point, built by the SDK with both toolchains, and checks that
// every row of abi.Points reaches the host: its export is checked, its
// capability bit kept, and an instance resolves its function.
func TestCallKindsCoverPoints(t *testing.T) {
	all := int32(1)<<abi.NumPoints - 1
	for k := CallKind(0); k < NumCallKinds; k++ {
		if _, ok := exportSignatures[abi.Points[k].Export]; !ok {
			t.Errorf("%s: no export signature", abi.Points[k].Export)
		}
	}
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			path, err := testguests.Build(tc, "plugins-wasm/testdata/extension-points")
			if err != nil {
				t.Fatal(err)
			}
			p := newPolicy(t, newEngine(t), PolicySpec{})
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			v := load(t, p, b)
			if got := v.Exports().Points; got != all {
				t.Fatalf("exports %s (%b), want every extension point (%b): is a point missing from the SDK's wasm exports?", v.Exports(), got, all)
			}
			in, err := v.acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer v.release(in, true)
			for k := CallKind(0); k < NumCallKinds; k++ {
				if in.fn[k] == nil {
					t.Errorf("instance has no function for %s", abi.Points[k].Export)
				}
			}
		})
	}
}

func TestExportsNarrow(t *testing.T) {
	for _, c := range []struct {
		exported, caps int32
		want           string
	}{
		{abi.CapFilter | abi.CapFilterNodes, abi.CapFilter | abi.CapFilterNodes, "filter,filter_nodes"},
		{abi.CapFilter | abi.CapFilterNodes, abi.CapFilterNodes, ""}, // a batch form needs its single form
		{abi.CapScore | abi.CapScoreNodes | abi.CapPreScore, abi.CapScore | abi.CapScoreNodes | abi.CapFilter, "score,score_nodes"},
	} {
		e := Exports{Points: c.exported}
		e.narrow(c.caps)
		if got := e.String(); got != c.want {
			t.Errorf("exports %b narrowed by %b = %q, want %q", c.exported, c.caps, got, c.want)
		}
	}
	if s := fmt.Sprint(Exports{Points: 1<<abi.NumPoints - 1}); s != "prefilter,filter,prescore,score,normalize_score,filter_nodes,score_nodes,preenqueue,prebind,postfilter,postbind,reserve,unreserve,permit" {
		t.Errorf("String = %q", s)
	}
}

// TestNodeDataMatchesPoints checks the NodeData column of abi.Points against
// the host: node functions answer at exactly the points the table says,
// and NotAvailable elsewhere.
func TestNodeDataMatchesPoints(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{})
	v := load(t, p, testguests.Fixture(t, "nodedata"))
	ni := nodeInfo("n", nil, false)
	for k := CallKind(0); k < NumCallKinds; k++ {
		var code int32
		if of := abi.Points[k].BatchOf; of != abi.BatchNone {
			results := make([]Result, 1)
			var scores []int64
			if of == CallScore {
				scores = make([]int64, 1)
			}
			if _, err := v.CallNodes(t.Context(), of, testPod(), []fwk.NodeInfo{ni}, new(PolicyCycle), results, scores); err != nil {
				t.Fatalf("%s: %v", abi.Points[k].Export, err)
			}
			code = results[0].Code
		} else {
			var node fwk.NodeInfo
			var scores []int64
			if abi.Points[k].NodeData {
				node = ni
			}
			if k == CallNormalizeScore {
				scores = []int64{1}
			}
			_, r, err := v.Call(t.Context(), k, testPod(), node, new(PolicyCycle), scores)
			if err != nil {
				t.Fatalf("%s: %v", abi.Points[k].Export, err)
			}
			code = r.Code
		}
		if available := code != abi.CodeUnschedulable; available != abi.Points[k].NodeData {
			t.Errorf("%s: node data available = %v, abi.Points says %v", abi.Points[k].Export, available, abi.Points[k].NodeData)
		}
	}
}

// The host enables WebAssembly 2.0 (wazero's CoreFeaturesV2: SIMD,
// multi-value, reference types, bulk memory, sign extension, non-trapping
// float-to-int, mutable globals) and nothing beyond it: a module using each
// of those loads and runs, a module with a tail call is refused when it
// compiles (docs/abi.md §1).
func TestWasmFeatures(t *testing.T) {
	e := newEngine(t)
	v := load(t, newPolicy(t, e, PolicySpec{Name: "features"}), testguests.Fixture(t, "features"))
	if r, err := filter(v, nodeInfo("n", nil, false)); err != nil || r.Code != 0 {
		t.Fatalf("filter = %+v, %v; want success", r, err)
	}
	_, err := newPolicy(t, e, PolicySpec{Name: "tailcall"}).Load(context.Background(), testguests.Fixture(t, "tailcall"), "")
	var le *LoadError
	if !errors.As(err, &le) || le.Reason != "Compile" || !strings.Contains(err.Error(), "tail") {
		t.Fatalf("load = %v, want a Compile error naming tail calls", err)
	}
	t.Logf("tail call refused: %v", err)
}
