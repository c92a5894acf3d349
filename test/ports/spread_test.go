package ports

import (
	"fmt"
	"math/rand/v2"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/helper"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/internal/spread"
)

// TestDefaultSelectorMatchesUpstream holds internal/spread, which gives
// policies the selector of PodTopologySpread's default constraints, to
// kube-scheduler's helper.DefaultSelector on the same listers: random
// Services (with and without selectors), ReplicationControllers,
// ReplicaSets and StatefulSets in two namespaces, and pods with random
// labels and controllers. Both must give the same selector, and the
// requirements the host encodes must match the same label sets.
func TestDefaultSelectorMatchesUpstream(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 2026))
	for round := range 20 {
		client := fake.NewClientset(spreadObjects(r)...)
		f := informers.NewSharedInformerFactory(client, 0)
		l := spread.Listers{
			Services:               f.Core().V1().Services().Lister(),
			ReplicationControllers: f.Core().V1().ReplicationControllers().Lister(),
			ReplicaSets:            f.Apps().V1().ReplicaSets().Lister(),
			StatefulSets:           f.Apps().V1().StatefulSets().Lister(),
		}
		stop := make(chan struct{})
		f.Start(stop)
		f.WaitForCacheSync(stop)
		nonEmpty := 0
		for i := range 200 {
			pod := spreadPod(r, fmt.Sprintf("p%d-%d", round, i))
			want := helper.DefaultSelector(pod, l.Services, l.ReplicationControllers, l.ReplicaSets, l.StatefulSets)
			got := l.DefaultSelector(pod)
			if got.String() != want.String() {
				t.Fatalf("pod %s (labels %v, owner %v): selector %q, upstream %q", pod.Name, pod.Labels, pod.OwnerReferences, got, want)
			}
			if !want.Empty() {
				nonEmpty++
			}
			encoded, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchExpressions: spread.Requirements(got)})
			if err != nil {
				t.Fatalf("requirements of %q do not convert: %v", got, err)
			}
			for range 20 {
				set := labels.Set(randomLabels(r))
				if encoded.Matches(set) != want.Matches(set) {
					t.Fatalf("labels %v: requirements of %q give %v, upstream %v", set, want, encoded.Matches(set), want.Matches(set))
				}
			}
		}
		close(stop)
		if nonEmpty == 0 {
			t.Fatalf("round %d: no pod had a non-empty default selector; the generator is broken", round)
		}
	}
}

var spreadKeys, spreadValues = []string{"app", "tier", "team"}, []string{"a", "b"}

func randomLabels(r *rand.Rand) map[string]string {
	m := map[string]string{}
	for _, k := range spreadKeys {
		if r.IntN(3) > 0 {
			m[k] = spreadValues[r.IntN(len(spreadValues))]
		}
	}
	return m
}

func randomLabelSelector(r *rand.Rand) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for _, k := range spreadKeys {
		switch r.IntN(5) {
		case 0:
			s.MatchLabels[k] = spreadValues[r.IntN(len(spreadValues))]
		case 1:
			s.MatchExpressions = append(s.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}[:1+r.IntN(2)]})
		case 2:
			s.MatchExpressions = append(s.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"b"}})
		case 3:
			op := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}[r.IntN(2)]
			s.MatchExpressions = append(s.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: op})
		}
	}
	return s
}

// spreadObjects are the namespaces "default" and "other" and a
// namespace's worth of workloads in each: Services (some with no selector, which selects nothing, some
// with an empty one) and two controllers of each kind.
func spreadObjects(r *rand.Rand) []runtime.Object {
	// The namespaces, with labels for namespace selectors.
	objs := []runtime.Object{
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"kubernetes.io/metadata.name": "default", "env": "prod"}}},
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other", Labels: map[string]string{"kubernetes.io/metadata.name": "other", "team": "b"}}},
	}
	for _, ns := range []string{"default", "other"} {
		for i := range 4 {
			svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("svc", i), Namespace: ns}}
			switch r.IntN(4) {
			case 0: // no selector
			case 1:
				svc.Spec.Selector = map[string]string{}
			default:
				svc.Spec.Selector = randomLabels(r)
			}
			objs = append(objs, svc)
		}
		for i := range 2 {
			name := fmt.Sprint("w", i)
			objs = append(objs,
				&v1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1.ReplicationControllerSpec{Selector: randomLabels(r)}},
				&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.ReplicaSetSpec{Selector: randomLabelSelector(r)}},
				&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.StatefulSetSpec{Selector: randomLabelSelector(r)}})
		}
	}
	return objs
}

// spreadPod is a pod with random labels and, often, a controller: of each
// supported kind, of a kind that does not count, or one that does not exist.
func spreadPod(r *rand.Rand, name string) *v1.Pod {
	pod := st.MakePod().Name(name).Namespace([]string{"default", "other"}[r.IntN(2)]).Obj()
	pod.Labels = randomLabels(r) // never nil: generatePod adds labels (st's Labels leaves an empty map nil)
	yes := true
	owners := []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ReplicationController"},
		{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		{APIVersion: "apps/v1", Kind: "StatefulSet"},
		{APIVersion: "batch/v1", Kind: "Job"},
		{APIVersion: "apps/v1beta2", Kind: "ReplicaSet"},
	}
	if k := r.IntN(len(owners) + 1); k < len(owners) {
		o := owners[k]
		o.Name, o.UID = []string{"w0", "w1", "gone"}[r.IntN(3)], "u"
		o.Controller = &yes
		pod.OwnerReferences = append(pod.OwnerReferences, o)
	}
	return pod
}
