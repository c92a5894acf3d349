package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/internal/testguests"
)

// TestBadPolicyIsContained is the bad-policy promise end to end, as a
// tenant boundary: one team's policy loops on its own pods (the adversary
// test policy, on pods labelled attack=loop; timeout 100ms, failurePolicy
// Fail, budget and breaker at their defaults) next to team-isolation, in
// the cluster's one scheduler. Runs with and without 5 looping pods
// (created first, before any ordinary pod) alternate, each with a fresh
// scheduler; in every run the ordinary pods are all bound, none twice,
// none rejected, and the median of the paired throughput ratios is at
// least 80%. The looping pods (5 distinct inputs, the worst
// case for the quarantine) each cost one timed-out cycle, stay pending
// with a reason that names the policy, the timeout, the quarantine and
// the fix, and requeues are answered from the quarantine without calling
// the guest; the breaker stays closed. A module that fails on most pods
// still opens the breaker, and the fixed module closes it and binds the
// looping pods, without a restart. TENANT_NODES, TENANT_PODS and
// TENANT_PAIRS size it (make soak runs it at full size).
func TestBadPolicyIsContained(t *testing.T) {
	nodes, pods, pairs := envInt("TENANT_NODES", 200), envInt("TENANT_PODS", 500), envInt("TENANT_PAIRS", 3)
	const attackers = 5
	e := newEnv(t, "badpolicy")
	parallel16(nodes, func(i int) { e.node(fmt.Sprintf("n-%03d", i), nil, "16") })

	// The adversary is team-b's policy: it loops on attack=loop pods and
	// passes the others. It is pushed gzipped, as large modules are.
	e.policyConfigMap("guard", gzipped(t, module(t, "testdata/adversary")))
	e.policyConfigMap("teams", module(t, "team-isolation"))
	port := freePort(t)
	cfg := e.writeConfig(`      - name: teams
        source: `+cmSource(e, "teams")+`
      - name: guard
        source: `+cmSource(e, "guard")+`
        timeout: 100ms
        failurePolicy: Fail
`, "leaderElection: {leaderElect: false}")
	start := func(run string) {
		e.stopScheduler()
		e.log = filepath.Join(e.dir, run+".log")
		e.sched = e.runArgs(e.log, "--config", cfg, "--secure-port", fmt.Sprint(port), "--bind-address", "127.0.0.1",
			"--authorization-always-allow-paths", "/metrics,/healthz", "-v=2", "--log-flush-frequency=100ms")
		e.waitLog(`"Policy module active" policy="guard"`, 1, 60*time.Second)
		e.waitLog(`"Policy module active" policy="teams"`, 1, 60*time.Second)
		e.waitLog(`"Starting Kubernetes Scheduler"`, 1, 60*time.Second)
	}
	metrics := func() string { return scrape(t, port) }
	stopped := func(m, reason string) float64 {
		return counter(m, "wasmsched_policy_stopped_cycles_total", `policy="guard",reason="`+reason+`"`)
	}
	attack := func(run string, i int) string { return fmt.Sprintf("%s-attack-%d", run, i) }

	var all []string
	// run creates n ordinary pods named prefix-NNN (16 at a time; with
	// attackers, the looping pods once a fifth of them exist) on a fresh
	// scheduler, and returns how long it took from the first create until
	// the last ordinary pod was bound (its Scheduled event's time).
	run := func(prefix string, n int, withAttack bool, attackAt int) time.Duration {
		start(prefix)
		var names []string
		for i := 0; i < n; i++ {
			names = append(names, fmt.Sprintf("%s-%03d", prefix, i))
		}
		all = append(all, names...)
		begin := time.Now()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for i, name := range names {
			if i == attackAt && withAttack {
				for k := 0; k < attackers; k++ {
					// Distinct inputs: each looping pod is its own template.
					e.pod(attack(prefix, k), map[string]string{"attack": "loop", "app": fmt.Sprintf("loop-%d", k)}, "100m")
				}
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				e.pod(name, map[string]string{"app": "web"}, "100m")
			}()
		}
		wg.Wait()
		for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
			bound, unschedulable, neither := settle(t, e, names)
			if len(bound) == n {
				// Not one ordinary pod was turned away meanwhile (by the
				// breaker, or by the looping pods' quarantine).
				if rejected := failedSchedulingOf(t, e.name, names); len(rejected) > 0 {
					t.Errorf("%s: %d ordinary pods were rejected beside the looping pods, e.g. %s", prefix, len(rejected), rejected[0])
				}
				m := metrics()
				t.Logf("%s: calls that got no CPU in time: PreEnqueue %v, Filter %v; pods retried for it %d", prefix,
					counter(m, "wasmsched_policy_evaluations_total", `extension_point="PreEnqueue",policy="guard",result="NotCalled"`),
					counter(m, "wasmsched_policy_evaluations_total", `extension_point="Filter",policy="guard",result="NotCalled"`),
					e.logCount("Pod not evaluated by every policy for lack of CPU"))
				return lastScheduled(t, e, names).Sub(begin)
			}
			if time.Now().After(deadline) {
				for _, name := range append(unschedulable, neither...) {
					t.Logf("%s: events %v", name, podEvents(e.name, name))
				}
				t.Fatalf("%s: %d of %d pods bound after 3 minutes (unschedulable %v, neither %v)", prefix, len(bound), n, unschedulable, neither)
			}
		}
	}

	var ratios []float64
	var last string
	var base time.Duration
	for i := 0; i < pairs; i++ {
		base = run(fmt.Sprintf("base%d", i), pods, false, -1)
		last = fmt.Sprintf("load%d", i)
		withBad := run(last, pods, true, pods/5)
		ratios = append(ratios, base.Seconds()/withBad.Seconds())
		m := metrics()
		t.Logf("pair %d: %d pods on %d nodes in %s without looping pods, %s with 5: %.0f%%; timed-out cycles %v, answered from quarantine %v",
			i, pods, nodes, base.Round(time.Millisecond), withBad.Round(time.Millisecond), 100*ratios[i], stopped(m, "Timeout"), stopped(m, "Quarantined"))
		// Each looping pod costs at most one timed-out cycle: then it is
		// quarantined. (A distinct input each: 5 cycles.)
		if got := stopped(m, "Timeout"); got > attackers {
			t.Errorf("pair %d: %v timed-out cycles for %d looping pods, want at most one each", i, got, attackers)
		}
		if !strings.Contains(m, `wasmsched_policy_circuit_breaker_state{policy="guard",state="closed"} 1`) {
			t.Errorf("pair %d: the breaker left closed for 5 looping pods among %d: %s", i, pods, grep(m, "circuit_breaker_state"))
		}
		for k := 0; k < attackers; k++ {
			e.deletePod(attack(last, k)) // the next run's scheduler starts clean
		}
	}
	sorted := append([]float64(nil), ratios...)
	sort.Float64s(sorted)
	median := sorted[len(sorted)/2]
	t.Logf("throughput with 5 looping pods / without, per pair: %v; median %.0f%%", roundAll(ratios), 100*median)
	if median < 0.8 {
		t.Errorf("median throughput ratio %.0f%%, want at least 80%%", 100*median)
	}

	// A burst of looping pods before any other pod reached the policy
	// (it has answered none): once that opened the breaker, and for a
	// second it rejected every ordinary pod. The quarantine holds them;
	// no ordinary pod is rejected (run checks), and the breaker stays
	// closed.
	last = "burst"
	burst := run(last, pods, true, 0)
	m0 := metrics()
	t.Logf("looping pods first: %d pods in %s (the last run without them: %s, %.0f%%); timed-out cycles %v", pods, burst.Round(time.Millisecond), base.Round(time.Millisecond), 100*base.Seconds()/burst.Seconds(), stopped(m0, "Timeout"))
	if !strings.Contains(m0, `wasmsched_policy_circuit_breaker_state{policy="guard",state="closed"} 1`) {
		t.Errorf("the breaker left closed for 5 looping pods that came first: %s", grep(m0, "circuit_breaker_state"))
	}

	// The looping pods of the last run are told why, by whom, and what to do.
	for k := 0; k < attackers; k++ {
		note := e.rejected(attack(last, k))
		for _, want := range []string{"WasmPolicy/guard", "timeout of 100ms", "quarantined", "fix the policy"} {
			if !strings.Contains(note, want) {
				t.Errorf("%s: FailedScheduling %q does not say %q", attack(last, k), note, want)
			}
		}
	}
	t.Logf("a looping pod's event: %s", e.failedScheduling(attack(last, 0)))

	// Requeues (pod deletions, a new node) bring the looping pods back:
	// they are answered from their quarantine, never by the guest.
	m := metrics()
	timeouts0, quarantined0 := stopped(m, "Timeout"), stopped(m, "Quarantined")
	for i := 0; i < 6; i++ {
		e.deletePod(all[0])
		all = all[1:]
		if i == 3 {
			e.node("late", nil, "16")
		}
		time.Sleep(300 * time.Millisecond)
	}
	m = metrics()
	t.Logf("6 pod deletions and a new node: cycles answered from quarantine %v, timed out %v", stopped(m, "Quarantined")-quarantined0, stopped(m, "Timeout")-timeouts0)
	if stopped(m, "Quarantined") <= quarantined0 {
		t.Error("the requeued looping pods were not answered from their quarantine")
	}
	if stopped(m, "Timeout") > timeouts0 {
		t.Errorf("%v timed-out cycles during the requeues: quarantined pods reached the guest", stopped(m, "Timeout")-timeouts0)
	}
	if got := counter(m, "wasmsched_policy_quarantined_inputs", `policy="guard"`); got != attackers {
		t.Errorf("wasmsched_policy_quarantined_inputs = %v, want %d", got, attackers)
	}
	t.Logf("deadline overrun in the scheduler (guard's calls that hit their deadline): %s", overrunSummary(m, "guard"))
	if p := histogramQuantile(m, "wasmsched_policy_deadline_overrun_seconds", `policy="guard"`, 1); p > 0.128 {
		t.Errorf("a call ended %.0f ms after its deadline (bucket bound), want at most 128 ms", 1000*p)
	}

	// A module broken for everyone still opens the breaker: the adversary
	// built with Go (new bytes, the same behaviour) resets the breaker and
	// the quarantine, and then only looping pods, of distinct templates,
	// come.
	e.policyConfigMap("guard", gzipped(t, testguests.PolicyBytes(t, testguests.Go, "testdata/adversary")))
	e.waitLog(`"Policy module active" policy="guard"`, 2, 120*time.Second)
	// Twelve: the breaker judges once it has seen twelve pods (with the
	// previous run's looping pods, let out of their quarantine by the
	// reload, it sees more).
	const broken = 12
	for k := 0; k < broken; k++ {
		e.pod(fmt.Sprintf("broken-%d", k), map[string]string{"attack": "loop", "app": fmt.Sprintf("broken-%d", k)}, "100m")
	}
	breakerOpen := `wasmsched_policy_circuit_breaker_state{policy="guard",state="open"} 1`
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(metrics(), breakerOpen); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("breaker not open after 60s of a module failing on every pod; metrics:\n%s", grep(metrics(), "wasmsched_policy_"))
		}
	}
	// The gauge moves before the Event is recorded (the recorder sends
	// asynchronously), so wait for the Event as for any other.
	t.Logf("ConfigMap event: %s", e.waitEvent(policyNS, e.name+"-guard", "PolicyCircuitBreakerOpen", "circuit breaker open"))

	// The fixed module closes the breaker and ends the quarantines; every
	// looping pod is bound, without a restart.
	e.policyConfigMap("guard", module(t, "maintenance-avoidance"))
	e.waitLog(`"Policy circuit breaker closed" policy="guard"`, 1, 60*time.Second)
	var waiting []string
	for k := 0; k < attackers; k++ {
		waiting = append(waiting, attack(last, k))
	}
	for k := 0; k < broken; k++ {
		waiting = append(waiting, fmt.Sprintf("broken-%d", k))
	}
	for _, name := range waiting {
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			p, err := client.CoreV1().Pods(e.name).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Spec.NodeName != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not bound within 60s of the fix", name)
			}
		}
	}
	m = metrics()
	if !strings.Contains(m, `wasmsched_policy_circuit_breaker_state{policy="guard",state="closed"} 1`) {
		t.Error("breaker gauge not back to closed")
	}
	if got := counter(m, "wasmsched_policy_quarantined_inputs", `policy="guard"`); got != 0 {
		t.Errorf("%v inputs still quarantined after the fix", got)
	}
	bound, unschedulable, neither := settle(t, e, all)
	if len(bound) != len(all) {
		t.Errorf("%d of %d pods bound (unschedulable %v, neither %v)", len(bound), len(all), unschedulable, neither)
	}
	if twice := scheduledTwice(t, e); len(twice) > 0 {
		t.Errorf("pods bound twice: %v", twice)
	}
}

// roundAll rounds ratios to two places for a log line.
func roundAll(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Round(100*x) / 100
	}
	return out
}

// lastScheduled returns the time of the latest Scheduled event of the pods.
func lastScheduled(t *testing.T, e *env, names []string) time.Time {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	evs, err := client.EventsV1().Events(e.name).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Scheduled"})
	if err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for _, ev := range evs.Items {
		if want[ev.Regarding.Name] && ev.EventTime.After(last) {
			last = ev.EventTime.Time
		}
	}
	return last
}

// gzipped compresses a module for a ConfigMap.
func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// deletePod deletes one of the test's pods at once (no kubelet here to
// finish a graceful deletion).
func (e *env) deletePod(name string) {
	e.t.Helper()
	now := int64(0)
	if err := client.CoreV1().Pods(e.name).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &now}); err != nil {
		e.t.Fatal(err)
	}
}

// counter returns the value of a metric series (name{labels} value), or 0.
func counter(metrics, name, labels string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+"{"+labels+"}") + ` (\S+)$`)
	if m := re.FindStringSubmatch(metrics); m != nil {
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	return 0
}

// histogramBuckets returns a histogram's cumulative buckets (le → count).
func histogramBuckets(metrics, name, labels string) (les []float64, counts []float64) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+"_bucket{") + `(.*)\} (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(metrics, -1) {
		if !strings.Contains(m[1], labels) {
			continue
		}
		le := regexp.MustCompile(`le="([^"]+)"`).FindStringSubmatch(m[1])
		if le == nil {
			continue
		}
		bound, _ := strconv.ParseFloat(le[1], 64)
		if le[1] == "+Inf" {
			bound = math.Inf(1)
		}
		c, _ := strconv.ParseFloat(m[2], 64)
		les, counts = append(les, bound), append(counts, c)
	}
	idx := make([]int, len(les))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return les[idx[a]] < les[idx[b]] })
	sl, sc := make([]float64, len(les)), make([]float64, len(les))
	for i, j := range idx {
		sl[i], sc[i] = les[j], counts[j]
	}
	return sl, sc
}

// histogramQuantile returns the upper bound of the bucket holding quantile
// q of a histogram (0 when it is empty).
func histogramQuantile(metrics, name, labels string, q float64) float64 {
	les, counts := histogramBuckets(metrics, name, labels)
	if len(counts) == 0 || counts[len(counts)-1] == 0 {
		return 0
	}
	want := q * counts[len(counts)-1]
	for i, c := range counts {
		if c >= want {
			return les[i]
		}
	}
	return math.Inf(1)
}

// overrunSummary phrases a policy's deadline overruns: count, and the
// bucket bounds of p50, p99 and max.
func overrunSummary(metrics, policy string) string {
	const name = "wasmsched_policy_deadline_overrun_seconds"
	labels := `policy="` + policy + `"`
	_, counts := histogramBuckets(metrics, name, labels)
	if len(counts) == 0 {
		return "none"
	}
	ms := func(q float64) string {
		return fmt.Sprintf("≤%gms", 1000*histogramQuantile(metrics, name, labels, q))
	}
	return fmt.Sprintf("%v calls, p50 %s, p99 %s, max %s", counts[len(counts)-1], ms(0.5), ms(0.99), ms(1))
}

// failedSchedulingOf returns "pod: message" for the FailedScheduling events
// of namespace ns about the pods named.
func failedSchedulingOf(t *testing.T, ns string, names []string) []string {
	t.Helper()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	evs, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs.Items {
		if want[ev.InvolvedObject.Name] {
			out = append(out, ev.InvolvedObject.Name+": "+ev.Message)
		}
	}
	return out
}
