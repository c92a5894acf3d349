//go:build !wasip1

package sdk

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPreEnqueueNative(t *testing.T) {
	RegisterPreEnqueue(func(pod Pod) Status {
		if v, _ := pod.Annotation("approved"); v == "true" {
			return Success()
		}
		Recheck(OnPodUpdate|OnPodsChange, 90*time.Minute)
		return UnschedulableAndUnresolvable("waiting for approval")
	})
	defer RegisterPreEnqueue(nil)
	st, r := RunPreEnqueue(&PodData{Name: "p"})
	if st.Code != CodeUnschedulableAndUnresolvable || st.Reason != "waiting for approval" {
		t.Errorf("status = %+v", st)
	}
	// The delay is clamped to an hour, as the host clamps it.
	if r.On != OnPodUpdate|OnPodsChange || r.After != time.Hour {
		t.Errorf("recheck = %+v, want pod update and pods change after 1h", r)
	}
	st, r = RunPreEnqueue(&PodData{Name: "p", Annotations: map[string]string{"approved": "true"}})
	if !st.IsSuccess() || r.On != OnPodUpdate || r.After != 0 {
		t.Errorf("approved: status %+v, recheck %+v (a gate that does not ask rechecks on pod updates)", st, r)
	}
}

func TestPreBindNative(t *testing.T) {
	var errs []error
	RegisterPreBind(func(pod Pod, node Node) Status {
		zone, _ := node.Label("zone")
		errs = []error{
			SetPodAnnotation("team.example.com/zone", zone),
			SetPodLabel("team.example.com/placed", "yes"),
			SetPodLabel("kubernetes.io/hostname", "x"),
			SetPodLabel("team.example.com/bad", "not a value"),
		}
		var names []string
		for _, p := range CyclePolicies() {
			names = append(names, p.Name+"="+p.SHA256+"/"+p.Mode)
		}
		if err := SetPodAnnotation("team.example.com/policies", strings.Join(names, ",")); err != nil {
			return Error(err.Error())
		}
		return Success()
	})
	defer RegisterPreBind(nil)
	SetPatchPrefixes("team.example.com/")
	SetCyclePolicies([]CyclePolicy{{"a", "01", "Enforce"}, {"b", "02", "Audit"}})
	defer SetPatchPrefixes()
	defer SetCyclePolicies(nil)
	st, p := RunPreBind(&PodData{Name: "p"}, &NodeData{Name: "n", Labels: map[string]string{"zone": "z1"}})
	if !st.IsSuccess() {
		t.Fatalf("status %+v", st)
	}
	if p.Annotations["team.example.com/zone"] != "z1" || p.Labels["team.example.com/placed"] != "yes" || p.Annotations["team.example.com/policies"] != "a=01/Enforce,b=02/Audit" || len(p.Labels)+len(p.Annotations) != 3 {
		t.Errorf("patch = %+v", p)
	}
	want := []error{nil, nil, ErrNotAllowed, ErrInvalid}
	for i := range want {
		if !errors.Is(errs[i], want[i]) {
			t.Errorf("write %d: err %v, want %v", i, errs[i], want[i])
		}
	}
	// Outside PreBind nothing is written.
	if err := SetPodLabel("team.example.com/x", "y"); !errors.Is(err, ErrNotInPreBind) {
		t.Errorf("outside PreBind: %v", err)
	}
}

func TestPatchLimits(t *testing.T) {
	var last error
	n := 0
	RegisterPreBind(func(Pod, Node) Status {
		for i := 0; i < 10000; i++ {
			if last = SetPodAnnotation("t.example.com/k"+itoaInt(i), "v"); last != nil {
				break
			}
			n++
		}
		return Success()
	})
	defer RegisterPreBind(nil)
	SetPatchPrefixes("t.example.com/")
	defer SetPatchPrefixes()
	_, p := RunPreBind(&PodData{}, &NodeData{})
	if n != 64 || !errors.Is(last, ErrTooLarge) || len(p.Annotations) != 64 {
		t.Errorf("wrote %d keys (patch %d), last error %v; want 64 then ErrTooLarge", n, len(p.Annotations), last)
	}
}

// A delay shorter than a millisecond (a window ending now) still asks for
// a recheck: the host clamps it to a second, rather than reading 0 as no
// delay at all.
func TestRecheckMillis(t *testing.T) {
	for _, c := range []struct {
		after time.Duration
		want  int32
	}{{0, 0}, {-time.Second, 0}, {time.Microsecond, 1}, {time.Millisecond, 1}, {1500 * time.Microsecond, 2}, {2 * time.Hour, 3600000}} {
		if got := recheckMillis(c.after); got != c.want {
			t.Errorf("recheckMillis(%s) = %d, want %d", c.after, got, c.want)
		}
	}
	RegisterPreEnqueue(func(Pod) Status { Recheck(OnPodUpdate, 300*time.Microsecond); return UnschedulableAndUnresolvable("x") })
	defer RegisterPreEnqueue(nil)
	if _, r := RunPreEnqueue(&PodData{}); r.After != time.Second {
		t.Errorf("a 300µs delay: recheck after %s, want 1s", r.After)
	}
}
