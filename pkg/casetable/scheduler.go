package casetable

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// scheduler is the module as the scheduler runs it: a WasmPolicy plugin
// whose one policy is the module with spec's and the table's settings. A
// case's Status is what a scheduling cycle through it gives the case's
// node, so the failurePolicy, a PreFilter result and the cycle's budget
// mean what they mean in the scheduler; the table's own checks (the
// guest's codes, batch against single forms) call the module directly.
type scheduler struct {
	// objects are the case's objects, which both the module and the plugin read.
	objects *caseObjects
	plugin  *wasmpolicy.WasmPolicy
	dir     string
}

func newScheduler(ctx context.Context, spec host.PolicySpec, wasm []byte, f *casetest.File) (*scheduler, error) {
	dir, err := os.MkdirTemp("", "wasmsched-casetable-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "policy.wasm")
	if err := os.WriteFile(path, wasm, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	pc := configv1.DefaultPolicy(spec.Name, config.Source{File: path})
	pc.Config, pc.Reads, pc.PatchPrefixes, pc.FailurePolicy = spec.Config, spec.Reads, spec.PatchPrefixes, failurePolicy(f)
	reads, grants := objectReads(f)
	pc.Objects = reads
	if spec.Timeout > 0 {
		pc.Timeout = spec.Timeout
	}
	if spec.PreEnqueueTimeout > 0 {
		pc.PreEnqueueTimeout = spec.PreEnqueueTimeout
	}
	if spec.MemoryLimitBytes > 0 {
		pc.MemoryLimit = spec.MemoryLimitBytes
	}
	args := configv1.DefaultArgs(pc)
	args.Objects = grants
	objs := &caseObjects{}
	args.MaxInstancesPerPolicy, args.FilePollInterval = max(int32(spec.MaxInstances), 1), time.Hour
	// Compiled once per module across tables and runs, as policytest does.
	args.CompilationCacheDir = filepath.Join(os.TempDir(), "wasmsched-casetable-cache")
	opts := []wasmpolicy.Option{wasmpolicy.WithInitialLoadTimeout(5 * time.Minute),
		wasmpolicy.WithObjectReaders(func(string) []host.ObjectReader { return objs.readers(len(reads)) })}
	if !spec.Clock.IsZero() {
		opts = append(opts, wasmpolicy.WithClock(spec.Clock))
	}
	w, err := wasmpolicy.NewWithArgs(ctx, args, wasmpolicy.NewClientHandle(nil, nil), opts...)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &scheduler{plugin: w, dir: dir, objects: objs}
	if missing := w.Unloaded(); len(missing) > 0 {
		s.close()
		return nil, fmt.Errorf("the module does not load as a WasmPolicy policy: %v", missing)
	}
	return s, nil
}

func (s *scheduler) close() {
	_ = s.plugin.Close()
	_ = os.RemoveAll(s.dir)
}

// statuses are the status of each of nodes after a scheduling cycle of pod
// on them, as Case.Status spells it, with the case's cluster view.
func (s *scheduler) statuses(ctx context.Context, pod *v1.Pod, nodes []fwk.NodeInfo, view *host.ClusterView) []string {
	ex := s.plugin.ExplainWith(ctx, pod, nodes, wasmpolicy.ExplainOptions{Cluster: view})
	out := make([]string, len(nodes))
	for j := range out {
		switch n := ex.Nodes[j]; {
		case n.Feasible:
			out[j] = fwk.Success.String()
		default:
			out[j] = n.Status + ": " + n.Reason
		}
	}
	return out
}
