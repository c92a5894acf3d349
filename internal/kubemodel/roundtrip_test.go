package kubemodel_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
	"github.com/wasmsched/wasmsched/internal/kubemodel/modelgen"
)

// schedulerNodeInfos builds the NodeInfos of a cluster's nodes (with their
// pods and image states) as the scheduler does; lineNodeInfos adds the
// project's other builders (pkg/nodeinfo) where they build.
var schedulerNodeInfos = map[string]func(nodes []*v1.Node, pods [][]*v1.Pod) []fwk.NodeInfo{
	"the scheduler's NodeInfo": func(nodes []*v1.Node, pods [][]*v1.Pod) []fwk.NodeInfo {
		out := make([]fwk.NodeInfo, len(nodes))
		for i, n := range nodes {
			ni := intree.NewNodeInfo(pods[i]...)
			ni.SetNode(n)
			out[i] = ni
		}
		intree.SetImageStates(out, nodes)
		return out
	},
}

func allNodeInfos() map[string]func([]*v1.Node, [][]*v1.Pod) []fwk.NodeInfo {
	out := map[string]func([]*v1.Node, [][]*v1.Pod) []fwk.NodeInfo{}
	for k, v := range schedulerNodeInfos {
		out[k] = v
	}
	for k, v := range lineNodeInfos {
		out[k] = v
	}
	return out
}

// world is one generated pod and cluster, read natively (the model with
// what DerivePod and DeriveNode derive) and through Kubernetes objects.
type world struct {
	pod     *model.Pod // derived
	node    *model.Node
	cluster *model.Cluster // the nodes derived
	terms   []model.CountTerm

	v1pod *v1.Pod
	ni    fwk.NodeInfo
	view  *host.ClusterView

	// devices is the pod's resource_claims answer (natively the case
	// table's), from which devicesRead builds the DRA objects.
	devices model.Devices
}

// devicesRead reads resource_claims of f.Num: natively the model's
// answer, through Kubernetes what kubemodel.Devices sums up from DRA
// objects built to hold it.
func devicesRead(f fields.Field, w *world, native bool) []string {
	d := w.devices
	if !native {
		claims, objs := kubemodel.DRAObjectsOf(w.v1pod.Namespace, d)
		pod := w.v1pod.DeepCopy()
		pod.Spec.ResourceClaims = claims
		d = kubemodel.Devices(pod, objs, true)
	}
	b, _ := model.EncodeDevices(d, f.Num)
	return []string{string(b)}
}

// Every row of the fields table reads the same from a model value as from
// the Kubernetes objects the value converts to (kubemodel.ToPod, ToNode)
// converted back (FillPod, FillNode) — natively, in a case table and in
// the scheduler, a policy reads one thing. Rows read by key are read for
// every key the generator uses; the whole-object rows are held to
// surviving the trip through the model's Object.
func TestRoundTrip(t *testing.T) {
	readers := map[string]func(f fields.Field, w *world, native bool) []string{
		abi.FnPodString: podString, abi.FnPodLabel: podLookup, abi.FnPodAnnotation: podLookup, abi.FnPodList: podList,
		abi.FnPodRequest: podRequest, abi.FnPodPriority: podPriority, abi.FnPodObject: nil,
		abi.FnNodeString: nodeString, abi.FnNodeLabel: nodeLookup, abi.FnNodeAnnotation: nodeLookup, abi.FnNodeTaint: nodeTaint,
		abi.FnNodeList: nodeList, abi.FnNodeResource: nodeResource, abi.FnNodePodCount: nodeScalar, abi.FnNodeUnschedulable: nodeScalar,
		abi.FnNodeObject: nil, abi.FnClusterNodes: clusterRead, abi.FnClusterNode: clusterRead, abi.FnCountPods: clusterRead,
		abi.FnExistingTerms: clusterRead, abi.FnNamespaceLabels: clusterRead, abi.FnVolumeClaims: clusterRead,
		abi.FnResourceClaims: devicesRead,
	}
	for _, f := range fields.Fields {
		if _, ok := readers[f.Fn]; !ok {
			t.Errorf("row %s %q (%s %d) has no round trip here: add its reader to TestRoundTrip", f.Object, f.Path, f.Fn, f.Num)
		}
	}
	g := newGen(rand.New(rand.NewPCG(40, 2026)))
	for i := range 400 {
		c := g.cluster()
		p := g.pod(fmt.Sprint("web-", i))
		var terms []model.CountTerm
		for range 3 {
			terms = append(terms, g.countTerm())
		}
		devices := kubemodel.RandomDevices(rand.New(rand.NewPCG(uint64(i), 68)))
		for how, build := range allNodeInfos() {
			w, err := newWorld(p, c, terms, build)
			if err != nil {
				t.Fatalf("world %d: %v", i, err)
			}
			w.devices = devices
			for _, f := range fields.Fields {
				read := readers[f.Fn]
				if read == nil {
					continue
				}
				native, kube := read(f, w, true), read(f, w, false)
				if fmt.Sprint(native) != fmt.Sprint(kube) {
					t.Fatalf("world %d, %s: row %s %q (%s %d):\n natively:           %q\n through Kubernetes: %q\npod %+v\nnode %+v", i, how, f.Object, f.Path, f.Fn, f.Num, native, kube, *p, *c.Nodes[0])
				}
			}
		}
		objectRoundTrip(t, i, p, c.Nodes[0])
	}
}

func newWorld(p *model.Pod, c *model.Cluster, terms []model.CountTerm, build func([]*v1.Node, [][]*v1.Pod) []fwk.NodeInfo) (*world, error) {
	w := &world{terms: terms, cluster: &model.Cluster{Namespaces: c.Namespaces, Claims: c.Claims, PersistentVolumes: c.PersistentVolumes, StorageClasses: c.StorageClasses}}
	var err error
	if w.pod, err = model.DerivePod(p); err != nil {
		return nil, err
	}
	var nodes []*v1.Node
	var pods [][]*v1.Pod
	for _, n := range c.Nodes {
		d, err := model.DeriveNode(n, c)
		if err != nil {
			return nil, err
		}
		w.cluster.Nodes = append(w.cluster.Nodes, d)
		node, ps, err := kubemodel.ToNode(n)
		if err != nil {
			return nil, err
		}
		nodes, pods = append(nodes, node), append(pods, ps)
	}
	w.node = w.cluster.Nodes[0]
	if w.v1pod, err = kubemodel.ToPod(p); err != nil {
		return nil, err
	}
	nis := build(nodes, pods)
	w.ni = nis[0]
	spread := kubemodel.DefaultSpreadOf(p)
	w.view = &host.ClusterView{Nodes: nis, DefaultSpreadSelector: func(*v1.Pod) []metav1.LabelSelectorRequirement { return spread },
		NamespaceLabels: func(ns string) (map[string]string, bool) { l, ok := c.Namespaces[ns]; return l, ok },
		Volumes:         kubemodel.ClusterVolumes(c)}
	return w, nil
}

// kubePod and kubeNode convert what a row reads back into the model, as
// the host does.
func (w *world) kubePod(part kubemodel.PodPart) *model.Pod {
	var m model.Pod
	kubemodel.FillPod(&m, w.v1pod, part, w.view.DefaultSpreadSelector)
	return &m
}

func (w *world) kubeNode(part kubemodel.NodePart) *model.Node {
	var m model.Node
	kubemodel.FillNode(&m, w.ni, part)
	return &m
}

func podString(f fields.Field, w *world, native bool) []string {
	p := w.pod
	if !native {
		p = w.kubePod(kubemodel.PodScalars)
	}
	s, _ := model.PodString(p, f.Num)
	return []string{s}
}

func podLookup(f fields.Field, w *world, native bool) []string {
	p := w.pod
	if !native {
		p = w.kubePod(map[string]kubemodel.PodPart{abi.FnPodLabel: kubemodel.PodLabels, abi.FnPodAnnotation: kubemodel.PodAnnotations}[f.Fn])
	}
	m := p.Labels
	if f.Fn == abi.FnPodAnnotation {
		m = p.Annotations
	}
	var out []string
	for _, k := range modelgen.Keys {
		v, ok := m[k]
		out = append(out, fmt.Sprint(k, "=", v, ok))
	}
	return out
}

func podList(f fields.Field, w *world, native bool) []string {
	p := w.pod
	if !native {
		p = w.kubePod(kubemodel.PodListPart(f.Num))
	}
	b, _ := model.PodList(p, f.Num)
	return []string{string(b)}
}

func podRequest(f fields.Field, w *world, native bool) []string {
	p := w.pod
	if !native {
		p = w.kubePod(kubemodel.PodRequests)
	}
	var out []string
	for _, name := range modelgen.Resources {
		out = append(out, name+"="+strconv.FormatInt(model.PodRequest(p, name), 10))
	}
	return out
}

func podPriority(f fields.Field, w *world, native bool) []string {
	p := w.pod
	if !native {
		p = w.kubePod(kubemodel.PodScalars)
	}
	return []string{strconv.FormatInt(p.Priority, 10)}
}

func nodeString(f fields.Field, w *world, native bool) []string {
	n := w.node
	if !native {
		n = w.kubeNode(kubemodel.NodeScalars)
	}
	s, _ := model.NodeString(n, f.Num)
	return []string{s}
}

func nodeLookup(f fields.Field, w *world, native bool) []string {
	n := w.node
	if !native {
		n = w.kubeNode(map[string]kubemodel.NodePart{abi.FnNodeLabel: kubemodel.NodeLabels, abi.FnNodeAnnotation: kubemodel.NodeAnnotations}[f.Fn])
	}
	m := n.Labels
	if f.Fn == abi.FnNodeAnnotation {
		m = n.Annotations
	}
	var out []string
	for _, k := range modelgen.Keys {
		v, ok := m[k]
		out = append(out, fmt.Sprint(k, "=", v, ok))
	}
	return out
}

func nodeTaint(f fields.Field, w *world, native bool) []string {
	n := w.node
	if !native {
		n = w.kubeNode(kubemodel.NodeTaints)
	}
	var out []string
	for _, k := range modelgen.Keys {
		b, ok := model.NodeTaint(nil, n, k)
		out = append(out, fmt.Sprint(string(b), ok))
	}
	return out
}

func nodeList(f fields.Field, w *world, native bool) []string {
	n := w.node
	if !native {
		n = w.kubeNode(kubemodel.NodeListPart(f.Num))
	}
	b, _ := model.NodeList(n, f.Num)
	return []string{string(b)}
}

func nodeResource(f fields.Field, w *world, native bool) []string {
	n := w.node
	if !native {
		n = w.kubeNode(kubemodel.ResourcePart(f.Num))
	}
	var out []string
	for _, name := range modelgen.Resources {
		v, _ := model.NodeResource(n, f.Num, name)
		if !native {
			// The host reads a resource in place; it must be the model's.
			if direct, _ := kubemodel.NodeResource(w.ni, f.Num, name); direct != v {
				return []string{fmt.Sprintf("%s: read in place %d, through the model %d", name, direct, v)}
			}
		}
		out = append(out, name+"="+strconv.FormatInt(v, 10))
	}
	return out
}

func nodeScalar(f fields.Field, w *world, native bool) []string {
	n := w.node
	if !native {
		n = w.kubeNode(kubemodel.NodeScalars)
	}
	return []string{fmt.Sprint(model.NodePodCount(n), n.Unschedulable)}
}

func clusterRead(f fields.Field, w *world, native bool) []string {
	c := w.cluster
	var out []string
	switch f.Fn {
	case abi.FnClusterNodes:
		if native {
			return []string{strconv.Itoa(len(c.Nodes))}
		}
		return []string{strconv.Itoa(len(w.view.Nodes))}
	case abi.FnClusterNode:
		for i := range c.Nodes {
			n := c.Nodes[i]
			if !native {
				n = &model.Node{}
				kubemodel.FillNode(n, w.view.Nodes[i], kubemodel.NodeScalars)
				kubemodel.FillNode(n, w.view.Nodes[i], kubemodel.NodeLabels)
				kubemodel.FillNode(n, w.view.Nodes[i], kubemodel.NodeTaints)
			}
			b, s, _ := model.ClusterNode(n, f.Num)
			out = append(out, string(b)+s)
		}
	case abi.FnCountPods:
		for i := range w.terms {
			if native {
				out = append(out, string(model.EncodeCounts(model.CountPods(c, w.pod, &w.terms[i]))))
				continue
			}
			term, err := host.ParseCountTerm(w.terms[i].JSON())
			if err != nil {
				out = append(out, err.Error())
				continue
			}
			out = append(out, string(model.EncodeCounts(w.view.CountPods(term, w.v1pod))))
		}
	case abi.FnExistingTerms:
		if native {
			return []string{string(model.EncodeTopologySums(model.ExistingTerms(c, w.pod, f.Num)))}
		}
		return []string{string(model.EncodeTopologySums(w.view.ExistingTerms(f.Num, w.v1pod)))}
	case abi.FnVolumeClaims:
		vcs := model.VolumeClaims(c, w.pod)
		if !native {
			vcs = kubemodel.VolumeClaims(w.v1pod, w.view.Volumes)
		}
		b, _ := model.EncodeVolumeClaims(vcs, f.Num)
		return []string{string(b)}
	case abi.FnNamespaceLabels:
		for _, ns := range append(modelgen.Namespaces, "unknown") {
			var l map[string]string
			var ok bool
			if native {
				l, ok = c.Namespaces[ns]
			} else {
				l, ok = w.view.NamespaceLabels(ns)
			}
			out = append(out, fmt.Sprint(ns, model.EncodeMap(l), ok))
		}
	}
	return out
}

// objectRoundTrip holds pod_object and node_object to the model: the
// object the host encodes for a model value, given back as the model's
// Object alone, converts to a Kubernetes object that encodes the same.
func objectRoundTrip(t *testing.T, i int, p *model.Pod, n *model.Node) {
	v1pod, err := kubemodel.ToPod(p)
	if err != nil {
		t.Fatal(err)
	}
	obj := kubemodel.PodObject(v1pod)
	again, err := kubemodel.ToPod(&model.Pod{Object: obj})
	if err != nil {
		t.Fatalf("world %d: the pod's own JSON as Object: %v", i, err)
	}
	if got := kubemodel.PodObject(again); string(got) != string(obj) {
		t.Fatalf("world %d: pod_object through the model:\n%s\n%s", i, obj, got)
	}
	node, _, err := kubemodel.ToNode(n)
	if err != nil {
		t.Fatal(err)
	}
	nobj := kubemodel.NodeObject(node)
	nagain, _, err := kubemodel.ToNode(&model.Node{Object: nobj})
	if err != nil {
		t.Fatalf("world %d: the node's own JSON as Object: %v", i, err)
	}
	if got := kubemodel.NodeObject(nagain); string(got) != string(nobj) {
		t.Fatalf("world %d: node_object through the model:\n%s\n%s", i, nobj, got)
	}
}

// The taint columns hold the effects of the taints Node.Taints lists (of
// one key, of all), natively and through Kubernetes.
func TestTaintColumnsReadAsTaints(t *testing.T) {
	g := newGen(rand.New(rand.NewPCG(43, 2026)))
	tainted := 0
	for i := range 200 {
		w, err := newWorld(g.pod(fmt.Sprint("web-", i)), g.cluster(), nil, schedulerNodeInfos["the scheduler's NodeInfo"])
		if err != nil {
			t.Fatalf("world %d: %v", i, err)
		}
		var all uint64
		byKey := map[string]uint64{"absent-key": 0}
		for _, tt := range w.node.Taints {
			all |= model.TaintBit(tt.Effect)
			byKey[tt.Key] |= model.TaintBit(tt.Effect)
		}
		if all != 0 {
			tainted++
		}
		for _, native := range []bool{true, false} {
			n := w.node
			if !native {
				n = w.kubeNode(kubemodel.ColumnPart(abi.ColTaintEffects))
			}
			if _, _, ok, v := model.TableColumn(n, abi.ColTaintEffects, ""); !ok || v != all {
				t.Fatalf("world %d: taint_effects (native %v) holds %d (ok %v), the taints %+v give %d", i, native, v, ok, w.node.Taints, all)
			}
			for key, want := range byKey {
				if _, _, ok, v := model.TableColumn(n, abi.ColTaint, key); !ok || v != want {
					t.Fatalf("world %d: taint:%s (native %v) holds %d (ok %v), want %d", i, key, native, v, ok, want)
				}
			}
		}
	}
	if tainted == 0 {
		t.Fatal("no generated node had a taint")
	}
}

// An image column holds the size Node.Images lists under the name (the
// last entry, as the scheduler's image states keep it), natively and
// through Kubernetes, and so does model.ImageSize, which the SDK reads
// without a table.
func TestImageColumnReadsAsImages(t *testing.T) {
	g := newGen(rand.New(rand.NewPCG(47, 2026)))
	held := 0
	for i := range 200 {
		w, err := newWorld(g.pod(fmt.Sprint("web-", i)), g.cluster(), nil, schedulerNodeInfos["the scheduler's NodeInfo"])
		if err != nil {
			t.Fatalf("world %d: %v", i, err)
		}
		want := map[string]int64{"absent:1": -1}
		for _, im := range w.node.Images {
			want[im.Name] = im.SizeBytes
		}
		for name, size := range want {
			if size >= 0 {
				held++
			}
			for _, native := range []bool{true, false} {
				n := w.node
				if !native {
					n = w.kubeNode(kubemodel.ColumnPart(abi.ColImage))
				}
				if _, _, ok, v := model.TableColumn(n, abi.ColImage, name); !ok || int64(v) != size {
					t.Fatalf("world %d: image:%s (native %v) holds %d (ok %v), the images %+v give %d", i, name, native, v, ok, w.node.Images, size)
				}
				if got := model.ImageSize(n.Images, name); got != size {
					t.Fatalf("world %d: ImageSize(%s) (native %v) = %d, want %d", i, name, native, got, size)
				}
			}
		}
	}
	if held == 0 {
		t.Fatal("no generated node held an image")
	}
}

// A node-table column of a resource holds what node_resource reads of it,
// natively and through Kubernetes: the SDK reads one or the other for the
// same call (a column when the batch has a table, node_resource otherwise).
func TestResourceColumnsReadAsNodeResource(t *testing.T) {
	kinds := map[string]int32{abi.ColAllocatable: model.ResourceAllocatable, abi.ColCapacity: model.ResourceCapacity,
		abi.ColRequested: model.ResourceRequested, abi.ColNonZeroRequested: model.ResourceNonZeroRequested}
	for _, tc := range abi.TableColumns {
		if _, ok := kinds[tc.Kind]; tc.Arg == "resource" && !ok {
			t.Errorf("column %s has no node_resource kind here: add it", tc.Kind)
		}
	}
	g := newGen(rand.New(rand.NewPCG(41, 2026)))
	for i := range 200 {
		c := g.cluster()
		w, err := newWorld(g.pod(fmt.Sprint("web-", i)), c, nil, schedulerNodeInfos["the scheduler's NodeInfo"])
		if err != nil {
			t.Fatalf("world %d: %v", i, err)
		}
		for kind, num := range kinds {
			for _, native := range []bool{true, false} {
				n := w.node
				if !native {
					n = w.kubeNode(kubemodel.ColumnPart(kind))
				}
				for _, name := range modelgen.Resources {
					want, _ := model.NodeResource(w.node, num, name)
					if _, _, ok, v := model.TableColumn(n, kind, name); !ok || int64(v) != want {
						t.Fatalf("world %d: column %s:%s (native %v) holds %d (ok %v), node_resource(%d) reads %d", i, kind, name, native, int64(v), ok, num, want)
					}
				}
			}
		}
	}
}
