// Package defaults holds the engine's defaults that the policy API
// (pkg/apis/config/v1) defaults its fields to: plain values, with no
// runtime behind them, so that the API packages (the args' and the policy
// objects' types, defaults and validation) build without the engine and
// wazero. The host re-exports each under its own name.
package defaults

import "time"

const (
	// MaxInstances is the size of a policy's instance pool when its spec
	// sets none: kube-scheduler's default parallelism.
	MaxInstances = 16
	// PreEnqueueTimeout bounds a preenqueue call of a policy that sets no
	// preEnqueueTimeout, unless its timeout is shorter: kube-scheduler
	// runs PreEnqueue with its scheduling queue locked.
	PreEnqueueTimeout = 10 * time.Millisecond
	// RetiredGrace is how long a replaced module serves the cycles that
	// pinned it.
	RetiredGrace = 30 * time.Second
	// MemoryLimitBytes is a policy's memory limit when it sets none.
	MemoryLimitBytes = 64 << 20
	// StackLimitBytes is a policy's stack limit when it sets none. The
	// example policies' calls use 10-20 KiB of stack (wazero's starts at
	// 10 KiB); this leaves a policy a dozen times that.
	StackLimitBytes = 256 << 10
	// MaxFunctions, MaxCodeBytes and MaxLocals are the compile limits'
	// defaults: the functions a module defines, the total size of its
	// function bodies, and the locals all its functions declare together.
	MaxFunctions = 50_000
	MaxCodeBytes = 4 << 20
	MaxLocals    = 1_000_000
)

// PreEnqueueTimeoutFor is the preenqueue timeout of a policy: set when it
// is positive, else PreEnqueueTimeout or timeout, whichever is shorter.
// It is the one rule: the args' defaulting, the plugin and the host's
// PolicySpec all apply it.
func PreEnqueueTimeoutFor(timeout, set time.Duration) time.Duration {
	if set > 0 {
		return set
	}
	return min(PreEnqueueTimeout, timeout)
}
