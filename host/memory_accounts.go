package host

import (
	"fmt"
	"sync/atomic"
)

// withTenants gives the namespaced policies a pool of limit bytes within
// the budget (0: none).
func (b *memoryBudget) withTenants(limit int64) *memoryBudget {
	if limit > 0 {
		b.tenants = &account{}
		b.tenants.limit.Store(limit)
	}
	return b
}

// account is a part of the budget that some policies are charged to as
// well as the whole: one namespace's slice, and the pool of all of them.
// A namespace (a team) can thereby fail only its own loads and calls: its
// policies are admitted against its slice, and their instances close only
// each other's (victim).
type account struct {
	ns string
	// limit is in bytes (0: none); the last policy built for the
	// namespace sets it, while calls read it.
	limit  atomic.Int64
	parent *account
	// modules are the modules its versions were admitted with (each
	// charged whole, even when shared); instances as the budget's.
	modules, instances atomic.Int64
}

func (a *account) used() int64 { return a.modules.Load() + a.instances.Load() }

// addInstances charges d to a and its parent; a may be nil.
func (a *account) addInstances(d int64) {
	for ; a != nil; a = a.parent {
		a.instances.Add(d)
	}
}

func (a *account) addModules(d int64) {
	for ; a != nil; a = a.parent {
		a.modules.Add(d)
	}
}

// over reports whether cost more bytes would not fit a or its parent.
func (a *account) over(cost int64) bool { return a.overAt(cost) != nil }

// acctOf is v's namespace's account (nil: the operator's, or no v).
func acctOf(v *Version) *account {
	if v == nil {
		return nil
	}
	return v.p.acct
}

// accountFor returns namespace ns's account of limit bytes (nil for the
// operator's policies: ns ""). The last limit given wins.
func (b *memoryBudget) accountFor(ns string, limit int64) *account {
	if ns == "" {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	a := b.accounts[ns]
	if a == nil {
		a = &account{ns: ns, parent: b.tenants}
		b.accounts[ns] = a
	}
	a.limit.Store(limit)
	return a
}

// admitTenant checks that a namespaced version fits its namespace's slice
// and the tenants' pool: their modules, this one's, and room to run one
// instance per CPU of the largest of the namespace's instances. It
// charges the module to them and returns "", or says why not.
func (b *memoryBudget) admitTenant(v *Version) string {
	a := v.p.acct
	if a == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	largest, stack := v.instCost, v.p.stackLimit
	for w := range b.versions {
		if w.p.acct == a {
			largest, stack = max(largest, w.instCost), max(stack, w.p.stackLimit)
		}
	}
	room := int64(b.proc.maxRunning())*largest + b.stackReserve(stack)
	cost := v.sm.cost()
	for x := a; x != nil; x = x.parent {
		if l := x.limit.Load(); l > 0 && x.modules.Load()+cost+room > l {
			if x != a {
				// The pool's use is every team's: the refusal, which the
				// team reads in its object's status, does not say it.
				return fmt.Sprintf("the namespaced policies' share of the memory budget (%s) cannot hold this module (%s: compiled code %s, host heap %s; and %s to run %d guest calls at once) next to the other namespaces' policies; ask the scheduler's operators to raise memoryBudget in policyObjects.tenants of the WasmPolicy args",
					mib(l), mib(cost), mib(v.sm.code), mib(v.sm.heap), mib(room), b.proc.maxRunning())
			}
			return fmt.Sprintf("namespace %s's share of the memory budget (%s) cannot hold this module: its modules hold %s, this one %s (compiled code %s, host heap %s), and %s must stay free to run %d guest calls at once (one instance is %s); remove policies of the namespace, or ask the scheduler's operators to raise memoryBudget in policyObjects.tenants of the WasmPolicy args",
				a.ns, mib(l), mib(x.modules.Load()), mib(cost), mib(v.sm.code), mib(v.sm.heap), mib(room), b.proc.maxRunning(), mib(v.instCost))
		}
	}
	a.addModules(cost)
	v.acctModule = cost
	return ""
}

// accountRefusal says that account full (a, its namespace's, or the
// tenants' pool) holds no more: the pool without the other namespaces'
// use.
func accountRefusal(a, full *account) string {
	if full == a {
		return fmt.Sprintf("namespace %s's share of the memory budget (%s) holds %s of its policies; remove policies of the namespace, or ask the scheduler's operators to raise memoryBudget in policyObjects.tenants of the WasmPolicy args",
			a.ns, mib(a.limit.Load()), mib(a.used()))
	}
	return fmt.Sprintf("the namespaced policies' share of the memory budget (%s) is full; ask the scheduler's operators to raise memoryBudget in policyObjects.tenants of the WasmPolicy args", mib(full.limit.Load()))
}

// overAt is the first of a and its parents that cost more bytes would not
// fit (nil: they fit).
func (a *account) overAt(cost int64) *account {
	for ; a != nil; a = a.parent {
		if l := a.limit.Load(); l > 0 && a.used()+cost > l {
			return a
		}
	}
	return nil
}
