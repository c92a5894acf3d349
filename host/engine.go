// Package host runs wasmsched policies: it loads and validates wasm modules,
// compiles each distinct module once (with an on-disk compilation cache) and
// shares it between the policies that use it, creates instances on demand so
// the scheduler's parallel Filter and Score calls never share one, keeps all
// policies together within a memory budget, enforces per-call deadlines and
// memory limits, and swaps module versions atomically when a policy's source
// changes.
//
// The package is the runtime. What a guest can call and read (the host
// functions and the data behind them) is package internal/hostabi; reading
// and rewriting the untrusted binary before anything runs is
// internal/wasmbin and internal/fuel. The package knows about Pods and
// NodeInfos but nothing about how a policy is configured or where its
// bytes come from; see pkg/source for that and pkg/wasmpolicy for the
// kube-scheduler plugin built on top.
package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host/internal/fuel"
	"github.com/wasmsched/wasmsched/host/internal/hostabi"
)

// Limits that apply to every policy regardless of its args. They bound what a
// hostile module can make the host do; docs/security.md lists them.
const (
	// MaxModuleSize is the largest module accepted, after gzip decompression.
	MaxModuleSize = 32 << 20
	// MaxReasonLength is the longest reason string kept from a guest; longer
	// reasons are truncated so events and logs stay readable.
	MaxReasonLength = abi.MaxReasonLength
)

// Engine owns what its policies share: a wazero runtime per memory limit,
// the compiled modules (one per distinct bytes and memory limit), the
// compilation cache, the memory budget and the caches of what policies
// read. Its lifetime is its owner's: each WasmPolicy plugin (one per
// scheduler profile), the extender and each CLI command make one and
// close it, so they never see each other's state; the engines of a
// process share only its Process (CPUs and Go heap). It is safe for
// concurrent use.
type Engine struct {
	cache        wazero.CompilationCache
	budget       *memoryBudget
	interruption Interruption
	// measurements is where the host heap measured for each module is kept
	// across restarts ("" without a cache dir): measuring takes garbage
	// collections, which a restart need not pay again.
	measurements string

	mu       sync.Mutex
	closed   bool
	runtimes map[uint32]wazero.Runtime // by memory limit in pages
	modules  map[moduleKey]*sharedModule

	stopReaper chan struct{}
	reaperDone chan struct{}

	// proc is what the engine shares with every engine of the process.
	proc *Process

	// What the engine's policies read, cached for all of them for as long
	// as the engine lives: node models and lists by name and NodeInfo
	// generation (nodeCache says why per engine), the strings node tables
	// intern, and the table layouts their instances declared.
	caches *hostabi.Caches
	// memoBytes is about what the memos of the engine's versions hold
	// together, their templates seen included; memoCap bounds it
	// (memoCapOf), and the budget counts it (memoryBudget.used).
	memoBytes atomic.Int64
	memoCap   int64
}

// moduleKey identifies a compiled module: its bytes and the memory limit
// of the runtime it is compiled for.
type moduleKey struct {
	pages  uint32
	digest string
}

// sharedModule is one compiled module and the policies using it. The first
// load of its key compiles it; concurrent loads of the same key wait for that
// compilation instead of compiling again.
type sharedModule struct {
	key   moduleKey
	ready chan struct{} // closed when compiled or failed
	// Set before ready is closed:
	cm      wazero.CompiledModule
	exports Exports
	reason  string // LoadError reason on failure
	err     error
	// cost is the module's compiled code and the host heap its compiled
	// form holds, measured when it compiled.
	code, heap int64
	// tableRoom is the host memory table.grow can add to one instance
	// (maxTableGrowth), charged to each instance up front.
	tableRoom int64
	// instHeap is the host heap one instance holds (wazero's instance data:
	// function tables, globals, the module context), measured when its first
	// instance was made; -1 until then.
	instHeap atomic.Int64
	// instTries counts the measurements of instHeap that read nothing
	// (under measureMu).
	instTries int

	refs int // under Engine.mu
	// clean says that no instance or module was released while the module
	// heap was measured (measureMu held): only then is it kept (and the
	// instance heap must be clean too).
	clean bool
}

// cost is what the module itself holds in memory.
func (m *sharedModule) cost() int64 { return m.code + m.heap }

// EngineOptions configures an Engine.
type EngineOptions struct {
	// CacheDir is where compiled machine code is kept across restarts, so a
	// restart does not recompile every module (seconds for Go guests). Empty
	// means an in-memory cache only.
	CacheDir string
	// MemoryBudget bounds the memory of all policies together: compiled
	// code, the host heap of modules and instances, and linear memory. 0
	// means no budget.
	MemoryBudget int64
	// TenantMemoryBudget bounds the namespaced policies (PolicySpec.Tenant)
	// together, within MemoryBudget: the rest stays for the operator's
	// policies. 0: no pool of their own (each namespace's slice still
	// holds).
	TenantMemoryBudget int64
	// IdleInstanceTimeout closes instances that have not been used for this
	// long; 0 means DefaultIdleInstanceTimeout.
	IdleInstanceTimeout time.Duration
	// Interruption is how a call is stopped at its deadline: the zero value,
	// InterruptFuel, is the one to run with.
	Interruption Interruption
}

// Interruption is how the engine stops a guest call at its deadline.
type Interruption int

const (
	// InterruptFuel instruments every module (host/internal/fuel) to check
	// its deadline in its own code every few microseconds: no exit from
	// native code per loop iteration and no goroutine per call.
	InterruptFuel Interruption = iota
	// InterruptCloseOnDone runs modules as uploaded with wazero's
	// close-on-context-done and a timer per instance: how the host worked
	// before, kept so benchmarks and tests can compare the two in one run.
	InterruptCloseOnDone
)

// String names the mode in benchmark and test names.
func (i Interruption) String() string {
	if i == InterruptCloseOnDone {
		return "close-on-done"
	}
	return "fuel"
}

// DefaultIdleInstanceTimeout is how long an unused instance is kept.
const DefaultIdleInstanceTimeout = time.Minute

// NewEngine creates an Engine. Policies created from it share its
// compilation cache and its compiled modules, so two policies loading the
// same bytes compile them once and hold them once.
func NewEngine(opts EngineOptions) (*Engine, error) {
	if opts.MemoryBudget < 0 {
		return nil, fmt.Errorf("memory budget %d is negative", opts.MemoryBudget)
	}
	if opts.IdleInstanceTimeout <= 0 {
		opts.IdleInstanceTimeout = DefaultIdleInstanceTimeout
	}
	if opts.Interruption != InterruptFuel && opts.Interruption != InterruptCloseOnDone {
		return nil, fmt.Errorf("unknown interruption mode %d", opts.Interruption)
	}
	e := &Engine{
		interruption: opts.Interruption,
		proc:         theProcess,
		budget:       newMemoryBudget(opts.MemoryBudget, theProcess).withTenants(opts.TenantMemoryBudget),
		runtimes:     map[uint32]wazero.Runtime{},
		modules:      map[moduleKey]*sharedModule{},
		stopReaper:   make(chan struct{}),
		reaperDone:   make(chan struct{}),
		caches:       hostabi.NewCaches(),
		memoCap:      memoCapOf(opts.MemoryBudget),
	}
	e.budget.memo = &e.memoBytes
	if opts.CacheDir == "" {
		e.cache = wazero.NewCompilationCache()
	} else {
		if err := os.MkdirAll(opts.CacheDir, 0o700); err != nil {
			return nil, fmt.Errorf("compilation cache dir %q: %w", opts.CacheDir, err)
		}
		c, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("compilation cache dir %q: %w", opts.CacheDir, err)
		}
		e.cache = c
		e.measurements = measurementsDir(opts.CacheDir)
	}
	go e.reapIdle(opts.IdleInstanceTimeout)
	return e, nil
}

// MemoryBudget reports the budget (0: none) and what is charged to it now.
func (e *Engine) MemoryBudget() MemoryUse { return e.budget.use() }

// errEngineClosed is returned by loads after Close.
var errEngineClosed = errors.New("the policy engine is closed")

// runtimeLocked returns the runtime for a memory limit, creating it with the
// host functions and the sandboxed WASI on first use. e.mu is held.
func (e *Engine) runtimeLocked(ctx context.Context, pages uint32) (wazero.Runtime, error) {
	if rt := e.runtimes[pages]; rt != nil {
		return rt, nil
	}
	rc := wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(e.cache).
		WithCloseOnContextDone(e.interruption == InterruptCloseOnDone).
		WithMemoryLimitPages(pages)
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("wasi: %w", err)
	}
	if err := instantiateHostModule(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("host module: %w", err)
	}
	if err := instantiateFuelModule(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("fuel module: %w", err)
	}
	e.runtimes[pages] = rt
	return rt, nil
}

// module returns the compiled module of wasm (whose sha256 is digest) for
// a memory limit, compiling it if no policy holds it yet. Concurrent calls
// for the same key wait for one compilation. The caller owns a reference
// and gives it back with releaseModule.
func (e *Engine) module(ctx context.Context, pages uint32, digest string, wasm []byte) (*sharedModule, wazero.Runtime, error) {
	key := moduleKey{pages, digest}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, nil, errEngineClosed
	}
	rt, err := e.runtimeLocked(ctx, pages)
	if err != nil {
		e.mu.Unlock()
		return nil, nil, err
	}
	if m := e.modules[key]; m != nil {
		m.refs++
		e.mu.Unlock()
		<-m.ready
		if m.err != nil {
			e.releaseModule(m)
			return m, nil, m.err
		}
		return m, rt, nil
	}
	m := &sharedModule{key: key, ready: make(chan struct{}), refs: 1}
	m.instHeap.Store(-1)
	e.modules[key] = m
	e.mu.Unlock()

	e.compile(ctx, rt, m, wasm)
	if m.err != nil {
		// Not kept: the next load of these bytes tries again.
		e.mu.Lock()
		if e.modules[key] == m {
			delete(e.modules, key)
		}
		e.mu.Unlock()
		close(m.ready)
		return m, nil, m.err
	}
	e.budget.modules.Add(m.cost())
	close(m.ready)
	return m, rt, nil
}

// compile compiles and checks m, measuring the machine code and host heap
// it adds. Compilations run one at a time, each with a worker per CPU:
// the same throughput on the machines the scheduler runs on, and each
// measurement sees only its own module.
//
// Running one at a time also keeps clear of a wazero v1.12.0 race: a
// module read from the file compilation cache is published in wazero's
// in-memory table before its entry preambles are compiled, and a
// concurrent compilation of the same bytes could instantiate it half-built
// and panic in moduleEngine.NewFunction (wazero/wazero#2547, open; no
// release has the fix). See docs/architecture.md (RATIONALE).
func (e *Engine) compile(ctx context.Context, rt wazero.Runtime, m *sharedModule, wasm []byte) {
	e.proc.measureMu.Lock()
	defer e.proc.measureMu.Unlock()
	if e.interruption == InterruptFuel {
		var reason string
		var err error
		var shape fuel.Shape
		if wasm, shape, reason, err = instrument(ctx, rt, wasm); err != nil {
			m.reason, m.err = reason, err
			return
		}
		defer e.proc.holdSource(wasm)()
		m.tableRoom = int64(shape.TableGrowth) * tableEntryBytes
	}
	known, ok := e.loadMeasurement(m.key)
	var heap0, released int64
	if !ok {
		heap0, released = e.proc.heapBaseline(), e.proc.releases.Load()
	}
	code0 := codeMappings()
	cctx := experimental.WithCompilationWorkers(ctx, runtime.GOMAXPROCS(0))
	cm, err := rt.CompileModule(cctx, wasm)
	if err != nil {
		m.reason, m.err = "Compile", compileError(err)
		return
	}
	ex, err := checkModule(cm)
	if err != nil {
		_ = cm.Close(ctx)
		m.reason, m.err = "Validate", err
		return
	}
	m.cm, m.exports = cm, ex
	if n, ok := compiledCodeBytes(cm); ok {
		m.code = n
	} else {
		m.code = codeMappings().newBytes(code0)
	}
	if ok {
		m.heap = known.ModuleHeap
		m.instHeap.Store(known.InstanceHeap)
		return
	}
	m.heap = max(0, e.proc.heapNow()-heap0)
	m.clean = e.proc.releases.Load() == released
}

// releaseModule gives back a reference taken by module; the last one frees
// the compiled code.
func (e *Engine) releaseModule(m *sharedModule) {
	e.mu.Lock()
	m.refs--
	last := m.refs == 0 && m.err == nil
	if last && e.modules[m.key] == m {
		delete(e.modules, m.key)
	}
	closed := e.closed
	e.mu.Unlock()
	if !last {
		return
	}
	e.budget.modules.Add(-m.cost())
	e.proc.releases.Add(1)
	if !closed {
		e.proc.measureMu.Lock() // freeing code during a measurement would skew it
		_ = m.cm.Close(context.Background())
		e.proc.measureMu.Unlock()
	}
}

// sharers reports how many policy versions hold m.
func (e *Engine) sharers(m *sharedModule) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return max(1, m.refs)
}

// Close releases the runtimes, compiled modules and the compilation cache.
// Policies should be closed first.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	rts := e.runtimes
	e.runtimes = nil
	e.mu.Unlock()
	close(e.stopReaper)
	<-e.reaperDone
	ctx := context.Background()
	for _, rt := range rts {
		_ = rt.Close(ctx)
	}
	return e.cache.Close(ctx)
}
