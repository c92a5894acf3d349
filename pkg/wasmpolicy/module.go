package wasmpolicy

import (
	"context"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host"
)

// module is what the plugin needs from one loaded module version. The host's
// *host.Version implements it; the plugin's table-driven tests implement it
// with fake guests (fake_test.go), so failurePolicy, audit, batching and
// score combination are tested in milliseconds without compiling a guest.
type module interface {
	// Exports reports which extension points the module implements.
	Exports() host.Exports
	// SHA256 identifies the module version in logs, events and metrics.
	SHA256() string
	// Signature is what pod signatures hold for this version, ok false
	// when it may not be signed (see host.Version.Signature).
	Signature() (sig string, ok bool)
	// Call runs one extension point (see host.Version.Call).
	Call(ctx context.Context, kind host.CallKind, pod *host.PodState, node fwk.NodeInfo, pc *host.PolicyCycle, scores []int64) (int64, host.Result, *host.CallError)
	// CallNodes runs the batch form of Filter or Score (see host.Version.CallNodes).
	CallNodes(ctx context.Context, kind host.CallKind, pod *host.PodState, nodes []fwk.NodeInfo, pc *host.PolicyCycle, results []host.Result, scores []int64) (int, *host.CallError)
	// PoolStats, MemoryBytes and MemoryShare feed the pool and memory gauges.
	PoolStats() (live, inUse int64)
	MemoryBytes() int64
	MemoryShare() int64
}

// policyRuntime is a policy's module side: the version serving now and the
// loading of new ones (host.Policy behind hostRuntime).
type policyRuntime interface {
	// Current returns the module serving now, or nil before the first load.
	Current() module
	// Load makes src the serving module, or keeps the current one and
	// returns a *host.LoadError.
	Load(ctx context.Context, src []byte, wantSHA256 string) (module, error)
	// SuppressedLines counts the policy's output lines its rate limit dropped.
	SuppressedLines() int64
	// RowStats counts the batch rows the policy evaluated, the nodes that
	// shared an equal row's verdict, and those answered from a verdict
	// remembered across cycles (docs/abi.md §3.4).
	RowStats() (evaluated, shared, remembered int64)
	Close(ctx context.Context) error
}

// hostRuntime adapts *host.Policy to policyRuntime.
type hostRuntime struct{ p *host.Policy }

func (r hostRuntime) Current() module {
	if v := r.p.Current(); v != nil {
		return v
	}
	return nil // not a typed nil: callers compare with nil
}

func (r hostRuntime) Load(ctx context.Context, src []byte, wantSHA256 string) (module, error) {
	v, err := r.p.Load(ctx, src, wantSHA256)
	if err != nil {
		return nil, err
	}
	return v, nil
}

func (r hostRuntime) SuppressedLines() int64 { return r.p.SuppressedLines() }

func (r hostRuntime) RowStats() (int64, int64, int64) { return r.p.RowStats() }

func (r hostRuntime) Close(ctx context.Context) error { return r.p.Close(ctx) }
