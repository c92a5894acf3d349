package casetable

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// A case's fields are applied over its Object; a malformed Object or
// timestamp, or a pod given Requests and Containers, is an error that says
// what is wrong.
func TestPodOverObject(t *testing.T) {
	pod, err := Pod(sdk.PodData{Name: "b", Labels: map[string]string{"x": "y"},
		Object: sdk.RawJSON(`{"metadata": {"name": "a", "namespace": "ns", "labels": {"old": "1"}}, "spec": {"runtimeClassName": "gvisor", "containers": [{"name": "app"}]}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "b" || pod.Namespace != "ns" || pod.Labels["x"] != "y" || pod.Labels["old"] != "" || *pod.Spec.RuntimeClassName != "gvisor" || pod.Spec.Containers[0].Name != "app" {
		t.Fatalf("pod %+v", pod)
	}
	if _, err := Pod(sdk.PodData{Object: sdk.RawJSON(`{"spec": {"nodeNmae": "n"}}`)}); err == nil || !strings.Contains(err.Error(), `unknown field "nodeNmae"`) {
		t.Errorf("misspelt Object field: %v", err)
	}
	if _, err := Pod(sdk.PodData{CreationTimestamp: "yesterday"}); err == nil || !strings.Contains(err.Error(), "RFC 3339") {
		t.Errorf("bad timestamp: %v", err)
	}
	if _, err := Pod(sdk.PodData{Name: "p", Requests: map[string]int64{"cpu": 1}, Containers: []sdk.Container{{Name: "c"}}}); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("Requests and Containers together: %v", err)
	}
	// Pods, the load pod and PodCount add up, as natively (model.PodsOn).
	ni, err := NodeInfo(sdk.NodeData{Name: "n", PodCount: 4, Requested: map[string]int64{"cpu": 500}, Pods: []sdk.NodePod{{Name: "p", UID: "u"}}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pi := range ni.GetPods() {
		names = append(names, pi.GetPod().Name+"/"+string(pi.GetPod().UID))
	}
	if got := strings.Join(names, " "); got != "p/u n-load/n-load n-pod2/n-pod2 n-pod3/n-pod3" || ni.GetRequested().GetMilliCPU() != 500 {
		t.Errorf("pods %s, requested cpu %d", got, ni.GetRequested().GetMilliCPU())
	}
}

// A score_nodes that disagrees with score is reported for every node where
// it does, naming the pod's case and the node's.
func TestScoreDisagreementNamesTheNode(t *testing.T) {
	e, err := host.NewEngine(host.EngineOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// semantics.wat with config "s": score returns 0; score_nodes reports
	// 10*i and rejects the batch's node 1.
	p, err := e.NewPolicy(context.Background(), host.PolicySpec{Name: "s", Config: "s", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	root, err := testguests.Root()
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(filepath.Join(root, "host", "testdata", "semantics.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := p.Load(context.Background(), wasm, "")
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	f := &casetest.File{Cases: []casetest.Case{
		{Name: "a", Pod: sdk.PodData{Name: "p"}, Node: sdk.NodeData{Name: "n0"}, Score: &zero},
		{Name: "b", Pod: sdk.PodData{Name: "p"}, Node: sdk.NodeData{Name: "n1"}, Score: &zero},
		{Name: "c", Pod: sdk.PodData{Name: "p"}, Node: sdk.NodeData{Name: "n2"}, Score: &zero},
	}}
	sched, err := newScheduler(context.Background(), host.PolicySpec{Name: "s", Config: "s", Timeout: 5 * time.Second}, wasm, f)
	if err != nil {
		t.Fatal(err)
	}
	defer sched.close()
	r := run(context.Background(), v, sched, f, new(host.Counters))
	for _, c := range r.Cases {
		if !c.Passed() {
			t.Errorf("case %s: %v (the single form meets every expectation)", c.Name, c.Problems)
		}
	}
	want := []string{
		`pod of case "a" on node n1 of case "b": score_nodes gives 2 Unschedulable "n1", score gives score 0`,
		`pod of case "a" on node n2 of case "c": score_nodes gives score 20, score gives score 0`,
	}
	for _, w := range want {
		found := false
		for _, d := range r.Disagreements {
			found = found || d == w
		}
		if !found {
			t.Errorf("missing disagreement %q in %q", w, r.Disagreements)
		}
	}
	if !r.Failed() || len(r.Disagreements) != 6 { // nodes 1 and 2, for each of the three pods
		t.Errorf("%d disagreements, failed %v: %q", len(r.Disagreements), r.Failed(), r.Disagreements)
	}
}
