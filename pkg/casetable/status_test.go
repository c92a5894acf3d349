package casetable_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/casetable"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// A case's Status is what the WasmPolicy plugin returns for the same
// module, pod and node under the same failurePolicy: every guest code
// (an unknown one included) through a case table and through the plugin's
// PreFilter and Filter, for Fail and Ignore.
func TestStatusIsTheScheduler(t *testing.T) {
	path, err := filepath.Abs(filepath.Join("testdata", "status.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `make fixtures` after editing status.wat)", err)
	}
	nodes := []string{"0-success", "1-error", "2-unschedulable", "3-unresolvable", "4-unknown", "5-skip"}
	applied := map[string]bool{"1-error": true, "4-unknown": true}
	e, err := host.NewEngine(host.EngineOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	for _, fp := range []config.FailurePolicy{config.FailurePolicyFail, config.FailurePolicyIgnore} {
		t.Run(string(fp), func(t *testing.T) {
			f := &casetest.File{FailurePolicy: string(fp)}
			for _, n := range nodes {
				f.Cases = append(f.Cases, casetest.Case{Name: n, Pod: sdk.PodData{Name: "p", Namespace: "ns", UID: "u"}, Node: sdk.NodeData{Name: n}})
			}
			r, err := casetable.RunModule(ctx, e, host.PolicySpec{Name: "status", Timeout: 5 * time.Second}, wasm, f)
			if err != nil {
				t.Fatal(err)
			}
			if r.FailurePolicy != string(fp) {
				t.Errorf("report's failurePolicy %q, want %q", r.FailurePolicy, fp)
			}

			pc := configv1.DefaultPolicy("status", config.Source{File: path})
			pc.FailurePolicy = fp
			args := configv1.DefaultArgs(pc)
			args.CompilationCacheDir = t.TempDir()
			w, err := wasmpolicy.NewWithArgs(ctx, args, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			pod, err := casetable.Pod(f.Cases[0].Pod)
			if err != nil {
				t.Fatal(err)
			}
			var infos []fwk.NodeInfo
			for _, c := range f.Cases {
				ni, err := casetable.NodeInfo(c.Node)
				if err != nil {
					t.Fatal(err)
				}
				infos = append(infos, ni)
			}
			state := intree.NewCycleState()
			if _, st := w.PreFilter(ctx, state, pod, infos); !st.IsSuccess() {
				t.Fatalf("PreFilter: %v", st)
			}
			for i, c := range r.Cases {
				st := w.Filter(ctx, state, pod, infos[i])
				want := fwk.Success.String()
				if st != nil {
					want = st.Code().String() + ": " + st.Message()
				}
				if c.Status != want {
					t.Errorf("node %s: the case table says %q, the plugin %q", c.Node, c.Status, want)
				}
				if c.FailurePolicyApplied != applied[c.Node] {
					t.Errorf("node %s: failurePolicyApplied %v", c.Node, c.FailurePolicyApplied)
				}
			}
			// The statuses themselves, so that the two cannot agree on
			// something wrong.
			if fp == config.FailurePolicyFail {
				for node, want := range map[string]string{
					"1-error":         "UnschedulableAndUnresolvable: node(s) rejected by WasmPolicy/status: policy error: why",
					"2-unschedulable": "Unschedulable: node(s) rejected by WasmPolicy/status: why",
					"5-skip":          "Success",
				} {
					for _, c := range r.Cases {
						if c.Node == node && c.Status != want {
							t.Errorf("node %s: status %q, want %q", node, c.Status, want)
						}
					}
				}
			}
		})
	}
}
