package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/wasmsched/wasmsched/internal/controlplane"
	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
)

var dyn dynamic.Interface

// setupPolicyObjects installs the policy CRDs and lets the scheduler's
// identity here (system:kube-scheduler) use them as the manifests let the
// wasmsched ServiceAccount, with status Leases in kube-system.
func setupPolicyObjects(ctx context.Context) error {
	var err error
	if dyn, err = dynamic.NewForConfig(cp.RestConfig(controlplane.AdminUser)); err != nil {
		return err
	}
	_, _, kubectl, err := controlplane.Binaries(controlplane.BinDir(root))
	if err != nil {
		return err
	}
	return controlplane.InstallPolicyObjects(ctx, client, root, kubectl, cp.AdminKubeconfig, controlplane.SchedulerUser, "kube-system")
}

// teamNamespace creates the test's team namespace, <test>-team, and lets
// the scheduler read its module ConfigMaps, as manifests/examples/team does
// for the scheduler's ServiceAccount.
func (e *env) teamNamespace() string {
	e.t.Helper()
	ctx := context.Background()
	team := e.name + "-team"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if err := controlplane.GrantModuleRead(ctx, client, team, controlplane.SchedulerUser); err != nil {
		e.t.Fatal(err)
	}
	return team
}

// kubectl runs kubectl as the admin with stdin, returning its combined output.
func kubectl(stdin string, args ...string) (string, error) {
	_, _, bin, err := controlplane.Binaries(controlplane.BinDir(root))
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", cp.AdminKubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// apply applies a YAML document with kubectl, as a team or operator would.
func (e *env) apply(doc string) {
	e.t.Helper()
	if out, err := kubectl(doc, "apply", "-f", "-"); err != nil {
		e.t.Fatalf("kubectl apply: %v\n%s\n%s", err, out, doc)
	}
}

// objectSchedulerConfig is the test's scheduler config with policy objects
// enabled, its status written under the Lease kube-system/<lease>, and
// policies (the args' list; "" for none).
func (e *env) objectSchedulerConfig(policies, lease, leaderElection string) string {
	e.t.Helper()
	path := e.writeConfig(policies, leaderElection)
	b, err := os.ReadFile(path)
	if err != nil {
		e.t.Fatal(err)
	}
	list := "      policies:\n"
	if policies == "" {
		list = "      policies: []\n"
	}
	cfg := strings.Replace(string(b), "      policies:\n", fmt.Sprintf("      policyObjects: {enabled: true, statusLease: {namespace: kube-system, name: %s}}\n%s", lease, list), 1)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// startObjectScheduler runs the test's scheduler with policy objects
// enabled and no policies in its args.
func (e *env) startObjectScheduler() {
	e.t.Helper()
	path := e.objectSchedulerConfig("", e.name, "leaderElection: {leaderElect: false}")
	e.log = filepath.Join(e.dir, "kube-scheduler.log")
	e.sched = e.run(path, e.log)
	e.waitLog(`"Starting Kubernetes Scheduler"`, 1, 60*time.Second)
	e.waitLog(`"Writing policy objects' status: holding the status lease"`, 1, 60*time.Second)
}

// policyStatus reads a policy object's status (namespace "" for a cluster policy).
func policyStatus(t *testing.T, namespace, name string) policyv1alpha1.SchedulingPolicyStatus {
	t.Helper()
	gvr := policyv1alpha1.ClusterSchedulingPoliciesResource
	var ri dynamic.ResourceInterface = dyn.Resource(gvr)
	if namespace != "" {
		ri = dyn.Resource(policyv1alpha1.SchedulingPoliciesResource).Namespace(namespace)
	}
	u, err := ri.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var st policyv1alpha1.SchedulingPolicyStatus
	if m, ok := u.Object["status"].(map[string]interface{}); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// waitReady waits until the object's status says Ready=status with reason
// for generation, and returns the status.
func waitReady(t *testing.T, namespace, name string, generation int64, status metav1.ConditionStatus, reason string) policyv1alpha1.SchedulingPolicyStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var st policyv1alpha1.SchedulingPolicyStatus
	for time.Now().Before(deadline) {
		st = policyStatus(t, namespace, name)
		for _, c := range st.Conditions {
			if c.Type == policyv1alpha1.ConditionReady && c.Status == status && c.Reason == reason && st.ObservedGeneration >= generation {
				return st
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("policy %s/%s: status never became Ready=%s %s for generation %d; last: %+v", namespace, name, status, reason, generation, st)
	return st
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func deleteObject(t *testing.T, gvr schema.GroupVersionResource, namespace, name string) {
	var ri dynamic.ResourceInterface = dyn.Resource(gvr)
	if namespace != "" {
		ri = dyn.Resource(gvr).Namespace(namespace)
	}
	if err := ri.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting %s %s/%s: %v", gvr.Resource, namespace, name, err)
	}
}

// clusterPolicy is a ClusterSchedulingPolicy running team-isolation from
// the test's ConfigMap "team" in this test's profile, with extra spec lines.
func (e *env) clusterPolicy(name, config, extra string) string {
	return fmt.Sprintf(`apiVersion: policy.wasmsched.io/v1alpha1
kind: ClusterSchedulingPolicy
metadata: {name: %s}
spec:
  source: %s
  config: %s
  profiles: [%s]
%s`, name, cmSource(e, "team"), config, e.name, extra)
}

// A cluster policy created, changed and deleted while the scheduler runs
// takes effect each time within about a second, with no restart; its
// status says so; its scope by namespace and by pod labels holds, with
// pods outside it as the negative controls.
func TestPolicyObjectLifecycle(t *testing.T) {
	e := newEnv(t, "objects")
	e.node("a", map[string]string{"team": "a", "tier": "gold"}, "4")
	e.node("b", map[string]string{"team": "b", "tier": "silver"}, "4")
	e.node("s", nil, "4")
	mod := module(t, "team-isolation")
	e.policyConfigMap("team", mod)
	e.startObjectScheduler()

	name := e.name + "-team"
	active := regexp.MustCompile(`"Policy object active" object="clusterschedulingpolicy/` + regexp.QuoteMeta(name) + `"`)
	var took []time.Duration
	start := time.Now()
	e.apply(e.clusterPolicy(name, "key=team", ""))
	t.Cleanup(func() { deleteObject(t, policyv1alpha1.ClusterSchedulingPoliciesResource, "", name) })
	took = append(took, e.waitLogMatch(active, 1, 30*time.Second).Sub(start))

	e.pod("team-a", map[string]string{"team": "a"}, "100m")
	if got := e.placed("team-a"); got != "a" {
		t.Errorf("team-a landed on %s, want a", got)
	}
	e.pod("team-c", map[string]string{"team": "c"}, "100m")
	if msg := e.rejected("team-c"); !strings.Contains(msg, "WasmPolicy/"+name) {
		t.Errorf("team-c rejected without naming the policy: %s", msg)
	}
	st := waitReady(t, "", name, 1, metav1.ConditionTrue, policyv1alpha1.ReasonLoaded)
	if st.ActiveSHA256 != digest(mod) {
		t.Errorf("status activeSHA256 %q, want %q", st.ActiveSHA256, digest(mod))
	}
	out, err := kubectl("", "get", "clusterschedulingpolicy", name)
	if err != nil {
		t.Fatal(err, out)
	}
	for _, want := range []string{"READY", "REASON", "MODE", "SHA256", "AGE", "True", "Loaded", digest(mod)[:12]} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get shows no %q:\n%s", want, out)
		}
	}

	// Change the config: the pools follow the tier label instead.
	start = time.Now()
	e.apply(e.clusterPolicy(name, "key=tier", ""))
	took = append(took, e.waitLogMatch(active, 2, 30*time.Second).Sub(start))
	e.pod("silver", map[string]string{"team": "a", "tier": "silver"}, "100m")
	if got := e.placed("silver"); got != "b" {
		t.Errorf("after the config change, a tier=silver pod of team a landed on %s, want b", got)
	}
	waitReady(t, "", name, 2, metav1.ConditionTrue, policyv1alpha1.ReasonLoaded)

	// Scope by namespace: only namespaces labelled scope=<test>.
	other := e.name + "-other"
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, err := client.CoreV1().Namespaces().Get(context.Background(), e.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels["scope"] = e.name
	if _, err := client.CoreV1().Namespaces().Update(context.Background(), ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	e.apply(e.clusterPolicy(name, "key=team", "  namespaceSelector: {matchLabels: {scope: "+e.name+"}}"))
	took = append(took, e.waitLogMatch(active, 3, 30*time.Second).Sub(start))
	e.pod("in-scope-ns", map[string]string{"team": "c"}, "100m")
	if msg := e.rejected("in-scope-ns"); !strings.Contains(msg, "WasmPolicy/"+name) {
		t.Errorf("in-scope-ns rejected without naming the policy: %s", msg)
	}
	e.podIn(other, e.name, "other-ns", map[string]string{"team": "c"}, "100m")
	e.placedIn(other, "other-ns") // negative control: outside the namespace selector

	// Scope by pod labels.
	start = time.Now()
	e.apply(e.clusterPolicy(name, "key=team", "  podSelector: {matchLabels: {isolated: \"yes\"}}"))
	took = append(took, e.waitLogMatch(active, 4, 30*time.Second).Sub(start))
	e.pod("labelled", map[string]string{"team": "c", "isolated": "yes"}, "100m")
	if msg := e.rejected("labelled"); !strings.Contains(msg, "WasmPolicy/"+name) {
		t.Errorf("labelled rejected without naming the policy: %s", msg)
	}
	e.pod("unlabelled", map[string]string{"team": "c"}, "100m")
	e.placed("unlabelled") // negative control: outside the pod selector

	// Delete: the policy stops applying.
	start = time.Now()
	deleteObject(t, policyv1alpha1.ClusterSchedulingPoliciesResource, "", name)
	took = append(took, e.waitLog(`"Policy object deleted; its policy no longer applies" object="clusterschedulingpolicy/`+name+`"`, 1, 30*time.Second).Sub(start))
	e.pod("after-delete", map[string]string{"team": "c", "isolated": "yes"}, "100m")
	e.placed("after-delete")
	// The pod the deleted policy rejected is sent back to the queue at once
	// (not after the unschedulable-pod timeout of five minutes).
	e.placed("labelled")

	// Within about a second: the median of the five changes, with a
	// generous bound on the slowest so that a busy machine cannot fail it.
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	t.Logf("object change to effect in the scheduler: %v (median %v)", took, sorted[len(sorted)/2])
	if med := sorted[len(sorted)/2]; med > time.Second {
		t.Errorf("median time from object change to effect %v, want at most 1s", med)
	}
	if worst := sorted[len(sorted)-1]; worst > 10*time.Second {
		t.Errorf("slowest object change took %v to take effect", worst)
	}
}

// A team's SchedulingPolicy applies to the pods of its namespace only, and
// may take its module only from its own namespace.
func TestNamespacedPolicyObject(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, "nsobjects")
	e.node("a", map[string]string{"team": "a"}, "4")
	e.node("s", nil, "4")
	team := e.teamNamespace()
	if _, err := client.CoreV1().ConfigMaps(team).Create(ctx, &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "policy-team-isolation"},
		BinaryData: map[string][]byte{"policy.wasm": module(t, "team-isolation")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.policyConfigMap("team", module(t, "team-isolation"))
	e.startObjectScheduler()

	policy := func(name, source string) string {
		return fmt.Sprintf(`apiVersion: policy.wasmsched.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: %s, namespace: %s}
spec:
  source: %s
  config: key=team
  profiles: [%s]
`, name, team, source, e.name)
	}
	e.apply(policy("isolation", "{configMap: {name: policy-team-isolation, key: policy.wasm}}"))
	waitReady(t, team, "isolation", 1, metav1.ConditionTrue, policyv1alpha1.ReasonLoaded)
	e.podIn(team, e.name, "team-pod", map[string]string{"team": "c"}, "100m")
	if msg := e.rejectedIn(team, "team-pod"); !strings.Contains(msg, "WasmPolicy/"+team+"/isolation") {
		t.Errorf("team-pod rejected without naming the policy: %s", msg)
	}
	e.pod("other-pod", map[string]string{"team": "c"}, "100m")
	e.placed("other-pod") // another namespace: unaffected

	// A ConfigMap of another namespace is refused in status.
	e.apply(policy("cross", cmSource(e, "team")))
	st := waitReady(t, team, "cross", 1, metav1.ConditionFalse, policyv1alpha1.ReasonInvalidSpec)
	if msg := st.Conditions[0].Message; !strings.Contains(msg, "spec.source.configMap.namespace") || !strings.Contains(msg, "only from a ConfigMap in "+team) {
		t.Errorf("cross-namespace source refused with %q", msg)
	}
	// A name Kubernetes accepts but a policy name cannot be (not a DNS label).
	e.apply(policy("dotted.name", "{configMap: {name: policy-team-isolation, key: policy.wasm}}"))
	st = waitReady(t, team, "dotted.name", 1, metav1.ConditionFalse, policyv1alpha1.ReasonInvalidSpec)
	if !strings.HasPrefix(st.LastError, "metadata.name: Invalid value") {
		t.Errorf("dotted name refused with %q, want the metadata.name path", st.LastError)
	}
	deleteObject(t, policyv1alpha1.SchedulingPoliciesResource, team, "dotted.name")
	// A missing ConfigMap is reported as such.
	e.apply(policy("missing", "{configMap: {name: no-such-configmap, key: policy.wasm}}"))
	st = waitReady(t, team, "missing", 1, metav1.ConditionFalse, policyv1alpha1.ReasonSourceMissing)
	if !strings.Contains(st.LastError, "no-such-configmap") {
		t.Errorf("lastError %q does not name the ConfigMap", st.LastError)
	}
	for _, n := range []string{"isolation", "cross", "missing"} {
		deleteObject(t, policyv1alpha1.SchedulingPoliciesResource, team, n)
	}

	// A namespace that did not let the scheduler read its ConfigMaps gets
	// the reason and the fix, not an endless Loading.
	closed := e.name + "-closed"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: closed}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.apply(strings.ReplaceAll(policy("isolation", "{configMap: {name: policy-team-isolation, key: policy.wasm}}"), "namespace: "+team, "namespace: "+closed))
	st = waitReady(t, closed, "isolation", 1, metav1.ConditionFalse, policyv1alpha1.ReasonSourceMissing)
	if !strings.Contains(st.LastError, "forbidden") || !strings.Contains(st.LastError, "wasmsched-policy-module-reader") {
		t.Errorf("unreadable ConfigMap reported as %q", st.LastError)
	}
	deleteObject(t, policyv1alpha1.SchedulingPoliciesResource, closed, "isolation")
}

// A module that does not load, or an update pinning another digest, leaves
// Ready=False with the reason while the last good version keeps serving.
func TestPolicyObjectBadModuleKeepsLastGood(t *testing.T) {
	e := newEnv(t, "objbad")
	e.node("a", map[string]string{"team": "a"}, "4")
	e.node("s", nil, "4")
	good := module(t, "team-isolation")
	e.policyConfigMap("team", good)
	e.startObjectScheduler()
	name := e.name + "-team"
	t.Cleanup(func() { deleteObject(t, policyv1alpha1.ClusterSchedulingPoliciesResource, "", name) })
	e.apply(e.clusterPolicy(name, "key=team", ""))
	waitReady(t, "", name, 1, metav1.ConditionTrue, policyv1alpha1.ReasonLoaded)

	check := func(st policyv1alpha1.SchedulingPolicyStatus, pod string) {
		t.Helper()
		if st.ActiveSHA256 != digest(good) {
			t.Errorf("activeSHA256 %q, want the last good %q", st.ActiveSHA256, digest(good))
		}
		if !strings.Contains(st.Conditions[0].Message, "keeps serving") {
			t.Errorf("Ready message %q does not say the last good module keeps serving", st.Conditions[0].Message)
		}
		e.pod(pod, map[string]string{"team": "c"}, "100m")
		if msg := e.rejected(pod); !strings.Contains(msg, "WasmPolicy/"+name) {
			t.Errorf("%s rejected without naming the policy: %s", pod, msg)
		}
	}
	e.apply(e.clusterPolicy(name, "key=team", "  sha256: \""+strings.Repeat("0", 64)+"\""))
	check(waitReady(t, "", name, 2, metav1.ConditionFalse, policyv1alpha1.ReasonSHA256Mismatch), "wrong-pin")

	e.apply(e.clusterPolicy(name, "key=team", ""))
	if st := waitReady(t, "", name, 3, metav1.ConditionTrue, policyv1alpha1.ReasonLoaded); st.LastError != "" {
		t.Errorf("lastError %q kept after the policy recovered", st.LastError)
	}
	e.policyConfigMap("team", []byte("this is not a wasm module"))
	check(waitReady(t, "", name, 3, metav1.ConditionFalse, policyv1alpha1.ReasonCompileError), "corrupt")
}

// The apiserver refuses bad policy objects at kubectl apply, naming the field.
func TestInvalidPolicyObjectsAreRefused(t *testing.T) {
	head := "apiVersion: policy.wasmsched.io/v1alpha1\nkind: ClusterSchedulingPolicy\nmetadata: {name: invalid}\nspec:\n"
	cm := "  source: {configMap: {namespace: ns, name: cm, key: policy.wasm}}\n"
	for _, c := range []struct{ name, doc, want string }{
		{"valid", head + cm, ""},
		{"unknown mode", head + cm + "  mode: Sometimes\n", `spec.mode: Unsupported value: "Sometimes"`},
		{"weight 0", head + cm + "  weight: 0\n", "spec.weight: Invalid value: 0"},
		{"weight 101", head + cm + "  weight: 101\n", "spec.weight: Invalid value: 101"},
		{"both sources", head + "  source: {file: /p.wasm, configMap: {namespace: ns, name: cm, key: k}}\n", "spec.source: Invalid value|set exactly one of file, configMap or oci"},
		{"no source", head + "  source: {}\n", "spec.source: Invalid value|set exactly one of file, configMap or oci"},
		{"relative file", head + "  source: {file: p.wasm}\n", "spec.source.file"},
		{"cluster ConfigMap without namespace", head + "  source: {configMap: {name: cm, key: k}}\n", "spec.source.configMap: Invalid value"},
		{"bad operator", head + cm + "  podSelector: {matchExpressions: [{key: team, operator: Near, values: [a]}]}\n", `spec.podSelector.matchExpressions[0].operator: Unsupported value: "Near"`},
		{"In without values", head + cm + "  podSelector: {matchExpressions: [{key: team, operator: In}]}\n", "spec.podSelector.matchExpressions[0]: Invalid value"},
		{"bad label key", head + cm + "  namespaceSelector: {matchLabels: {\"bad key!\": x}}\n", "spec.namespaceSelector.matchLabels"},
		{"bad label value", head + cm + "  podSelector: {matchLabels: {team: \"-x\"}}\n", "spec.podSelector.matchLabels.team"},
		{"timeout too long", head + cm + "  timeout: 30s\n", "spec.timeout: Invalid value"},
		{"unknown read", head + cm + "  reads: [Secrets]\n", `spec.reads[0]: Unsupported value: "Secrets"`},
		{"bad sha256", head + cm + "  sha256: abc\n", "spec.sha256: Invalid value"},
		{"preEnqueue timeout too long", head + cm + "  preEnqueueTimeout: 2s\n", "spec.preEnqueueTimeout: Invalid value"},
		{"patch prefix without a domain", head + cm + "  patchPrefixes: [zone]\n", "spec.patchPrefixes[0]: Invalid value"},
		{"patch prefix of Kubernetes", head + cm + "  patchPrefixes: [node-role.kubernetes.io/]\n", "spec.patchPrefixes: Invalid value|domains of Kubernetes itself"},
		{"valid patch prefixes", head + cm + "  patchPrefixes: [placement.example.com/, team.example.com/zone-]\n  preEnqueueTimeout: 5ms\n", ""},
		{"namespaced file source", "apiVersion: policy.wasmsched.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: invalid, namespace: default}\nspec:\n  source: {file: /p.wasm}\n", "spec.source.file: Invalid value"},
	} {
		out, err := kubectl(c.doc, "apply", "--dry-run=server", "-f", "-")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v\n%s", c.name, err, out)
		case c.want != "" && err == nil:
			t.Errorf("%s: accepted:\n%s", c.name, c.doc)
		case c.want != "":
			// Each |-separated part must be in the message: apiservers
			// word a CEL rule's error a little differently by version.
			for _, part := range strings.Split(c.want, "|") {
				if !strings.Contains(out, part) {
					t.Errorf("%s: refused without %q:\n%s", c.name, part, out)
				}
			}
		}
	}
}
