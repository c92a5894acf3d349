package host

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/host/internal/hostabi"
)

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
	// acctModule is the module's cost charged to the policy's namespace
	// (admitTenant), refunded when the version is freed; under the
	// budget's mu.
	acctModule int64

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
	// unkeyable is set once the guest was seen reading outside its rows
	// under more than maxUnkeyableLayouts layouts (callNodes), or in a
	// single-node call (Call); then no row is shared, within a cycle or
	// across cycles. unkeyableAt are the layouts under which a batch was
	// seen reading outside its rows: no batch is grouped by their rows
	// again (keyableUnder).
	unkeyable   atomic.Bool
	unkeyableAt atomic.Pointer[[]*hostabi.Layout]
	// variesByPod is set once a call read what varies between pods of
	// one template or between cycles (hostabi.Call.VariesByPod); layout
	// is the node table the guest last declared; memo holds the verdicts
	// remembered across cycles (memo.go).
	variesByPod atomic.Bool
	// readsObjects is set once a call read granted objects: the memo then
	// keys its verdicts on the kinds' change counts too (objectsGen).
	readsObjects atomic.Bool
	layout       atomic.Pointer[hostabi.Layout]
	memo         verdictMemo
	// podReads are the pod's labels and annotations the version's guests
	// read: the memo keys pods through them (hostabi.PodReads).
	podReads hostabi.PodReads
	// random is set once a call drew random bytes: its answers are its
	// instance's, not a function of what it read (Signature).
	random atomic.Bool
	// grouping backs off grouping a batch's rows (groupRows), by batch;
	// cycleSharing looking rows up in a cycle's table, by cycle, for
	// Filter and for Score (memoTable.looked).
	grouping     backoff
	cycleSharing [2]backoff
	inUse        atomic.Int64
	memBytes     atomic.Int64
	chargedBytes atomic.Int64
	// lastUsed is when a call last took an instance (monotonic).
	lastUsed atomic.Int64
	retired  atomic.Bool
	closed   atomic.Bool
	// grace is the timer that frees a retired version's module: stopped
	// once it is freed, so a closed policy is not kept in memory until the
	// grace has passed.
	grace atomic.Pointer[time.Timer]
}

// Exports reports which extension points the module implements.
func (v *Version) Exports() Exports { return v.exports }

// SHA256 is the hex digest of the module's wasm bytes.
func (v *Version) SHA256() string { return v.sha256 }

// Signature says what a scheduler's pod signature (kube-scheduler's
// SignPlugin, KEP-5598 opportunistic batching) must hold for this version:
// the module's digest and its policy's config, which with the pod's key
// (PodState.Key) decide its Filter and Score verdicts on a node (docs/abi.md
// §3.4). ok is false when its verdicts may differ between two pods with
// equal keys: reuse turned off, a guest that keeps state, or one seen
// reading what varies by pod (name, UID, whole object, the cluster) or
// drawing random bytes in a call, or one given the real clock or real
// random bytes.
func (v *Version) Signature() (sig string, ok bool) {
	p := v.p
	if p.noReuse || p.realClock || p.realRandom || v.exports.KeepsState || v.variesByPod.Load() || v.random.Load() || v.readsObjects.Load() {
		return "", false
	}
	return v.sha256 + "/" + p.configSum, true
}

// Size is the module's size in bytes.
func (v *Version) Size() int { return v.size }

// TableBatches reports how many batch calls ran with the nodes in the
// guest's node table (ABI v2, abi.md §3.2): zero for a v1 guest, and for a
// v2 guest until its first batch has shown the SDK what it reads.
func (v *Version) TableBatches() int64 { return v.tableBatches.Load() }

// SharesRows reports whether nodes with equal rows share the guest's
// verdict in this version's batches (docs/abi.md §3.4): not when the
// policy turned it off, the guest keeps state, or it read outside its rows
// too often to be grouped again (reusable).
func (v *Version) SharesRows() bool { return v.reusable() }

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

// trackMemory charges an instance's host heap, table room and the stacks
// its entry points hold (instance.stackHeld) to the
// version and the engine's budget, and its linear memory where it has no
// mapping of its own (nothing once it is closing). A mapped linear memory
// charges itself as it grows (chargeGrowth) and refunds itself as it is
// unmapped (refundLinear).
func (v *Version) trackMemory(in *instance, closing bool) {
	mem, charge := int64(0), int64(0)
	if !closing {
		charge = max(0, v.sm.instHeap.Load()) + v.sm.tableRoom + in.stackHeld
		if in.linear == nil {
			mem = int64(in.memoryBytes())
			charge += mem
		}
	}
	if d := mem - in.lastMem; d != 0 {
		v.memBytes.Add(d)
		in.lastMem = mem
	}
	if d := charge - in.charged; d != 0 {
		v.chargedBytes.Add(d)
		v.p.e.budget.instances.Add(d)
		v.p.acct.addInstances(d)
		in.charged = charge
	}
}

// burstSlack is how far past its size when it was made an instance's
// memory may grow and the instance still be kept (or, if more, up to twice
// that size): a Go guest's heap grows by a few MiB as its first calls warm
// it, while a call that took tens of MiB more was a burst whose memory the
// instance would otherwise keep, charged, until it is closed.
const burstSlack = 64 << 20

// grewPastNeed reports whether the instance's memory grew past what its
// calls need: past the policy's recycle mark (half its memory limit), or
// by more than burstSlack and more than doubled since it was made; or its
// entry points' stacks hold more than the policy's stack limit together.
func (in *instance) grewPastNeed() bool {
	mem := int64(in.memoryBytes())
	return mem > int64(in.v.p.recycleBytes) || mem-in.createdMem > max(in.createdMem, burstSlack) || in.stackHeld > in.v.p.stackLimit
}

// cost is what the instance is charged now: host heap, table room and
// linear memory.
func (in *instance) cost() int64 { return in.charged + in.linear.linearSize() }

// chargeGrowth charges d more bytes of linear memory to the instance's
// version, its namespace and the budget, and reports whether they were
// granted (memory.grow fails otherwise). initial is the module's declared
// minimum at instantiation, which is always charged: the call made room
// for the instance before it was created.
func (in *instance) chargeGrowth(d int64, initial bool) bool {
	v := in.v
	b := v.p.e.budget
	if initial {
		b.instances.Add(d)
		v.p.acct.addInstances(d)
	} else if why := b.grow(d, v, in.mod == nil); why != "" {
		in.refusedGrowth, in.refusal = d, why
		return false
	}
	v.chargedBytes.Add(d)
	v.memBytes.Add(d)
	return true
}

// refundLinear returns what the instance's linear memory was charged, as
// it is unmapped.
func (in *instance) refundLinear(n int64) {
	if n == 0 {
		return
	}
	v := in.v
	v.p.e.budget.instances.Add(-n)
	v.p.acct.addInstances(-n)
	v.chargedBytes.Add(-n)
	v.memBytes.Add(-n)
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
		// Measured as the instances after it are made: with the functions
		// of the points the guest's capabilities name, not every export
		// (the load narrows v.exports from the same answer, later).
		ex := v.exports
		if applyCapabilities(in, &ex) == nil {
			in.keepOnly(ex)
		}
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
		in = v.shareUnderPressure(ctx)
	}
	if in == nil {
		if v.closed.Load() {
			v.permits <- struct{}{}
			return nil, errors.New("module version was replaced and freed")
		}
		// Make room by closing idle instances of other policies
		// (memoryBudget.victim). If none is left (instances grew while
		// running), the call still gets its instance: stalling the
		// scheduler would be worse than going over for a moment.
		if !v.p.e.budget.makeRoom(v.instCost, v) {
			if a := v.p.acct; a != nil {
				// A namespace's policies never go over its slice, nor
				// take anyone else's instances: the call fails, and
				// the policy's failurePolicy answers its own pods.
				v.permits <- struct{}{}
				return nil, fmt.Errorf("namespace %s's share of the memory budget (%s) holds no more instances of its policies: %s in use", a.ns, mib(a.limit.Load()), mib(a.used()))
			}
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
	v.p.e.budget.inUse.Add(1)
	return in, nil
}

// shareWait bounds how long a call waits for an instance of its own policy
// when the budget is full (shareUnderPressure): about what instantiating a
// Go guest costs.
const shareWait = 20 * time.Millisecond

// shareUnderPressure waits, when the memory budget has no room for another
// instance and the version has one already, for that one to be released
// (at most shareWait), rather than closing another policy's: with more
// policies than the budget holds two instances of, each cycle's parallel
// Filter calls would otherwise make a second instance of every policy by
// closing another's only one (200 Go policies: a cycle made about 200
// instances, 2 s). nil: make one.
func (v *Version) shareUnderPressure(ctx context.Context) *instance {
	if v.live.Load() == 0 || v.p.e.budget.fits(v.instCost, v) {
		return nil
	}
	t := time.NewTimer(shareWait)
	defer t.Stop()
	select {
	case in := <-v.idle:
		return in
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

// release returns a healthy instance to the pool, or discards it: after a
// failed call, when the version was replaced, or when its memory grew past
// what it needs (grewPastNeed: wasm memory never shrinks). A discarded instance of the
// serving version is replaced in the background, so the call after a
// failure does not pay for instantiating a module (5-15 ms for a Go guest).
func (v *Version) release(in *instance, healthy bool) {
	in.Call.Release()
	v.inUse.Add(-1)
	v.p.e.budget.inUse.Add(-1)
	if healthy && !v.retired.Load() && !in.grewPastNeed() {
		v.trackMemory(in, false)
		v.idle <- in
		v.permits <- struct{}{}
		if b := v.p.e.budget; b.limit > 0 && b.used() > b.limit {
			b.makeRoom(0, v) // its memory grew during the call
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
	if !v.p.e.budget.makeRoom(v.instCost, v) {
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

// retire closes the idle instances of a replaced version. Cycles that pinned
// it may still call it; they get fresh instances that are closed on release.
// After the policy's RetiredGrace the compiled module is released, so reloads
// do not accumulate machine code.
func (v *Version) retire() {
	if v.retired.Swap(true) {
		return
	}
	v.grace.Store(time.AfterFunc(v.p.retiredGrace, v.freeCompiled))
	v.memo.drop(&v.p.e.memoBytes)
	v.closeIdle()
}

// freeCompiled gives the version's module back once no instance of it is
// live (freeing the code if no other policy uses it).
func (v *Version) freeCompiled() {
	if v.closed.Load() {
		return
	}
	if v.live.Load() > 0 {
		v.grace.Store(time.AfterFunc(v.p.retiredGrace, v.freeCompiled))
		return
	}
	if v.closed.Swap(true) {
		return
	}
	if t := v.grace.Swap(nil); t != nil {
		t.Stop()
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
