package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gangLabels are the labels of a member of gang name with min-count min.
func gangLabels(name string, min int) map[string]string {
	return map[string]string{"gang.wasmsched.io/name": name, "gang.wasmsched.io/min-count": fmt.Sprint(min)}
}

// newGangEnv runs the gang example with config and maxPermitWait on one
// node g1 with cpu.
func newGangEnv(t *testing.T, name, cpu, config, maxPermitWait string) *env {
	e := newEnv(t, name)
	e.node("g1", nil, cpu)
	e.policyConfigMap("gang", module(t, "gang"))
	e.startScheduler(fmt.Sprintf("      - name: gang\n        source: %s\n        config: %s\n        maxPermitWait: %s\n", cmSource(e, "gang"), config, maxPermitWait), "gang")
	return e
}

// unbound lists the pods of names that are not bound.
func (e *env) unbound(names []string) []string {
	var out []string
	for _, n := range names {
		p, err := client.CoreV1().Pods(e.name).Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		if p.Spec.NodeName == "" {
			out = append(out, n)
		}
	}
	return out
}

// The gang example (ABI v4 Permit, Reserve, Unreserve, PostFilter) on the
// real control plane: a gang of 4 with min-count 4 on a node with room for
// 3 stays pending, all 4, each with a message naming the gang and the
// count; once a node is added, all 4 are bound within seconds.
func TestGangWaitsForItsMembers(t *testing.T) {
	e := newGangEnv(t, "gang", "3", "timeout=60s", "2m")

	names := []string{"m1", "m2", "m3", "m4"}
	for _, n := range names {
		e.pod(n, gangLabels("train", 4), "900m")
	}
	// Every member is told, in its FailedScheduling event, which gang it
	// waits for and how many members were reserved.
	count := regexp.MustCompile(`gang train: member m\d fits no node; \d of 4 members reserved`)
	for _, n := range names {
		note := e.waitEvent(e.name, n, "FailedScheduling", "gang train")
		if !count.MatchString(note) {
			t.Errorf("%s: FailedScheduling %q does not name the gang and the count", n, note)
		}
	}
	// Still all pending a while later: no member is bound alone.
	time.Sleep(3 * time.Second)
	if left := e.unbound(names); len(left) != 4 {
		t.Fatalf("with room for 3 of a gang of 4, only %v are pending: a member was bound without its gang", left)
	}

	added := time.Now()
	e.node("g2", nil, "3")
	deadline := added.Add(60 * time.Second)
	for len(e.unbound(names)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%v not bound 60s after the node was added; events of m1: %v", e.unbound(names), podEvents(e.name, "m1"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(added)
	t.Logf("all 4 members bound %s after the node was added", took.Round(time.Millisecond))
	if took > 30*time.Second {
		t.Errorf("the gang took %s to bind once a node was added, want seconds (kube-scheduler's backoff is at most 10s)", took)
	}
}

// A gang whose members never all arrive: each waiting member is rejected
// at the Permit timeout, nothing is bound, and when the placements are
// undone the policy holds no count (the scheduler logs podsHolding=0).
func TestGangTimeoutReleases(t *testing.T) {
	e := newGangEnv(t, "gangtimeout", "4", "timeout=3s", "1m")
	names := []string{"e1", "e2"}
	for _, n := range names {
		e.pod(n, gangLabels("eval", 3), "100m")
	}
	// The first member to time out is rejected for its timeout, and its
	// unreserve releases the other, naming the gang: both stay pending.
	timedOut := regexp.MustCompile(`rejected due to timeout after waiting 3s at plugin WasmPolicy`)
	deadline := time.Now().Add(30 * time.Second)
	for !slices.ContainsFunc(append(eventNotes(e.name, "e1", "", "FailedScheduling"), eventNotes(e.name, "e2", "", "FailedScheduling")...), timedOut.MatchString) {
		if time.Now().After(deadline) {
			t.Fatalf("no member rejected at its Permit timeout within 30s; events: %v %v", podEvents(e.name, "e1"), podEvents(e.name, "e2"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, n := range names {
		e.waitEvent(e.name, n, "FailedScheduling", "WasmPolicy")
	}
	e.waitLogMatch(regexp.MustCompile(`"Placement undone; gave back the pod's counts" pod="gangtimeout/e\d" policy="gang" .*podsHolding=0`), 1, 30*time.Second)
	if left := e.unbound(names); len(left) != 2 {
		t.Fatalf("a member of an incomplete gang was bound: pending %v", left)
	}
}
