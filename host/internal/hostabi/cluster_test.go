package hostabi

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
)

// randomCluster is a cluster of n nodes (some without a zone label) with
// pods of several namespaces and labels, some terminating, and namespaces
// with labels (one namespace of the pods, "ghost", is unknown).
type randomCluster struct {
	nodes      []fwk.NodeInfo
	namespaces map[string]map[string]string
}

var (
	clusterNamespaces = []string{"default", "team-a", "team-b", "ghost"}
	clusterKeys       = []string{"app", "team", "tier"}
	clusterValues     = []string{"web", "db", "a", "b", ""}
)

func newRandomCluster(r *rand.Rand, n int) randomCluster {
	c := randomCluster{namespaces: map[string]map[string]string{
		"default": {"kubernetes.io/metadata.name": "default"},
		"team-a":  {"kubernetes.io/metadata.name": "team-a", "team": "a", "env": "prod"},
		"team-b":  {"kubernetes.io/metadata.name": "team-b", "team": "b"},
	}}
	deleted := metav1.Now()
	for i := range n {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), Labels: map[string]string{}}}
		if r.IntN(5) > 0 {
			node.Labels["zone"] = fmt.Sprintf("zone-%d", r.IntN(3))
		}
		if r.IntN(3) == 0 {
			node.Labels["rack"] = fmt.Sprintf("rack-%d", r.IntN(4))
		}
		for range r.IntN(3) {
			effects := []v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute}
			node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: []string{"dedicated", "gpu"}[r.IntN(2)], Value: []string{"a", "b"}[r.IntN(2)], Effect: effects[r.IntN(3)]})
		}
		var pods []*v1.Pod
		for j := range r.IntN(6) {
			p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d-%d", i, j), Namespace: clusterNamespaces[r.IntN(len(clusterNamespaces))], Labels: randomLabels(r)},
				Spec: v1.PodSpec{NodeName: node.Name}}
			if r.IntN(6) == 0 {
				p.DeletionTimestamp = &deleted
			}
			pods = append(pods, p)
		}
		ni := intree.NewNodeInfo(pods...)
		ni.SetNode(node)
		c.nodes = append(c.nodes, ni)
	}
	return c
}

func randomLabels(r *rand.Rand) map[string]string {
	l := map[string]string{}
	for _, k := range clusterKeys {
		if r.IntN(3) > 0 {
			l[k] = clusterValues[r.IntN(len(clusterValues))]
		}
	}
	return l
}

// randomSelector is nil, empty, or a mix of matchLabels and every operator.
func randomSelector(r *rand.Rand, keys, values []string) *metav1.LabelSelector {
	switch r.IntN(8) {
	case 0:
		return nil
	case 1:
		return &metav1.LabelSelector{}
	}
	s := &metav1.LabelSelector{}
	if r.IntN(2) == 0 {
		s.MatchLabels = map[string]string{keys[r.IntN(len(keys))]: values[r.IntN(len(values))]}
	}
	for range r.IntN(3) {
		req := metav1.LabelSelectorRequirement{Key: keys[r.IntN(len(keys))]}
		switch r.IntN(4) {
		case 0:
			req.Operator = metav1.LabelSelectorOpIn
		case 1:
			req.Operator = metav1.LabelSelectorOpNotIn
		case 2:
			req.Operator = metav1.LabelSelectorOpExists
		case 3:
			req.Operator = metav1.LabelSelectorOpDoesNotExist
		}
		if req.Operator == metav1.LabelSelectorOpIn || req.Operator == metav1.LabelSelectorOpNotIn {
			for range 1 + r.IntN(2) {
				req.Values = append(req.Values, values[r.IntN(len(values))])
			}
		}
		s.MatchExpressions = append(s.MatchExpressions, req)
	}
	return s
}

func randomTerm(r *rand.Rand) CountTerm {
	t := CountTerm{LabelSelector: randomSelector(r, clusterKeys, clusterValues), IncludeTerminating: r.IntN(2) == 0}
	if r.IntN(2) == 0 {
		t.TopologyKey = "zone"
	}
	switch r.IntN(4) {
	case 1:
		t.Namespaces = []string{clusterNamespaces[r.IntN(len(clusterNamespaces))]}
	case 2:
		t.NamespaceSelector = randomSelector(r, []string{"team", "env", "kubernetes.io/metadata.name"}, []string{"a", "b", "prod", "default"})
	case 3:
		t.Namespaces = []string{"team-b"}
		t.NamespaceSelector = randomSelector(r, []string{"team", "env"}, []string{"a", "prod"})
	}
	if r.IntN(4) == 0 {
		for range 1 + r.IntN(2) {
			a := randomTerm(r)
			a.TopologyKey, a.IncludeTerminating, a.AlsoMatching = "", false, nil
			a.NodeKeys, a.NodeAffinityPolicy, a.NodeTaintsPolicy = nil, "", ""
			t.AlsoMatching = append(t.AlsoMatching, a)
		}
	}
	policies := []string{"", model.NodeInclusionHonor, model.NodeInclusionIgnore}
	t.NodeAffinityPolicy, t.NodeTaintsPolicy = policies[r.IntN(3)], policies[r.IntN(3)]
	if r.IntN(3) == 0 {
		t.NodeKeys = []string{"rack"}
	}
	return t
}

// randomIncomingPod is the pod being scheduled: in namespace ns, with a
// nodeSelector, required node affinity and tolerations or not.
func randomIncomingPod(r *rand.Rand, ns string) *v1.Pod {
	pod := st.MakePod().Name("incoming").Namespace(ns).Obj()
	if r.IntN(3) == 0 {
		pod.Spec.NodeSelector = map[string]string{"zone": fmt.Sprintf("zone-%d", r.IntN(3))}
	}
	if r.IntN(3) == 0 {
		pod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"zone-0", "zone-2"}}}},
				{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "rack", Operator: v1.NodeSelectorOpExists}}}}}}}
	}
	for range r.IntN(3) {
		tol := v1.Toleration{Key: []string{"dedicated", "gpu", ""}[r.IntN(3)], Operator: v1.TolerationOpEqual, Value: []string{"a", "b"}[r.IntN(2)]}
		if tol.Key == "" || r.IntN(3) == 0 {
			tol.Operator, tol.Value = v1.TolerationOpExists, ""
		}
		if r.IntN(2) == 0 {
			tol.Effect = []v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectNoExecute}[r.IntN(2)]
		}
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, tol)
	}
	return pod
}

// upstreamIncludes is PodTopologySpread's node inclusion for a term's node
// fields, with upstream's own helpers: every key present, the pod's
// required node affinity, its tolerations of NoSchedule/NoExecute taints.
func upstreamIncludes(term CountTerm, pod *v1.Pod, node *v1.Node) bool {
	for _, k := range term.NodeKeys {
		if _, ok := node.Labels[k]; !ok {
			return false
		}
	}
	if term.NodeAffinityPolicy == string(v1.NodeInclusionPolicyHonor) {
		if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
			return false
		}
	}
	if term.NodeTaintsPolicy == string(v1.NodeInclusionPolicyHonor) {
		if untoleratedTaint(node.Spec.Taints, pod.Spec.Tolerations) {
			return false
		}
	}
	return true
}

// upstreamCount counts with the scheduler framework's own AffinityTerm
// (what InterPodAffinity uses), per topology value of the nodes that have
// the key, or per node name for an empty key.
func upstreamCount(t *testing.T, c randomCluster, term CountTerm, pod *v1.Pod) map[string]int64 {
	vterms := []v1.PodAffinityTerm{{LabelSelector: term.LabelSelector, Namespaces: term.Namespaces, NamespaceSelector: term.NamespaceSelector, TopologyKey: term.TopologyKey}}
	for _, a := range term.AlsoMatching {
		vterms = append(vterms, v1.PodAffinityTerm{LabelSelector: a.LabelSelector, Namespaces: a.Namespaces, NamespaceSelector: a.NamespaceSelector})
	}
	terms, err := intree.GetAffinityTerms(pod, vterms)
	if err != nil {
		t.Fatal(err)
	}
	// The incoming pod's terms, as InterPodAffinity's PreFilter resolves
	// them (mergeAffinityTermNamespacesIfNotEmpty): a selector with
	// requirements becomes the names of the namespaces the lister holds
	// that it matches.
	for i := range terms {
		if terms[i].NamespaceSelector.Empty() {
			continue
		}
		for name, l := range c.namespaces {
			if terms[i].NamespaceSelector.Matches(labels.Set(l)) {
				terms[i].Namespaces.Insert(name)
			}
		}
		terms[i].NamespaceSelector = labels.Nothing()
	}
	matchesAll := func(p *v1.Pod, nsLabels labels.Set) bool {
		for i := range terms {
			if !terms[i].Matches(p, nsLabels) {
				return false
			}
		}
		return true
	}
	out := map[string]int64{}
	for _, ni := range c.nodes {
		value, ok := ni.Node().Name, true
		if term.TopologyKey != "" {
			value, ok = ni.Node().Labels[term.TopologyKey]
		}
		if !ok || !upstreamIncludes(term, pod, ni.Node()) {
			continue
		}
		n := out[value]
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			if p.DeletionTimestamp != nil && !term.IncludeTerminating {
				continue
			}
			if matchesAll(p, labels.Set(c.namespaces[p.Namespace])) {
				n++
			}
		}
		out[value] = n
	}
	return out
}

// count_pods counts what upstream's AffinityTerm matches for the incoming
// pod's terms, with the same namespace rules (own namespace, a list, {} for
// all, a selector resolved to the namespaces the lister holds, so a pod in
// an unknown namespace matches no selector with requirements), on 300 random terms over random
// clusters; the SDK's native CountPods and LabelSelector.Matches agree.
func TestCountPodsMatchesUpstream(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 26))
	pairs := 0
	for round := range 30 {
		c := newRandomCluster(r, 12)
		view := &ClusterView{Nodes: c.nodes, NamespaceLabels: func(name string) (map[string]string, bool) {
			l, ok := c.namespaces[name]
			return l, ok
		}}
		native := &sdk.ClusterData{Namespaces: c.namespaces}
		for _, ni := range c.nodes {
			nd := &sdk.NodeData{Name: ni.Node().Name, Labels: ni.Node().Labels}
			for _, taint := range ni.Node().Spec.Taints {
				nd.Taints = append(nd.Taints, sdk.Taint{Key: taint.Key, Value: taint.Value, Effect: string(taint.Effect)})
			}
			for _, pi := range ni.GetPods() {
				p := pi.GetPod()
				nd.Pods = append(nd.Pods, sdk.NodePod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, Terminating: p.DeletionTimestamp != nil})
			}
			native.Nodes = append(native.Nodes, nd)
		}
		sdk.SetCluster(native)
		for range 10 {
			pod := randomIncomingPod(r, clusterNamespaces[round%3])
			term := randomTerm(r)
			want := upstreamCount(t, c, term, pod)
			if got := view.CountPods(&term, pod); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("term %+v (pod in %s): host counted %v, upstream %v", term, pod.Namespace, got, want)
			}
			// The SDK encodes the term as a guest would and the host parses it.
			b := sdkTerm(term).JSON()
			parsed, err := ParseCountTerm(b)
			if err != nil {
				t.Fatalf("the SDK's encoding of %+v does not parse: %v\n%s", term, err, b)
			}
			if got := view.CountPods(parsed, pod); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("term %s: host counted %v after the SDK's encoding, upstream %v", b, got, want)
			}
			sdk.RunPreFilter(sdkPod(pod)) // no PreFilter registered: it only sets the pod
			if got := (sdk.Cluster{}).CountPods(sdkTerm(term)); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("term %s: the SDK counted %v natively, upstream %v", b, got, want)
			}
			pairs++
		}
	}
	sdk.SetCluster(nil)
	t.Logf("%d terms over 30 random clusters agree with upstream's AffinityTerm", pairs)
}

// The SDK's LabelSelector.Matches is metav1.LabelSelectorAsSelector's
// Matches for every operator, nil and empty selectors.
func TestSDKLabelSelectorMatchesUpstream(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		s := randomSelector(r, clusterKeys, clusterValues)
		l := randomLabels(r)
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			t.Fatal(err)
		}
		if want, got := sel.Matches(labels.Set(l)), sdkSelector(s).Matches(l); got != want {
			t.Fatalf("selector %+v on %v: SDK %v, upstream %v", s, l, got, want)
		}
	}
	// Keys and values that are not valid label keys or values: upstream
	// refuses the selector, and the SDK's matches nothing.
	badKeys := append([]string{"-app", "example.com/", "Example.com/app", "a/b/c", "app"}, clusterKeys...)
	badValues := append([]string{"-x", "x-", "has space", "", "a.b_c-d"}, clusterValues...)
	refused := 0
	for range 5000 {
		s := randomSelector(r, badKeys, badValues)
		l := randomLabels(r)
		want := false
		if sel, err := metav1.LabelSelectorAsSelector(s); err == nil {
			want = sel.Matches(labels.Set(l))
		} else {
			refused++
		}
		if got := sdkSelector(s).Matches(l); got != want {
			t.Fatalf("selector %+v on %v: SDK %v, upstream %v", s, l, got, want)
		}
	}
	if refused == 0 {
		t.Fatal("no selector was refused: the test does not cover invalid keys and values")
	}
	// Requirements upstream refuses match nothing in the SDK.
	for _, req := range []sdk.LabelSelectorRequirement{{Key: "app", Operator: "In"}, {Key: "app", Operator: "NotIn"}, {Key: "app", Operator: "Exists", Values: []string{"x"}}, {Key: "app", Operator: "Gt", Values: []string{"1"}}} {
		if (&sdk.LabelSelector{MatchExpressions: []sdk.LabelSelectorRequirement{req}}).Matches(map[string]string{"app": "web"}) {
			t.Errorf("%+v matched; upstream refuses it", req)
		}
	}
}

func sdkSelector(s *metav1.LabelSelector) *sdk.LabelSelector {
	if s == nil {
		return nil
	}
	out := &sdk.LabelSelector{MatchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, sdk.LabelSelectorRequirement{Key: r.Key, Operator: string(r.Operator), Values: r.Values})
	}
	return out
}

// sdkPod is what the SDK's native CountPods reads of the pod being
// scheduled: its namespace, nodeSelector, required node affinity and
// tolerations.
func sdkPod(pod *v1.Pod) *sdk.PodData {
	p := &sdk.PodData{Name: pod.Name, Namespace: pod.Namespace, NodeSelector: pod.Spec.NodeSelector}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		p.Affinity = &model.Affinity{}
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			var mt model.NodeSelectorTerm
			for _, e := range t.MatchExpressions {
				mt.MatchExpressions = append(mt.MatchExpressions, model.NodeSelectorRequirement{Key: e.Key, Operator: string(e.Operator), Values: e.Values})
			}
			p.Affinity.NodeAffinityRequired = append(p.Affinity.NodeAffinityRequired, mt)
		}
	}
	for _, t := range pod.Spec.Tolerations {
		p.Tolerations = append(p.Tolerations, sdk.Toleration{Key: t.Key, Operator: string(t.Operator), Value: t.Value, Effect: string(t.Effect)})
	}
	return p
}

func sdkTerm(t CountTerm) sdk.CountTerm {
	out := sdk.CountTerm{LabelSelector: sdkSelector(t.LabelSelector), Namespaces: t.Namespaces, NamespaceSelector: sdkSelector(t.NamespaceSelector), TopologyKey: t.TopologyKey, IncludeTerminating: t.IncludeTerminating,
		NodeKeys: t.NodeKeys, NodeAffinityPolicy: t.NodeAffinityPolicy, NodeTaintsPolicy: t.NodeTaintsPolicy}
	for _, a := range t.AlsoMatching {
		out.AlsoMatching = append(out.AlsoMatching, sdkTerm(a))
	}
	return out
}

// BenchmarkCountPods is what the first count_pods of a term costs a cycle
// (every later call of the cycle hits the view's cache): 5000 nodes with 20
// pods each, counted per zone, from the term's bytes as a guest passes them.
func BenchmarkCountPods(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 5))
	var nodes []fwk.NodeInfo
	for i := range 5000 {
		var pods []*v1.Pod
		for j := range 20 {
			pods = append(pods, st.MakePod().Name(fmt.Sprintf("p-%d-%d", i, j)).Namespace("payments").Labels(map[string]string{"team": []string{"payments", "search"}[r.IntN(2)], "app": "web"}).Obj())
		}
		ni := intree.NewNodeInfo(pods...)
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), Labels: map[string]string{"topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3)}}})
		nodes = append(nodes, ni)
	}
	term := sdk.CountTerm{LabelSelector: &sdk.LabelSelector{MatchLabels: map[string]string{"team": "payments"}}, TopologyKey: "topology.kubernetes.io/zone"}.JSON()
	pod := st.MakePod().Name("incoming").Namespace("payments").Obj()
	b.ResetTimer()
	for range b.N {
		v := &ClusterView{Nodes: nodes}
		if _, ok := v.countPods(term, pod); !ok {
			b.Fatal("term refused")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(5000*20), "ns/pod")
}

// existing_terms sums the terms of the pods already on nodes that the
// incoming pod matches as InterPodAffinity does (upstream's AffinityTerm
// with the incoming pod's namespace labels, per topology pair of the
// term's pod's node), and the SDK's native ExistingTerms, written apart
// from the host's, gives the same bytes: 30 random clusters whose pods
// carry random required and preferred affinity and anti-affinity terms
// (every selector shape and namespace rule, unknown namespaces included),
// every kind, 10 incoming pods each. Every tenth cluster has 600 nodes,
// which the host walks in parallel (four goroutines here, whatever the
// machine's CPUs).
func TestExistingTermsMatchUpstream(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	r := rand.New(rand.NewPCG(7, 26))
	nonEmpty := 0
	// Every third round keeps existing_terms' order across its views
	// and the rounds before (TestExistingTermsOrderKeptAcrossCycles).
	kept := NewNodeCountCache()
	for round := range 30 {
		n := 10
		if round%10 == 9 {
			n = 600
		}
		if n >= 256 && parallelChunks(n) < 2 {
			t.Fatalf("%d nodes are walked by %d goroutine", n, parallelChunks(n))
		}
		c := newRandomCluster(r, n)
		native := &sdk.ClusterData{Namespaces: c.namespaces}
		var nodes []fwk.NodeInfo
		for _, ni := range c.nodes {
			nd := &sdk.NodeData{Name: ni.Node().Name, Labels: ni.Node().Labels}
			for _, taint := range ni.Node().Spec.Taints {
				nd.Taints = append(nd.Taints, sdk.Taint{Key: taint.Key, Value: taint.Value, Effect: string(taint.Effect)})
			}
			var pods []*v1.Pod
			for _, pi := range ni.GetPods() {
				p := pi.GetPod().DeepCopy()
				a, sa := &v1.Affinity{PodAffinity: &v1.PodAffinity{}, PodAntiAffinity: &v1.PodAntiAffinity{}}, &sdk.Affinity{}
				for range r.IntN(3) {
					term := randomTerm(r)
					st := sdkTerm(term)
					vt := v1.PodAffinityTerm{LabelSelector: term.LabelSelector, Namespaces: term.Namespaces, NamespaceSelector: term.NamespaceSelector, TopologyKey: term.TopologyKey}
					spt := sdk.PodAffinityTerm{LabelSelector: st.LabelSelector, Namespaces: st.Namespaces, NamespaceSelector: st.NamespaceSelector, TopologyKey: st.TopologyKey}
					w := int32(1 + r.IntN(100))
					switch r.IntN(4) {
					case 0:
						a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, vt)
						sa.PodAntiAffinityRequired = append(sa.PodAntiAffinityRequired, spt)
					case 1:
						a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, vt)
						sa.PodAffinityRequired = append(sa.PodAffinityRequired, spt)
					case 2:
						a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, v1.WeightedPodAffinityTerm{Weight: w, PodAffinityTerm: vt})
						sa.PodAffinityPreferred = append(sa.PodAffinityPreferred, sdk.WeightedPodAffinityTerm{Weight: w, PodAffinityTerm: spt})
					case 3:
						a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, v1.WeightedPodAffinityTerm{Weight: w, PodAffinityTerm: vt})
						sa.PodAntiAffinityPreferred = append(sa.PodAntiAffinityPreferred, sdk.WeightedPodAffinityTerm{Weight: w, PodAffinityTerm: spt})
					}
				}
				p.Spec.Affinity = a
				pods = append(pods, p)
				nd.Pods = append(nd.Pods, sdk.NodePod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, Terminating: p.DeletionTimestamp != nil, Affinity: sa})
			}
			withTerms := intree.NewNodeInfo(pods...)
			withTerms.SetNode(ni.Node())
			nodes = append(nodes, withTerms)
			native.Nodes = append(native.Nodes, nd)
		}
		sdk.SetCluster(native)
		for i := range 10 {
			pod := st.MakePod().Name(fmt.Sprint("incoming-", i)).Namespace(clusterNamespaces[r.IntN(len(clusterNamespaces))]).Labels(randomLabels(r)).Obj()
			view := &ClusterView{Nodes: nodes, NamespaceLabels: func(name string) (map[string]string, bool) {
				l, ok := c.namespaces[name]
				return l, ok
			}}
			if round%3 == 2 {
				view.NodeCounts = kept
			}
			if round%2 == 1 {
				// The snapshot's lists of nodes with such pods, as
				// kube-scheduler's snapshot builds them: walked instead
				// of every node, with the same sums.
				view.HasAffinityLists = true
				for _, ni := range nodes {
					if len(ni.GetPodsWithAffinity()) > 0 {
						view.WithAffinity = append(view.WithAffinity, ni)
					}
					if len(ni.GetPodsWithRequiredAntiAffinity()) > 0 {
						view.WithRequiredAntiAffinity = append(view.WithRequiredAntiAffinity, ni)
					}
				}
			}
			sdk.RunPreFilter(&sdk.PodData{Name: pod.Name, Namespace: pod.Namespace, Labels: pod.Labels}) // sets the pod natively
			for kind := range model.NumExistingTerms {
				got, ok := view.existingTerms(kind, pod)
				if !ok {
					t.Fatalf("kind %d refused", kind)
				}
				if want := upstreamExisting(nodes, kind, pod, labels.Set(c.namespaces[pod.Namespace])); fmt.Sprint(decodeSums(got)) != fmt.Sprint(want) {
					t.Fatalf("round %d, pod %v in %s, kind %d: host %v, upstream %v", round, pod.Labels, pod.Namespace, kind, decodeSums(got), want)
				}
				if n := (sdk.Cluster{}).ExistingTerms(kind); fmt.Sprint(n) != fmt.Sprint(sdkSums(decodeSums(got))) {
					t.Fatalf("round %d, pod %v in %s, kind %d: SDK natively %v, host %v", round, pod.Labels, pod.Namespace, kind, n, decodeSums(got))
				}
				if len(got) > 4 {
					nonEmpty++
				}
			}
		}
	}
	sdk.SetCluster(nil)
	if nonEmpty < 100 {
		t.Fatalf("only %d non-empty answers; the generator is too sparse", nonEmpty)
	}
	t.Logf("%d non-empty answers of 1200 agree", nonEmpty)
}

type sum struct {
	key, value string
	sum        int64
}

func decodeSums(b []byte) []sum {
	var out []sum
	r := abi.NewListReader(b)
	for r.Len() >= 3 {
		k, _ := r.Next()
		v, _ := r.Next()
		n, _ := r.Next()
		var x int64
		fmt.Sscan(string(n), &x)
		out = append(out, sum{string(k), string(v), x})
	}
	return out
}

func sdkSums(s []sum) []sdk.TopologySum {
	var out []sdk.TopologySum
	for _, e := range s {
		out = append(out, sdk.TopologySum{Key: e.key, Value: e.value, Sum: e.sum})
	}
	return out
}

// upstreamExisting is InterPodAffinity's loop over the existing pods
// (getExistingAntiAffinityCounts for required anti-affinity,
// processExistingPod for the rest), sorted.
func upstreamExisting(nodes []fwk.NodeInfo, kind int32, pod *v1.Pod, nsLabels labels.Set) []sum {
	m := map[[2]string]int64{}
	for _, ni := range nodes {
		node := ni.Node()
		for _, pi := range ni.GetPods() {
			var terms []fwk.WeightedAffinityTerm
			switch kind {
			case model.ExistingAntiAffinityRequired:
				for _, t := range pi.GetRequiredAntiAffinityTerms() {
					terms = append(terms, fwk.WeightedAffinityTerm{AffinityTerm: t, Weight: 1})
				}
			case model.ExistingAffinityRequired:
				for _, t := range pi.GetRequiredAffinityTerms() {
					terms = append(terms, fwk.WeightedAffinityTerm{AffinityTerm: t, Weight: 1})
				}
			case model.ExistingAffinityPreferred:
				terms = pi.GetPreferredAffinityTerms()
			case model.ExistingAntiAffinityPreferred:
				terms = pi.GetPreferredAntiAffinityTerms()
			}
			for _, t := range terms {
				if v, ok := node.Labels[t.TopologyKey]; ok && t.Matches(pod, nsLabels) {
					m[[2]string{t.TopologyKey, v}] += int64(t.Weight)
				}
			}
		}
	}
	var out []sum
	for k, v := range m {
		out = append(out, sum{k[0], k[1], v})
	}
	slices.SortFunc(out, func(a, b sum) int {
		if a.key != b.key {
			return strings.Compare(a.key, b.key)
		}
		return strings.Compare(a.value, b.value)
	})
	return out
}

// node_list's image states are cached with the node, yet follow a change
// of an image's node count that leaves the node's generation as it was
// (the snapshot recounts the nodes that hold an image when another node
// pulls it): the cache checks every summary it was encoded from.
func TestImageStatesFollowNodeCounts(t *testing.T) {
	nodes := []*v1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"web:1"}, SizeBytes: 100 << 20}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
	}
	infos := []fwk.NodeInfo{intree.NewNodeInfo(), intree.NewNodeInfo()}
	for i, n := range nodes {
		infos[i].SetNode(n)
	}
	intree.SetImageStates(infos, nodes)
	c := newNodeCache()
	decode := func(ni fwk.NodeInfo) string {
		b, ok := c.list(ni, model.NodeImageStates)
		if !ok {
			t.Fatal("node_list refused the image states")
		}
		var out []string
		for r := abi.NewListReader(b); r.Len() > 0; {
			s, _ := r.Next()
			out = append(out, string(s))
		}
		return fmt.Sprint(out)
	}
	first := decode(infos[0])
	if !strings.Contains(first, "web:1") || decode(infos[0]) != first {
		t.Fatalf("image states %s, then %s", first, decode(infos[0]))
	}
	if got := decode(infos[1]); got != "[]" {
		t.Fatalf("a node without images lists %s", got)
	}
	gen := infos[0].GetGeneration()
	infos[0].GetImageStates()["web:1"].NumNodes = 2
	if infos[0].GetGeneration() != gen {
		t.Fatal("the test changed the generation")
	}
	if got := decode(infos[0]); got == first {
		t.Fatalf("after the node count changed, the image states are still %s", got)
	}
	infos[0].GetImageStates()["web:1"].NumNodes = 1
	if got := decode(infos[0]); got != first {
		t.Fatalf("back at one node: %s, first %s", got, first)
	}
}

// Counts kept across cycles (NodeCountCache) are the counts: over 120
// steps that change the cluster as the scheduler's snapshot does (a pod
// added, removed or starting to terminate on a node: a new NodeInfo; a
// node's labels changed in place, its zone sometimes removed: SetNode, a
// new generation; a namespace's labels changed: no node changes; two
// nodes trading places in the list),
// a view with the cache counts what upstream counts for random terms, and
// most node counts were taken from the cache.
func TestNodeCountsFollowTheCluster(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 26))
	c := newRandomCluster(r, 12)
	cache := NewNodeCountCache()
	terms := make([]CountTerm, 4) // asked again and again, as a workload's pods ask
	for i := range terms {
		terms[i] = randomTerm(r)
	}
	// One term selects namespaces by the label the steps change.
	terms[0].Namespaces, terms[0].NamespaceSelector = nil, &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
	deleted := metav1.Now()
	counted, kept := 0, 0
	for step := range 120 {
		i := r.IntN(len(c.nodes))
		ni := c.nodes[i]
		var pods []*v1.Pod
		for _, pi := range ni.GetPods() {
			pods = append(pods, pi.GetPod())
		}
		switch step % 4 {
		case 0:
			pods = append(pods, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("new-%d", step), Namespace: clusterNamespaces[r.IntN(len(clusterNamespaces))], Labels: randomLabels(r)},
				Spec: v1.PodSpec{NodeName: ni.Node().Name}})
		case 1:
			if len(pods) > 0 {
				k := r.IntN(len(pods))
				if r.IntN(2) == 0 {
					pods = slices.Delete(pods, k, k+1)
				} else {
					p := pods[k].DeepCopy()
					p.DeletionTimestamp = &deleted
					pods[k] = p
				}
			}
		case 2:
			node := ni.Node().DeepCopy()
			node.Labels["zone"] = fmt.Sprintf("zone-%d", r.IntN(3))
			if r.IntN(4) == 0 {
				delete(node.Labels, "zone") // the node leaves every zone term's count (kept: its value)
			}
			node.Labels["app"] = clusterValues[r.IntN(len(clusterValues))]
			ni.(interface{ SetNode(*v1.Node) }).SetNode(node) // in place, a new generation
		case 3:
			c.namespaces["team-b"] = map[string]string{"kubernetes.io/metadata.name": "team-b", "team": []string{"a", "b"}[r.IntN(2)]}
		}
		if step%4 <= 1 {
			fresh := intree.NewNodeInfo(pods...)
			fresh.SetNode(ni.Node())
			c.nodes[i] = fresh
		}
		if step%7 == 6 { // the snapshot's list changes order when nodes come and go
			j := r.IntN(len(c.nodes))
			c.nodes[i], c.nodes[j] = c.nodes[j], c.nodes[i]
		}
		for range 3 {
			// A view is one cycle's: of one pod.
			view := &ClusterView{Nodes: c.nodes, NodeCounts: cache, NamespaceLabels: func(name string) (map[string]string, bool) {
				l, ok := c.namespaces[name]
				return l, ok
			}}
			k := r.IntN(len(terms))
			term := terms[k]
			pod := randomIncomingPod(r, clusterNamespaces[k%3])
			b := sdkTerm(term).JSON()
			parsed, err := ParseCountTerm(b)
			if err != nil {
				t.Fatal(err)
			}
			hits, misses := cache.hits, cache.misses
			got, ok := view.countPods(b, pod)
			if !ok {
				t.Fatalf("step %d: term %s refused", step, b)
			}
			if want := model.EncodeCounts(upstreamCount(t, c, *parsed, pod)); string(got) != string(want) {
				t.Fatalf("step %d: term %s (pod in %s): with kept counts %q, upstream %q", step, b, pod.Namespace, got, want)
			}
			counted += cache.hits - hits + cache.misses - misses
			kept += cache.hits - hits
		}
	}
	if counted == 0 || kept < counted/2 {
		t.Errorf("%d of %d node counts taken from the cache; want most", kept, counted)
	}
	t.Logf("%d of %d node counts taken from the cache", kept, counted)
}

// A term larger than maxKeptTermBytes is counted but never kept: a guest
// cannot make the cache hold its large terms.
func TestNodeCountsKeepOnlySmallTerms(t *testing.T) {
	c := newRandomCluster(rand.New(rand.NewPCG(22, 26)), 4)
	cache := NewNodeCountCache()
	big := CountTerm{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{strings.Repeat("x", 60)}}}}, TopologyKey: "zone"}
	for i := range 100 {
		big.LabelSelector.MatchExpressions[0].Values = append(big.LabelSelector.MatchExpressions[0].Values, fmt.Sprintf("v%d", i)+strings.Repeat("y", 50))
	}
	b := sdkTerm(big).JSON()
	if len(b) <= maxKeptTermBytes {
		t.Fatalf("the term is %d bytes, not over %d", len(b), maxKeptTermBytes)
	}
	pod := randomIncomingPod(rand.New(rand.NewPCG(1, 1)), "default")
	view := &ClusterView{Nodes: c.nodes, NodeCounts: cache}
	got, ok := view.countPods(b, pod)
	if want := model.EncodeCounts(upstreamCount(t, c, big, pod)); !ok || string(got) != string(want) {
		t.Fatalf("a large term counted %q (%v), upstream %q", got, ok, want)
	}
	if len(cache.terms) != 0 {
		t.Errorf("the cache keeps %d terms after a %d-byte one", len(cache.terms), len(b))
	}
}

// existing_terms' answers put in order by the pairs' kept ranks are the
// answers sorted as strings: over 300 cycles whose pairs change as a
// cluster's do (nodes added and removed, the zones relabelled, matches on
// a few nodes at a time), the kept order is sorted again only when a
// node with a new value joins, and stays within its bound.
func TestExistingTermsOrderKeptAcrossCycles(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 26))
	cache := NewNodeCountCache()
	count, zones := 40, 0
	cluster := func() []fwk.NodeInfo {
		nodes := make([]fwk.NodeInfo, count)
		for i := range nodes {
			nodes[i] = intree.NewNodeInfo()
			nodes[i].SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%03d", i), Labels: map[string]string{
				"kubernetes.io/hostname": fmt.Sprintf("node-%03d", i), "topology.kubernetes.io/zone": fmt.Sprint("zone-", i%3+zones)}}})
		}
		return nodes
	}
	nodes := cluster()
	changes, sorts := 1, 0
	for step := range 300 {
		switch k := r.IntN(8); {
		case k == 0:
			count++ // a node joins: a new hostname
			nodes, changes = cluster(), changes+1
		case k == 1:
			count = max(1, count-1) // one leaves: nothing new
			nodes = cluster()
		case step%100 == 99:
			zones++ // the zones relabelled
			nodes, changes = cluster(), changes+1
		}
		sums := map[topologyPair]int64{}
		for _, ni := range nodes {
			if r.IntN(5) != 0 {
				continue // no matching pod on it this cycle
			}
			l := ni.Node().Labels
			sums[topologyPair{"kubernetes.io/hostname", l["kubernetes.io/hostname"]}] += int64(1 + r.IntN(100))
			if r.IntN(2) == 0 {
				sums[topologyPair{"topology.kubernetes.io/zone", l["topology.kubernetes.io/zone"]}]++
			}
		}
		want := make([]model.TopologySum, 0, len(sums))
		for p, s := range sums {
			want = append(want, model.TopologySum{Key: p.key, Value: p.value, Sum: s})
		}
		before := cache.orderSorts
		got := cache.sortSums(sums, nodes)
		if g, w := model.EncodeSortedTopologySums(got), model.EncodeTopologySums(want); string(g) != string(w) {
			t.Fatalf("step %d: in kept order %v, sorted %v", step, got, decodeSums(w))
		}
		if n, bound := len(cache.order.pairs), 4*len(nodes)+256+2*len(nodes); n > bound {
			t.Fatalf("step %d: the order holds %d pairs, bound %d", step, n, bound)
		}
		sorts += cache.orderSorts - before
	}
	if sorts == 0 || sorts > changes {
		t.Fatalf("the order was sorted again %d times for %d changes that brought new values", sorts, changes)
	}
	t.Logf("sorted again %d times for %d changes that brought new values, over 300 cycles", sorts, changes)
}

// BenchmarkExistingTermsOrder encodes one cycle's existing_terms answer of
// a hostname term over 500 nodes (names as scheduler_perf generates them)
// sorted as strings, and in the order kept across cycles.
func BenchmarkExistingTermsOrder(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 0))
	sums := map[topologyPair]int64{}
	var nodes []fwk.NodeInfo
	for range 500 {
		name := fmt.Sprintf("scheduler-perf-%05x", r.IntN(1<<20))
		sums[topologyPair{"kubernetes.io/hostname", name}] = 1
		ni := intree.NewNodeInfo()
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}})
		nodes = append(nodes, ni)
	}
	b.Run("sorted", func(b *testing.B) {
		for b.Loop() {
			out := make([]model.TopologySum, 0, len(sums))
			for p, s := range sums {
				out = append(out, model.TopologySum{Key: p.key, Value: p.value, Sum: s})
			}
			model.EncodeTopologySums(out)
		}
	})
	b.Run("kept", func(b *testing.B) {
		cache := NewNodeCountCache()
		for b.Loop() {
			model.EncodeSortedTopologySums(cache.sortSums(sums, nodes))
		}
	})
}
