// Package e2e runs bin/kube-scheduler with WasmPolicy against a real
// kube-apiserver and etcd (internal/controlplane) and checks what operators
// see: placements, FailedScheduling events, hot reloads, refused modules.
//
// Every test uses its own namespace, its own nodes (labelled e2e=<test>, which
// its pods select) and its own scheduler process and scheduler name, so tests
// never see each other's objects.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

const policyNS = "wasmsched-policies"

var (
	cp     *controlplane.ControlPlane
	client kubernetes.Interface
	root   string
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		var err error
		if root, err = testguests.Root(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		dir, err := os.MkdirTemp("", "wasmsched-e2e")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		cp, err = controlplane.Start(context.Background(), controlplane.BinDir(root), dir, false)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: control plane:", err)
			return 1
		}
		defer cp.Stop()
		if client, err = cp.Client(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := setupPolicyNamespace(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: setup:", err)
			return 1
		}
		return m.Run()
	}())
}

// setupPolicyNamespace creates the namespace for policy ConfigMaps and lets
// system:kube-scheduler (the scheduler's identity here) read them.
func setupPolicyNamespace() error {
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: policyNS}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := controlplane.GrantPolicyRead(ctx, client, policyNS, controlplane.SchedulerUser); err != nil {
		return err
	}
	if err := controlplane.GrantPodPatch(ctx, client, controlplane.SchedulerUser); err != nil {
		return err
	}
	return setupPolicyObjects(ctx)
}

// env is one test's namespace, nodes and scheduler.
type env struct {
	t     *testing.T
	name  string // test id: namespace, scheduler name, node label value
	dir   string
	sched *exec.Cmd
	log   string
}

func newEnv(t *testing.T, name string) *env {
	t.Helper()
	e := &env{t: t, name: name, dir: t.TempDir()}
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.stopScheduler)
	return e
}

// node creates a Node with capacity, labelled for this test.
func (e *env) node(name string, labels map[string]string, cpu string) {
	e.t.Helper()
	e.nodeWith(name, labels, nil, cpu)
}

// policyConfigMap creates or replaces a policy ConfigMap with a module.
func (e *env) policyConfigMap(name string, module []byte) {
	e.t.Helper()
	ctx := context.Background()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: e.name + "-" + name, Namespace: policyNS}, BinaryData: map[string][]byte{"policy.wasm": module}}
	if _, err := client.CoreV1().ConfigMaps(policyNS).Update(ctx, cm, metav1.UpdateOptions{}); err == nil {
		return
	}
	if _, err := client.CoreV1().ConfigMaps(policyNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// startScheduler runs bin/kube-scheduler with the given policies YAML (the
// list under args.policies) and waits until it runs with every policy loaded.
func (e *env) startScheduler(policies string, active ...string) {
	e.t.Helper()
	path := e.writeConfig(policies, "leaderElection: {leaderElect: false}")
	e.log = filepath.Join(e.dir, "kube-scheduler.log")
	e.sched = e.run(path, e.log)
	e.waitLog(`"Starting Kubernetes Scheduler"`, 1, 60*time.Second)
	for _, p := range active {
		e.waitLog(`"Policy module active" policy="`+p+`"`, 1, 60*time.Second)
	}
}

func (e *env) run(config, logPath string) *exec.Cmd {
	e.t.Helper()
	bin := controlplane.SchedulerBinary(root)
	if _, err := os.Stat(bin); err != nil {
		e.t.Fatalf("%s missing: run make build", bin)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", config, "--secure-port", "0", "-v=2", "--log-flush-frequency=100ms")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	return cmd
}

func (e *env) writeConfig(policies, leaderElection string) string {
	e.t.Helper()
	cfg := controlplane.SchedulerConfig(cp.SchedulerKubeconfig, e.name, filepath.Join(e.dir, "cache"), "200ms", leaderElection, policies)
	path := filepath.Join(e.dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return path
}

func (e *env) stopScheduler() {
	if e.sched != nil && e.sched.Process != nil {
		_ = e.sched.Process.Kill()
		_, _ = e.sched.Process.Wait()
	}
	// No policy call of any e2e run may fail for want of a CPU or an
	// instance: a call that could not start is the scheduler's overload
	// (logged at -v=4 only), never an Unavailable outcome.
	if e.log != "" {
		if b, _ := os.ReadFile(e.log); bytes.Contains(b, []byte(`outcome="unavailable"`)) {
			e.t.Errorf("the scheduler logged %d policy calls with outcome=\"unavailable\" (%s)", bytes.Count(b, []byte(`outcome="unavailable"`)), e.log)
		}
	}
	if e.t.Failed() && e.log != "" {
		b, _ := os.ReadFile(e.log)
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		e.t.Logf("scheduler log tail:\n%s", b)
	}
}

// waitLog waits until the scheduler log contains text at least n times and
// returns when that happened.
func (e *env) waitLog(text string, n int, timeout time.Duration) time.Time {
	e.t.Helper()
	return e.waitFor(text, n, timeout, func(b []byte) int { return strings.Count(string(b), text) })
}

// waitFor polls the scheduler log until count finds what at least n times.
func (e *env) waitFor(what string, n int, timeout time.Duration, count func([]byte) int) time.Time {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(e.log)
		if count(b) >= n {
			return time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("scheduler did not log %s (%d times) within %s", what, n, timeout)
	return time.Time{}
}

// leaseAcquired matches kube-scheduler's log line for winning the leader
// election of lock (namespace/name, or "" for any), as every build line
// words it: "successfully acquired lease NS/NAME" up to v1.34,
// `"Successfully acquired lease" lock="NS/NAME"` since.
func leaseAcquired(lock string) *regexp.Regexp {
	l := `\S+`
	if lock != "" {
		l = regexp.QuoteMeta(lock)
	}
	return regexp.MustCompile(`(successfully acquired lease ` + l + `|"Successfully acquired lease" lock="` + l + `")`)
}

// waitLogMatch waits until the scheduler log matches re at least n times.
func (e *env) waitLogMatch(re *regexp.Regexp, n int, timeout time.Duration) time.Time {
	e.t.Helper()
	return e.waitFor(re.String(), n, timeout, func(b []byte) int { return len(re.FindAllIndex(b, -1)) })
}

// logMatchCount returns how often re matches the scheduler log.
func (e *env) logMatchCount(re *regexp.Regexp) int {
	b, _ := os.ReadFile(e.log)
	return len(re.FindAllIndex(b, -1))
}

// logCount returns how often text occurs in the scheduler log.
func (e *env) logCount(text string) int {
	b, _ := os.ReadFile(e.log)
	return strings.Count(string(b), text)
}

// pod creates a pod for this test's scheduler and nodes.
func (e *env) pod(name string, labels map[string]string, cpu string) {
	e.t.Helper()
	e.podFor(e.name, name, labels, cpu)
}

// podFor creates a pod for the named scheduler on this test's nodes.
func (e *env) podFor(scheduler, name string, labels map[string]string, cpu string) {
	e.t.Helper()
	e.podIn(e.name, scheduler, name, labels, cpu)
}

// podIn creates a pod in namespace ns for the named scheduler on this test's nodes.
func (e *env) podIn(ns, scheduler, name string, labels map[string]string, cpu string) {
	e.t.Helper()
	p := e.appPod(ns, name, scheduler, labels, cpu, "128Mi").Obj()
	if _, err := client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// appPod is a pod in namespace ns for the named scheduler on this test's
// nodes, with one container that requests cpu and mem (none when cpu is "").
func (e *env) appPod(ns, name, scheduler string, labels map[string]string, cpu, mem string) *st.PodWrapper {
	c := st.MakeContainer().Name("c").Image("registry.example/app:1")
	if cpu != "" {
		c.ResourceRequests(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: mem})
	}
	return st.MakePod().Namespace(ns).Name(name).Labels(labels).SchedulerName(scheduler).
		NodeSelector(map[string]string{"e2e": e.name}).Containers([]v1.Container{c.Obj()})
}

// placed waits until the pod is bound and returns its node (without the test prefix).
func (e *env) placed(name string) string {
	e.t.Helper()
	return e.placedIn(e.name, name)
}

// placedIn is placed for a pod of namespace ns.
func (e *env) placedIn(ns, name string) string {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		p, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			return strings.TrimPrefix(p.Spec.NodeName, e.name+"-")
		}
		if msg := e.failedSchedulingIn(ns, name); msg != "" {
			e.t.Fatalf("pod %s/%s not scheduled: %s", ns, name, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("pod %s not bound within 30s", name)
	return ""
}

// rejected waits for the pod's FailedScheduling event and returns its note.
func (e *env) rejected(name string) string {
	e.t.Helper()
	return e.rejectedIn(e.name, name)
}

// rejectedIn is rejected for a pod of namespace ns.
func (e *env) rejectedIn(ns, name string) string {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if msg := e.failedSchedulingIn(ns, name); msg != "" {
			p, _ := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			if p != nil && p.Spec.NodeName != "" {
				e.t.Fatalf("pod %s both rejected and bound to %s", name, p.Spec.NodeName)
			}
			return msg
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("no FailedScheduling event for %s within 30s", name)
	return ""
}

func (e *env) failedScheduling(pod string) string {
	return e.failedSchedulingIn(e.name, pod)
}

func (e *env) failedSchedulingIn(ns, pod string) string {
	evs, err := client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "regarding.name=" + pod})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, ev := range evs.Items {
		if ev.Reason == "FailedScheduling" {
			return ev.Note
		}
	}
	return ""
}

// configMapEvents returns the notes of events of a type and reason on a policy ConfigMap.
func configMapEvents(name, typ, reason string) []string {
	return eventNotes(policyNS, name, typ, reason)
}

// eventNotes returns the notes of the events of an object of namespace ns
// with a type ("" for any) and reason.
func eventNotes(ns, name, typ, reason string) []string {
	evs, err := client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "regarding.name=" + name})
	if err != nil {
		return nil
	}
	var notes []string
	for _, ev := range evs.Items {
		if (typ == "" || ev.Type == typ) && ev.Reason == reason {
			notes = append(notes, ev.Note)
		}
	}
	return notes
}

// podEvents lists every Event about pod name, as "reason: note".
func podEvents(ns, name string) []string {
	evs, err := client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "regarding.name=" + name})
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, ev := range evs.Items {
		out = append(out, ev.Reason+": "+ev.Note)
	}
	return out
}

func module(t *testing.T, name string) []byte {
	return testguests.PolicyBytes(t, testguests.TinyGo, name)
}

func cmSource(e *env, name string) string {
	return fmt.Sprintf("{configMap: {namespace: %s, name: %s-%s, key: policy.wasm}}", policyNS, e.name, name)
}
