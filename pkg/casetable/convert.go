package casetable

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
)

// Pod converts a case's pod into a real Pod (kubemodel.ToPod).
func Pod(d sdk.PodData) (*v1.Pod, error) { return kubemodel.ToPod(&d) }

// useView gives the pod its cycle's cluster view, and nodes the image
// states a scheduler snapshot of the view's nodes would give them.
func useView(pod *host.PodState, view *host.ClusterView, nodes []fwk.NodeInfo) {
	pod.Cluster = view
	var clusterNodes []*v1.Node
	for _, ni := range view.Nodes {
		clusterNodes = append(clusterNodes, ni.Node())
	}
	intree.SetImageStates(nodes, clusterNodes)
}

// clusterView is a case's cluster view: its cluster's nodes and
// namespaces, or its own node alone, as natively (casetest.Case.Cluster).
func clusterView(c *casetest.Case, own fwk.NodeInfo) (*host.ClusterView, error) {
	// The case's pod says what selects it, as natively.
	spread := kubemodel.DefaultSpreadOf(&c.Pod)
	defaultSpread := func(*v1.Pod) []metav1.LabelSelectorRequirement { return spread }
	data := c.ClusterData()
	devices := func(*v1.Pod, bool) model.Devices { return data.Devices }
	if c.Cluster == nil || len(c.Cluster.Nodes) == 0 {
		return &host.ClusterView{Nodes: []fwk.NodeInfo{own}, NamespaceLabels: func(name string) (map[string]string, bool) {
			l, ok := data.Namespaces[name]
			return l, ok
		}, DefaultSpreadSelector: defaultSpread, Volumes: kubemodel.ClusterVolumes(data), Devices: devices}, nil
	}
	v := &host.ClusterView{NamespaceLabels: func(name string) (map[string]string, bool) {
		l, ok := c.Cluster.Namespaces[name]
		return l, ok
	}, DefaultSpreadSelector: defaultSpread, Volumes: kubemodel.ClusterVolumes(data), Devices: devices}
	for _, d := range c.Cluster.Nodes {
		ni, err := NodeInfo(d)
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		v.Nodes = append(v.Nodes, ni)
	}
	return v, nil
}

// NodeInfo converts a case's node into a real NodeInfo (kubemodel.ToNodeInfo).
func NodeInfo(d sdk.NodeData) (fwk.NodeInfo, error) { return kubemodel.ToNodeInfo(&d) }
