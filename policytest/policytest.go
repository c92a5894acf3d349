// The main line only: it follows the main line's kube-scheduler (its
// request options and NodeInfo interface); see docs/kubernetes.md.

//go:build !k8s_1_34

// Package policytest runs a compiled policy module against pods and nodes
// built in Go, inside a plain `go test`, through the same host and plugin
// code as the scheduler, in kube-scheduler's framework: PreFilter, Filter,
// PreScore, Score and NormalizeScore, with the module's real imports,
// limits and ABI.
//
//	func TestTeamIsolation(t *testing.T) {
//		p := policytest.Load(t, policytest.Build(t, policytest.TinyGo, "."), policytest.Config("key=team"))
//		pod := policytest.Pod("web").Label("team", "a").CPU("500m").Obj()
//		v := p.Filter(pod, policytest.Node("n1").Label("team", "b").Obj())
//		if v.Passed() { t.Fatal("a team-b node admitted a team-a pod") }
//	}
//
// The module is built once per test binary, and runs in kube-scheduler's
// own framework as the scheduler runs it (WasmPolicy.Explain). A policy's
// own module requires github.com/wasmsched/wasmsched and the guest SDK,
// without the staging replace lines kube-scheduler's own build needs.
package policytest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/casetable"
	"github.com/wasmsched/wasmsched/pkg/nodeinfo"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// Toolchain is a guest compiler.
type Toolchain = testguests.Toolchain

// The toolchains a policy can be built with.
const (
	TinyGo = testguests.TinyGo
	Go     = testguests.Go
)

// Toolchains lists both, so a test can run its cases under each.
var Toolchains = testguests.Toolchains

// Build compiles the policy's main package in dir (relative to the test's
// working directory, which `go test` sets to the package's directory: "."
// for a policy tested next to its main.go) with a toolchain, once per test
// binary, and returns the module's path. TinyGo is $TINYGO or tinygo on
// PATH; Go is the go command running the test. Inside the wasmsched
// repository, modules are cached in _output/guests across runs.
func Build(t testing.TB, tc Toolchain, dir string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if root, err := testguests.Root(); err == nil {
		if rel, err := filepath.Rel(root, abs); err == nil && !strings.HasPrefix(rel, "..") {
			p, err := testguests.Build(tc, rel)
			if err != nil {
				t.Fatalf("building %s with %s: %v", dir, tc, err)
			}
			return p
		}
	}
	p, err := buildOutside(tc, abs)
	if err != nil {
		t.Fatalf("building %s with %s: %v", dir, tc, err)
	}
	return p
}

var (
	builtMu sync.Mutex
	built   = map[string]string{}
)

// buildOutside builds a policy of the author's own module into a temporary
// directory, once per test binary.
func buildOutside(tc Toolchain, dir string) (string, error) {
	builtMu.Lock()
	defer builtMu.Unlock()
	key := string(tc) + "\x00" + dir
	if p, ok := built[key]; ok {
		return p, nil
	}
	out, err := os.MkdirTemp("", "policytest-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(out, filepath.Base(dir)+".wasm")
	var cmd *exec.Cmd
	switch tc {
	case Go:
		cmd = exec.Command("go", "build", "-buildmode=c-shared", "-o", path, ".")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	case TinyGo:
		tinygo := os.Getenv("TINYGO")
		if tinygo == "" {
			if tinygo, err = exec.LookPath("tinygo"); err != nil {
				return "", fmt.Errorf("TinyGo not found: put tinygo on PATH or set $TINYGO (wasmsched's hack/install-tinygo.sh installs v0.41.1)")
			}
		}
		cmd = exec.Command(tinygo, "build", "-target=wasip1", "-buildmode=c-shared", "-scheduler=none", "-no-debug", "-opt=2", "-o", path, ".")
	default:
		return "", fmt.Errorf("unknown toolchain %q", tc)
	}
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, b)
	}
	built[key] = path
	return path, nil
}

// Option changes how a policy is loaded.
type Option func(*loading)

// loading is the policy being loaded and the objects of its reads.
type loading struct {
	policy  config.Policy
	objects [][]*unstructured.Unstructured
	err     error
}

// Config sets the policy's config string (sdk.Config() in the guest).
func Config(s string) Option { return func(l *loading) { l.policy.Config = s } }

// Timeout sets the per-call timeout (default 1s, generous for tests).
func Timeout(d time.Duration) Option { return func(l *loading) { l.policy.Timeout = d } }

// MemoryLimit sets the instance memory limit (default 64 MiB).
func MemoryLimit(bytes int64) Option { return func(l *loading) { l.policy.MemoryLimit = bytes } }

// Objects declares the policy's next granted object read, as
// policies[].objects does (the first call is objects[0], which
// sdk.ObjectsOf(0) reads), and gives it the objects the scheduler's watch
// of the kind would hold: typed objects (a *coordinationv1.Lease) or
// *unstructured.Unstructured ones (a custom resource). Their declared
// fields are read by path, as the scheduler reads them. Load grants the
// kind itself: a test is its own operator.
func Objects(apiVersion, kind string, fields []string, objs ...runtime.Object) Option {
	return func(l *loading) {
		l.policy.Objects = append(l.policy.Objects, config.ObjectRead{APIVersion: apiVersion, Kind: kind, Fields: fields})
		var us []*unstructured.Unstructured
		for _, o := range objs {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
			if err != nil {
				l.err = fmt.Errorf("Objects %s %s: %w", apiVersion, kind, err)
				return
			}
			u := &unstructured.Unstructured{Object: m}
			u.SetAPIVersion(apiVersion)
			u.SetKind(kind)
			us = append(us, u)
		}
		l.objects = append(l.objects, us)
	}
}

// PolicyOption changes the policy's settings (a config.Policy, as
// policies[] of WasmPolicy's args holds them) for what no other Option
// sets: realClock, patchPrefixes, weight, mode.
func PolicyOption(set func(*config.Policy)) Option {
	return func(l *loading) { set(&l.policy) }
}

// Reads declares what the policy may read beyond the pod and the node, as
// policies[].reads does: NodePods, WholeObjects, Cluster, Namespaces,
// Volumes, Devices (which reads no claims here: policytest has no DRA
// objects; use a case table's deviceRequests and nodeDevices). Load
// refuses an unknown name, listing the valid ones. Without the declaration
// a read fails closed: the node's Verdict is the policy error "declare
// NodePods in policies[].reads to use Node.Pods" (see Verdict.Code).
func Reads(names ...string) Option {
	return func(l *loading) { l.policy.Reads = append([]string(nil), names...) }
}

// FailurePolicy sets what a policy error makes of a node: Fail (the
// default) rejects it, Ignore admits it (see Verdict.Code).
func FailurePolicy(f config.FailurePolicy) Option {
	return func(l *loading) { l.policy.FailurePolicy = f }
}

// Policy is a module loaded into the real WasmPolicy plugin.
type Policy struct {
	t      testing.TB
	plugin *wasmpolicy.WasmPolicy
}

// Load loads the module at path; the test fails if it does not load.
func Load(t testing.TB, path string, opts ...Option) *Policy {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatal(err)
	}
	l := &loading{policy: configv1.DefaultPolicy(filepath.Base(path), config.Source{File: abs})}
	l.policy.Timeout = time.Second // a test machine is slower than a scheduler node
	for _, o := range opts {
		o(l)
	}
	if l.err != nil {
		t.Fatal(l.err)
	}
	pc := l.policy
	args := configv1.DefaultArgs(pc)
	args.MaxInstancesPerPolicy, args.FilePollInterval = 2, time.Hour
	args.CompilationCacheDir = filepath.Join(os.TempDir(), "wasmsched-policytest-cache")
	var readers []host.ObjectReader
	for i, r := range pc.Objects {
		args.Objects = append(args.Objects, casetable.LocalGrant(r))
		data, err := casetable.ObjectData(r, l.objects[i])
		if err != nil {
			t.Fatalf("Objects %s %s: %v", r.APIVersion, r.Kind, err)
		}
		readers = append(readers, casetable.ObjectReader(data))
	}
	// A test must see the module's result, not a scheduler's startup bound:
	// compiling a Go guest cold under -race on a busy machine can take longer
	// than kube-scheduler's 10 s. A module that fails to load still fails at once.
	plugin, err := wasmpolicy.NewWithArgs(context.Background(), args, wasmpolicy.NewClientHandle(nil, nil), wasmpolicy.WithInitialLoadTimeout(5*time.Minute),
		wasmpolicy.WithObjectReaders(func(string) []host.ObjectReader { return readers }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plugin.Close() })
	if missing := plugin.Unloaded(); len(missing) > 0 {
		t.Fatalf("module did not load: %v (run with -v to see the host's log)", missing)
	}
	return &Policy{t: t, plugin: plugin}
}

// Verdict is the policy's decision on one node.
type Verdict struct {
	// Code is Pass, Skip, Unschedulable or UnschedulableAndUnresolvable.
	// A policy error (an sdk.Error status, a read its Reads do not
	// declare, a trap, a timeout) arrives as the policy's FailurePolicy
	// makes it: with Fail, the default, UnschedulableAndUnresolvable with
	// the Reason "policy error: " and the error; with Ignore, Pass.
	Code   string
	Reason string
	// Score is the normalized score (0..100) for a node the policy admits,
	// when the policy scores; RawScore is what the guest returned.
	Score, RawScore *int64
}

// Passed reports whether the node is admitted.
func (v Verdict) Passed() bool { return v.Code == "Pass" || v.Code == "Skip" }

// Schedule runs a whole cycle for pod on the nodes; running pods are placed
// on their spec.nodeName. It returns the verdict for every node, by name.
func (p *Policy) Schedule(pod *v1.Pod, nodes []*v1.Node, running ...*v1.Pod) map[string]Verdict {
	p.t.Helper()
	ex := p.plugin.Explain(context.Background(), pod, nodeinfo.List(nodes, running))
	out := make(map[string]Verdict, len(ex.Nodes))
	for _, n := range ex.Nodes {
		pv := n.Policies[0]
		out[n.Node] = Verdict{Code: pv.Verdict, Reason: pv.Reason, Score: pv.Score, RawScore: pv.RawScore}
	}
	return out
}

// Filter is Schedule on one node.
func (p *Policy) Filter(pod *v1.Pod, node *v1.Node, running ...*v1.Pod) Verdict {
	p.t.Helper()
	return p.Schedule(pod, []*v1.Node{node}, running...)[node.Name]
}

// PodBuilder builds a Pod with one container.
type PodBuilder struct{ pod *v1.Pod }

// Pod starts a pod in namespace default.
func Pod(name string) *PodBuilder {
	return &PodBuilder{&v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "app", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{}}}}},
	}}
}

// Label sets a label.
func (b *PodBuilder) Label(k, v string) *PodBuilder {
	if b.pod.Labels == nil {
		b.pod.Labels = map[string]string{}
	}
	b.pod.Labels[k] = v
	return b
}

// Request sets a resource request of the container.
func (b *PodBuilder) Request(name v1.ResourceName, q string) *PodBuilder {
	b.pod.Spec.Containers[0].Resources.Requests[name] = resource.MustParse(q)
	return b
}

// CPU and Memory set the container's requests.
func (b *PodBuilder) CPU(q string) *PodBuilder    { return b.Request(v1.ResourceCPU, q) }
func (b *PodBuilder) Memory(q string) *PodBuilder { return b.Request(v1.ResourceMemory, q) }

// Toleration adds a toleration.
func (b *PodBuilder) Toleration(key string, effect v1.TaintEffect) *PodBuilder {
	b.pod.Spec.Tolerations = append(b.pod.Spec.Tolerations, v1.Toleration{Key: key, Operator: v1.TolerationOpExists, Effect: effect})
	return b
}

// On places the pod on a node (for running pods).
func (b *PodBuilder) On(node string) *PodBuilder { b.pod.Spec.NodeName = node; return b }

// Obj returns the pod.
func (b *PodBuilder) Obj() *v1.Pod { return b.pod }

// NodeBuilder builds a Node; it starts with 4 CPUs, 16Gi and 110 pods allocatable.
type NodeBuilder struct{ node *v1.Node }

// Node starts a node.
func Node(name string) *NodeBuilder {
	res := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110")}
	return &NodeBuilder{&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Capacity: res.DeepCopy(), Allocatable: res}}}
}

// Label sets a label.
func (b *NodeBuilder) Label(k, v string) *NodeBuilder {
	if b.node.Labels == nil {
		b.node.Labels = map[string]string{}
	}
	b.node.Labels[k] = v
	return b
}

// Annotation sets an annotation.
func (b *NodeBuilder) Annotation(k, v string) *NodeBuilder {
	if b.node.Annotations == nil {
		b.node.Annotations = map[string]string{}
	}
	b.node.Annotations[k] = v
	return b
}

// Taint adds a taint.
func (b *NodeBuilder) Taint(key string, effect v1.TaintEffect) *NodeBuilder {
	b.node.Spec.Taints = append(b.node.Spec.Taints, v1.Taint{Key: key, Effect: effect})
	return b
}

// Allocatable sets an allocatable (and capacity) quantity.
func (b *NodeBuilder) Allocatable(name v1.ResourceName, q string) *NodeBuilder {
	b.node.Status.Allocatable[name] = resource.MustParse(q)
	b.node.Status.Capacity[name] = resource.MustParse(q)
	return b
}

// Cordoned marks the node unschedulable.
func (b *NodeBuilder) Cordoned() *NodeBuilder { b.node.Spec.Unschedulable = true; return b }

// Obj returns the node.
func (b *NodeBuilder) Obj() *v1.Node { return b.node }
