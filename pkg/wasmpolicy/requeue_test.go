package wasmpolicy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// The hints of the Volumes read's events: a pod that a policy declaring
// Volumes rejected is retried when a claim it names is added or changes,
// when a volume is added or its labels or node affinity change, and when
// a StorageClass is added; a pod only other policies rejected, a claim of
// another pod or namespace, a volume's status, and a gated pod are not.
func TestVolumeReadHints(t *testing.T) {
	reader := fakePolicy("zone", nil, func(c *config.Policy) { c.Reads = []string{string(fields.ScopeVolumes)} })
	other := fakePolicy("other", nil, nil)
	w := withGates(fakePlugin(reader, other))
	byReader := st.MakePod().Name("a").Namespace("team").UID("a").PVC("data").Obj()
	byOther := st.MakePod().Name("b").Namespace("team").UID("b").PVC("data").Obj()
	unknown := st.MakePod().Name("c").Namespace("team").UID("c").PVC("data").Obj()
	gated := st.MakePod().Name("d").Namespace("team").UID("d").PVC("data").Obj()
	reader.remember(byReader)
	other.remember(byOther)
	w.gates.gate(gated, reader, host.Recheck{Events: abi.RecheckNodesChange})

	claim := func(ns, name, volume string) *v1.PersistentVolumeClaim {
		return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.PersistentVolumeClaimSpec{VolumeName: volume}}
	}
	volume := func(zone string, phase v1.PersistentVolumePhase) *v1.PersistentVolume {
		return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Labels: map[string]string{v1.LabelTopologyZone: zone}}, Status: v1.PersistentVolumeStatus{Phase: phase}}
	}
	events := map[fwk.EventResource]fwk.QueueingHintFn{}
	for _, e := range w.volumeEvents() {
		events[e.Event.Resource] = e.QueueingHintFn
	}
	for _, c := range []struct {
		name     string
		resource fwk.EventResource
		pod      *v1.Pod
		old, new interface{}
		want     fwk.QueueingHint
	}{
		{"its claim bound", fwk.PersistentVolumeClaim, byReader, claim("team", "data", ""), claim("team", "data", "pv"), fwk.Queue},
		{"its claim added", fwk.PersistentVolumeClaim, byReader, nil, claim("team", "data", ""), fwk.Queue},
		{"another claim", fwk.PersistentVolumeClaim, byReader, nil, claim("team", "logs", "pv"), fwk.QueueSkip},
		{"its claim's name in another namespace", fwk.PersistentVolumeClaim, byReader, nil, claim("other", "data", "pv"), fwk.QueueSkip},
		{"rejected only by a policy not reading volumes", fwk.PersistentVolumeClaim, byOther, nil, claim("team", "data", "pv"), fwk.QueueSkip},
		{"rejected before the records were taken", fwk.PersistentVolumeClaim, unknown, nil, claim("team", "data", "pv"), fwk.Queue},
		{"held by a gate", fwk.PersistentVolumeClaim, gated, nil, claim("team", "data", "pv"), fwk.QueueSkip},
		{"a volume added", fwk.PersistentVolume, byReader, nil, volume("a", v1.VolumeAvailable), fwk.Queue},
		{"a volume's zone changed", fwk.PersistentVolume, byReader, volume("a", v1.VolumeBound), volume("b", v1.VolumeBound), fwk.Queue},
		{"a volume's phase changed", fwk.PersistentVolume, byReader, volume("a", v1.VolumeAvailable), volume("a", v1.VolumeBound), fwk.QueueSkip},
		{"a StorageClass added", fwk.StorageClass, byReader, nil, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}}, fwk.Queue},
		{"a StorageClass added, rejected by others", fwk.StorageClass, byOther, nil, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}}, fwk.QueueSkip},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := events[c.resource](klog.Background(), c.pod, c.old, c.new)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
	// A deleted pod leaves the records: its UID is not a reason to retry.
	w.forgetRejected(byReader)
	if declares, known := w.rejectedBy(byReader, fields.ScopeVolumes); declares || known {
		t.Errorf("after its deletion the pod is still recorded: declares %v, known %v", declares, known)
	}
}

// The events WasmPolicy registers: node conditions among the node
// changes, and the volume events only when a policy may read volumes (so
// kube-scheduler watches claims, volumes and classes only then), the same
// kinds and actions as kube-scheduler's VolumeZone.
func TestEventsToRegister(t *testing.T) {
	kinds := func(w *WasmPolicy) map[fwk.EventResource]fwk.ActionType {
		events, err := w.EventsToRegister(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		out := map[fwk.EventResource]fwk.ActionType{}
		for _, e := range events {
			out[e.Event.Resource] |= e.Event.ActionType
		}
		return out
	}
	plain := kinds(fakePlugin())
	if plain[fwk.Node]&fwk.UpdateNodeCondition == 0 {
		t.Errorf("node events %v: a node's conditions changing is not among them", plain[fwk.Node])
	}
	for _, r := range []fwk.EventResource{fwk.PersistentVolumeClaim, fwk.PersistentVolume, fwk.StorageClass} {
		if _, ok := plain[r]; ok {
			t.Errorf("%s registered though no policy reads volumes", r)
		}
	}
	w := fakePlugin()
	w.volumes = volumeListers{}
	got := kinds(w)
	want := map[fwk.EventResource]fwk.ActionType{fwk.PersistentVolumeClaim: fwk.Add | fwk.Update, fwk.PersistentVolume: fwk.Add | fwk.Update, fwk.StorageClass: fwk.Add}
	for r, a := range want {
		if got[r] != a {
			t.Errorf("%s: %v, want %v (kube-scheduler's VolumeZone)", r, got[r], a)
		}
	}
}
