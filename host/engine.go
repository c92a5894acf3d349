// Package host runs wasmsched policies: it loads and validates wasm modules,
// compiles each module version once (with an on-disk compilation cache), pools
// instances so the scheduler's parallel Filter and Score calls never share one,
// enforces per-call deadlines and memory limits, and swaps module versions
// atomically when a policy's source changes.
//
// The package knows about Pods and NodeInfos but nothing about how a policy is
// configured or where its bytes come from; see pkg/source for that and
// pkg/wasmpolicy for the kube-scheduler plugin built on top.
package host

import (
	"context"
	"fmt"
	"os"

	"github.com/tetratelabs/wazero"
)

// Limits that apply to every policy regardless of its args. They bound what a
// hostile module can make the host do; docs/security.md lists them.
const (
	// MaxModuleSize is the largest module accepted, after gzip decompression.
	MaxModuleSize = 32 << 20
	// MaxReasonLength is the longest reason string kept from a guest; longer
	// reasons are truncated so events and logs stay readable.
	MaxReasonLength = 1024
	// MaxCycleStateSize bounds what prefilter/prescore may store per cycle.
	MaxCycleStateSize = 1 << 20
	// MaxLogSize bounds one log call from a guest.
	MaxLogSize = 16 << 10
)

// Engine owns what all policies share: the compilation cache. One Engine per
// process; it is safe for concurrent use.
type Engine struct {
	cache wazero.CompilationCache
}

// EngineOptions configures an Engine.
type EngineOptions struct {
	// CacheDir is where compiled machine code is kept across restarts, so a
	// restart does not recompile every module (seconds for Go guests). Empty
	// means an in-memory cache only.
	CacheDir string
}

// NewEngine creates an Engine. Policies created from it share its
// compilation cache, so two policies loading the same bytes compile them once.
func NewEngine(opts EngineOptions) (*Engine, error) {
	e := &Engine{}
	if opts.CacheDir == "" {
		e.cache = wazero.NewCompilationCache()
		return e, nil
	}
	if err := os.MkdirAll(opts.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("compilation cache dir %q: %w", opts.CacheDir, err)
	}
	c, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("compilation cache dir %q: %w", opts.CacheDir, err)
	}
	e.cache = c
	return e, nil
}

// Close releases the compilation cache. Policies must be closed first.
func (e *Engine) Close() error {
	return e.cache.Close(context.Background())
}
