package kubemodel

import (
	"fmt"
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// The model's MatchNodeSelectorTerms is upstream's LazyErrorNodeSelector (what
// NodeAffinity's Filter uses) on random terms: every operator, matchFields,
// empty terms, numeric and non-numeric values for Gt and Lt, and terms
// upstream refuses to parse.
func TestSDKNodeSelectorMatchesUpstream(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 13))
	keys := []string{"zone", "gpu", "size", "not a key!"}
	values := []string{"a", "b", "3", "10", "-2", "x9", "", "a,b"}
	ops := []v1.NodeSelectorOperator{v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn, v1.NodeSelectorOpExists, v1.NodeSelectorOpDoesNotExist, v1.NodeSelectorOpGt, v1.NodeSelectorOpLt, "Bogus"}
	req := func(field bool) v1.NodeSelectorRequirement {
		rq := v1.NodeSelectorRequirement{Key: keys[r.IntN(len(keys))], Operator: ops[r.IntN(len(ops))]}
		if field {
			rq.Key = "metadata.name"
			if r.IntN(6) == 0 {
				rq.Key = "metadata.uid"
			}
			rq.Operator = []v1.NodeSelectorOperator{v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn, v1.NodeSelectorOpExists}[r.IntN(3)]
		}
		// Mostly the number of values the operator needs, sometimes not.
		n := 1 + r.IntN(2)
		switch rq.Operator {
		case v1.NodeSelectorOpExists, v1.NodeSelectorOpDoesNotExist:
			n = 0
		case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
			n = 1
		}
		if field && rq.Operator != v1.NodeSelectorOpExists {
			n = 1
		}
		if r.IntN(8) == 0 {
			n = r.IntN(3)
		}
		for range n {
			v := values[r.IntN(len(values))]
			if field {
				v = []string{"n1", "n2"}[r.IntN(2)]
			}
			rq.Values = append(rq.Values, v)
		}
		return rq
	}
	matched, checked, refused := 0, 0, 0
	for range 20000 {
		var terms []v1.NodeSelectorTerm
		for range r.IntN(3) + 1 {
			var term v1.NodeSelectorTerm
			for range r.IntN(3) {
				term.MatchExpressions = append(term.MatchExpressions, req(false))
			}
			if r.IntN(3) == 0 {
				term.MatchFields = append(term.MatchFields, req(true))
			}
			terms = append(terms, term)
		}
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: []string{"n1", "n2"}[r.IntN(2)], Labels: map[string]string{}}}
		for _, k := range keys {
			if r.IntN(3) > 0 {
				node.Labels[k] = values[r.IntN(len(values))]
			}
		}
		want, _ := nodeaffinity.NewLazyErrorNodeSelector(&v1.NodeSelector{NodeSelectorTerms: terms}).Match(node)
		got := model.MatchNodeSelectorTerms(sdkNodeTerms(terms), node.Name, node.Labels)
		if got != want {
			t.Fatalf("terms %+v on node %s %v: SDK %v, upstream %v", terms, node.Name, node.Labels, got, want)
		}
		checked++
		if want {
			matched++
		}
		// The same terms as preferred ones (weight 0 skipped unchecked):
		// the SDK refuses exactly what upstream's PreScore cannot parse.
		var prefs []v1.PreferredSchedulingTerm
		var sdkPrefs []model.PreferredSchedulingTerm
		for i, term := range terms {
			w := int32(r.IntN(4))
			prefs = append(prefs, v1.PreferredSchedulingTerm{Weight: w, Preference: term})
			sdkPrefs = append(sdkPrefs, model.PreferredSchedulingTerm{Weight: w, Preference: sdkNodeTerms(terms)[i]})
		}
		_, uerr := nodeaffinity.NewPreferredSchedulingTerms(prefs)
		merr := model.ValidatePreferredSchedulingTerms(sdkPrefs)
		if (uerr == nil) != (merr == nil) {
			t.Fatalf("preferred terms %+v: SDK says %v, upstream %v", prefs, merr, uerr)
		}
		if uerr != nil {
			refused++
		}
	}
	t.Logf("%d term sets agree with upstream, %d of them matching; as preferred terms, %d refused by both", checked, matched, refused)
}

func sdkNodeTerms(terms []v1.NodeSelectorTerm) []model.NodeSelectorTerm {
	var out []model.NodeSelectorTerm
	for _, t := range terms {
		var o model.NodeSelectorTerm
		for _, r := range t.MatchExpressions {
			o.MatchExpressions = append(o.MatchExpressions, model.NodeSelectorRequirement{Key: r.Key, Operator: string(r.Operator), Values: r.Values})
		}
		for _, r := range t.MatchFields {
			o.MatchFields = append(o.MatchFields, model.NodeSelectorRequirement{Key: r.Key, Operator: string(r.Operator), Values: r.Values})
		}
		out = append(out, o)
	}
	return out
}

// The SDK's PodRequests is component-helpers' resource.PodRequests, with and
// without the scoring plugins' non-zero defaults, on random pods: app and
// init containers, sidecars in every position, missing and explicit 0
// requests, pod-level resources, overhead.
func TestSDKPodRequestsMatchUpstream(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	amounts := map[v1.ResourceName][]string{
		v1.ResourceCPU: {"", "0", "100m", "250m", "1", "3"}, v1.ResourceMemory: {"", "0", "64Mi", "1Gi"},
		"example.com/gpu": {"", "", "1", "2"}, "hugepages-2Mi": {"", "", "2Mi"},
	}
	requests := func() v1.ResourceList {
		rl := v1.ResourceList{}
		for name, vs := range amounts {
			if v := vs[r.IntN(len(vs))]; v != "" {
				rl[name] = resource.MustParse(v)
			}
		}
		return rl
	}
	for range 5000 {
		pod := &v1.Pod{}
		for i := range r.IntN(4) {
			c := v1.Container{Name: fmt.Sprint("init", i), Resources: v1.ResourceRequirements{Requests: requests()}}
			if r.IntN(2) == 0 {
				always := v1.ContainerRestartPolicyAlways
				c.RestartPolicy = &always
			}
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		}
		for i := range 1 + r.IntN(3) {
			pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: fmt.Sprint("app", i), Resources: v1.ResourceRequirements{Requests: requests()}})
		}
		if r.IntN(4) == 0 {
			pod.Spec.Overhead = requests()
		}
		if r.IntN(4) == 0 {
			pod.Spec.Resources = &v1.ResourceRequirements{Requests: requests()}
		}
		var cs []model.Container
		for _, c := range pod.Spec.InitContainers {
			cs = append(cs, sdkContainer(model.ContainerInit, c))
		}
		for _, c := range pod.Spec.Containers {
			cs = append(cs, sdkContainer(model.ContainerApp, c))
		}
		var podLevel map[string]int64
		if pod.Spec.Resources != nil {
			podLevel = Quantities(pod.Spec.Resources.Requests)
		}
		for _, nonMissing := range []bool{false, true} {
			opts := resourcehelper.PodResourcesOptions{}
			var defaults map[string]int64
			if nonMissing {
				opts.NonMissingContainerRequests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("200Mi")}
				defaults = model.DefaultNonZeroRequests
			}
			want := Quantities(resourcehelper.PodRequests(pod, opts))
			got := model.SumRequests(cs, podLevel, Quantities(pod.Spec.Overhead), defaults)
			for k := range got {
				if got[k] == 0 {
					if _, ok := want[k]; !ok {
						delete(got, k) // a resource at 0 and a missing one are the same request
					}
				}
			}
			for k := range want {
				if want[k] == 0 {
					if _, ok := got[k]; !ok {
						delete(want, k)
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("pod %+v (non-zero defaults %v): SDK %v, upstream %v", pod.Spec, nonMissing, got, want)
			}
		}
	}
}

func sdkContainer(kind string, c v1.Container) model.Container {
	out := model.Container{Kind: kind, Name: c.Name, Requests: Quantities(c.Resources.Requests)}
	if c.RestartPolicy != nil {
		out.RestartPolicy = string(*c.RestartPolicy)
	}
	return out
}

// Quantities finer than the model's units (cpu: 1500u) are summed before
// they are rounded, as the scheduler sums them: Pod.Requests and
// Pod.NonZeroRequests carry the scheduler's numbers, where adding up each
// container's rounded request (what SumRequests can do with the model's
// integers) overshoots by a millicore per container.
func TestSubMilliRequestsSumBeforeRounding(t *testing.T) {
	c := func(name, cpu string) v1.Container {
		ct := v1.Container{Name: name}
		if cpu != "" {
			ct.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
		}
		return ct
	}
	pod := &v1.Pod{Spec: v1.PodSpec{
		Containers: []v1.Container{c("a", "1500u"), c("b", "1500u"), c("c", "")},
		Overhead:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("50u")},
	}}
	var m model.Pod
	FillPod(&m, pod, PodRequests, nil)
	FillPod(&m, pod, PodNonZeroRequests, nil)
	FillPod(&m, pod, PodContainers, nil)
	FillPod(&m, pod, PodOverhead, nil)
	// 1500u + 1500u + 50u = 3050u: 4m once rounded up; container "c"
	// requests no cpu, so scoring counts 100m for it.
	if got := m.Derived.Requests["cpu"]; got != 4 {
		t.Errorf("Requests cpu = %d, want 4 (3050u rounded up once)", got)
	}
	if got := m.Derived.NonZeroRequests["cpu"]; got != 104 {
		t.Errorf("NonZeroRequests cpu = %d, want 104 (3050u + 100m)", got)
	}
	if got := m.Derived.NonZeroRequests["memory"]; got != 3*model.DefaultNonZeroRequests["memory"] {
		t.Errorf("NonZeroRequests memory = %d, want three containers' default", got)
	}
	// What rounding each part first would give: 2m + 2m + 1m.
	if got := model.SumRequests(m.Derived.Containers, nil, m.Overhead, model.DefaultNonZeroRequests)["cpu"]; got != 105 {
		t.Errorf("SumRequests of the rounded parts = %d, want 105 (the difference this read exists for)", got)
	}
}
