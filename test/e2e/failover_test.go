package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Two scheduler replicas share a Lease; the leader is killed mid-workload.
// The other replica takes over and every pod ends bound (once) or with a
// FailedScheduling reason: none is left Pending silently.
func TestLeaderFailover(t *testing.T) {
	e := newEnv(t, "failover")
	e.node("pay-1", map[string]string{"team": "payments"}, "8")
	e.node("pay-2", map[string]string{"team": "payments"}, "8")
	e.node("shared-1", nil, "8")
	e.policyConfigMap("team", module(t, "team-isolation"))
	e.policyConfigMap("placement", module(t, "spread"))
	// kube-scheduler's bootstrap RBAC lets system:kube-scheduler take the
	// "kube-scheduler" Lease in kube-system; only this test elects a leader.
	cfg := e.writeConfig(`      - name: team-isolation
        source: `+cmSource(e, "team")+`
        config: key=team
      - name: placement
        source: `+cmSource(e, "placement")+`
        config: cpu=1
`, `leaderElection: {leaderElect: true, resourceNamespace: kube-system, resourceName: kube-scheduler, leaseDuration: 4s, renewDeadline: 3s, retryPeriod: 500ms}`)
	logs := []string{filepath.Join(e.dir, "replica-0.log"), filepath.Join(e.dir, "replica-1.log")}
	r0 := e.run(cfg, logs[0])
	r1 := e.run(cfg, logs[1])
	procs := []*struct{ pid int }{{r0.Process.Pid}, {r1.Process.Pid}}

	leader := -1
	deadline := time.Now().Add(60 * time.Second)
	for leader < 0 && time.Now().Before(deadline) {
		for i, l := range logs {
			e.log = l
			if e.logMatchCount(leaseAcquired("")) > 0 {
				leader = i
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if leader < 0 {
		t.Fatal("no replica acquired the lease within 60s")
	}
	e.log = logs[leader]
	e.waitLog(`"Policy module active" policy="placement"`, 1, 60*time.Second)
	t.Logf("replica %d leads", leader)

	var names []string
	for i := 0; i < 24; i++ {
		name := fmt.Sprintf("p-%02d", i)
		labels := map[string]string{"team": "payments"}
		switch i % 4 {
		case 1:
			labels = nil // shared pool
		case 3:
			labels = map[string]string{"team": "nobody"} // never schedulable
		}
		if i == 8 {
			// Kill the leader mid-workload, without a chance to release the lease.
			if err := syscall.Kill(procs[leader].pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			t.Logf("killed replica %d after %d pods", leader, i)
		}
		e.pod(name, labels, "100m")
		names = append(names, name)
		time.Sleep(50 * time.Millisecond)
	}

	other := 1 - leader
	e.log = logs[other]
	e.waitLogMatch(leaseAcquired(""), 1, 60*time.Second)
	t.Logf("replica %d took over", other)

	// Every pod ends bound or rejected with a reason.
	deadline = time.Now().Add(90 * time.Second)
	var pending []string
	for {
		pending = pending[:0]
		for _, n := range names {
			p, err := client.CoreV1().Pods(e.name).Get(context.Background(), n, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Spec.NodeName == "" && e.failedScheduling(n) == "" {
				pending = append(pending, n)
			}
		}
		if len(pending) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(pending) > 0 {
		t.Fatalf("pods left Pending without a reason: %v", pending)
	}
	for i, n := range names {
		p, _ := client.CoreV1().Pods(e.name).Get(context.Background(), n, metav1.GetOptions{})
		node := strings.TrimPrefix(p.Spec.NodeName, e.name+"-")
		switch i % 4 {
		case 3:
			if node != "" || !strings.Contains(e.failedScheduling(n), "rejected by WasmPolicy/team-isolation") {
				t.Errorf("%s: node %q, reason %q", n, node, e.failedScheduling(n))
			}
		case 1:
			if node != "shared-1" {
				t.Errorf("%s landed on %q, want shared-1", n, node)
			}
		default:
			if node != "pay-1" && node != "pay-2" {
				t.Errorf("%s landed on %q, want a payments node", n, node)
			}
		}
	}
}
