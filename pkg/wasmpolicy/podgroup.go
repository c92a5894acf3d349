package wasmpolicy

import (
	"fmt"
	"reflect"
	"slices"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

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
		names, ok := reservePlugins(w.handle)
		w.reserveOK = !ok || slices.Contains(names, Name)
	})
	return w.reserveOK
}

// reservePlugins are the Reserve plugins of the framework h, when h is
// kube-scheduler's (its ListPlugins). Read by reflection: the type it
// returns is in k8s.io/kubernetes, which the plugin does not import
// (docs/architecture.md), and a Handle does not have the method.
func reservePlugins(h any) ([]string, bool) {
	m := reflect.ValueOf(h).MethodByName("ListPlugins")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return nil, false
	}
	ps := m.Call(nil)[0]
	if ps.Kind() != reflect.Pointer || ps.IsNil() || ps.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	enabled := ps.Elem().FieldByName("Reserve")
	if enabled.IsValid() && enabled.Kind() == reflect.Struct {
		enabled = enabled.FieldByName("Enabled")
	}
	if !enabled.IsValid() || enabled.Kind() != reflect.Slice {
		return nil, false
	}
	names := []string{}
	for i := range enabled.Len() {
		if p := enabled.Index(i); p.Kind() == reflect.Struct {
			if n := p.FieldByName("Name"); n.IsValid() && n.Kind() == reflect.String {
				names = append(names, n.String())
			}
		}
	}
	return names, true
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
