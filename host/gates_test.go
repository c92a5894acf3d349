package host

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host/internal/hostabi"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// TestGateFunctionEdges runs the hand-written gates fixture: each export
// checks the answers of the gate and patch functions at its extension
// point (NotAvailable elsewhere, BadArgs, NotAllowed, TooLarge) and traps
// on a wrong one. The host's side of the calls is checked here.
func TestGateFunctionEdges(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{PatchPrefixes: []string{"ok.example.com/"}})
	v := load(t, p, testguests.Fixture(t, "gates"))
	if ex := v.Exports(); !ex.Has(CallPreEnqueue) || !ex.Has(CallPreBind) || !ex.Has(CallFilter) || ex.Has(CallScore) {
		t.Fatalf("exports %s", ex)
	}
	pod := NewPodState(st.MakePod().Name("p").UID("p").Obj())
	node := nodeInfo("n", nil, false)
	if _, r, err := v.Call(context.Background(), CallFilter, pod, node, new(PolicyCycle), nil); err != nil || r.Code != abi.CodeSuccess {
		t.Fatalf("filter: %+v %v", r, err)
	}
	pc := new(PolicyCycle)
	_, r, err := v.Call(context.Background(), CallPreEnqueue, NewPodState(pod.Pod), nil, pc, nil)
	if err != nil || r.Code != abi.CodeUnschedulableAndUnresolvable || r.Reason != "gated" {
		t.Fatalf("preenqueue: %+v %v", r, err)
	}
	if !pc.RecheckSet || pc.Recheck != (Recheck{Events: abi.RecheckPodsChange, After: time.Second}) {
		t.Errorf("recheck = %+v, want pods change after 1s (10 ms clamped)", pc.Recheck)
	}
	pc = &PolicyCycle{Cycle: hostabi.Cycle{Policies: EncodeCyclePolicies([][3]string{{"a", "00", "Enforce"}})}}
	if _, r, err := v.Call(context.Background(), CallPreBind, pod, node, pc, nil); err != nil || r.Code != abi.CodeSuccess {
		t.Fatalf("prebind: %+v %v", r, err)
	}
	if pc.Patch.Labels["ok.example.com/a"] != "v1" || pc.Patch.Annotations["ok.example.com/a"] != "not a value" || pc.Patch.Len() != 2 {
		t.Errorf("patch = %+v", pc.Patch.Patch)
	}
	// The first refusal is kept for the report: the 1 MB value.
	if !strings.Contains(pc.Patch.Refused, "exceeds the patch limit") {
		t.Errorf("refused = %q", pc.Patch.Refused)
	}
}

// TestPatchChecksAgreeWithKubernetes holds the ABI's key and label value
// checks (shared by the host and the SDK, which cannot import
// apimachinery) to apimachinery's validation.
func TestPatchChecksAgreeWithKubernetes(t *testing.T) {
	keys := []string{"a", "a/b", "example.com/x", "Example.com/x", "example.com/", "/x", "a/b/c", "x_y.z-1", "-x", "x-", "example..com/x",
		"team.example.com/" + strings.Repeat("n", 63), "team.example.com/" + strings.Repeat("n", 64), strings.Repeat("d", 254) + "/x", "a.b-c.d/e", "é", ""}
	for _, k := range keys {
		want := len(validation.IsQualifiedName(k)) == 0
		if got := abi.QualifiedName(k); got != want {
			t.Errorf("QualifiedName(%q) = %v, apimachinery says %v", k, got, want)
		}
	}
	values := []string{"", "a", "a.b_c-d", "-a", "a-", strings.Repeat("v", 63), strings.Repeat("v", 64), "a b", "ü"}
	for _, v := range values {
		want := len(validation.IsValidLabelValue(v)) == 0
		if got := abi.CheckLabelValue(v); got != want {
			t.Errorf("CheckLabelValue(%q) = %v, apimachinery says %v", v, got, want)
		}
	}
}

// The one rule for a gate's bound (the args' defaulting and the plugin
// apply it too): what the policy sets, else 10ms or its timeout, whichever
// is shorter; a spec that sets none gets it.
func TestPreEnqueueTimeoutRule(t *testing.T) {
	for _, c := range []struct{ timeout, set, want time.Duration }{
		{100 * time.Millisecond, 0, 10 * time.Millisecond},
		{5 * time.Millisecond, 0, 5 * time.Millisecond},
		{100 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond},
	} {
		if got := PreEnqueueTimeout(c.timeout, c.set); got != c.want {
			t.Errorf("PreEnqueueTimeout(%s, %s) = %s, want %s", c.timeout, c.set, got, c.want)
		}
	}
	p, err := newEngine(t).NewPolicy(context.Background(), PolicySpec{Name: "p", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if got := p.timeouts[CallPreEnqueue]; got != DefaultPreEnqueueTimeout {
		t.Errorf("a spec without preEnqueueTimeout gets %s, want %s", got, DefaultPreEnqueueTimeout)
	}
}
