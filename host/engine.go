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
	"sync"

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

	// modules holds a lock per module digest being compiled (lockModule).
	modulesMu sync.Mutex
	modules   map[string]*moduleLock
}

// moduleLock serializes the compilations of one module's bytes.
type moduleLock struct {
	mu   sync.Mutex
	refs int
}

// lockModule makes compilations of the same bytes (digest) wait for each
// other, across every policy of the engine, and returns the unlock.
//
// Why: wazero v1.12.0 adds a module read from the file compilation cache to
// its in-memory table before compiling the module's entry preambles
// (internal/engine/wazevo/engine_cache.go, getCompiledModule). A concurrent
// CompileModule of the same bytes, from another policy's runtime sharing
// the cache, gets that half-built module, and instantiating it panics in
// moduleEngine.NewFunction (index out of range on entryPreamblesPtrs): the
// scheduler crashed on about 1 in 5 warm starts with 40 Go policies, 8 per
// module (upstream wazero/wazero#2547, open; no release has the fix).
// Distinct modules still compile in parallel. When a wazero release fixes
// #2547, this lock can go (docs/architecture.md, RATIONALE).
func (e *Engine) lockModule(digest string) (unlock func()) {
	e.modulesMu.Lock()
	if e.modules == nil {
		e.modules = map[string]*moduleLock{}
	}
	l := e.modules[digest]
	if l == nil {
		l = &moduleLock{}
		e.modules[digest] = l
	}
	l.refs++
	e.modulesMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		e.modulesMu.Lock()
		if l.refs--; l.refs == 0 {
			delete(e.modules, digest)
		}
		e.modulesMu.Unlock()
	}
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
