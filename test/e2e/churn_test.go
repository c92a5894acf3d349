package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmsched/wasmsched/internal/controlplane"
	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
)

// TestPolicyObjectChurn creates and deletes a policy object CHURN_CYCLES
// times (default 50) while CHURN_PODS pods (default 2000) schedule, next to
// a cluster policy that stays. The churned policies (maintenance-avoidance,
// bin-packing, spread in turn) admit every pod of the run, so the outcome
// of each pod is known: bound, or (team "nobody") rejected by the policy
// that stays. The pods are created first behind a scheduling gate, and
// released when the churn starts.
//
// It requires: no pod lost, none scheduled twice, no failed policy call or
// cycle without a module in the log. Then memory: once the pods have
// settled and the churned policies are closed, the scheduler's resident
// memory is measured, the churn runs CHURN_CYCLES times more, and once
// those are closed the memory must be back within 10% of the first
// measurement. Both measurements are taken in the same state (the same
// pods bound, no policy loading), so the difference is what the churn left
// behind, not what the pods cost.
func TestPolicyObjectChurn(t *testing.T) {
	nPods, cycles := envInt("CHURN_PODS", 2000), envInt("CHURN_CYCLES", 50)
	ctx := context.Background()
	e := newEnv(t, "churn")
	for i := 0; i < 40; i++ {
		labels := map[string]string{}
		switch i % 5 {
		case 0, 1:
			labels["team"] = "a"
		case 2, 3:
			labels["team"] = "b"
		}
		e.nodeWith(fmt.Sprintf("n-%02d", i), labels, nil, "64")
	}
	e.policyConfigMap("team", module(t, "team-isolation"))
	churned := []string{"maintenance-avoidance", "bin-packing", "spread"}
	for _, m := range churned {
		e.policyConfigMap(m, module(t, m))
	}
	path := e.objectSchedulerConfig("", e.name, "leaderElection: {leaderElect: false}")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A short grace, so that the retired policies are closed soon after
	// the churn; cycles here take milliseconds.
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), "      policyObjects:", "      retiredGrace: 2s\n      policyObjects:", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	e.log = filepath.Join(e.dir, "kube-scheduler.log")
	e.sched = e.run(path, e.log)
	e.waitLog(`"Starting Kubernetes Scheduler"`, 1, 60*time.Second)
	stay := e.name + "-team"
	t.Cleanup(func() { deleteObject(t, policyv1alpha1.ClusterSchedulingPoliciesResource, "", stay) })
	e.apply(e.clusterPolicy(stay, "key=team", ""))
	waitReady(t, "", stay, 1, metav1.ConditionTrue, policyv1alpha1.ReasonLoaded)

	// Pods are created faster than the shared client's QPS allows.
	cfg := cp.RestConfig(controlplane.AdminUser)
	cfg.QPS, cfg.Burst = 2000, 2000
	fast, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, nPods)
	labels := make([]map[string]string, nPods)
	nobody := map[string]bool{}
	for i := range names {
		names[i] = fmt.Sprintf("p-%04d", i)
		switch {
		case i%20 == 0:
			labels[i] = map[string]string{"team": "nobody"}
			nobody[names[i]] = true
		case i%20 == 1: // shared pool
		case i%2 == 0:
			labels[i] = map[string]string{"team": "a"}
		default:
			labels[i] = map[string]string{"team": "b"}
		}
	}
	start := time.Now()
	parallel(nPods, func(i int) {
		p := e.appPod(e.name, names[i], e.name, labels[i], "10m", "16Mi").SchedulingGates([]string{"wasmsched.io/churn"}).Obj()
		if _, err := fast.CoreV1().Pods(e.name).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Error(err)
		}
	})
	t.Logf("%d gated pods created in %s", nPods, time.Since(start).Round(time.Millisecond))

	// The churn, while the gates come off and the pods schedule.
	churn := func(from int) {
		for i := from; i < from+cycles; i++ {
			e.churnOnce(churned[i%len(churned)], i)
		}
	}
	churnDone := make(chan struct{})
	go func() {
		defer close(churnDone)
		churn(0)
	}()
	released := time.Now()
	parallel(nPods, func(i int) {
		patch := []byte(`{"spec":{"schedulingGates":null}}`)
		if _, err := fast.CoreV1().Pods(e.name).Patch(ctx, names[i], types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Error(err)
		}
	})
	var bound, unschedulable, lost []string
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
		bound, unschedulable, lost = settle(t, e, names)
		if len(lost) == 0 || time.Now().After(deadline) {
			break
		}
	}
	settled := time.Since(released)
	<-churnDone
	churnTook := time.Since(released)

	// Memory: the retired policies close after the grace (2 s) and the
	// scheduler then returns their memory to the OS (within 10 s of a
	// close); measure, churn as much again with the pods settled, and
	// measure again once those are closed too.
	closedRe := regexp.MustCompile(`"Retired policy closed: its instances and compiled code are freed" policy="` + regexp.QuoteMeta(e.name) + `-churn-`)
	released2 := regexp.MustCompile(`"Returned the memory of closed policies to the operating system"`)
	e.waitLogMatch(closedRe, cycles, time.Minute)
	e.waitLogMatch(released2, e.logMatchCount(released2)+1, time.Minute)
	before := e.schedulerRSS()
	beforeParts := procStatus(e.sched.Process.Pid, "RssAnon", "RssFile")
	churn(cycles)
	e.waitLogMatch(closedRe, 2*cycles, time.Minute)
	var after int64
	back := time.Now()
	for deadline := back.Add(30 * time.Second); ; {
		if after = e.schedulerRSS(); after <= before+before/10 || time.Now().After(deadline) {
			break
		}
	}
	afterParts := procStatus(e.sched.Process.Pid, "RssAnon", "RssFile")

	twice := scheduledTwice(t, e)
	log := readLog(e)
	failed := failedCycles(log)
	created := strings.Count(log, `"Policy object active" object="clusterschedulingpolicy/`+e.name+`-churn-`)
	deleted := strings.Count(log, `"Policy object deleted; its policy no longer applies" object="clusterschedulingpolicy/`+e.name+`-churn-`)
	closed := e.logMatchCount(closedRe)
	t.Logf("CHURN REPORT pods=%d, policy objects created and deleted %d times while they schedule, then %d times more", nPods, cycles, cycles)
	t.Logf("  pods settled %s after release; churn done after %s", settled.Round(time.Millisecond), churnTook.Round(time.Millisecond))
	t.Logf("  bound %d, unschedulable with a reason %d, lost %d, scheduled twice %d", len(bound), len(unschedulable), len(lost), len(twice))
	t.Logf("  churned policies active %d, deleted %d, closed %d; failed calls or cycles: %v", created, deleted, closed, failed)
	t.Logf("  scheduler RSS before the second churn %d MiB, after %d MiB (%+.1f%%, back %s after the last close); anonymous %d → %d MiB, file-backed %d → %d MiB",
		before/1024, after/1024, 100*float64(after-before)/float64(before), time.Since(back).Round(100*time.Millisecond),
		beforeParts[0]/1024, afterParts[0]/1024, beforeParts[1]/1024, afterParts[1]/1024)

	if len(lost) > 0 {
		t.Errorf("%d pods lost, e.g. %v", len(lost), lost[:min(5, len(lost))])
	}
	if len(twice) > 0 {
		t.Errorf("pods scheduled twice: %v", twice)
	}
	if len(failed) > 0 {
		t.Errorf("failed policy calls or cycles: %v", failed)
	}
	for _, n := range bound {
		if nobody[n] {
			t.Errorf("%s (team nobody) was bound", n)
		}
	}
	if want := nPods / 20; len(unschedulable) != want {
		t.Errorf("%d pods unschedulable, want the %d of team nobody", len(unschedulable), want)
	}
	if want := 2 * cycles; created != want || deleted != want || closed != want {
		t.Errorf("churned policies: %d active, %d deleted, %d closed; want %d each", created, deleted, closed, want)
	}
	if after > before+before/10 {
		t.Errorf("scheduler RSS %d MiB after the churn, %d MiB before: more than 10%% higher", after/1024, before/1024)
	}
}

// churnOnce creates a cluster policy running module m, waits until it
// serves, deletes it and waits until it no longer applies.
func (e *env) churnOnce(m string, i int) {
	e.t.Helper()
	name := fmt.Sprintf("%s-churn-%d", e.name, i)
	e.apply(fmt.Sprintf(`apiVersion: policy.wasmsched.io/v1alpha1
kind: ClusterSchedulingPolicy
metadata: {name: %s}
spec:
  source: %s
  failurePolicy: Ignore
  profiles: [%s]
`, name, cmSource(e, m), e.name))
	e.waitLog(`"Policy object active" object="clusterschedulingpolicy/`+name+`"`, 1, 30*time.Second)
	deleteObject(e.t, policyv1alpha1.ClusterSchedulingPoliciesResource, "", name)
	e.waitLog(`"Policy object deleted; its policy no longer applies" object="clusterschedulingpolicy/`+name+`"`, 1, 30*time.Second)
}

// schedulerRSS is the median of five samples of the scheduler's resident
// memory, in KiB, half a second apart.
func (e *env) schedulerRSS() int64 {
	var xs []int64
	for i := 0; i < 5; i++ {
		xs = append(xs, rssKB(e.sched.Process.Pid))
		time.Sleep(500 * time.Millisecond)
	}
	return median(xs)
}

// parallel runs fn(0..n-1) on 16 goroutines.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// procStatus reads fields (in KiB) of /proc/PID/status, 0 when missing.
func procStatus(pid int, fields ...string) []int64 {
	out := make([]int64, len(fields))
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		for i, f := range fields {
			if rest, ok := strings.CutPrefix(line, f+":"); ok {
				var kb int64
				fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
				out[i] = kb
			}
		}
	}
	return out
}
