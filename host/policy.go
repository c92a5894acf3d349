package host

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/host/defaults"
)

// PolicySpec is what the host needs to know about a policy; the plugin fills
// it from the policy's args.
type PolicySpec struct {
	// Name identifies the policy in reasons, logs, events and metrics.
	Name string
	// Config is handed to the guest verbatim.
	Config string
	// Timeout bounds every guest call but preenqueue's.
	Timeout time.Duration
	// PreEnqueueTimeout bounds a preenqueue call, which runs on the
	// scheduling queue's path; 0 means PreEnqueueTimeout(Timeout, 0).
	PreEnqueueTimeout time.Duration
	// PatchPrefixes are the key prefixes a prebind call may write labels
	// and annotations under (patch_label, patch_annotation); none: it may
	// write nothing.
	PatchPrefixes []string
	// InitTimeout bounds instantiation and _initialize; 0 means max(1s, 10×Timeout).
	InitTimeout time.Duration
	// MemoryLimitBytes caps each instance's linear memory (rounded down to
	// 64 KiB pages); 0 means DefaultMemoryLimitBytes.
	MemoryLimitBytes int64
	// StackLimitBytes caps the call stack of each call (host/stack.go);
	// 0 means DefaultStackLimitBytes. The memory budget keeps
	// stackGrowthFactor times it for each call that may run at once.
	StackLimitBytes int64
	// MaxInstances bounds the pool: at most this many calls run at once.
	// Set it to the scheduler's parallelism; 0 means DefaultMaxInstances.
	MaxInstances int
	// RecycleMemoryBytes discards an instance after a call that left its
	// linear memory above this size, since wasm memory never shrinks. 0 means
	// half of MemoryLimitBytes.
	RecycleMemoryBytes int64
	// RealClock gives the guest the host's clocks instead of deterministic ones.
	RealClock bool
	// Clock, when set and RealClock is not, is what the guest's wall clock
	// reads, at every read (wasmsched test --clock). Unset, the
	// deterministic wall clock starts at 2022-01-01T00:00:00Z and advances
	// 1 ms per read (docs/abi.md §1).
	Clock time.Time
	// RealRandom gives the guest crypto/rand instead of a deterministic source.
	RealRandom bool
	// Reads are the scopes (fields.Scopes) the policy may read beyond the
	// pod and the node being evaluated; a read outside them answers
	// abi.NotDeclared and is logged once.
	Reads []string
	// Tenant is the namespace of a namespaced policy (a team's
	// SchedulingPolicy), "" for the operator's: its reads about pods and
	// namespaces stay inside that namespace (docs/abi.md §4.0), whatever
	// it declares.
	Tenant string
	// TenantMemoryBudget is the Tenant namespace's slice of the memory
	// budget: its policies' modules and instances together. 0: none.
	TenantMemoryBudget int64
	// OnInstance, when set, is told how long each new instance took to
	// instantiate and initialize (inline or in the background): the
	// Tenant namespace's share of scheduling time is charged for it.
	OnInstance func(time.Duration)
	// Counters are the policy's counts when a version declares
	// KeepsState: the caller keeps them by policy name, so that a new
	// config (a new Policy) keeps what pods hold. nil: the Policy makes
	// its own.
	Counters *Counters
	// OutputBurst and OutputRate bound the log lines the policy produces
	// (stdout, stderr and log calls together): a burst, then a steady rate
	// in lines per second. 0 means DefaultOutputBurst, DefaultOutputRate.
	OutputBurst int
	OutputRate  float64
	// Limits bound the code of a module the policy loads; zero fields
	// take the defaults (DefaultMaxFunctions...).
	Limits CompileLimits
	// RetiredGrace is how long a replaced version stays callable for
	// scheduling cycles that pinned it before the swap; then its compiled
	// code is freed. 0 means DefaultRetiredGrace.
	RetiredGrace time.Duration
	// NoReuse evaluates every node of a batch, even nodes whose node-table
	// rows are equal (docs/abi.md §3.3): for a policy whose verdicts
	// depend on more than it reads.
	NoReuse bool
}

// Policy is one named policy and the module Version currently serving it.
// Loading a new Version never disturbs calls in flight: the new Version is
// compiled and initialized off the hot path and then swapped in atomically;
// if it fails, the current Version keeps serving.
type Policy struct {
	e      *Engine
	name   string
	config []byte
	// configSum is the hex sha256 of config (Version.Signature).
	configSum string
	timeout   time.Duration
	// timeouts bound each kind of call (timeout, or the preenqueue one).
	timeouts      [NumCallKinds]time.Duration
	patchPrefixes []string
	// objects are the readers of the policy's declared objects
	// (SetObjects), nil until its kinds are watched.
	objects      atomic.Pointer[[]ObjectReader]
	initTimeout  time.Duration
	retiredGrace time.Duration
	maxInstances int
	recycleBytes uint32
	// stackLimit is the call stack one call may use (bytes).
	stackLimit int64

	output *outputLimiter
	limits CompileLimits

	// reads are the declared scopes; undeclared remembers the undeclared
	// scopes already logged, so each is logged once.
	reads      map[fields.Scope]bool
	undeclared sync.Map
	// tenant is the spec's Tenant; acct its namespace's slice of the
	// memory budget (nil for the operator's policies).
	tenant     string
	acct       *account
	onInstance func(time.Duration)
	// counters are given to the instances of versions that keep state.
	counters *Counters

	pages        uint32
	moduleConfig wazero.ModuleConfig
	// realClock and realRandom are the spec's: each instance gets its
	// own deadline-bounded sleep and random source (instance.go).
	realClock, realRandom bool
	// noReuse is the spec's NoReuse. rowsEvaluated counts the batch rows
	// the policy's guests evaluated, rowsShared the nodes that got the
	// verdict of an equal row instead (CallNodes), over every version.
	noReuse                   bool
	rowsEvaluated, rowsShared atomic.Int64
	// rowsRemembered counts the nodes answered from a version's memo.
	rowsRemembered atomic.Int64

	loadMu sync.Mutex
	cur    atomic.Pointer[Version]

	// replacing counts instances being made in the background (release);
	// Close waits for them before it closes the runtime under them.
	replaceMu sync.Mutex
	closing   bool
	replacing sync.WaitGroup
	// versions are the loaded versions not yet freed (under replaceMu).
	versions map[*Version]struct{}
}

// Counters are the policy's counts (docs/abi.md §3.6).
func (p *Policy) Counters() *Counters { return p.counters }

// RowStats reports the batch rows the policy's guests evaluated, the nodes
// that got the verdict of an equal row of their batch instead, and those
// answered from a verdict remembered from an earlier cycle (docs/abi.md
// §3.4).
func (p *Policy) RowStats() (evaluated, shared, remembered int64) {
	return p.rowsEvaluated.Load(), p.rowsShared.Load(), p.rowsRemembered.Load()
}

// NewPolicy creates a policy with no module loaded yet.
func (e *Engine) NewPolicy(ctx context.Context, spec PolicySpec) (*Policy, error) {
	if spec.Name == "" {
		return nil, errors.New("policy name is empty")
	}
	if spec.Timeout <= 0 {
		return nil, fmt.Errorf("policy %q: timeout must be positive", spec.Name)
	}
	if spec.MemoryLimitBytes == 0 {
		spec.MemoryLimitBytes = DefaultMemoryLimitBytes
	}
	pages := spec.MemoryLimitBytes / 65536
	if pages < 1 || pages > 65536 {
		return nil, fmt.Errorf("policy %q: memory limit %d bytes is outside 64KiB..4GiB", spec.Name, spec.MemoryLimitBytes)
	}
	if spec.StackLimitBytes == 0 {
		spec.StackLimitBytes = DefaultStackLimitBytes
	}
	if spec.StackLimitBytes < MinStackLimitBytes || spec.StackLimitBytes > MaxStackLimitBytes {
		return nil, fmt.Errorf("policy %q: stack limit %d bytes is outside 64KiB..8MiB", spec.Name, spec.StackLimitBytes)
	}
	if spec.MaxInstances < 1 {
		spec.MaxInstances = DefaultMaxInstances
	}
	if spec.PreEnqueueTimeout < 0 {
		return nil, fmt.Errorf("policy %q: preEnqueue timeout must not be negative", spec.Name)
	}
	spec.PreEnqueueTimeout = PreEnqueueTimeout(spec.Timeout, spec.PreEnqueueTimeout)
	if spec.InitTimeout <= 0 {
		spec.InitTimeout = max(time.Second, 10*spec.Timeout)
	}
	if spec.OutputBurst <= 0 {
		spec.OutputBurst = DefaultOutputBurst
	}
	if spec.OutputRate <= 0 {
		spec.OutputRate = DefaultOutputRate
	}
	if spec.RetiredGrace <= 0 {
		spec.RetiredGrace = DefaultRetiredGrace
	}
	if spec.RecycleMemoryBytes <= 0 {
		spec.RecycleMemoryBytes = pages * 65536 / 2
	}
	// No filesystem, no environment, no arguments: that is wazero's default
	// ModuleConfig. Start functions are run by newInstance under a deadline.
	mc := wazero.NewModuleConfig().WithStartFunctions()
	switch {
	case spec.RealClock:
		mc = mc.WithSysWalltime().WithSysNanotime().WithSysNanosleep()
	case !spec.Clock.IsZero():
		sec, nsec := spec.Clock.Unix(), int32(spec.Clock.Nanosecond())
		mc = mc.WithWalltime(func() (int64, int32) { return sec, nsec }, sys.ClockResolution(1))
	}

	scopes, err := fields.ParseScopes(spec.Reads)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", spec.Name, err)
	}
	reads := map[fields.Scope]bool{}
	for _, r := range scopes {
		reads[r] = true
	}
	var timeouts [NumCallKinds]time.Duration
	for k := range timeouts {
		timeouts[k] = spec.Timeout
	}
	timeouts[CallPreEnqueue] = spec.PreEnqueueTimeout
	counters := spec.Counters
	if counters == nil {
		counters = new(Counters)
	}
	return &Policy{
		e:             e,
		timeouts:      timeouts,
		patchPrefixes: append([]string(nil), spec.PatchPrefixes...),
		reads:         reads,
		tenant:        spec.Tenant,
		onInstance:    spec.OnInstance,
		counters:      counters,
		acct:          e.budget.accountFor(spec.Tenant, spec.TenantMemoryBudget),
		name:          spec.Name,
		config:        []byte(spec.Config),
		configSum:     fmt.Sprintf("%x", sha256.Sum256([]byte(spec.Config))),
		timeout:       spec.Timeout,
		initTimeout:   spec.InitTimeout,
		retiredGrace:  spec.RetiredGrace,
		output:        newOutputLimiter(spec.OutputBurst, spec.OutputRate),
		limits:        spec.Limits.withDefaults(),
		maxInstances:  spec.MaxInstances,
		recycleBytes:  uint32(min(spec.RecycleMemoryBytes, 1<<32-1)),
		stackLimit:    spec.StackLimitBytes,
		pages:         uint32(pages),
		versions:      map[*Version]struct{}{},
		moduleConfig:  mc,
		realClock:     spec.RealClock,
		realRandom:    spec.RealRandom,
		noReuse:       spec.NoReuse,
	}, nil
}

// Name returns the policy's name.
func (p *Policy) Name() string { return p.name }

// Current returns the Version serving now, or nil before the first successful load.
func (p *Policy) Current() *Version { return p.cur.Load() }

// Close stops the policy and frees all its instances, and its modules
// unless other policies share them. Calls in flight finish; their instances
// are closed when they return.
func (p *Policy) Close(ctx context.Context) error {
	p.replaceMu.Lock()
	p.closing = true
	p.replaceMu.Unlock()
	p.replacing.Wait()
	if v := p.cur.Swap(nil); v != nil {
		v.retire()
	}
	p.replaceMu.Lock()
	vs := make([]*Version, 0, len(p.versions))
	for v := range p.versions {
		vs = append(vs, v)
	}
	p.replaceMu.Unlock()
	for _, v := range vs {
		v.closeIdle()
		v.freeCompiled()
	}
	return nil
}

// DefaultMemoryLimitBytes is the memory limit of a policy that does not set
// one: the default of the policy args' memoryLimit (64Mi).
const DefaultMemoryLimitBytes = defaults.MemoryLimitBytes

// DefaultMaxInstances is the size of a policy's instance pool when its spec
// sets none: kube-scheduler's default parallelism. The args'
// maxInstancesPerPolicy defaults to it.
const DefaultMaxInstances = defaults.MaxInstances

// DefaultPreEnqueueTimeout bounds a preenqueue call of a policy that sets
// no preEnqueueTimeout, unless its timeout is shorter: kube-scheduler runs
// PreEnqueue with its scheduling queue locked.
const DefaultPreEnqueueTimeout = defaults.PreEnqueueTimeout

// PreEnqueueTimeout is the bound of a policy's preenqueue calls: set, when
// it is positive, else DefaultPreEnqueueTimeout or timeout, whichever is
// shorter. It is the one rule: the args' defaulting, the plugin and the
// host's PolicySpec all apply it.
func PreEnqueueTimeout(timeout, set time.Duration) time.Duration {
	return defaults.PreEnqueueTimeoutFor(timeout, set)
}

// DefaultRetiredGrace is the RetiredGrace of a policy that does not set one.
const DefaultRetiredGrace = defaults.RetiredGrace
