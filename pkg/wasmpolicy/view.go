package wasmpolicy

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
	"github.com/wasmsched/wasmsched/internal/spread"
)

// namespaceLabels looks up a namespace's labels for namespace selectors;
// nil when the plugin has no namespace lister.
func (w *WasmPolicy) namespaceLabels() func(string) (map[string]string, bool) {
	if w.namespaces == nil {
		return nil
	}
	return func(name string) (map[string]string, bool) {
		ns, err := w.namespaces.Get(name)
		if err != nil {
			return nil, false
		}
		return ns.Labels, true
	}
}

// clusterView is a cycle's cluster view (docs/abi.md §4.6) when a policy
// declared a read of it: the scheduler's snapshot. Outside a scheduler its
// Nodes stay nil until PreFilter or PreScore fills in the nodes the caller
// passed (viewNodes).
func (w *WasmPolicy) clusterView(policies []*policy) *host.ClusterView {
	if !slices.ContainsFunc(policies, func(p *policy) bool { return p.clusterReads }) {
		return nil
	}
	v := &host.ClusterView{}
	if w.handle != nil {
		if l := w.handle.SnapshotSharedLister(); l != nil {
			if all, err := l.NodeInfos().List(); err == nil {
				v.Nodes = all
				aff, err1 := l.NodeInfos().HavePodsWithAffinityList()
				anti, err2 := l.NodeInfos().HavePodsWithRequiredAntiAffinityList()
				if err1 == nil && err2 == nil {
					v.WithAffinity, v.WithRequiredAntiAffinity, v.HasAffinityLists = aff, anti, true
				}
			}
		}
	}
	v.NamespaceLabels = w.nsLabels
	v.NodeCounts = w.nodeCounts
	if w.volumes != nil {
		v.Volumes = w.volumes
	}
	if w.dra != nil {
		dra := w.dra
		v.Devices = func(pod *v1.Pod, nodes bool) model.Devices { return kubemodel.Devices(pod, dra, nodes) }
	}
	if w.spread != nil {
		v.DefaultSpreadSelector = func(pod *v1.Pod) []metav1.LabelSelectorRequirement {
			return spread.Requirements(w.spread.DefaultSelector(pod))
		}
	}
	return v
}

// viewNodes gives a cluster view without a snapshot the node list of the
// first PreFilter or PreScore of its cycle.
func viewNodes(c *cycleData, nodes []fwk.NodeInfo) {
	if v := c.pod.Cluster; v != nil && v.Nodes == nil {
		v.Nodes = nodes
	}
}

// readsCluster reports whether declared reads need a cycle's cluster view
// (and so make a policy's verdicts unsignable): Cluster, Namespaces or
// Volumes or Devices.
func readsCluster(reads []string) bool {
	return slices.Contains(reads, string(fields.ScopeCluster)) || slices.Contains(reads, string(fields.ScopeNamespaces)) ||
		slices.Contains(reads, string(fields.ScopeVolumes)) || slices.Contains(reads, string(fields.ScopeDevices))
}

// draOf is the DynamicResources plugin's own view, which resource_claims
// reads: its claims include the allocations made in cycles whose binding
// has not written them. Nil outside a scheduler, or when no policy may
// declare Devices (the view's informers then need not run for us).
func draOf(h framework.Handle, devices bool) kubemodel.DRALister {
	if h == nil || !devices {
		return nil
	}
	if m := h.SharedDRAManager(); m != nil {
		return draView{m}
	}
	klog.InfoS("Policies may declare the Devices read, but this process has no DRA view (outside kube-scheduler, or DynamicResourceAllocation off): resource_claims answers no claims and no devices")
	return nil
}

// draView is the DynamicResources plugin's view as resource_claims reads
// it.
type draView struct{ m framework.SharedDRAManager }

func (d draView) Claim(namespace, name string) (*resourceapi.ResourceClaim, error) {
	return d.m.ResourceClaims().Get(namespace, name)
}

func (d draView) ClaimPending(c *resourceapi.ResourceClaim) bool {
	return framework.ClaimPending(d.m, c.UID)
}

// Allocated lists the plugin's allocated devices, allocations in flight
// included; it tries again when the plugin's claims change while being
// listed, as the plugin does.
func (d draView) Allocated() (map[kubemodel.DeviceID]bool, error) {
	var err error
	for range 3 {
		ids, lerr := d.m.ResourceClaims().ListAllAllocatedDevices()
		if err = lerr; err != nil {
			continue
		}
		out := make(map[kubemodel.DeviceID]bool, len(ids))
		for id := range ids {
			out[kubemodel.DeviceID{id.Driver.String(), id.Pool.String(), id.Device.String()}] = true
		}
		return out, nil
	}
	return nil, err
}

func (d draView) Slices() ([]*resourceapi.ResourceSlice, error) {
	return d.m.ResourceSlices().ListWithDeviceTaintRules()
}

func (d draView) Class(name string) (*resourceapi.DeviceClass, error) {
	return d.m.DeviceClasses().Get(name)
}

// volumeListers are the scheduler's listers as volume_claims reads them.
type volumeListers struct {
	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
}

func (l volumeListers) Claim(namespace, name string) (*v1.PersistentVolumeClaim, bool) {
	c, err := l.claims.PersistentVolumeClaims(namespace).Get(name)
	return c, err == nil
}

func (l volumeListers) Volume(name string) (*v1.PersistentVolume, bool) {
	v, err := l.volumes.Get(name)
	return v, err == nil
}

func (l volumeListers) Class(name string) (*storagev1.StorageClass, bool) {
	c, err := l.classes.Get(name)
	return c, err == nil
}
