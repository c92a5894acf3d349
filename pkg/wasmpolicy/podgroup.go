package wasmpolicy

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
)

// A pod-group cycle (GenericWorkload, v1.36 on) places a member into the
// snapshot's NodeInfo, runs Reserve, tries the next member against the
// snapshot that now holds it, and undoes each placement with Unreserve
// and a forget; it puts the NodeInfo's generation back each time. Reserve
// and Unreserve here tell the host's caches (host.NodeAssumed), so that
// the next member's policies read the node with its placed siblings, and
// a verdict or a node table kept from before is not taken for the node as
// it is now.

// snapshotNode is the snapshot's NodeInfo of nodeName: the one a
// pod-group cycle placed the pod into.
func (w *WasmPolicy) snapshotNode(nodeName string) fwk.NodeInfo {
	if w.handle == nil {
		return nil
	}
	l := w.handle.SnapshotSharedLister()
	if l == nil {
		return nil
	}
	ni, err := l.NodeInfos().Get(nodeName)
	if err != nil {
		return nil
	}
	return ni
}

// podGroupAssumed marks the node a pod-group cycle placed pod on.
func (w *WasmPolicy) podGroupAssumed(pod *v1.Pod, nodeName string) {
	if ni := w.snapshotNode(nodeName); ni != nil {
		host.NodeAssumed(ni, pod.UID)
	}
}

// podGroupForgotten takes the mark off before the cycle takes pod out.
func (w *WasmPolicy) podGroupForgotten(pod *v1.Pod, nodeName string) {
	if ni := w.snapshotNode(nodeName); ni != nil {
		host.NodeForgotten(ni, pod.UID)
	}
}

// atReserve reports whether the profile runs WasmPolicy at Reserve, which
// a pod-group cycle needs (above); asked once, of the framework that made
// the plugin.
func (w *WasmPolicy) atReserve() bool {
	w.reserveOnce.Do(func() {
		w.reserveOK = true
		l, ok := w.handle.(interface{ ListPlugins() *schedconfig.Plugins })
		if !ok {
			return
		}
		ps := l.ListPlugins()
		if ps == nil {
			return
		}
		w.reserveOK = false
		for _, p := range ps.Reserve.Enabled {
			if p.Name == Name {
				w.reserveOK = true
			}
		}
	})
	return w.reserveOK
}

// podGroupStatus is PreFilter's answer in a pod-group cycle of a profile
// that does not run WasmPolicy at Reserve: its policies could not see the
// group's placed members, so no member is judged.
func (w *WasmPolicy) podGroupStatus(state fwk.CycleState) *fwk.Status {
	if !framework.InPodGroupCycle(state) || w.atReserve() {
		return nil
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
		"%s: pod-group cycles need %s at the Reserve extension point of this profile, so that its policies see the group's placed members; enable it under multiPoint (as the default profile does) or under reserve", Name, Name))
}
