package wasmpolicy

import (
	"context"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
)

// A closed plugin leaves nothing behind: once a pod is quarantined (its
// timer would wake it 30 s later), Close still lets the plugin and its
// engine, with everything the engine cached, be collected. A quarantine
// timer and a retired version's grace timer left running kept them (the
// engine's node cache: 96 MB after the 5000-node cycle benchmarks) until
// they fired.
func TestClosedPluginIsCollected(t *testing.T) {
	pc := configv1.DefaultPolicy("adversary", config.Source{File: testguests.Policy(t, testguests.TinyGo, "testdata/adversary")})
	pc.FailurePolicy = config.FailurePolicyFail
	collected, engineCollected := make(chan struct{}), make(chan struct{})
	func() {
		w, err := NewWithArgs(context.Background(), &config.WasmPolicyArgs{
			MaxInstancesPerPolicy: 2, FilePollInterval: time.Hour, CompilationCacheDir: sharedCacheDir,
			Policies: []config.Policy{pc},
		}, nil, WithInitialLoadTimeout(3*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		ni := intree.NewNodeInfo()
		ni.SetNode(st.MakeNode().Name("n1").Obj())
		pod := st.MakePod().Namespace("default").Name("p").UID("p").Labels(map[string]string{"attack": "panic"}).Obj()
		state := intree.NewCycleState()
		_, s := w.PreFilter(context.Background(), state, pod, []fwk.NodeInfo{ni})
		if s.IsSuccess() || s.IsSkip() {
			s = w.Filter(context.Background(), state, pod, ni)
		}
		if s.IsSuccess() || !strings.Contains(s.Message(), "quarantined") {
			t.Fatalf("a trapping pod: %v, want it rejected and quarantined", s)
		}
		if got := w.static[0].quarantine.size(); got != 1 {
			t.Fatalf("%d quarantined inputs, want 1", got)
		}
		runtime.AddCleanup(w, func(done chan struct{}) { close(done) }, collected)
		runtime.AddCleanup(w.engine, func(done chan struct{}) { close(done) }, engineCollected)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	// Cleanups run on one goroutine after a collection finds the object
	// unreachable; under make test's race stage, with other packages on
	// both cores, 20 rounds of 50 ms were once not enough. A plugin that
	// is kept alive is never collected, so the generous bound hides no leak.
	for what, done := range map[string]chan struct{}{"plugin": collected, "engine": engineCollected} {
		for i := 0; ; i++ {
			runtime.GC()
			select {
			case <-done:
			case <-time.After(50 * time.Millisecond):
				if i < 200 {
					continue
				}
				var stacks strings.Builder
				_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
				t.Fatalf("the closed %s is still reachable after 200 collections (10 s); goroutines:\n%s", what, stacks.String())
			}
			break
		}
	}
}
