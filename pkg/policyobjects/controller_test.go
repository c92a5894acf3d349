package policyobjects

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
)

// The controller's rules are tested here through its Plugin boundary: the
// plugin below records what the controller asks of it, and the test
// decides when a policy's load ends and how. test/ runs the controller
// with the real plugin against a real kube-apiserver.

type testPlugin struct {
	profile string
	args    []string

	mu        sync.Mutex
	built     []*testPolicy
	published [][]string
}

func (p *testPlugin) Profile() string { return p.profile }

func (p *testPlugin) Build(_ context.Context, spec config.Policy, _ string) (Policy, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tp := &testPolicy{name: spec.Name, spec: spec}
	tp.load.Source = "configmap " + spec.Source.ConfigMap.Namespace + "/" + spec.Source.ConfigMap.Name
	p.built = append(p.built, tp)
	return tp, nil
}

func (p *testPlugin) CanaryTransition(string, string) {}

func (p *testPlugin) HasArgsPolicy(name string) bool {
	for _, a := range p.args {
		if a == name {
			return true
		}
	}
	return false
}

func (p *testPlugin) Publish(serving []Policy) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var names []string
	for _, s := range serving {
		names = append(names, s.Name()+"@"+s.Load().SHA256)
	}
	p.published = append(p.published, names)
}

// last is the set published last, as name@sha256.
func (p *testPlugin) last() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.published) == 0 {
		return "(never published)"
	}
	return strings.Join(p.published[len(p.published)-1], ",")
}

type testPolicy struct {
	name string
	spec config.Policy

	mu         sync.Mutex
	load       Load
	settled    bool
	retired    bool
	superseded string
	closed     bool
	forgot     bool
}

func (p *testPolicy) Name() string                      { return p.name }
func (p *testPolicy) Run(ctx context.Context, _ func()) { <-ctx.Done() }
func (p *testPolicy) Load() Load                        { p.mu.Lock(); defer p.mu.Unlock(); return p.load }
func (p *testPolicy) Settled() bool                     { p.mu.Lock(); defer p.mu.Unlock(); return p.settled }
func (p *testPolicy) Retire()                           { p.mu.Lock(); p.retired = true; p.mu.Unlock() }
func (p *testPolicy) Superseded(by Policy) {
	p.mu.Lock()
	p.superseded = by.Name() + "@" + by.Load().SHA256
	p.mu.Unlock()
}
func (p *testPolicy) Canary() CanaryCounts { return CanaryCounts{} }
func (p *testPolicy) Close(forget bool) {
	p.mu.Lock()
	p.closed, p.forgot = true, forget
	p.mu.Unlock()
}

// loaded ends a load in a module (sha) or, with sha "", in a failure.
func (p *testPolicy) loaded(sha, failureReason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settled = true
	p.load.SHA256, p.load.Exports = sha, "filter"
	p.load.FailureReason, p.load.FailureMessage = failureReason, ""
	if failureReason != "" {
		p.load.FailureMessage = "the module does not compile"
	}
}

func (p *testPolicy) state() (retired, closed, forgot bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.retired, p.closed, p.forgot
}

// newTestController is a controller whose informers' stores the test
// fills; nothing lists or watches.
func newTestController(t *testing.T, plugin Plugin) *Controller {
	t.Helper()
	c, err := New(plugin, Config{ReadOnly: true, RetiredGrace: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.ctx, c.logger = ctx, klog.Background()
	c.informers = map[bool]cache.SharedIndexInformer{}
	for _, namespaced := range []bool{false, true} {
		c.informers[namespaced] = cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{})
	}
	t.Cleanup(func() { cancel(); c.queue.ShutDown(); c.Close() })
	return c
}

// put stores obj (a SchedulingPolicy or ClusterSchedulingPolicy) as the
// informer would, and reconciles it.
func put(t *testing.T, c *Controller, obj runtime.Object) key {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	k := key{u.GetNamespace(), u.GetName()}
	if err := c.informers[k.namespace != ""].GetStore().Update(u); err != nil {
		t.Fatal(err)
	}
	reconcile(t, c, k)
	return k
}

func reconcile(t *testing.T, c *Controller, k key) {
	t.Helper()
	if err := c.reconcile(k); err != nil {
		t.Fatalf("reconcile %s: %v", k, err)
	}
}

func teamPolicy(uid types.UID, generation int64, config string) *policyv1alpha1.SchedulingPolicy {
	return &policyv1alpha1.SchedulingPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.wasmsched.io/v1alpha1", Kind: "SchedulingPolicy"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "spread", UID: uid, Generation: generation},
		Spec: policyv1alpha1.SchedulingPolicySpec{
			Source:         policyv1alpha1.Source{ConfigMap: &policyv1alpha1.ConfigMapSource{Name: "spread-module", Key: "policy.wasm"}},
			PolicySettings: configv1.PolicySettings{Config: config},
		},
	}
}

func (c *Controller) entryOf(t *testing.T, k key) *entry {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[k]
	if e == nil {
		t.Fatalf("no entry for %s", k)
	}
	return e
}

// A new spec is a candidate beside the serving version, and replaces it
// only once it has a module: a bad update leaves the last good version
// serving, and says so in status.
func TestCandidateReplacesServingOnlyOnceLoaded(t *testing.T) {
	plugin := &testPlugin{profile: "default-scheduler"}
	c := newTestController(t, plugin)

	k := put(t, c, teamPolicy("u1", 1, "v1"))
	if len(plugin.built) != 1 || plugin.built[0].name != "team-a/spread" {
		t.Fatalf("built %v, want one policy named team-a/spread", plugin.built)
	}
	if got := statusOf(c.entryOf(t, k)).Conditions[0]; got.Reason != policyv1alpha1.ReasonLoading {
		t.Errorf("before the first load: %s %q, want Loading", got.Reason, got.Message)
	}
	v1 := plugin.built[0]
	v1.loaded("aaaa", "")
	reconcile(t, c, k)
	if got := plugin.last(); got != "team-a/spread@aaaa" {
		t.Fatalf("published %q after the first load, want team-a/spread@aaaa", got)
	}

	// A new spec that fails to load: v1 keeps serving.
	put(t, c, teamPolicy("u1", 2, "v2"))
	if len(plugin.built) != 2 {
		t.Fatalf("built %d policies after a spec change, want 2", len(plugin.built))
	}
	v2 := plugin.built[1]
	v2.loaded("", "CompileError")
	reconcile(t, c, k)
	if got := plugin.last(); got != "team-a/spread@aaaa" {
		t.Errorf("published %q after a failed update, want v1 still (team-a/spread@aaaa)", got)
	}
	st := statusOf(c.entryOf(t, k))
	if cond := st.Conditions[0]; cond.Status != metav1.ConditionFalse || cond.Reason != policyv1alpha1.ReasonCompileError ||
		!strings.Contains(cond.Message, "keeps serving") || st.ActiveSHA256 != "aaaa" || st.ObservedGeneration != 2 {
		t.Errorf("status after a failed update: %+v", st)
	}

	// The same spec again builds nothing new.
	put(t, c, teamPolicy("u1", 2, "v2"))
	if len(plugin.built) != 2 {
		t.Errorf("built %d policies for an unchanged spec, want 2", len(plugin.built))
	}

	// A third spec replaces the failed candidate at once, and v1 once it
	// loads.
	put(t, c, teamPolicy("u1", 3, "v3"))
	v3 := plugin.built[2]
	if r, _, _ := v2.state(); !r {
		t.Error("the failed candidate was not retired when a newer spec came")
	}
	v3.loaded("cccc", "")
	reconcile(t, c, k)
	if got := plugin.last(); got != "team-a/spread@cccc" {
		t.Errorf("published %q, want team-a/spread@cccc", got)
	}
	if v1.superseded != "team-a/spread@cccc" {
		t.Errorf("v1 superseded by %q, want team-a/spread@cccc", v1.superseded)
	}
	if got := statusOf(c.entryOf(t, k)); got.Conditions[0].Status != metav1.ConditionTrue || got.LastError != "" {
		t.Errorf("status once v3 serves: %+v", got)
	}
	waitClosed(t, v1, false)
	waitClosed(t, v2, false)
	if _, closed, _ := v3.state(); closed {
		t.Error("the serving policy was closed")
	}

	// Deleted: nothing serves, and the policy's series go.
	if err := c.informers[true].GetStore().Delete(&unstructured.Unstructured{Object: map[string]interface{}{
		"metadata": map[string]interface{}{"namespace": "team-a", "name": "spread"}}}); err != nil {
		t.Fatal(err)
	}
	reconcile(t, c, k)
	if got := plugin.last(); got != "" {
		t.Errorf("published %q after the delete, want nothing", got)
	}
	waitClosed(t, v3, true)
	if got := c.Serving(); len(got) != 0 {
		t.Errorf("Serving() = %v after the delete", got)
	}
}

// waitClosed waits out the retired grace for p to be closed.
func waitClosed(t *testing.T, p *testPolicy, forget bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		retired, closed, forgot := p.state()
		if closed {
			if !retired {
				t.Errorf("%s closed without being retired", p.name)
			}
			if forgot != forget {
				t.Errorf("%s closed with forget=%v, want %v", p.name, forgot, forget)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not closed 30 s after its retired grace (20 ms)", p.name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An object deleted and created again under the same name is a new
// policy; the old one's series stay, since the name runs again.
func TestRecreatedObjectIsANewPolicy(t *testing.T) {
	plugin := &testPlugin{}
	c := newTestController(t, plugin)
	k := put(t, c, teamPolicy("u1", 1, "v1"))
	plugin.built[0].loaded("aaaa", "")
	reconcile(t, c, k)
	put(t, c, teamPolicy("u2", 1, "v1"))
	if len(plugin.built) != 2 {
		t.Fatalf("built %d policies, want a new one for the new object", len(plugin.built))
	}
	waitClosed(t, plugin.built[0], false)
	if got := plugin.last(); got != "" {
		t.Errorf("published %q while the new object loads, want nothing: the old object is gone", got)
	}
}

// A policy scoped to other profiles is neither run nor reported by this
// profile's plugin.
func TestOtherProfilesPolicy(t *testing.T) {
	obj := teamPolicy("u1", 1, "v1")
	obj.Spec.Profiles = []string{"batch-scheduler"}
	for profile, runs := range map[string]bool{"default-scheduler": false, "batch-scheduler": true, "": true} {
		plugin := &testPlugin{profile: profile}
		c := newTestController(t, plugin)
		put(t, c, obj)
		if got := len(plugin.built) == 1; got != runs {
			t.Errorf("profile %q: runs the policy = %v, want %v", profile, got, runs)
		}
	}
}

// What the apiserver cannot check is refused with the field and the fix,
// and a refused update leaves the serving version serving.
func TestRefusedSpecs(t *testing.T) {
	for name, tc := range map[string]struct {
		obj  func() runtime.Object
		want string
	}{
		"file source in a namespace": {func() runtime.Object {
			p := teamPolicy("u", 1, "")
			p.Spec.Source = policyv1alpha1.Source{File: "/etc/p.wasm"}
			return p
		}, "spec.source.file: a SchedulingPolicy takes its module from a ConfigMap in its own namespace"},
		"another namespace's ConfigMap": {func() runtime.Object {
			p := teamPolicy("u", 1, "")
			p.Spec.Source.ConfigMap.Namespace = "team-b"
			return p
		}, `spec.source.configMap.namespace: Forbidden: "team-b" is not the policy's namespace`},
		"TLS off in a namespace": {func() runtime.Object {
			p := teamPolicy("u", 1, "")
			p.Spec.Source = policyv1alpha1.Source{OCI: &policyv1alpha1.OCISource{Ref: "registry.example/p:1", Insecure: true}}
			return p
		}, "spec.source.oci.insecure: Forbidden"},
		"another namespace's pull secret": {func() runtime.Object {
			p := teamPolicy("u", 1, "")
			p.Spec.Source = policyv1alpha1.Source{OCI: &policyv1alpha1.OCISource{Ref: "registry.example/p:1",
				PullSecret: &policyv1alpha1.SecretReference{Namespace: "kube-system", Name: "s"}}}
			return p
		}, `spec.source.oci.pullSecret.namespace: Forbidden: "kube-system"`},
		"weight 0": {func() runtime.Object {
			p := teamPolicy("u", 1, "")
			zero := int32(0)
			p.Spec.Weight = &zero
			return p
		}, "spec.weight"},
		"an args policy's name": {func() runtime.Object {
			return &policyv1alpha1.ClusterSchedulingPolicy{
				TypeMeta:   metav1.TypeMeta{APIVersion: "policy.wasmsched.io/v1alpha1", Kind: "ClusterSchedulingPolicy"},
				ObjectMeta: metav1.ObjectMeta{Name: "team-isolation", UID: "u", Generation: 1},
				Spec: policyv1alpha1.ClusterSchedulingPolicySpec{
					Source: policyv1alpha1.Source{ConfigMap: &policyv1alpha1.ConfigMapSource{Namespace: "kube-system", Name: "m", Key: "policy.wasm"}},
				},
			}
		}, `metadata.name: Duplicate value: "team-isolation" is the name of a policy in the scheduler's WasmPolicy args; rename the object`},
	} {
		t.Run(name, func(t *testing.T) {
			plugin := &testPlugin{args: []string{"team-isolation"}}
			c := newTestController(t, plugin)
			k := put(t, c, tc.obj())
			if len(plugin.built) != 0 {
				t.Errorf("built a policy of a refused spec")
			}
			st := statusOf(c.entryOf(t, k))
			if cond := st.Conditions[0]; cond.Reason != policyv1alpha1.ReasonInvalidSpec || !strings.Contains(cond.Message, tc.want) {
				t.Errorf("status %s %q, want InvalidSpec containing %q", cond.Reason, cond.Message, tc.want)
			}
		})
	}
	// Refused after a good version: it keeps serving.
	plugin := &testPlugin{}
	c := newTestController(t, plugin)
	k := put(t, c, teamPolicy("u1", 1, "v1"))
	plugin.built[0].loaded("aaaa", "")
	reconcile(t, c, k)
	bad := teamPolicy("u1", 2, "v1")
	zero := int32(0)
	bad.Spec.Weight = &zero
	put(t, c, bad)
	if got := plugin.last(); got != "team-a/spread@aaaa" {
		t.Errorf("published %q after a refused update, want team-a/spread@aaaa", got)
	}
	if cond := statusOf(c.entryOf(t, k)).Conditions[0]; !strings.Contains(cond.Message, "the previous module aaaa keeps serving") {
		t.Errorf("status %q, want it to say the previous module keeps serving", cond.Message)
	}
}

// The objects listed at start hold the scheduler back until each one's
// first load ended, in a module, a failure or a refusal.
func TestStartWaitsForFirstLoads(t *testing.T) {
	plugin := &testPlugin{}
	c := newTestController(t, plugin)
	good, failing, refused := teamPolicy("u1", 1, ""), teamPolicy("u2", 1, ""), teamPolicy("u3", 1, "")
	failing.Name, refused.Name = "failing", "refused"
	refused.Spec.Source.ConfigMap.Namespace = "elsewhere"
	c.mu.Lock()
	for _, n := range []string{"spread", "failing", "refused"} {
		k := key{"team-a", n}
		c.entries[k] = &entry{key: k, initial: true}
		c.pending++
	}
	c.started = true
	c.mu.Unlock()
	synced := func() bool {
		select {
		case <-c.synced:
			return true
		default:
			return false
		}
	}
	kg, kf := put(t, c, good), put(t, c, failing)
	put(t, c, refused)
	if synced() {
		t.Fatal("synced while two objects are still loading")
	}
	plugin.built[0].loaded("aaaa", "")
	reconcile(t, c, kg)
	if synced() {
		t.Fatal("synced while one object is still loading")
	}
	plugin.built[1].loaded("", "CompileError")
	reconcile(t, c, kf)
	if !synced() {
		t.Fatal("not synced once every object's first load ended")
	}
}

func TestStatusMessages(t *testing.T) {
	long := strings.Repeat("é", 3000) // 6000 bytes
	e := &entry{generation: 4, candidate: &run{Policy: &testPolicy{load: Load{FailureReason: "SHA256Mismatch", FailureMessage: long}}}}
	st := statusOf(e)
	cond := st.Conditions[0]
	if len(cond.Message) > maxStatusMessage || !strings.HasSuffix(cond.Message, "...") || !strings.HasPrefix(cond.Message, "SHA256Mismatch: é") {
		t.Errorf("a long message: %d bytes, ends %q", len(cond.Message), cond.Message[len(cond.Message)-8:])
	}
	if cond.Reason != policyv1alpha1.ReasonSHA256Mismatch || st.LastError != cond.Message || cond.ObservedGeneration != 4 {
		t.Errorf("status %+v", st)
	}
	for reason, want := range map[string]string{"SourceError": policyv1alpha1.ReasonSourceMissing, "NotFound": "NotFound", "MemoryBudget": "MemoryBudget", "ImportDenied": policyv1alpha1.ReasonCompileError} {
		if got := readyReason(reason); got != want {
			t.Errorf("readyReason(%s) = %s, want %s", reason, got, want)
		}
	}
	if got := fieldManager(strings.Repeat("n", 200) + "/x"); len(got) != 128 || !strings.HasPrefix(got, "wasmsched/nnn") {
		t.Errorf("fieldManager of a long identity: %q (%d)", got, len(got))
	}
}
