// Package policies replays every example policy's case table (the one its
// native test uses) against the policy compiled with TinyGo and with Go,
// through the real host and real NodeInfos.
package policies

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

func TestExamplePoliciesAsWasm(t *testing.T) {
	root, err := testguests.Root()
	if err != nil {
		t.Fatal(err)
	}
	engine, err := host.NewEngine(host.EngineOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	for _, tc := range testguests.Toolchains {
		for _, name := range testguests.Policies {
			t.Run(string(tc)+"/"+name, func(t *testing.T) {
				file, err := casetest.Load(filepath.Join(root, "plugins-wasm", name, "testdata.json"))
				if err != nil {
					t.Fatal(err)
				}
				wasm := testguests.PolicyBytes(t, tc, name)
				p, err := engine.NewPolicy(context.Background(), host.PolicySpec{
					Name: name, Config: file.Config, Timeout: time.Second, MaxInstances: 4,
				})
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close(context.Background())
				v, err := p.Load(context.Background(), wasm, "")
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s built with %s: %d bytes, exports %s, loaded in %s", name, tc, v.Size(), v.Exports(), v.LoadDuration())
				for _, c := range file.Cases {
					pod := host.NewPodState(toPod(c.Pod))
					ni := toNodeInfo(c.Node)
					if c.Filter != nil {
						_, res, cerr := v.Call(context.Background(), host.CallFilter, pod, ni, new(host.PolicyCycle), nil)
						if cerr != nil {
							t.Fatalf("%s: filter: %v", c.Name, cerr)
						}
						if res.Code != c.Filter.Code || (c.Filter.Reason != "" && res.Reason != c.Filter.Reason) {
							t.Errorf("%s: filter = %d %q, want %d %q", c.Name, res.Code, res.Reason, c.Filter.Code, c.Filter.Reason)
						}
					}
					if c.Score != nil {
						s, res, cerr := v.Call(context.Background(), host.CallScore, pod, ni, new(host.PolicyCycle), nil)
						if cerr != nil || res.Code != 0 {
							t.Fatalf("%s: score: %v %+v", c.Name, cerr, res)
						}
						if s != *c.Score {
							t.Errorf("%s: score = %d, want %d", c.Name, s, *c.Score)
						}
					}
				}
			})
		}
	}
}

func quantity(name string, v int64) resource.Quantity {
	if name == "cpu" {
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	return *resource.NewQuantity(v, resource.BinarySI)
}

func resourceList(m map[string]int64) v1.ResourceList {
	if m == nil {
		return nil
	}
	rl := v1.ResourceList{}
	for k, v := range m {
		rl[v1.ResourceName(k)] = quantity(k, v)
	}
	return rl
}

// toPod converts a case's PodData into a real Pod.
func toPod(d sdk.PodData) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace, UID: types.UID(d.UID + d.Name), Labels: d.Labels, Annotations: d.Annotations},
		Spec: v1.PodSpec{
			SchedulerName:      d.SchedulerName,
			PriorityClassName:  d.PriorityClassName,
			ServiceAccountName: d.ServiceAccountName,
			NodeSelector:       d.NodeSelector,
			Containers:         []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: resourceList(d.Requests)}}},
		},
	}
	if d.Priority != 0 {
		p := int32(d.Priority)
		pod.Spec.Priority = &p
	}
	for _, t := range d.Tolerations {
		tol := v1.Toleration{Key: t.Key, Operator: v1.TolerationOperator(t.Operator), Value: t.Value, Effect: v1.TaintEffect(t.Effect)}
		if t.TolerationSeconds != "" {
			s, _ := strconv.ParseInt(t.TolerationSeconds, 10, 64)
			tol.TolerationSeconds = &s
		}
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, tol)
	}
	return pod
}

// toNodeInfo converts a case's NodeData into a real NodeInfo; Requested
// becomes a running pod with those requests.
func toNodeInfo(d sdk.NodeData) fwk.NodeInfo {
	var pods []*v1.Pod
	if len(d.Requested) > 0 {
		pods = append(pods, toPod(sdk.PodData{Name: d.Name + "-load", Requests: d.Requested}))
	}
	for len(pods) < d.PodCount {
		pods = append(pods, toPod(sdk.PodData{Name: d.Name + "-pod" + strconv.Itoa(len(pods))}))
	}
	for _, p := range pods {
		p.Spec.NodeName = d.Name
	}
	ni := intree.NewNodeInfo(pods...)
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, Labels: d.Labels, Annotations: d.Annotations},
		Spec:       v1.NodeSpec{Unschedulable: d.Unschedulable},
		Status:     v1.NodeStatus{Allocatable: resourceList(d.Allocatable), Capacity: resourceList(d.Capacity)},
	}
	for _, t := range d.Taints {
		node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: t.Key, Value: t.Value, Effect: v1.TaintEffect(t.Effect)})
	}
	ni.SetNode(node)
	return ni
}
