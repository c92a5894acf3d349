package host

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// adversaryTimeout is the per-call timeout the adversary runs under.
const adversaryTimeout = 500 * time.Millisecond

// TestAdversaryGuest runs every attack of the adversary test policy
// (plugins-wasm/testdata/adversary), compiled with TinyGo and with Go, in
// Filter, Score, PreEnqueue and PreBind. Each must end within timeout + 10 ms in the expected
// way; a failed call must discard its instance, and the next call must
// succeed on a fresh one.
func TestAdversaryGuest(t *testing.T) {
	e := newEngine(t)
	type want struct {
		outcome Outcome // for failed calls
		or      Outcome // another acceptable outcome, when timing decides
		code    int32   // for calls that return
		detail  string  // in the error or the reason
	}
	cases := map[Toolchain]map[string]want{}
	cases[testguests.TinyGo] = map[string]want{
		"loop":    {outcome: OutcomeTimeout},
		"slow":    {code: abi.CodeSuccess},
		"recurse": {outcome: OutcomeTrap},
		"panic":   {outcome: OutcomeTrap},
		"nil":     {outcome: OutcomeTrap},
		"divide":  {outcome: OutcomeTrap},
		"index":   {outcome: OutcomeTrap},
		"alloc":   {outcome: OutcomeTrap},
		"exit":    {outcome: OutcomeExit, detail: "exit_code(3)"},
		"reason":  {code: abi.CodeUnschedulable},
		"status":  {code: abi.CodeError, detail: "invalid status code 42"},
	}
	cases[testguests.Go] = map[string]want{}
	for k, v := range cases[testguests.TinyGo] {
		cases[testguests.Go][k] = v
	}
	// TinyGo's allocator collects and retries for about 400 ms before it
	// gives up (trap); Go's runtime doubles and copies its stack for about
	// 2 s before it runs out of memory. Either way the call ends by the
	// deadline.
	cases[testguests.TinyGo]["alloc"] = want{outcome: OutcomeTimeout, or: OutcomeTrap}
	cases[testguests.Go]["recurse"] = want{outcome: OutcomeTimeout, or: OutcomeTrap}
	for _, tc := range testguests.Toolchains {
		mod := testguests.PolicyBytes(t, tc, "testdata/adversary")
		for attack, w := range cases[tc] {
			for _, kind := range []CallKind{CallFilter, CallScore, CallPreEnqueue, CallPreBind} {
				t.Run(string(tc)+"/"+attack+"/"+kind.String(), func(t *testing.T) {
					p := newPolicy(t, e, PolicySpec{Name: "adversary", Timeout: adversaryTimeout, PreEnqueueTimeout: adversaryTimeout, MaxInstances: 1, PatchPrefixes: []string{"adversary.example.com/"}})
					v := load(t, p, mod)
					// Each point's attack is picked by its own label.
					label := map[CallKind]string{CallPreEnqueue: "preenqueue-attack", CallPreBind: "prebind-attack"}[kind]
					if label == "" {
						label = "attack"
					}
					pod := NewPodState(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p", Labels: map[string]string{label: attack}}})
					// Every run must end the expected way; the timing claim is
					// checked on all runs together (deadline_test.go). Calls
					// that end well before the deadline need one run.
					runs := 1
					if w.outcome == OutcomeTimeout || w.or == OutcomeTimeout {
						runs = 3
					}
					var o overruns
					calm := NewPodState(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", UID: "q"}})
					node := nodeInfo("n", nil, false)
					if kind == CallPreEnqueue {
						node = nil // the pod only
					}
					for run := 0; run < runs; run++ {
						discarded := v.discarded.Load()
						start := time.Now()
						_, r, err := v.Call(context.Background(), kind, pod, node, new(PolicyCycle), nil)
						elapsed := time.Since(start)
						o.add(max(elapsed, adversaryTimeout), adversaryTimeout)
						if w.outcome != OutcomeOK {
							if err == nil || (err.Outcome != w.outcome && (w.or == OutcomeOK || err.Outcome != w.or)) || !strings.Contains(err.Error(), w.detail) {
								t.Fatalf("got %+v, %v; want outcome %s with %q", r, err, w.outcome, w.detail)
							}
							t.Logf("%s after %s: %v", err.Outcome, elapsed.Round(time.Microsecond), strings.SplitN(err.Error(), "\n", 2)[0])
							if _, inUse := v.PoolStats(); v.discarded.Load() != discarded+1 || inUse != 0 {
								t.Fatalf("after the failed call: %d discarded, inUse=%d; want the instance discarded", v.discarded.Load()-discarded, inUse)
							}
						} else {
							if err != nil || r.Code != w.code || !strings.Contains(r.Reason, w.detail) {
								t.Fatalf("got %+v, %v; want code %d with %q", r, err, w.code, w.detail)
							}
							if len(r.Reason) > MaxReasonLength+200 {
								t.Fatalf("reason of %d bytes reached the host", len(r.Reason))
							}
						}
						// The next call succeeds on a fresh instance, which
						// also stays warm for the next run: a run measures the
						// call, not the instance's creation.
						if _, r, err := v.Call(context.Background(), kind, calm, node, new(PolicyCycle), nil); err != nil || r.Code != abi.CodeSuccess {
							t.Fatalf("next call = %+v, %v; want success", r, err)
						}
					}
					o.check(t, "call ended")
				})
			}
		}
	}
}

// Toolchain shortens testguests.Toolchain in test names.
type Toolchain = testguests.Toolchain
