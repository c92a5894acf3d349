package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestSoak is the load, reload and failover run. Two scheduler replicas
// with leader election schedule SOAK_PODS pods (default 400; `make soak`:
// 2000) onto SOAK_NODES nodes (default 100; `make soak`: 500) under three
// policies, while the placement policy's ConfigMap is rewritten every
// second, alternating good modules (bin-packing, spread) and corrupt bytes,
// and the leader is SIGKILLed a third of the way through the pods.
//
// It requires: every pod bound or carrying a FailedScheduling reason, none
// lost, none scheduled twice; no scheduling cycle failed because of a reload
// (no failed policy call, no missing module in either replica's log); and
// the surviving replica's memory flat across at least 20 applied reloads.
func TestSoak(t *testing.T) {
	nNodes, nPods := envInt("SOAK_NODES", 100), envInt("SOAK_PODS", 400)
	minReloads := envInt("SOAK_RELOADS", 20)
	e := newEnv(t, "soak")
	start := time.Now()

	// Nodes: 40% team a, 40% team b, 20% shared; every tenth in maintenance.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := 0; i < nNodes; i++ {
		labels := map[string]string{}
		switch i % 5 {
		case 0, 1:
			labels["team"] = "a"
		case 2, 3:
			labels["team"] = "b"
		}
		annotations := map[string]string{}
		if i%10 == 9 {
			annotations["maintenance.wasmsched.io/window"] = "CHG-" + strconv.Itoa(i)
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			e.nodeWith(fmt.Sprintf("n-%03d", i), labels, annotations, "8")
		}(i)
	}
	wg.Wait()
	t.Logf("%d nodes created in %s", nNodes, time.Since(start).Round(time.Millisecond))

	e.policyConfigMap("team", module(t, "team-isolation"))
	e.policyConfigMap("maintenance", module(t, "maintenance-avoidance"))
	goodModules := [][]byte{module(t, "bin-packing"), module(t, "spread")}
	e.policyConfigMap("placement", goodModules[0])
	cfg := e.writeConfig(`      - name: team-isolation
        source: `+cmSource(e, "team")+`
      - name: maintenance-avoidance
        source: `+cmSource(e, "maintenance")+`
      - name: placement
        source: `+cmSource(e, "placement")+`
        config: cpu=1
`, `leaderElection: {leaderElect: true, resourceNamespace: kube-system, resourceName: wasmsched-soak, leaseDuration: 4s, renewDeadline: 3s, retryPeriod: 500ms}`)
	logs := []string{filepath.Join(e.dir, "replica-0.log"), filepath.Join(e.dir, "replica-1.log")}
	replicas := []int{e.run(cfg, logs[0]).Process.Pid, e.run(cfg, logs[1]).Process.Pid}
	leader := waitLeader(t, e, logs)
	e.log = logs[leader]
	e.waitLog(`"Policy module active" policy="placement"`, 1, 60*time.Second)
	other := 1 - leader
	t.Logf("replica %d leads", leader)

	// Rewrite the placement ConfigMap every second: good, corrupt, good...
	stop := make(chan struct{})
	var writes, goodWrites, badWrites atomic.Int64
	reloaderDone := make(chan struct{})
	go func() {
		defer close(reloaderDone)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			var b []byte
			if i%2 == 1 {
				b = []byte(fmt.Sprintf("corrupt module %d: not wasm", i))
				badWrites.Add(1)
			} else {
				b = goodModules[(i/2)%2]
				goodWrites.Add(1)
			}
			cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: e.name + "-placement", Namespace: policyNS}, BinaryData: map[string][]byte{"policy.wasm": b}}
			if _, err := client.CoreV1().ConfigMaps(policyNS).Update(context.Background(), cm, metav1.UpdateOptions{}); err == nil {
				writes.Add(1)
			}
		}
	}()

	// Memory of the replica that survives, sampled after each reload it
	// applies (both replicas load every version; only the leader schedules).
	type rssSample struct {
		reloads int
		kb      int64
	}
	var mu sync.Mutex
	var samples []rssSample
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		seen := 0
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			b, _ := os.ReadFile(logs[other])
			if n := strings.Count(string(b), `"Policy module active" policy="placement"`); n > seen {
				seen = n
				if kb := rssKB(replicas[other]); kb > 0 {
					mu.Lock()
					samples = append(samples, rssSample{n, kb})
					mu.Unlock()
				}
			}
		}
	}()

	// Pods: 45% team a, 45% team b, 5% shared pool, 5% team "nobody"
	// (rejected by team-isolation everywhere), created over about 20 s.
	names := make([]string, nPods)
	groups := make([]string, nPods)
	killAt := nPods / 3
	interval := 20 * time.Second / time.Duration(nPods)
	for i := 0; i < nPods; i++ {
		names[i] = fmt.Sprintf("p-%04d", i)
		var labels map[string]string
		switch {
		case i%20 == 0:
			groups[i] = "nobody"
			labels = map[string]string{"team": "nobody"}
		case i%20 == 1:
			groups[i] = "shared"
		case i%2 == 0:
			groups[i] = "a"
			labels = map[string]string{"team": "a"}
		default:
			groups[i] = "b"
			labels = map[string]string{"team": "b"}
		}
		if i == killAt {
			if err := syscall.Kill(replicas[leader], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			t.Logf("killed leader (replica %d) after %d pods, %s into the run", leader, i, time.Since(start).Round(time.Second))
		}
		e.pod(names[i], labels, []string{"100m", "200m", "250m", "500m"}[i%4])
		time.Sleep(interval)
	}
	e.log = logs[other]
	e.waitLogMatch(leaseAcquired(""), 1, 60*time.Second)
	t.Logf("replica %d took over", other)

	// Wait until every pod settled.
	deadline := time.Now().Add(5 * time.Minute)
	var bound, unschedulable, lost []string
	for {
		bound, unschedulable, lost = settle(t, e, names)
		if len(lost) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	settled := time.Since(start)
	// Then keep reloading for minReloads more applied versions: the memory
	// phase, with the workload done so that only reloads change memory.
	base := e.logCount(`"Policy module active" policy="placement"`)
	applied := base
	for applied < base+minReloads && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		applied = e.logCount(`"Policy module active" policy="placement"`)
	}
	close(stop)
	<-reloaderDone
	<-samplerDone
	rejectedLoads := e.logCount(`"Policy module rejected; keeping the last good module"`)

	// Scheduled twice: a pod with Scheduled events naming two nodes.
	twice := scheduledTwice(t, e)

	// Failed cycles: any failed call or cycle without a module, in either log.
	var failed []string
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		for _, f := range failedCycles(string(b)) {
			failed = append(failed, filepath.Base(l)+": "+f)
		}
	}

	var rss []int64
	for _, smp := range samples {
		if smp.reloads > base {
			rss = append(rss, smp.kb)
		}
	}
	t.Logf("SOAK REPORT nodes=%d pods=%d; all pods settled after %s; total %s", nNodes, nPods, settled.Round(time.Second), time.Since(start).Round(time.Second))
	t.Logf("  pods bound:                    %d", len(bound))
	t.Logf("  unschedulable with a reason:   %d", len(unschedulable))
	t.Logf("  lost (neither):                %d", len(lost))
	t.Logf("  scheduled twice:               %d", len(twice))
	t.Logf("  ConfigMap writes:              %d (%d good, %d corrupt)", writes.Load(), goodWrites.Load(), badWrites.Load())
	t.Logf("  reloads applied by survivor:   %d (%d after the pods settled); rejected: %d", applied, applied-base, rejectedLoads)
	t.Logf("  failed cycles from reloads:    %d", len(failed))
	t.Logf("  survivor RSS (MiB) per reload after the pods settled: %s", mib(rss))

	if len(lost) > 0 {
		t.Errorf("%d pods lost (neither bound nor with a FailedScheduling reason), e.g. %v", len(lost), lost[:min(5, len(lost))])
	}
	if len(twice) > 0 {
		t.Errorf("pods scheduled twice: %v", twice)
	}
	if len(failed) > 0 {
		t.Errorf("scheduling cycles failed during reloads: %v", failed)
	}
	if applied-base < minReloads || rejectedLoads == 0 {
		t.Errorf("reloads applied after settling %d (want %d), rejected %d (want > 0)", applied-base, minReloads, rejectedLoads)
	}
	// Expected outcome per group.
	isBound := map[string]bool{}
	for _, n := range bound {
		isBound[n] = true
	}
	for i, n := range names {
		if groups[i] == "nobody" && isBound[n] {
			t.Errorf("%s (team nobody) was bound", n)
		}
		if groups[i] != "nobody" && !isBound[n] {
			t.Errorf("%s (team %s) was not bound: %s", n, groups[i], e.failedScheduling(n))
		}
	}
	for _, n := range unschedulable {
		if msg := e.failedScheduling(n); !strings.Contains(msg, "rejected by WasmPolicy/team-isolation") {
			t.Errorf("%s: FailedScheduling %q does not name team-isolation", n, msg)
		}
	}
	// Memory: no growth trend across the reloads. A replaced version's
	// compiled code is freed RetiredGrace (30 s) after the swap, so up to 30 s
	// of versions are alive at once; beyond that, memory must not grow.
	if len(rss) >= 6 {
		early, late := median(rss[:3]), median(rss[len(rss)-3:])
		t.Logf("  RSS early median %d MiB, late median %d MiB (%+.0f%%)", early/1024, late/1024, 100*float64(late-early)/float64(early))
		if late > early+max(early*15/100, 16*1024) {
			t.Errorf("survivor RSS grew from %d MiB to %d MiB across %d reloads", early/1024, late/1024, len(rss))
		}
	} else {
		t.Errorf("only %d memory samples", len(rss))
	}
}

// failedCycles lists, with counts, the scheduler log lines that mean a
// scheduling cycle failed because of a policy: a failed call, a cycle
// without a module, a module freed under a cycle, an error status.
func failedCycles(log string) []string {
	var out []string
	for _, bad := range []string{`"Policy call failed"`, "policy has no module loaded", "replaced and freed", `"Policy returned an error"`} {
		if n := strings.Count(log, bad); n > 0 {
			out = append(out, fmt.Sprintf("%s ×%d", bad, n))
		}
	}
	return out
}

// nodeWith is env.node with annotations.
func (e *env) nodeWith(name string, labels, annotations map[string]string, cpu string) {
	e.t.Helper()
	l := map[string]string{"e2e": e.name}
	for k, v := range labels {
		l[k] = v
	}
	ctx := context.Background()
	n, err := client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.name + "-" + name, Labels: l, Annotations: annotations}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Error(err)
		return
	}
	res := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")}
	n.Status = v1.NodeStatus{Capacity: res, Allocatable: res}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		e.t.Error(err)
	}
	e.t.Cleanup(func() { _ = client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
}

func waitLeader(t *testing.T, e *env, logs []string) int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for i, l := range logs {
			e.log = l
			if e.logMatchCount(leaseAcquired("")) > 0 {
				return i
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no replica acquired the lease within 60s")
	return -1
}

// waitBound waits until every named pod is bound, and fails the test after
// timeout, saying how many were bound and what happened before.
func waitBound(t *testing.T, e *env, names []string, timeout time.Duration, after string) {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		bound, _, _ := settle(t, e, names)
		if len(bound) == len(names) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pods bound %s after %s", len(bound), len(names), timeout, after)
		}
	}
}

// settle sorts the pods into bound, unschedulable (with a FailedScheduling
// event) and neither, with two List calls.
func settle(t *testing.T, e *env, names []string) (bound, unschedulable, neither []string) {
	ctx := context.Background()
	pods, err := client.CoreV1().Pods(e.name).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := client.EventsV1().Events(e.name).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, ev := range evs.Items {
		failed[ev.Regarding.Name] = true
	}
	node := map[string]string{}
	for _, p := range pods.Items {
		node[p.Name] = p.Spec.NodeName
	}
	for _, n := range names {
		switch {
		case node[n] != "":
			bound = append(bound, n)
		case failed[n]:
			unschedulable = append(unschedulable, n)
		default:
			neither = append(neither, n)
		}
	}
	return bound, unschedulable, neither
}

// scheduledTwice returns pods whose Scheduled events name more than one node.
func scheduledTwice(t *testing.T, e *env) []string {
	evs, err := client.EventsV1().Events(e.name).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Scheduled"})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]map[string]bool{}
	for _, ev := range evs.Items {
		if nodes[ev.Regarding.Name] == nil {
			nodes[ev.Regarding.Name] = map[string]bool{}
		}
		// "Successfully assigned <ns>/<pod> to <node>"
		if i := strings.LastIndex(ev.Note, " to "); i >= 0 {
			nodes[ev.Regarding.Name][ev.Note[i+4:]] = true
		}
	}
	var out []string
	for p, ns := range nodes {
		if len(ns) > 1 {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// rssKB reads a process's resident set size.
func rssKB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb
			}
		}
	}
	return 0
}

func median(xs []int64) int64 {
	s := append([]int64(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func mib(xs []int64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatInt(x/1024, 10)
	}
	return strings.Join(parts, " ")
}
