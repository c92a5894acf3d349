package hostabi

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
)

// Every numbered field of fields.Fields has a host reader that answers it, and
// the number after the last of each function answers BadArgs: a row without
// a reader, or a reader without a row, fails here.
func TestEveryFieldHasAReader(t *testing.T) {
	pod := NewPodState(st.MakePod().Name("p").Namespace("ns").UID("u").Obj())
	ni := intree.NewNodeInfo()
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: v1.NodeStatus{
		Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
		Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
	}})
	nodes := newNodeCache()
	read := map[string]func(num int32) bool{
		abi.FnPodString:    func(n int32) bool { _, ok := pod.str(n); return ok },
		abi.FnPodList:      func(n int32) bool { _, ok := pod.list(n); return ok },
		abi.FnNodeString:   func(n int32) bool { _, ok := nodes.str(ni, n); return ok },
		abi.FnNodeList:     func(n int32) bool { _, ok := nodes.list(ni, n); return ok },
		abi.FnPodObject:    func(n int32) bool { _, ok := pod.object(n); return ok },
		abi.FnNodeObject:   func(n int32) bool { _, ok := nodes.object(ni, n); return ok },
		abi.FnNodeResource: func(n int32) bool { _, ok := nodeResource(ni, n, "cpu"); return ok },
		abi.FnClusterNode:  func(n int32) bool { _, _, ok := clusterNodeField(nodes, ni, n); return ok },
		abi.FnExistingTerms: func(n int32) bool {
			_, ok := (&ClusterView{Nodes: []fwk.NodeInfo{ni}}).existingTerms(n, pod.Pod)
			return ok
		},
		abi.FnVolumeClaims: func(n int32) bool {
			_, ok := (&ClusterView{Nodes: []fwk.NodeInfo{ni}}).volumeClaims(n, pod.Pod)
			return ok
		},
		abi.FnResourceClaims: func(n int32) bool {
			_, ok := (&ClusterView{Nodes: []fwk.NodeInfo{ni}}).resourceClaims(n, pod.Pod)
			return ok
		},
	}
	numbered := map[string]bool{}
	for _, f := range fields.Fields {
		if f.Num == fields.NoNum {
			if _, ok := Funcs[f.Fn]; !ok {
				t.Errorf("%s %s: no host function %s", f.Object, f.Path, f.Fn)
			}
			continue
		}
		r, ok := read[f.Fn]
		if !ok {
			t.Errorf("%s %s: no reader for numbered function %s in this test", f.Object, f.Path, f.Fn)
			continue
		}
		numbered[f.Fn] = true
		if !r(f.Num) {
			t.Errorf("%s %s: %s(%d) has no reader", f.Object, f.Path, f.Fn, f.Num)
		}
	}
	for fn, r := range read {
		if !numbered[fn] {
			t.Errorf("%s has a reader but no row in fields.Fields", fn)
		}
		if next := fields.MaxNum(fn) + 1; r(next) {
			t.Errorf("%s(%d) answers, but fields.Fields has no row for it", fn, next)
		}
	}
}
