package host

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

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
	pod := NewPodState(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"}})
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

// TestPreEnqueueTimeout: preenqueue runs under its own, tighter timeout
// (it sits on the scheduling queue's path), and ends within it + 10 ms.
func TestPreEnqueueTimeout(t *testing.T) {
	const tight = 20 * time.Millisecond
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			p := newPolicy(t, newEngine(t), PolicySpec{Timeout: time.Second, PreEnqueueTimeout: tight, MaxInstances: 1})
			v := load(t, p, testguests.PolicyBytes(t, tc, "testdata/adversary"))
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p", Labels: map[string]string{"preenqueue-attack": "loop"}}}
			calm := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", UID: "q"}}
			var o overruns
			for i := 0; i < deadlineRuns; i++ {
				start := time.Now()
				_, _, err := v.Call(context.Background(), CallPreEnqueue, NewPodState(pod), nil, new(PolicyCycle), nil)
				o.add(time.Since(start), tight)
				if err == nil || err.Outcome != OutcomeTimeout {
					t.Fatalf("run %d: %v, want a timeout", i, err)
				}
				// A fresh instance is ready for the next run, and calls pass.
				if _, r, err := v.Call(context.Background(), CallPreEnqueue, NewPodState(calm), nil, new(PolicyCycle), nil); err != nil || r.Code != abi.CodeSuccess {
					t.Fatalf("next call: %+v %v", r, err)
				}
			}
			o.check(t, "preenqueue ended")
		})
	}
}

// TestPreBindPatchAttacks: a 10 MB annotation, 10,000 keys and a key
// outside the allowed prefixes are refused without harm, with a reason the
// plugin reports, and each call ends well within its timeout. The 64 keys
// that fit are kept. In preenqueue the same writes find no patch
// (NotAvailable) and end as fast.
func TestPreBindPatchAttacks(t *testing.T) {
	const timeout = 200 * time.Millisecond
	for _, tc := range testguests.Toolchains {
		mod := testguests.PolicyBytes(t, tc, "testdata/adversary")
		p := newPolicy(t, newEngine(t), PolicySpec{Timeout: timeout, PreEnqueueTimeout: timeout, MaxInstances: 1, PatchPrefixes: []string{"adversary.example.com/"}})
		v := load(t, p, mod)
		for _, c := range []struct {
			kind    CallKind
			attack  string
			code    int32
			keys    int
			refused string
			reason  string
		}{
			{CallPreBind, "hugepatch", abi.CodeSuccess, 0, "exceeds the patch limit", ""},
			{CallPreBind, "keys", abi.CodeSuccess, abi.MaxPatchKeys, "exceed 64 keys", ""},
			{CallPreBind, "outside", abi.CodeError, 0, `label key "kubernetes.io/hostname" is outside the policy's patchPrefixes ["adversary.example.com/"]`, "outside the policy's patchPrefixes"},
			{CallPreBind, "", abi.CodeSuccess, 1, "", ""},
			{CallPreEnqueue, "hugepatch", abi.CodeSuccess, 0, "", ""},
			{CallPreEnqueue, "keys", abi.CodeSuccess, 0, "", ""},
			{CallPreEnqueue, "outside", abi.CodeError, 0, "", "pod patches are written in PreBind only"},
		} {
			t.Run(string(tc)+"/"+c.kind.String()+"/"+c.attack, func(t *testing.T) {
				pod := NewPodState(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p", Labels: map[string]string{"preenqueue-attack": c.attack, "prebind-attack": c.attack}}})
				node := nodeInfo("n", nil, false)
				if c.kind == CallPreEnqueue {
					node = nil
				}
				for run := 0; run < 3; run++ { // the second and third on a warm instance
					pc := new(PolicyCycle)
					start := time.Now()
					_, r, err := v.Call(context.Background(), c.kind, pod, node, pc, nil)
					if elapsed := time.Since(start); elapsed > timeout+worstOverrunMax {
						t.Errorf("run %d took %s", run, elapsed)
					}
					if err != nil || r.Code != c.code || pc.Patch.Len() != c.keys || !strings.Contains(pc.Patch.Refused, c.refused) || c.refused == "" && pc.Patch.Refused != "" {
						t.Fatalf("run %d: %+v %v, patch of %d keys, refused %q; want code %d, %d keys, refused %q", run, r, err, pc.Patch.Len(), pc.Patch.Refused, c.code, c.keys, c.refused)
					}
					if !strings.Contains(r.Reason, c.reason) {
						t.Errorf("reason %q does not say what the guest saw (%q)", r.Reason, c.reason)
					}
				}
			})
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
