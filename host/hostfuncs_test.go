package host

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host/internal/hostabi"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// TestHostFunctionsMatchTable fails when abi.HostFunctions and the host's
// implementations disagree: a row without an implementation, or an
// implementation the table does not list (a module could not import it).
func TestHostFunctionsMatchTable(t *testing.T) {
	inTable := map[string]bool{}
	for _, f := range abi.HostFunctions {
		inTable[f.Name] = true
		if _, ok := hostabi.Funcs[f.Name]; !ok {
			t.Errorf("abi.HostFunctions lists %q but host/hostfuncs.go does not implement it", f.Name)
		}
		if _, ok := hostFunctionSignatures[f.Name]; !ok {
			t.Errorf("%q has no signature in the import allow-list", f.Name)
		}
	}
	for name := range hostabi.Funcs {
		if !inTable[name] {
			t.Errorf("host/hostfuncs.go implements %q, which abi.HostFunctions does not list", name)
		}
	}
}

func TestNodeTaint(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{})
	v := load(t, p, testguests.Fixture(t, "nodetaint"))
	ni := intree.NewNodeInfo()
	ni.SetNode(st.MakeNode().Name("n").Taints([]v1.Taint{
		{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule},
		{Key: "other", Value: "x", Effect: v1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoExecute},
	}).Obj())
	r, err := filter(v, ni)
	if err != nil {
		t.Fatal(err)
	}
	lr := abi.NewListReader([]byte(r.Reason))
	var got []string
	for {
		s, ok := lr.Next()
		if !ok {
			break
		}
		got = append(got, string(s))
	}
	want := []string{"gpu", "NoSchedule", "gpu", "NoExecute"}
	if len(got) != len(want) || lr.Err() {
		t.Fatalf("node_taint(dedicated) = %q (list error %v), want %q", got, lr.Err(), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("node_taint(dedicated) = %q, want %q", got, want)
		}
	}

	if r, err := filter(v, nodeInfo("untainted", nil, false)); err != nil || r.Reason != "notfound" {
		t.Errorf("node without the taint: %+v, %v; want NotFound (-1)", r, err)
	}
	if _, r, err := v.Call(context.Background(), CallPreFilter, testPod(), nil, new(PolicyCycle), nil); err != nil || r.Reason != "notavail" {
		t.Errorf("in prefilter: %+v, %v; want NotAvailable (-3)", r, err)
	}
	if _, r, err := v.Call(context.Background(), CallScore, testPod(), ni, new(PolicyCycle), nil); err != nil || r.Reason != "badargs " {
		t.Errorf("key outside memory: %+v, %v; want BadArgs (-2)", r, err)
	}
}

// A guest imports node_taint only when it reads a taint by key, with either
// toolchain: guests built with this SDK that do not use it still load on a
// host from before node_taint (docs/abi.md §7).
func TestNodeTaintImportedOnlyWhenUsed(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		for policy, want := range map[string]bool{"team-isolation": false, "maintenance-avoidance": true} {
			info, err := Inspect(context.Background(), testguests.PolicyBytes(t, tc, policy))
			if err != nil {
				t.Fatal(err)
			}
			got := false
			for _, im := range info.Imports {
				got = got || (im.Module == abi.HostModule && im.Name == abi.FnNodeTaint)
			}
			if got != want {
				t.Errorf("%s/%s imports node_taint: %v, want %v", tc, policy, got, want)
			}
		}
	}
}

// During _initialize there is no pod, node or cycle: the pod and node
// functions answer NotAvailable (the i64 ones the missing quantity), the
// cycle state NotFound, and config works. None traps (the pod functions
// used to dereference a nil pod, and the load failed).
func TestHostFunctionsDuringInitialize(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{Config: "k=v"})
	v := load(t, p, testguests.Fixture(t, "initpod"))
	in := <-v.idle
	defer func() { v.idle <- in }()
	for i, c := range []struct {
		fn   string
		want int64
	}{
		{"config", 3},
		{"pod_string", int64(abi.NotAvailable)},
		{"pod_label", int64(abi.NotAvailable)},
		{"pod_annotation", int64(abi.NotAvailable)},
		{"pod_list", int64(abi.NotAvailable)},
		{"pod_request", abi.MissingQuantity},
		{"pod_priority", abi.MissingQuantity},
		{"node_label", int64(abi.NotAvailable)},
		{"cycle_state_get", int64(abi.NotFound)},
	} {
		got, ok := in.mod.Memory().ReadUint64Le(uint32(256 + 8*i))
		if !ok || int64(got) != c.want {
			t.Errorf("%s in _initialize = %d, want %d", c.fn, int64(got), c.want)
		}
	}
}
