package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/host/internal/hostabi"
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
}

// Policy is one named policy and the module Version currently serving it.
// Loading a new Version never disturbs calls in flight: the new Version is
// compiled and initialized off the hot path and then swapped in atomically;
// if it fails, the current Version keeps serving.
type Policy struct {
	e       *Engine
	name    string
	config  []byte
	timeout time.Duration
	// timeouts bound each kind of call (timeout, or the preenqueue one).
	timeouts      [NumCallKinds]time.Duration
	patchPrefixes []string
	initTimeout   time.Duration
	retiredGrace  time.Duration
	maxInstances  int
	recycleBytes  uint32

	output *outputLimiter
	limits CompileLimits

	// reads are the declared scopes; undeclared remembers the undeclared
	// scopes already logged, so each is logged once.
	reads      map[fields.Scope]bool
	undeclared sync.Map

	pages        uint32
	moduleConfig wazero.ModuleConfig
	// realClock and realRandom are the spec's: each instance gets its
	// own deadline-bounded sleep and random source (instance.go).
	realClock, realRandom bool

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

	reads := map[fields.Scope]bool{}
	for _, r := range spec.Reads {
		reads[fields.Scope(r)] = true
	}
	var timeouts [NumCallKinds]time.Duration
	for k := range timeouts {
		timeouts[k] = spec.Timeout
	}
	timeouts[CallPreEnqueue] = spec.PreEnqueueTimeout
	return &Policy{
		e:             e,
		timeouts:      timeouts,
		patchPrefixes: append([]string(nil), spec.PatchPrefixes...),
		reads:         reads,
		name:          spec.Name,
		config:        []byte(spec.Config),
		timeout:       spec.Timeout,
		initTimeout:   spec.InitTimeout,
		retiredGrace:  spec.RetiredGrace,
		output:        newOutputLimiter(spec.OutputBurst, spec.OutputRate),
		limits:        spec.Limits.withDefaults(),
		maxInstances:  spec.MaxInstances,
		recycleBytes:  uint32(min(spec.RecycleMemoryBytes, 1<<32-1)),
		pages:         uint32(pages),
		versions:      map[*Version]struct{}{},
		moduleConfig:  mc,
		realClock:     spec.RealClock,
		realRandom:    spec.RealRandom,
	}, nil
}

// Name returns the policy's name.
func (p *Policy) Name() string { return p.name }

// Current returns the Version serving now, or nil before the first successful load.
func (p *Policy) Current() *Version { return p.cur.Load() }

// LoadError explains why a module Version was refused. The policy keeps
// serving its previous version, if it had one.
type LoadError struct {
	Policy string
	// Reason is a short machine-friendly cause: Decode, SHA256Mismatch,
	// TooLarge, Compile, Validate, Instantiate, ABIVersion.
	Reason string
	Err    error
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("policy %q: %s: %v", e.Policy, e.Reason, e.Err)
}

func (e *LoadError) Unwrap() error { return e.Err }

// Load makes src the policy's module: gzip and raw wasm are accepted, the
// sha256 of the wasm bytes must equal wantSHA256 when it is set, and the
// module must compile, pass the import allow-list and ABI checks, and
// initialize. Only then is it swapped in. Loading the bytes that already
// serve is a no-op that returns the current version.
func (p *Policy) Load(ctx context.Context, src []byte, wantSHA256 string) (*Version, error) {
	defer p.e.proc.holdSource(src)()
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	// Decoding allocates (a gunzipped copy, the bounds check): not while
	// a module is measured (measureMu).
	p.e.proc.measureMu.RLock()
	wasm, digest, err := DecodeModule(src)
	p.e.proc.measureMu.RUnlock()
	if err != nil {
		return nil, &LoadError{p.name, "Decode", err}
	}
	if len(wasm) != len(src) { // gunzipped into a buffer of its own
		defer p.e.proc.holdSource(wasm)()
	}
	if want := strings.ToLower(strings.TrimPrefix(wantSHA256, "sha256:")); want != "" && want != digest {
		return nil, &LoadError{p.name, "SHA256Mismatch", fmt.Errorf("module sha256 is %s but the policy pins %s; update the policy's sha256 or upload the pinned module", digest, want)}
	}
	if cur := p.cur.Load(); cur != nil && cur.sha256 == digest {
		return cur, nil
	}
	start := time.Now()
	p.e.proc.measureMu.RLock()
	size, err := measure(wasm)
	p.e.proc.measureMu.RUnlock()
	if err != nil {
		return nil, &LoadError{p.name, "Compile", fmt.Errorf("malformed module: %w (upload the complete .wasm built for wasip1)", err)}
	}
	if err := checkSize(size, p.limits); err != nil {
		return nil, &LoadError{p.name, "TooLarge", err}
	}
	// One compiled module per distinct bytes (and memory limit), shared by
	// every policy loading them: the first load compiles, the others wait.
	sm, rt, err := p.e.module(ctx, p.pages, digest, wasm)
	if err != nil {
		reason := "Compile"
		if sm != nil && sm.reason != "" {
			reason = sm.reason
		}
		return nil, &LoadError{p.name, reason, err}
	}
	v := &Version{p: p, sm: sm, rt: rt, exports: sm.exports, sha256: digest, size: len(wasm),
		idle: make(chan *instance, p.maxInstances), permits: make(chan struct{}, p.maxInstances)}
	fail := func(in *instance, reason string, err error) (*Version, error) {
		if in != nil {
			v.trackMemory(in, true)
			in.close()
		}
		p.e.releaseModule(sm)
		return nil, &LoadError{p.name, reason, err}
	}
	in, err := v.firstInstance(ctx)
	if err != nil {
		return fail(nil, "Instantiate", err)
	}
	v.trackMemory(in, false)
	if err := checkABIVersion(in); err != nil {
		return fail(in, "ABIVersion", err)
	}
	if err := applyCapabilities(in, &v.exports); err != nil {
		return fail(in, "Validate", err)
	}
	v.instCost = in.charged
	if modules, room, ok := p.e.budget.admit(v); !ok {
		b := p.e.budget
		return fail(in, "MemoryBudget", fmt.Errorf("the policies' memory budget of %s cannot hold this module: loaded modules hold %s (this one %s: compiled code %s, host heap %s, shared by %d policies) and %s must stay free to run %d guest calls at once (one instance of this module is %s); raise memoryBudget in the WasmPolicy args or remove policies",
			mib(b.limit), mib(modules), mib(sm.cost()), mib(sm.code), mib(sm.heap), p.e.sharers(sm), mib(room), p.e.proc.maxRunning(), mib(v.instCost)))
	}
	p.replaceMu.Lock()
	p.versions[v] = struct{}{}
	p.replaceMu.Unlock()
	v.live.Add(1)
	v.lastUsed.Store(monotonic())
	v.idle <- in
	for range p.maxInstances {
		v.permits <- struct{}{}
	}
	// The first instance is kept while it fits: if the budget is full,
	// idle instances of the policies used least recently are closed.
	p.e.budget.makeRoom(0)
	v.loadDuration = time.Since(start)
	if old := p.cur.Swap(v); old != nil {
		old.retire()
	}
	klog.InfoS("Policy module loaded", "policy", p.name, "sha256", digest, "bytes", len(wasm), "exports", v.exports.String(), "duration", v.loadDuration)
	return v, nil
}

func checkABIVersion(in *instance) error {
	fn := in.mod.ExportedFunction(abi.ExportAbiVersion)
	in.arm(in.v.p.initTimeout, 0)
	res, err := fn.Call(&in.cctx)
	if !in.disarm() {
		return fmt.Errorf("%s did not return within %s", abi.ExportAbiVersion, in.v.p.initTimeout)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", abi.ExportAbiVersion, err)
	}
	got := int32(res[0])
	if got < abi.MinVersion || got > abi.Version {
		return fmt.Errorf("module implements ABI v%d, this host implements v%d to v%d; rebuild the policy with a matching guest SDK", got, abi.MinVersion, abi.Version)
	}
	in.v.abiVersion = got
	return nil
}

// applyCapabilities narrows the exports to what the guest says it implements
// (the SDK exports every entry point but registers only some), so the host
// never calls an entry point the policy does not implement.
func applyCapabilities(in *instance, ex *Exports) error {
	fn := in.mod.ExportedFunction(abi.ExportCapabilities)
	if fn == nil {
		return nil
	}
	in.arm(in.v.p.initTimeout, 0)
	res, err := fn.Call(&in.cctx)
	if !in.disarm() || err != nil {
		return fmt.Errorf("%s failed: %v", abi.ExportCapabilities, err)
	}
	ex.narrow(int32(res[0]))
	if ex.Points == 0 {
		return fmt.Errorf("the policy registers no function at any extension point (capabilities=%d): register at least one of Filter, Score, PreEnqueue or PreBind", int32(res[0]))
	}
	return nil
}

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

// Version is one loaded module of a policy with its instance pool. A
// scheduling cycle pins the Version it starts with, so every call of the
// cycle sees the same module even if a reload lands mid-cycle.
type Version struct {
	// abiVersion is what the module's abi_version export reported.
	abiVersion   int32
	p            *Policy
	sm           *sharedModule
	rt           wazero.Runtime
	exports      Exports
	sha256       string
	size         int
	loadDuration time.Duration
	// instCost is the memory one instance held after it initialized.
	instCost int64

	// permits holds one token per instance the version may have in use
	// (maxInstances); idle holds instances not in use. Acquiring takes a
	// permit, then an idle instance or a new one; releasing gives both
	// back. Instances are made on demand, so a policy holds as many as its
	// calls have needed at once, and idle ones can be closed at any time
	// (memoryBudget, reapIdle). No lock is held across a guest call.
	permits chan struct{}
	idle    chan *instance
	live    atomic.Int64
	// created counts instances over the version's life, discarded those
	// discarded after a call (failed, or grown past the recycle mark).
	created, discarded atomic.Int64
	// tableBatches counts the batch calls served from a node table.
	tableBatches atomic.Int64
	inUse        atomic.Int64
	memBytes     atomic.Int64
	chargedBytes atomic.Int64
	// lastUsed is when a call last took an instance (monotonic).
	lastUsed atomic.Int64
	retired  atomic.Bool
	closed   atomic.Bool
}

// Exports reports which extension points the module implements.
func (v *Version) Exports() Exports { return v.exports }

// SHA256 is the hex digest of the module's wasm bytes.
func (v *Version) SHA256() string { return v.sha256 }

// Size is the module's size in bytes.
func (v *Version) Size() int { return v.size }

// TableBatches reports how many batch calls ran with the nodes in the
// guest's node table (ABI v2, abi.md §3.2): zero for a v1 guest, and for a
// v2 guest until its first batch has shown the SDK what it reads.
func (v *Version) TableBatches() int64 { return v.tableBatches.Load() }

// ABIVersion is the ABI version the module reported (abi.MinVersion to
// abi.Version).
func (v *Version) ABIVersion() int { return int(v.abiVersion) }

// LoadDuration is how long compiling and initializing the Version took.
func (v *Version) LoadDuration() time.Duration { return v.loadDuration }

// Policy returns the policy the Version belongs to.
func (v *Version) Policy() *Policy { return v.p }

// PoolStats reports live instances and instances in use.
func (v *Version) PoolStats() (live, inUse int64) { return v.live.Load(), v.inUse.Load() }

// MemoryBytes is the linear memory of the version's live instances, as of
// the end of each one's last call.
func (v *Version) MemoryBytes() int64 { return v.memBytes.Load() }

// MemoryShare is what the version is charged in the engine's memory budget:
// its instances (host heap and linear memory) and its share of the module
// it uses (the module's code and heap divided by the versions sharing it).
func (v *Version) MemoryShare() int64 {
	return v.chargedBytes.Load() + v.sm.cost()/int64(v.p.e.sharers(v.sm))
}

// trackMemory charges an instance's current host heap and linear memory to
// the version and the engine's budget (nothing once it is closing).
func (v *Version) trackMemory(in *instance, closing bool) {
	mem, charge := int64(0), int64(0)
	if !closing {
		mem = int64(in.memoryBytes())
		charge = mem + max(0, v.sm.instHeap.Load()) + v.sm.tableRoom
	}
	if d := mem - in.lastMem; d != 0 {
		v.memBytes.Add(d)
		in.lastMem = mem
	}
	if d := charge - in.charged; d != 0 {
		v.chargedBytes.Add(d)
		v.p.e.budget.instances.Add(d)
		in.charged = charge
	}
}

// ErrNotStarted is in the error of a call that never started because its
// context ended while it waited: for a CPU to run on (every running token
// was taken by other guest calls) or for a free instance. The guest did
// nothing wrong: the scheduler was busy, or it no longer needed the answer
// (kube-scheduler cancels the Filter calls still waiting once it has found
// enough feasible nodes). Callers must not hold it against the policy.
var ErrNotStarted = errors.New("the call did not start before its context ended")

var errPoolWait = fmt.Errorf("%w: no free instance", ErrNotStarted)

// errRunWait is a call that could not start before its context ended:
// every CPU was running another guest call (a PreEnqueue call waits at
// most its timeout, since kube-scheduler's queue is locked meanwhile).
var errRunWait = fmt.Errorf("%w: no CPU free to run it", ErrNotStarted)

// maxInstanceMeasures bounds the measurements of a module's instance heap
// that read nothing before 0 is kept: each takes measureMu alone and two
// collections.
const maxInstanceMeasures = 3

// firstInstance makes a new version's first instance. The first instance
// of a module is made alone (measureMu), to measure the host heap an
// instance holds.
func (v *Version) firstInstance(ctx context.Context) (*instance, error) {
	e := v.p.e
	if v.sm.instHeap.Load() >= 0 {
		e.proc.measureMu.RLock()
		defer e.proc.measureMu.RUnlock()
		return v.newInstance(ctx)
	}
	e.proc.measureMu.Lock()
	defer e.proc.measureMu.Unlock()
	if v.sm.instHeap.Load() >= 0 {
		return v.newInstance(ctx)
	}
	h0, released := e.proc.heapBaseline(), e.proc.releases.Load()
	in, err := v.newInstance(ctx)
	if err == nil {
		// An instance always holds some heap: a delta of 0 or less means
		// memory freed elsewhere meanwhile (a load ending, under -race
		// with loads finishing together) hid it. The next new instance
		// measures again, up to maxInstanceMeasures times.
		if d := e.proc.heapNow() - h0; d > 0 || v.sm.instTries+1 >= maxInstanceMeasures {
			v.sm.instHeap.Store(max(0, d))
			if d > 0 && v.sm.clean && e.proc.releases.Load() == released {
				e.storeMeasurement(v.sm)
			}
		} else {
			v.sm.instTries++
		}
	}
	return in, err
}

func (v *Version) acquire(ctx context.Context) (*instance, error) {
	select {
	case <-v.permits:
	default:
		select {
		case <-v.permits:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%w)", errPoolWait, context.Cause(ctx))
		}
	}
	v.lastUsed.Store(monotonic())
	var in *instance
	select {
	case in = <-v.idle:
	default:
		if v.closed.Load() {
			v.permits <- struct{}{}
			return nil, errors.New("module version was replaced and freed")
		}
		// Make room by closing idle instances of policies used least
		// recently. If none is left (instances grew while running), the
		// call still gets its instance: stalling the scheduler would be
		// worse than going over for a moment.
		if !v.p.e.budget.makeRoom(v.instCost) {
			v.p.e.budget.over.Add(1)
		}
		var err error
		if in, err = v.newInstance(ctx); err != nil {
			v.permits <- struct{}{}
			klog.ErrorS(err, "Could not create a policy instance", "policy", v.p.name, "sha256", v.sha256)
			return nil, err
		}
		v.live.Add(1)
		v.trackMemory(in, false)
	}
	v.inUse.Add(1)
	return in, nil
}

// release returns a healthy instance to the pool, or discards it: after a
// failed call, when the version was replaced, or when its memory grew past
// the recycle mark (wasm memory never shrinks). A discarded instance of the
// serving version is replaced in the background, so the call after a
// failure does not pay for instantiating a module (5-15 ms for a Go guest).
func (v *Version) release(in *instance, healthy bool) {
	in.Call.Release()
	v.inUse.Add(-1)
	if healthy && !v.retired.Load() && in.memoryBytes() <= v.p.recycleBytes {
		v.trackMemory(in, false)
		v.idle <- in
		v.permits <- struct{}{}
		if b := v.p.e.budget; b.limit > 0 && b.used() > b.limit {
			b.makeRoom(0) // its memory grew during the call
		}
		return
	}
	// The instance is uncharged and forgotten now, and closed in the
	// background with its replacement: unmapping the memory a failed
	// call touched (64 MiB: 3-5 ms, more on a busy machine) is not the
	// caller's to wait for.
	v.trackMemory(in, true)
	v.live.Add(-1)
	v.discarded.Add(1)
	p := v.p
	p.replaceMu.Lock()
	if v.retired.Load() || p.closing {
		p.replaceMu.Unlock()
		in.close()
		v.permits <- struct{}{}
		return
	}
	p.replacing.Add(1)
	p.replaceMu.Unlock()
	go func() {
		in.close()
		v.replace()
	}()
}

// discard closes an instance that is not in the pool.
func (v *Version) discard(in *instance) {
	v.trackMemory(in, true)
	in.close()
	v.live.Add(-1)
}

// replace makes an instance for the slot of a discarded one. Until it is
// done the permit stays taken, as it was while the failed call ran; if
// instantiating fails, the next call tries (and reports) it.
func (v *Version) replace() {
	defer v.p.replacing.Done()
	defer func() { v.permits <- struct{}{} }()
	if !v.p.e.budget.makeRoom(v.instCost) {
		return // the next call makes one if it needs it
	}
	in, err := v.newInstance(context.Background())
	if err != nil {
		if !v.retired.Load() {
			klog.ErrorS(err, "Could not replace a discarded policy instance", "policy", v.p.name, "sha256", v.sha256)
		}
		return
	}
	v.live.Add(1)
	v.trackMemory(in, false)
	v.idle <- in
	if v.retired.Load() {
		v.closeIdle() // retired while this instance was being made
	}
}

// DefaultMemoryLimitBytes is the memory limit of a policy that does not set
// one: the default of the policy args' memoryLimit (64Mi).
const DefaultMemoryLimitBytes = 64 << 20

// DefaultMaxInstances is the size of a policy's instance pool when its spec
// sets none: kube-scheduler's default parallelism. The args'
// maxInstancesPerPolicy defaults to it.
const DefaultMaxInstances = 16

// DefaultPreEnqueueTimeout bounds a preenqueue call of a policy that sets
// no preEnqueueTimeout, unless its timeout is shorter: kube-scheduler runs
// PreEnqueue with its scheduling queue locked.
const DefaultPreEnqueueTimeout = 10 * time.Millisecond

// PreEnqueueTimeout is the bound of a policy's preenqueue calls: set, when
// it is positive, else DefaultPreEnqueueTimeout or timeout, whichever is
// shorter. It is the one rule: the args' defaulting, the plugin and the
// host's PolicySpec all apply it.
func PreEnqueueTimeout(timeout, set time.Duration) time.Duration {
	if set > 0 {
		return set
	}
	return min(DefaultPreEnqueueTimeout, timeout)
}

// DefaultRetiredGrace is the RetiredGrace of a policy that does not set one.
const DefaultRetiredGrace = 30 * time.Second

// retire closes the idle instances of a replaced version. Cycles that pinned
// it may still call it; they get fresh instances that are closed on release.
// After the policy's RetiredGrace the compiled module is released, so reloads
// do not accumulate machine code.
func (v *Version) retire() {
	if v.retired.Swap(true) {
		return
	}
	time.AfterFunc(v.p.retiredGrace, v.freeCompiled)
	v.closeIdle()
}

// freeCompiled gives the version's module back once no instance of it is
// live (freeing the code if no other policy uses it).
func (v *Version) freeCompiled() {
	if v.closed.Load() {
		return
	}
	if v.live.Load() > 0 {
		time.AfterFunc(v.p.retiredGrace, v.freeCompiled)
		return
	}
	if v.closed.Swap(true) {
		return
	}
	v.p.replaceMu.Lock()
	delete(v.p.versions, v)
	v.p.replaceMu.Unlock()
	v.p.e.budget.forget(v)
	v.p.e.releaseModule(v.sm)
}

// closeIdle closes the version's idle instances.
func (v *Version) closeIdle() {
	for v.closeOneIdle() {
	}
}

// closeOneIdle closes one idle instance, if there is one.
func (v *Version) closeOneIdle() bool {
	select {
	case in := <-v.idle:
		v.discard(in)
		return true
	default:
		return false
	}
}

// CallNodes runs the batch form of Filter or Score (kind CallFilter or
// CallScore) over nodes on one instance, in one guest call. results[i] (and,
// for Score, scores[i]) receive node i's verdict. Each node gets the full
// policy timeout, within what pc's budget has left. On a failed call, done
// is the index of the node being evaluated when it failed; results after it
// are not set.
func (v *Version) CallNodes(ctx context.Context, kind CallKind, pod *PodState, nodes []fwk.NodeInfo, pc *PolicyCycle, results []Result, scores []int64) (done int, cerr *CallError) {
	batchKind := abi.BatchNone
	if kind >= 0 && kind < NumCallKinds {
		batchKind = abi.Points[kind].Batch
	}
	if batchKind == abi.BatchNone || !v.implements(batchKind) || len(results) != len(nodes) || (kind == CallScore && len(scores) != len(nodes)) {
		name := "a batch form of " + kind.String()
		if batchKind != abi.BatchNone {
			name = abi.Points[batchKind].Export
		}
		return 0, &CallError{Outcome: OutcomeUnavailable, Err: fmt.Errorf("module does not implement %s for %d nodes (results %d, scores %d)", name, len(nodes), len(results), len(scores))}
	}
	in, deadline, cerr := v.begin(ctx, kind, pc)
	if cerr != nil {
		return 0, cerr
	}
	for i := range results {
		results[i] = Result{Code: hostabi.CodeUnselected}
	}
	in.Pod, in.Cycle, in.Batch, in.Results, in.Cur, in.ScoresSet = pod, abiCycle(pc), nodes, results, -1, false
	if kind == CallScore {
		clear(scores)
		in.Scores = scores
	}
	// An ABI v2 guest that declared a node table large enough gets the
	// nodes' declared fields in its memory (abi.md §3.2).
	var t *hostabi.Table
	if in.Table != nil && len(nodes) <= in.Table.Rows() && v.abiVersion >= 2 && in.FillTable(in.mod.Memory(), in.Table, nodes) {
		t = in.Table
		in.CallTable, in.TableCur, in.TableEpoch = t, -1, in.Caches.Epoch()
		v.tableBatches.Add(1)
	}
	_, cerr = in.call(batchKind, pod.Cycle, uint32(len(nodes)), deadline)
	done = in.Cur
	scoresSet := in.ScoresSet
	var fromTable []bool
	if t != nil {
		fromTable = make([]bool, len(nodes))
		var sc []int64
		if kind == CallScore {
			sc = scores
		}
		in.TableVerdicts(in.liveMemory(), t, len(nodes), results, sc, fromTable)
		if cerr != nil {
			// The nodes the guest gave a verdict, in order, keep it; the
			// first without one was being evaluated and gets the failure.
			lead := 0
			for lead < len(nodes) && fromTable[lead] {
				lead++
			}
			done = max(done, lead)
		}
	}
	in.Batch, in.Results, in.Cur, in.CallTable = nil, nil, -1, nil
	cerr = v.end(in, pc, cerr)
	if cerr != nil {
		done = max(done, 0)
		unselected(results[:done], nodes, batchKind, t != nil)
		return done, cerr
	}
	unselected(results, nodes, batchKind, t != nil)
	if kind == CallScore && !scoresSet {
		for i := range results {
			if results[i].Code == abi.CodeSuccess && (fromTable == nil || !fromTable[i]) {
				results[i] = Result{Code: abi.CodeError, Reason: "score_nodes returned without reporting its scores with scores_set"}
			}
		}
	}
	return len(nodes), nil
}

// unselected gives the nodes of a batch the guest never selected an Error
// verdict: a guest that returns early must not pass nodes it did not look
// at (abi.md §3.1), so the policy's failurePolicy decides for them.
func unselected(results []Result, nodes []fwk.NodeInfo, batchKind CallKind, table bool) {
	what := "selecting"
	if table {
		what = "a verdict in its node table or selecting"
	}
	for i := range results {
		if results[i].Code == hostabi.CodeUnselected {
			name := ""
			if n := nodes[i].Node(); n != nil {
				name = n.Name
			}
			results[i] = Result{Code: abi.CodeError, Reason: fmt.Sprintf("%s returned without %s node %d (%s)", abi.Points[batchKind].Export, what, i, name)}
		}
	}
}

// begin takes an instance for a call of pc's cycle, and the budget's
// deadline for it.
func (v *Version) begin(ctx context.Context, kind CallKind, pc *PolicyCycle) (*instance, int64, *CallError) {
	var b *Budget
	if pc != nil {
		b = pc.Budget
	}
	if cerr := b.stoppedCall(); cerr != nil {
		return nil, 0, cerr
	}
	// The running token comes first: an instance is only held by a call
	// that runs, so at most one instance per P is in use at any time, and
	// a policy never needs more instances than that (memoryBudget).
	tokens := *v.p.e.proc.running.Load()
	select {
	case tokens <- struct{}{}:
	default:
		var gate chan struct{} // nil: never ready
		if kind == CallPreEnqueue {
			gate = v.p.e.proc.gate
		}
		select {
		case tokens <- struct{}{}:
		case gate <- struct{}{}:
			tokens = gate
		case <-ctx.Done():
			return nil, 0, &CallError{Outcome: OutcomeUnavailable, Err: fmt.Errorf("%w (%w)", errRunWait, context.Cause(ctx))}
		}
	}
	in, err := v.acquire(ctx)
	if err != nil {
		<-tokens
		return nil, 0, &CallError{Outcome: OutcomeUnavailable, Err: err}
	}
	in.token = tokens
	if b == nil {
		return in, 0, nil
	}
	deadline, cerr := b.begin(in)
	if cerr != nil {
		v.release(in, true)
		<-tokens
		return nil, 0, cerr
	}
	return in, deadline, nil
}

// end charges the call to pc's budget (a failure stops the budget) and
// returns the instance to the pool, or discards it after a failed call.
func (v *Version) end(in *instance, pc *PolicyCycle, cerr *CallError) *CallError {
	if pc != nil && pc.Budget != nil {
		cerr = pc.Budget.end(in, cerr)
	}
	// A call stopped before it was armed left the instance untouched.
	tokens := in.token
	in.token = nil
	v.release(in, cerr == nil || cerr.Outcome == OutcomeStopped && !in.interrupted())
	<-tokens
	return cerr
}

// implements reports whether the module exports the entry point of kind.
func (v *Version) implements(kind CallKind) bool { return v.exports.Has(kind) }

// Call runs one extension point on a pooled instance. node is nil for
// PreFilter, PreScore and NormalizeScore; pc is the policy's state for this
// cycle (the guest's cycle state, written by prefilter/prescore and read
// later, and the cycle budget); scores is the in/out slice for
// NormalizeScore. A CallError means the call failed (timeout, trap, exit,
// budget, or no instance) and the instance was discarded, or that the
// cycle's budget had stopped and the guest was not called.
func (v *Version) Call(ctx context.Context, kind CallKind, pod *PodState, node fwk.NodeInfo, pc *PolicyCycle, scores []int64) (int64, Result, *CallError) {
	if kind < 0 || kind >= NumCallKinds || abi.Points[kind].BatchOf != abi.BatchNone || !v.implements(kind) {
		return 0, Result{}, &CallError{Outcome: OutcomeUnavailable, Err: fmt.Errorf("module does not implement extension point %d", kind)}
	}
	in, deadline, cerr := v.begin(ctx, kind, pc)
	if cerr != nil {
		return 0, Result{}, cerr
	}
	in.Pod, in.Node, in.Cycle, in.Scores = pod, node, abiCycle(pc), scores
	if kind == CallNormalizeScore && pc != nil && len(pc.Scored) == len(scores) {
		in.Batch, in.Cur = pc.Scored, -1 // select_node picks a scored node
	}
	ret, cerr := in.call(kind, pod.Cycle, uint32(len(scores)), deadline)
	in.Batch, in.Cur = nil, -1
	res := Result{Code: in.Code, Reason: in.Reason}
	if cerr = v.end(in, pc, cerr); cerr != nil {
		return 0, Result{}, cerr
	}
	return int64(ret), res, nil
}

// permits reports whether the policy declared scope, and logs the first
// undeclared read of each scope: the guest gets abi.NotDeclared, the
// operator a line that names the read and the declaration it needs.
// badTerm logs, once per policy, a count_pods term that does not parse,
// with the parser's reason: the guest only sees -2.
func (p *Policy) badTerm(term []byte) {
	if _, logged := p.undeclared.LoadOrStore("count_pods term", true); logged {
		return
	}
	_, err := ParseCountTerm(term)
	klog.InfoS("Policy passed count_pods a term that does not parse; the call returned BadArgs (-2)", "policy", p.name, "err", err,
		"fix", "pass a PodAffinityTerm in JSON (labelSelector, namespaces, namespaceSelector, topologyKey, includeTerminating), as docs/abi.md §4.6.1 shows")
}

func (p *Policy) permits(scope fields.Scope, fn string, num int32) bool {
	if scope == fields.ScopeNone || p.reads[scope] {
		return true
	}
	if _, logged := p.undeclared.LoadOrStore(scope, true); !logged {
		read := fn
		if num != fields.NoNum {
			read = fmt.Sprintf("%s(%d)", fn, num)
		}
		klog.InfoS("Policy read data its args do not declare; the read returned NotDeclared (-4)",
			"policy", p.name, "read", read, "fix", fmt.Sprintf("add %s to policies[].reads of policy %q", scope, p.name))
	}
	return false
}
