package host

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// memoryBudget charges what policies hold in memory against one limit: the
// compiled code and host heap of every loaded module, and the host heap and
// linear memory of every live instance. All of it is measured (codeBytes,
// liveHeap, the linear memory's size), not estimated from module size.
//
// A module is admitted only if the loaded modules plus one running instance
// per CPU, and one for a gate (the largest instance loaded), fit: at most
// GOMAXPROCS guest calls run at once (running), and a PreEnqueue call
// beside them (gateToken), so that is what the scheduler needs to make
// progress. Everything above is shared out by use: an instance is created
// when a call finds none idle, after closing idle instances of the least
// recently used policies if the budget is full; instances idle for
// IdleInstanceTimeout are closed.
type memoryBudget struct {
	limit int64
	// proc says how many guest calls may run at once (roomLocked).
	proc *Process
	// modules and instances are what is charged now.
	modules, instances atomic.Int64
	// evictions counts idle instances closed to make room; over counts
	// instances made while the budget was full and nothing idle was left
	// to close; refusedGrowth counts memory.grow calls refused (grow).
	evictions, over, refusedGrowth atomic.Int64
	// inUse counts the instances serving a call; largest is the largest
	// instance cost (Version.instCost) of the versions loaded. grow keeps
	// room for an instance of largest for every running slot without one.
	inUse, largest atomic.Int64
	// largestStack is the largest stack limit of the versions loaded: a
	// running call's stack may grow to stackGrowthFactor times it
	// (stackReserve).
	largestStack atomic.Int64

	mu       sync.Mutex
	versions map[*Version]struct{} // versions that may hold instances

	// tenants is the namespaced policies' pool, the parent of every
	// namespace's account (accounts, under mu); nil: no pool.
	tenants  *account
	accounts map[string]*account

	// memo is what the engine's remembered verdicts hold (Engine.memoBytes;
	// nil: none): charged as it is, within the engine's memoCap.
	memo *atomic.Int64
}

// memoUsed is what remembered verdicts hold now.
func (b *memoryBudget) memoUsed() int64 {
	if b.memo == nil {
		return 0
	}
	return b.memo.Load()
}

func newMemoryBudget(limit int64, proc *Process) *memoryBudget {
	return &memoryBudget{limit: limit, proc: proc, versions: map[*Version]struct{}{}, accounts: map[string]*account{}}
}

// grow charges d more bytes of a running instance's linear memory (of
// version v) to the budget and v's namespace, if they hold it, and reports
// whether they did. Growth never takes the room the other running slots
// need: what is charged plus d plus one instance of the largest version for
// each slot (proc.maxRunning) without an instance in use stays within the
// limit. So however many calls grow at once, the budget holds, and every
// other call can still get an instance (after idle ones are closed). When
// it does not fit, idle instances are closed as for a new instance
// (victim: a namespace's among its own only); when none is left, growth is
// refused, and the guest sees its own out-of-memory. creating is growth
// during instantiation, whose instance is not yet counted in use.
// It returns "" when it did, or why not, for the guest's error (or the
// load's refusal): the budget's state, or the namespace's share (without
// the other namespaces' use).
func (b *memoryBudget) grow(d int64, v *Version, creating bool) (refusal string) {
	a := acctOf(v)
	for {
		var full *account
		if b.tryCharge(d, creating) {
			if full = a.overAt(d); full == nil {
				a.addInstances(d)
				return ""
			}
			b.instances.Add(-d)
		}
		b.mu.Lock()
		w := b.victim(v)
		closed := w != nil && w.closeOneIdle()
		b.mu.Unlock()
		if closed {
			b.evictions.Add(1)
			continue
		}
		b.refusedGrowth.Add(1)
		if full != nil {
			return accountRefusal(a, full)
		}
		return fmt.Sprintf("the policies' memory budget of %s holds %s, and %s must stay free to run %d more guest calls at once; raise memoryBudget in the WasmPolicy args or remove policies",
			mib(b.limit), mib(b.used()), mib(b.reserved()), max(0, int64(b.proc.maxRunning())-b.inUse.Load()))
	}
}

// refuseDeclared says why n bytes of a module's declared initial memory
// (made at instantiation, before the budget can refuse any of it) do not
// fit now for version v, or returns "".
func (b *memoryBudget) refuseDeclared(n int64, v *Version) string {
	if b.limit > 0 && b.used()+n > b.limit {
		return fmt.Sprintf("the policies' memory budget of %s cannot hold the module's initial memory (%s) beside the %s in use; raise memoryBudget in the WasmPolicy args or remove policies", mib(b.limit), mib(n), mib(b.used()))
	}
	if a := acctOf(v); a != nil {
		if full := a.overAt(n); full != nil {
			return "the module's initial memory (" + mib(n) + ") does not fit: " + accountRefusal(a, full)
		}
	}
	return ""
}

// reserved is the room kept for running slots without an instance in use:
// one instance of the largest version each.
func (b *memoryBudget) reserved() int64 {
	return max(0, int64(b.proc.maxRunning())-b.inUse.Load())*b.largest.Load() + b.stackReserve(b.largestStack.Load())
}

// stackReserve is the room kept for the call stacks of the calls that may
// run at once (a call per running slot and a gate), each up to
// stackGrowthFactor times the largest stack limit: an instance is
// charged the stacks it holds after its calls, not what a call may grow.
func (b *memoryBudget) stackReserve(largestStack int64) int64 {
	return int64(b.proc.maxRunning()+1) * stackGrowthFactor * largestStack
}

// tryCharge adds d to the instances' charge if it fits with the running
// slots' room (grow), atomically: calls growing at once cannot together
// overshoot.
func (b *memoryBudget) tryCharge(d int64, creating bool) bool {
	if b.limit == 0 {
		b.instances.Add(d)
		return true
	}
	room := b.reserved()
	if creating && room > 0 {
		room -= b.largest.Load() // the slot of the instance being made
	}
	for {
		cur := b.instances.Load()
		if b.modules.Load()+b.memoUsed()+cur+d+room > b.limit {
			return false
		}
		if b.instances.CompareAndSwap(cur, cur+d) {
			return true
		}
	}
}

// MemoryUse is the memory budget and what is charged to it.
type MemoryUse struct {
	// Budget is the limit in bytes; 0 means none.
	Budget int64
	// Modules is compiled code plus the host heap of compiled modules.
	Modules int64
	// Instances is the host heap and linear memory of live instances.
	Instances int64
	// Evictions counts idle instances closed to make room for others.
	Evictions int64
	// OverBudget counts instances created while the budget was full.
	OverBudget int64
	// RefusedGrowth counts memory.grow calls the budget refused.
	RefusedGrowth int64
	// Reserved is the room kept free for the running slots that hold no
	// instance now (one instance of the largest policy each) and for the
	// call stacks of the calls that may run at once: growth cannot take
	// it.
	Reserved int64
	// Verdicts is what remembered verdicts hold (rows, verdicts and the
	// templates met), within the engine's cap (an eighth of the budget,
	// at most 64 MiB).
	Verdicts int64
}

// Used is everything charged to the budget.
func (u MemoryUse) Used() int64 { return u.Modules + u.Instances + u.Verdicts }

func (b *memoryBudget) use() MemoryUse {
	return MemoryUse{Budget: b.limit, Modules: b.modules.Load(), Instances: b.instances.Load(), Evictions: b.evictions.Load(), OverBudget: b.over.Load(), RefusedGrowth: b.refusedGrowth.Load(), Reserved: b.reserved(), Verdicts: b.memoUsed()}
}

func (b *memoryBudget) used() int64 { return b.modules.Load() + b.instances.Load() + b.memoUsed() }

// room is what must stay free for the scheduler to make progress: one
// instance per running guest call, of the largest instance loaded.
// b.mu is held.
func (b *memoryBudget) roomLocked(extra *Version) int64 {
	largest, stack := int64(0), int64(0)
	if extra != nil {
		largest, stack = extra.instCost, extra.p.stackLimit
	}
	for v := range b.versions {
		largest, stack = max(largest, v.instCost), max(stack, v.p.stackLimit)
	}
	return int64(b.proc.maxRunning())*largest + b.stackReserve(stack)
}

// admit checks that a new version fits: every loaded module (v's module is
// already charged, from when it compiled) plus room to run; idle instances
// can be closed, so they do not count. It returns what the modules hold and
// the room, for the refusal's message.
func (b *memoryBudget) admit(v *Version) (modules, room int64, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	modules, room = b.modules.Load(), b.roomLocked(v)
	if b.limit > 0 && modules+room > b.limit {
		return modules, room, false
	}
	b.versions[v] = struct{}{}
	b.largest.Store(max(b.largest.Load(), v.instCost))
	b.largestStack.Store(max(b.largestStack.Load(), v.p.stackLimit))
	return modules, room, true
}

// forget stops tracking a version (it was freed), and refunds its module
// to its namespace's account.
func (b *memoryBudget) forget(v *Version) {
	b.mu.Lock()
	delete(b.versions, v)
	largest, stack := int64(0), int64(0)
	for w := range b.versions {
		largest, stack = max(largest, w.instCost), max(stack, w.p.stackLimit)
	}
	b.largest.Store(largest)
	b.largestStack.Store(stack)
	if v.acctModule != 0 {
		v.p.acct.addModules(-v.acctModule)
		v.acctModule = 0
	}
	b.mu.Unlock()
}

// fits reports whether cost more bytes fit in the budget now, and in the
// account of forV's namespace.
func (b *memoryBudget) fits(cost int64, forV *Version) bool {
	return (b.limit == 0 || b.used()+cost <= b.limit) && !acctOf(forV).over(cost)
}

// makeRoom closes idle instances (victim) until cost more bytes fit, and
// reports whether they fit.
//
// forV is the version that needs the room (its own idle instance, after a
// call that grew it, is not closed for it).
//
// A namespaced policy's room is made among its own namespace's idle
// instances only, within its account as well as the budget: a team can
// never close another team's, or the operator's, instances.
func (b *memoryBudget) makeRoom(cost int64, forV *Version) bool {
	a := acctOf(forV)
	full := func() bool { return (b.limit > 0 && b.used()+cost > b.limit) || a.over(cost) }
	if !full() {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for full() {
		v := b.victim(forV)
		if v == nil || !v.closeOneIdle() {
			return !full()
		}
		b.evictions.Add(1)
	}
	return true
}

// victim picks the version whose idle instance makeRoom closes (b.mu held):
// a policy's second idle instance before any policy's only one, least
// recently used first. nil: no idle instance.
func (b *memoryBudget) victim(except *Version) *Version {
	var extra, lru *Version
	for v := range b.versions {
		n := len(v.idle)
		if n == 0 || v == except || acctOf(except) != nil && v.p.acct != acctOf(except) {
			continue
		}
		used := v.lastUsed.Load()
		if n > 1 && (extra == nil || used < extra.lastUsed.Load()) {
			extra = v
		}
		if lru == nil || used < lru.lastUsed.Load() {
			lru = v
		}
	}
	if extra != nil {
		return extra
	}
	return lru
}

// reapIdle closes the idle instances of versions not used for timeout.
func (e *Engine) reapIdle(timeout time.Duration) {
	defer close(e.reaperDone)
	t := time.NewTicker(max(timeout/4, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-e.stopReaper:
			return
		case <-t.C:
		}
		now := monotonic()
		b := e.budget
		b.mu.Lock()
		for v := range b.versions {
			if now-v.lastUsed.Load() > int64(timeout) {
				v.closeIdle()
			}
		}
		b.mu.Unlock()
	}
}

// mib formats a byte count for messages.
func mib(n int64) string {
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}
