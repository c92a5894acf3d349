package host

import (
	"crypto/sha256"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host/internal/hostabi"
)

// Verdicts across cycles (docs/abi.md §3.4). A Filter or Score verdict is a
// function of what the guest read: the node's row of its node table, the
// pod (less its identity: PodState.Key), its cycle state, its config and
// module. The pods of one ReplicaSet read the same, so a version remembers
// the verdicts of each (pod key, cycle state, row) and a later cycle takes
// them instead of calling the guest. A node that changed has another row;
// a changed module or config is another Version, with its own memo.
//
// Not remembered: the verdicts of a call that read anything else (the pod's
// name, UID or whole object, the cluster, a node outside its row, random
// bytes). After a read of the pod's identity or the cluster the version
// stops remembering; after a read outside the rows it stops only once it is
// no longer reusable (unkeyableUnder). A policy with the real clock, one
// that keeps state, and one whose args disable reuse are never remembered.

// memoKey is what a remembered verdict depends on besides its row.
type memoKey struct {
	kind   CallKind
	pod    [32]byte
	state  [32]byte
	layout *hostabi.Layout
	epoch  uint32
	// objects folds the change counts of the policy's declared kinds, for
	// a version whose calls read granted objects: a change of one of
	// them makes every remembered verdict a miss.
	objects uint64
}

// memoVerdict is one remembered verdict.
type memoVerdict struct {
	res   Result
	score int64
}

// memoTable is the verdicts of one memoKey by row.
type memoTable struct {
	mu    sync.RWMutex
	rows  map[string]memoVerdict
	bytes int64
	// full is set once the table takes no more rows (evicted, or at
	// maxMemoRows).
	full bool
	// batches are whole batches answered from rows, by their first node
	// (memoBatch); evicted is set when the table was forgotten.
	batches map[uintptr]*memoBatch
	evicted bool
	// transient marks a cycle's own table (cycleTable): not in the
	// version's memo, its bytes not counted there.
	transient bool
	// reads is the generation of the version's PodReads its key was
	// computed with: verdicts are added only while it is current.
	reads uint32
	// A cycle's own table is used or not for the whole cycle (on, decided
	// when the cycle makes it), and turns itself off when its first
	// cycleLookups lookups find nothing (lookups, found).
	on      atomic.Bool
	found   atomic.Bool
	lookups atomic.Int32
}

// memoEntryBytes is about what a remembered verdict costs besides its
// row's bytes: the map entry (the string header and the verdict, 48
// bytes) with the map's slack, and the row's allocation rounded up.
const memoEntryBytes = 96

// verdictMemo is a version's remembered verdicts.
type verdictMemo struct {
	mu     sync.RWMutex
	tables map[memoKey]*memoTable
	order  []memoKey // oldest first, for eviction
	// seen are the templates met, with the pod cycle that met each first:
	// a key gets a table once a second cycle meets its template (admit).
	seen map[templateKey]uint64
	// dropped is set when the version retires: it remembers nothing more.
	dropped bool
	// bytes is about what the tables hold (rows and verdicts) and the
	// templates seen; the engine's total (Engine.memoBytes) includes it.
	bytes atomic.Int64
	// The probe window: firsts counts templates met for the first time
	// since the memo (re)started, hits the batches that found remembered
	// verdicts; after memoProbeTemplates firsts without a hit the memo
	// stops (offUntil, monotonic) for memoOffPeriod, and starts again.
	firsts, hits, offUntil atomic.Int64
}

// Bounds of a version's memo: the keys (pod templates × cycle states) and
// the bytes it holds, and the rows of one key. Past either of the first
// two the oldest key goes; a key with maxMemoRows rows takes no more. A
// row of a few columns and its verdict take about 100 bytes: 4 MiB hold
// 40,000 verdicts, 40 pod templates on 1000 distinct nodes. maxMemoSeen
// bounds the templates met (about 40 bytes each); past it they are
// forgotten, and each is met for the first time again. The memos of all
// an engine's versions together, templates seen included, stay within
// memoCapOf the budget (200 policies would otherwise hold 800 MiB), and
// the budget counts them: past either no version remembers more until
// some is freed.
const (
	maxMemoKeys        = 256
	maxMemoBytes       = 4 << 20
	maxMemoRows        = 8192
	maxMemoSeen        = 4096
	maxEngineMemoBytes = 64 << 20
	// seenEntryBytes is about what a template met costs in the seen map
	// (key, value and the map's share): 200 policies meeting 4096
	// templates each held 160 MiB before it was counted.
	seenEntryBytes = 64
)

// The probe window: a version whose memo met memoProbeTemplates templates
// for the first time without finding a remembered verdict (every pod its
// own template) stops remembering for memoOffPeriod, then tries again.
// Until then each pod cost a template's entry and a hash, for nothing: 200
// policies and all-distinct pods took 95–112 MiB of heap, and no verdict
// was ever reused.
const (
	memoProbeTemplates = 1024
	memoOffPeriod      = time.Minute
)

// memoCapOf is the cap of an engine's remembered verdicts under a memory
// budget of budget bytes (0: none): an eighth of it, at most
// maxEngineMemoBytes; the budget counts what they hold.
func memoCapOf(budget int64) int64 {
	if budget <= 0 {
		return maxEngineMemoBytes
	}
	return min(maxEngineMemoBytes, budget/8)
}

// memoRoom reports whether the engine's memos may hold add more bytes:
// within their cap and the memory budget.
func (e *Engine) memoRoom(add int64) bool {
	if e.memoBytes.Load()+add > e.memoCap {
		return false
	}
	b := e.budget
	return b.limit == 0 || b.used()+add <= b.limit
}

// admit returns the memo table of k if k has one, or makes it if a pod
// cycle other than cycle met k's template before: a template's first
// cycle is evaluated without the memo. The pods of one template meet it in
// many cycles; a pod of its own template (one Job's pod, a pod whose
// labels are unique) meets it once, and would pay to remember rows no
// later cycle asks for (BenchmarkShapes' -fresh rows: 3x the reuse-off
// path when every cycle stored its rows). The first sighting is told by
// templateOf, which costs a hash of the pod's labels rather than its key
// (PodState.Key encodes everything a policy may read of the pod: 5 µs for
// a small pod, 4% of a 1000-node Filter of a pod of its own template).
// key is called only for a template met before. nil: not admitted.
func (m *verdictMemo) admit(kind CallKind, pod *PodState, reads *hostabi.PodReadSet, cycle uint64, key func() memoKey, e *Engine) *memoTable {
	engine := &e.memoBytes
	if off := m.offUntil.Load(); off != 0 && monotonic() < off {
		return nil
	}
	tk := templateKey{kind: kind, hash: templateOf(pod, reads)}
	m.mu.RLock()
	first, seen := m.seen[tk]
	dropped := m.dropped
	m.mu.RUnlock()
	if dropped {
		return nil
	}
	if !seen || first == cycle {
		if !seen {
			m.meet(tk, cycle, e)
		}
		return nil
	}
	k := key()
	m.mu.RLock()
	t := m.tables[k]
	m.mu.RUnlock()
	if t != nil {
		return t
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.tables[k]; t != nil {
		return t
	}
	if m.dropped || !e.memoRoom(memoEntryBytes) {
		return nil
	}
	if m.tables == nil {
		m.tables = map[memoKey]*memoTable{}
	}
	for len(m.order) > 0 && (len(m.order) >= maxMemoKeys || m.bytes.Load() > maxMemoBytes) {
		m.evict(m.order[0], engine)
		m.order = m.order[1:]
	}
	t = &memoTable{rows: map[string]memoVerdict{}, reads: reads.Gen}
	m.tables[k] = t
	m.order = append(m.order, k)
	return t
}

// meet records template tk's first sighting, in cycle, within the seen
// map's bounds, charging it to the memo; and closes the probe window of a
// memo that met memoProbeTemplates templates without a hit.
func (m *verdictMemo) meet(tk templateKey, cycle uint64, e *Engine) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.seen[tk]; ok || m.dropped {
		return
	}
	if m.firsts.Add(1) >= memoProbeTemplates && m.hits.Swap(0) == 0 {
		// Nothing found in the window: stop remembering for a while,
		// and give back what it held.
		m.offUntil.Store(monotonic() + int64(memoOffPeriod))
		m.firsts.Store(0)
		m.forgetSeen(&e.memoBytes)
		for _, k := range m.order {
			m.evict(k, &e.memoBytes)
		}
		m.order = nil
		return
	} else if m.firsts.Load() >= memoProbeTemplates {
		m.firsts.Store(0) // a window with hits: the next one
	}
	if m.seen == nil || len(m.seen) >= maxMemoSeen {
		m.forgetSeen(&e.memoBytes)
		m.seen = make(map[templateKey]uint64, 16)
	}
	if !e.memoRoom(seenEntryBytes) {
		return
	}
	m.seen[tk] = cycle
	m.bytes.Add(seenEntryBytes)
	e.memoBytes.Add(seenEntryBytes)
}

// forgetSeen empties the seen map and refunds it (m.mu held).
func (m *verdictMemo) forgetSeen(engine *atomic.Int64) {
	n := int64(len(m.seen)) * seenEntryBytes
	m.bytes.Add(-n)
	engine.Add(-n)
	m.seen = nil
}

// templateKey is what admit tells a template's first cycle by.
type templateKey struct {
	kind CallKind
	hash uint64
}

// templateSeed seeds templateOf's hash for the process.
var templateSeed = maphash.MakeSeed()

// templateOf is a hash of the pod's namespace and of its labels that the
// version's guests read (reads): the pods of one template have the same,
// and a pod whose labels that policy reads are its own has its own. Only
// the memo's admission depends on it, never a verdict.
func templateOf(pod *PodState, reads *hostabi.PodReadSet) uint64 {
	if pod == nil || pod.Pod == nil {
		return 0
	}
	h := maphash.String(templateSeed, pod.Pod.Namespace)
	if reads.AllLabels {
		for k, v := range pod.Pod.Labels {
			h += maphash.String(templateSeed, k+"\x00"+v) // in any order
		}
		return h
	}
	for _, k := range reads.Labels {
		if v, ok := pod.Pod.Labels[k]; ok {
			h += maphash.String(templateSeed, k+"\x00"+v)
		}
	}
	return h
}

// evict forgets k's table (m.mu held); a call holding it stores nothing
// more.
func (m *verdictMemo) evict(k memoKey, engine *atomic.Int64) {
	old := m.tables[k]
	delete(m.tables, k)
	old.mu.Lock()
	m.bytes.Add(-old.bytes)
	engine.Add(-old.bytes)
	old.rows, old.bytes, old.batches = map[string]memoVerdict{}, 0, nil
	old.full, old.evicted = true, true
	old.mu.Unlock()
}

// drop forgets every remembered verdict and remembers no more: the version
// was replaced, and only cycles that pinned it still call it.
func (m *verdictMemo) drop(engine *atomic.Int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropped = true
	for _, k := range m.order {
		m.evict(k, engine)
	}
	m.forgetSeen(engine)
	m.order = nil
}

// remembers reports whether the version may remember kind's verdicts for
// calls of this pod.
func (v *Version) remembers(kind CallKind, pod *PodState) bool {
	return abi.Points[kind].JudgesNodes && pod != nil && v.reusable() &&
		!v.variesByPod.Load() && !v.p.realClock && !v.p.realRandom && v.layout.Load() != nil
}

// memoKeyOf is the key of pod's verdicts of kind in cycle pc, with the
// pod seen through reads.
func (v *Version) memoKeyOf(kind CallKind, pod *PodState, reads *hostabi.PodReadSet, pc *PolicyCycle, l *hostabi.Layout, epoch uint32) memoKey {
	k := memoKey{kind: kind, pod: pod.KeyFor(reads), layout: l, epoch: epoch}
	if v.readsObjects.Load() {
		k.objects = v.p.objectsGen()
	}
	if pc != nil && len(pc.State) > 0 {
		k.state = sha256.Sum256(pc.State)
	}
	return k
}
