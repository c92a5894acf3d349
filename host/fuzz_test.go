package host

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host/internal/hostabi"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
)

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

// FuzzLoad feeds arbitrary bytes, raw and gzipped, to the module loader:
// decoding, the size limit, compilation, validation and initialization must
// refuse bad input with an error, never panic, and never replace a good
// version with a bad one.
func FuzzLoad(f *testing.F) {
	fixtures, _ := filepath.Glob(filepath.Join("testdata", "*.wasm"))
	for _, p := range fixtures {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(gz(b))
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte("\x1f\x8b"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	e := newEngine(f)
	p := newPolicy(f, e, PolicySpec{Timeout: 50 * time.Millisecond, InitTimeout: 200 * time.Millisecond, MemoryLimitBytes: 4 << 20})
	good, err := os.ReadFile(filepath.Join("testdata", "ok.wasm"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		base, err := p.Load(context.Background(), good, "")
		if err != nil {
			t.Fatal(err)
		}
		v, err := p.Load(context.Background(), data, "")
		if err != nil {
			if p.Current() != base {
				t.Fatal("a refused module replaced the serving version")
			}
			return
		}
		if v == nil || p.Current() != v {
			t.Fatal("a loaded module is not the serving version")
		}
	})
}

// FuzzHostFunctions has a guest call every host function with arbitrary
// pointers, lengths, kinds and codes (taken from the fuzz input). The host
// must answer each with a value or an error code: the call must not trap,
// and the host must not panic, during Filter and during a batch.
func FuzzHostFunctions(f *testing.F) {
	call := func(sel byte, a, b, c, d int32) []byte {
		out := make([]byte, 20)
		out[0] = sel
		for i, v := range []int32{a, b, c, d} {
			binary.LittleEndian.PutUint32(out[4+4*i:], uint32(v))
		}
		return out
	}
	for sel := byte(0); sel < 18; sel++ {
		f.Add(call(sel, 0, 16, 32, 64))
		f.Add(call(sel, -1, -1, -1, -1))
		f.Add(call(sel, 65530, 100, 131070, 1<<30))
		f.Add(append(call(sel, 3, 0, 0, 8), call(sel+1, 0, 70000, 8, 8)...))
	}
	p := newPolicy(f, newEngine(f), PolicySpec{Config: "key=team", MaxInstances: 2})
	v, err := p.Load(context.Background(), testguestsFixture(f, "hostfuzz"), "")
	if err != nil {
		f.Fatal(err)
	}
	pod := NewPodState(&v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"x": "y"}},
		Spec: v1.PodSpec{Tolerations: []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}},
			Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}},
	})
	ni := intree.NewNodeInfo()
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"team": "a"}},
		Spec:   v1.NodeSpec{Taints: []v1.Taint{{Key: "t", Effect: v1.TaintEffectNoSchedule}}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")}, Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")}}})
	f.Fuzz(func(t *testing.T, data []byte) {
		blob := &PolicyCycle{Cycle: hostabi.Cycle{State: append([]byte(nil), data...)}}
		if _, _, err := v.Call(context.Background(), CallFilter, pod, ni, blob, nil); err != nil {
			t.Fatalf("host call trapped or failed: %v", err)
		}
		// The fixture has no filter_nodes: the batch form must be refused
		// cleanly (this once dereferenced a missing export).
		results := make([]Result, 2)
		if _, err := v.CallNodes(context.Background(), CallFilter, pod, []fwk.NodeInfo{ni, ni}, blob, results, nil); err == nil || err.Outcome != OutcomeUnavailable {
			t.Fatalf("batch on a module without filter_nodes: %v", err)
		}
	})
}

func testguestsFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fuzzWaiting is a set of waiting pods for FuzzPlacementFunctions: two
// pods, whose allows and rejects it counts.
type fuzzWaiting struct{ decided int }

func (w *fuzzWaiting) List(sel labels.Selector) [][4]string {
	var out [][4]string
	for _, p := range [][4]string{{"w1", "ns", "a", "n"}, {"w2", "ns", "b", "n"}} {
		if sel.Matches(labels.Set{"gang": p[2]}) {
			out = append(out, p)
		}
	}
	return out
}
func (w *fuzzWaiting) Allow(uid string) bool { w.decided++; return uid == "w1" || uid == "w2" }
func (w *fuzzWaiting) Reject(uid, msg string) bool {
	w.decided++
	return len(msg) <= abi.MaxReasonLength && (uid == "w1" || uid == "w2")
}

// FuzzPlacementFunctions has reserve, permit and unreserve call the counter
// and waiting-pod functions with arbitrary pointers, lengths, keys and
// amounts (the fuzz input). No call may trap or panic the host; every count
// stays within the ABI's bounds; and whatever the guest took, giving the
// pod back (as the plugin does at Unreserve) leaves no count held.
func FuzzPlacementFunctions(f *testing.F) {
	call := func(sel byte, a, b int32, n int64) []byte {
		out := make([]byte, 20)
		out[0] = sel
		binary.LittleEndian.PutUint32(out[4:], uint32(a))
		binary.LittleEndian.PutUint32(out[8:], uint32(b))
		binary.LittleEndian.PutUint64(out[12:], uint64(n))
		return out
	}
	for sel := byte(0); sel < 5; sel++ {
		f.Add(call(sel, 0, 4, 1))
		f.Add(call(sel, -1, -1, -1))
		f.Add(call(sel, 65530, 100, 1<<62))
		f.Add(append(call(sel, 0, 253, abi.MaxCount), call(sel+1, 0, 254, 1)...))
	}
	counters := new(Counters)
	p := newPolicy(f, newEngine(f), PolicySpec{MaxInstances: 1, Counters: counters})
	v, err := p.Load(context.Background(), testguestsFixture(f, "placefuzz"), "")
	if err != nil {
		f.Fatal(err)
	}
	pod := NewPodState(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}})
	ni := intree.NewNodeInfo()
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, kind := range []CallKind{CallReserve, CallPermit, CallUnreserve} {
			pc := &PolicyCycle{Cycle: hostabi.Cycle{State: append([]byte(nil), data...), Waiting: &fuzzWaiting{}}}
			if _, _, err := v.Call(context.Background(), kind, pod, ni, pc, nil); err != nil {
				t.Fatalf("%s trapped or failed: %v", kind, err)
			}
		}
		for k, c := range counters.Counts() {
			if c < 1 || c > abi.MaxCount || len(k) == 0 || len(k) > abi.MaxCounterKeyLen {
				t.Fatalf("count %q = %d, outside the bounds", k, c)
			}
		}
		counters.RollBack("u", 0)
		if got := counters.Counts(); len(got) != 0 || counters.Holders() != 0 {
			t.Fatalf("after giving the pod back: counts %v, %d holders", got, counters.Holders())
		}
	})
}
