package host

import (
	"context"
	"crypto/sha256"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	fwk "k8s.io/kube-scheduler/framework"

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
// bytes); after one such call the version stops remembering. A policy with
// the real clock, one that keeps state, and one whose args disable reuse
// are never remembered.

// memoKey is what a remembered verdict depends on besides its row.
type memoKey struct {
	kind   CallKind
	pod    [32]byte
	state  [32]byte
	layout *hostabi.Layout
	epoch  uint32
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

// memoBatch is a batch whose every node had a remembered verdict, kept
// whole: the next cycle of the template finds the same NodeInfos at the
// same generations in most of its batches, and takes their verdicts
// without building a row or looking one up per node (BenchmarkCycle: the
// row lookups were 15% of a 1000-node cycle). A NodeInfo's generation
// comes from kube-scheduler's process-wide counter, taken anew on every
// change, so a node at the generation seen is the node whose rows gave
// these verdicts (as the node cache, hostabi, assumes too). The one
// exception is the pod-group cycles of the GenericWorkload gate, whose
// snapshot puts a member into a NodeInfo and restores its generation;
// docs/kubernetes.md says not to combine that gate with WasmPolicy.
// Entries are not changed once stored.
type memoBatch struct {
	nodes  []uintptr // the NodeInfos' pointers (identity, not kept alive)
	gens   []int64
	res    []Result
	scores []int64
}

// memoBatchBytes is about what a memoBatch costs per node (its slices'
// elements, 48 bytes, and their growth's slack). The three estimates here
// are measured (docs/security.md, RATIONALE: remembered verdicts are
// charged what they hold).
const memoBatchBytes = 64

// nodeIdentity is the pointer a NodeInfo holds.
func nodeIdentity(ni fwk.NodeInfo) uintptr {
	return uintptr((*[2]unsafe.Pointer)(unsafe.Pointer(&ni))[1])
}

// batch answers a whole batch from a stored memoBatch, if its nodes are
// those of one at the same generations.
func (t *memoTable) batch(nodes []fwk.NodeInfo, results []Result, scores []int64) bool {
	t.mu.RLock()
	b := t.batches[nodeIdentity(nodes[0])]
	t.mu.RUnlock()
	if b == nil || len(b.nodes) != len(nodes) {
		return false
	}
	for i, ni := range nodes {
		if nodeIdentity(ni) != b.nodes[i] || ni.GetGeneration() != b.gens[i] {
			return false
		}
	}
	copy(results, b.res)
	if scores != nil {
		copy(scores, b.scores)
	}
	return true
}

// newMemoBatch records a batch answered from rows; nil when some node has
// no generation (a NodeInfo made outside kube-scheduler's counter).
func newMemoBatch(nodes []fwk.NodeInfo, results []Result, scores []int64) *memoBatch {
	b := &memoBatch{nodes: make([]uintptr, len(nodes)), gens: make([]int64, len(nodes)), res: append([]Result(nil), results...)}
	for i, ni := range nodes {
		if b.gens[i] = ni.GetGeneration(); b.gens[i] == 0 {
			return nil
		}
		b.nodes[i] = nodeIdentity(ni)
	}
	if scores != nil {
		b.scores = append([]int64(nil), scores...)
	}
	return b
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

// keepBatch stores a batch answered wholly from rows, within the memo's
// bounds (its bytes count as rows' do).
func (t *memoTable) keepBatch(v *Version, nodes []fwk.NodeInfo, results []Result, scores []int64) {
	if len(nodes) == 0 || !v.p.e.memoRoom(int64(len(nodes)*memoBatchBytes+memoEntryBytes)) || v.memo.bytes.Load() > maxMemoBytes {
		return
	}
	b := newMemoBatch(nodes, results, scores)
	if b == nil {
		return
	}
	size := int64(len(nodes)*memoBatchBytes + memoEntryBytes)
	key := b.nodes[0]
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.evicted {
		return
	}
	if t.batches == nil {
		t.batches = map[uintptr]*memoBatch{}
	}
	if old, replaced := t.batches[key]; replaced {
		size -= int64(len(old.nodes)*memoBatchBytes + memoEntryBytes)
	} else if len(t.batches) >= maxMemoBatches {
		return
	}
	t.batches[key] = b
	t.bytes += size
	v.memo.bytes.Add(size)
	v.p.e.memoBytes.Add(size)
}

// maxMemoBatches bounds the batches one table keeps: 5000 nodes in
// batches of 32 are 157.
const maxMemoBatches = 1024

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
	return (kind == CallFilter || kind == CallScore) && pod != nil && v.reusable() &&
		!v.variesByPod.Load() && !v.p.realClock && !v.p.realRandom && v.layout.Load() != nil
}

// memoKeyOf is the key of pod's verdicts of kind in cycle pc, with the
// pod seen through reads.
func (v *Version) memoKeyOf(kind CallKind, pod *PodState, reads *hostabi.PodReadSet, pc *PolicyCycle, l *hostabi.Layout, epoch uint32) memoKey {
	k := memoKey{kind: kind, pod: pod.KeyFor(reads), layout: l, epoch: epoch}
	if pc != nil && len(pc.State) > 0 {
		k.state = sha256.Sum256(pc.State)
	}
	return k
}

// cycleMemo is a cycle's answer from its version's memo (admit), kept for
// the cycle's later batches, which would otherwise hash the same key again:
// valid while the kind, the layout, the interner epoch and the cycle state
// (by identity: cycle_state_set replaces it) are those it was taken for.
type cycleMemo struct {
	v      *Version
	kind   CallKind
	layout *hostabi.Layout
	epoch  uint32
	state  []byte
	// remember: t came from the version's memo (or is the cycle's own
	// table because the memo did not admit the key); else it is the
	// cycle's own table of a version that does not remember.
	remember bool
	t        *memoTable
}

// memoTableOf returns the table for pod's batches of kind in cycle pc: the
// version's memo table of the key when remember is set and the memo
// admits it (verdictMemo.admit), else the cycle's own table (nil without
// a cycle).
func (v *Version) memoTableOf(kind CallKind, pod *PodState, pc *PolicyCycle, l *hostabi.Layout, epoch uint32, remember bool) *memoTable {
	reads := v.podReads.Set()
	key := func() memoKey { return v.memoKeyOf(kind, pod, reads, pc, l, epoch) }
	if pc == nil {
		if !remember {
			return nil
		}
		return v.memo.admit(kind, pod, reads, pod.Cycle, key, v.p.e)
	}
	st := pc.State
	if c := pc.memo.Load(); c != nil && c.v == v && c.kind == kind && c.layout == l && c.epoch == epoch && c.remember == remember &&
		len(c.state) == len(st) && unsafe.SliceData(c.state) == unsafe.SliceData(st) {
		return c.t
	}
	var t *memoTable
	if remember {
		t = v.memo.admit(kind, pod, reads, pod.Cycle, key, v.p.e)
	}
	if t == nil {
		t = &memoTable{rows: map[string]memoVerdict{}, transient: true}
		t.on.Store(v.cycleSharing[sharingKind(kind)].try(cycleIdleAfter, cycleProbe))
	}
	pc.memo.Store(&cycleMemo{v: v, kind: kind, layout: l, epoch: epoch, state: st, remember: remember, t: t})
	return t
}

// sharesInCycle reports whether the version may share verdicts across the
// batches of one cycle although it does not remember them across cycles:
// what varies by pod (its identity, the cluster) does not vary within a
// cycle, so only a read outside the row (reusable) and the real clock or
// random source stop it (time passes between a cycle's batches, as it does
// not within one call).
func (v *Version) sharesInCycle(kind CallKind, pod *PodState, pc *PolicyCycle) bool {
	return pc != nil && (kind == CallFilter || kind == CallScore) && pod != nil && v.reusable() &&
		!v.p.realClock && !v.p.realRandom && v.layout.Load() != nil
}

// A cycle's own table. A pod the memo does not take (the first cycle of
// its template, a pod of its own template) still has its verdicts shared
// across its cycle's batches: within one cycle the pod and its cycle
// state are fixed, so nodes with equal rows get the same verdict in every
// batch, not only in their own (a pool of 50 nodes spread over 32-node
// batches was evaluated once per batch, not once). The table lives as
// long as the cycle's PolicyCycle and holds at most maxCycleRows rows. A
// lookup that finds nothing costs about 6 µs over the batch (every row
// distinct: BenchmarkShapes, distinct -fresh), so a cycle whose first
// cycleLookups lookups find nothing stops looking, and a version (per
// kind) whose cycles keep finding nothing uses the table in one cycle of
// cycleProbe, and in all again once one finds a row. Counted in batches,
// the back-off could not come back: a probe batch found its cycle's table
// empty, the batches before it having skipped it.
const (
	maxCycleRows   = 1024
	cycleLookups   = 2
	cycleIdleAfter = 4
	cycleProbe     = 16
)

// sharingKind indexes Version.cycleSharing: Filter's rows and Score's are
// not alike (a Score reads requested resources, which differ by node).
func sharingKind(kind CallKind) int {
	if kind == CallScore {
		return 1
	}
	return 0
}

// looked records what a batch found in its cycle's table (which held
// rows): the first hit keeps the table on for the cycle and tells the
// version; cycleLookups lookups without one turn it off for the rest of
// the cycle, and count as an idle cycle.
func (t *memoTable) looked(v *Version, kind CallKind, hit bool) {
	b := &v.cycleSharing[sharingKind(kind)]
	switch {
	case hit:
		if !t.found.Swap(true) {
			b.record(true, cycleIdleAfter)
		}
	case !t.found.Load() && t.lookups.Add(1) == cycleLookups:
		t.on.Store(false)
		b.record(false, cycleIdleAfter)
	}
}

// CallNodes runs the batch form of Filter or Score (kind CallFilter or
// CallScore) over nodes. results[i] (and, for Score, scores[i]) receive
// node i's verdict. Each node gets the full policy timeout, within what
// pc's budget has left. On a failed call, done is the index of the node
// being evaluated when it failed; results after it are not set.
//
// Verdicts the version remembers (verdictMemo) are taken without a call;
// the other nodes go to the guest in one call (callNodes), and their
// verdicts are remembered if the call read nothing that varies by pod.
func (v *Version) CallNodes(ctx context.Context, kind CallKind, pod *PodState, nodes []fwk.NodeInfo, pc *PolicyCycle, results []Result, scores []int64) (int, *CallError) {
	remember := v.remembers(kind, pod)
	if !remember && !v.sharesInCycle(kind, pod, pc) || len(results) != len(nodes) || (kind == CallScore && len(scores) != len(nodes)) {
		d, _, cerr := v.callNodes(ctx, kind, pod, nodes, pc, results, scores)
		return d, cerr
	}
	if pc != nil {
		// A cycle whose budget stopped calls the policy no more, and takes
		// nothing remembered either: its failure decides (docs/security.md).
		if cerr := pc.Budget.stoppedCall(); cerr != nil {
			return 0, cerr
		}
	}
	caches := v.p.e.caches
	l := v.layout.Load()
	epoch := caches.Epoch()
	t := v.memoTableOf(kind, pod, pc, l, epoch, remember)
	if t == nil || t.transient && !t.on.Load() {
		d, _, cerr := v.callNodes(ctx, kind, pod, nodes, pc, results, scores)
		return d, cerr
	}
	if len(nodes) > 0 && t.batch(nodes, results, scores) {
		v.p.rowsRemembered.Add(int64(len(nodes)))
		v.memo.hits.Add(1)
		return len(nodes), nil
	}
	// A batch of up to 32 nodes (the plugin's size) keeps its rows and
	// misses on the stack.
	var rowBuf [32][]byte
	var missBuf [32]int
	rows := rowBuf[:0]
	if len(nodes) > len(rowBuf) {
		rows = make([][]byte, 0, len(nodes))
	}
	rows = rows[:len(nodes)]
	for i, ni := range nodes {
		var e uint32
		if rows[i], e = caches.Row(l, ni); e != epoch {
			d, _, cerr := v.callNodes(ctx, kind, pod, nodes, pc, results, scores) // the interner moved on: no key
			return d, cerr
		}
	}
	miss := missBuf[:0]
	t.mu.RLock()
	empty := len(t.rows) == 0
	for i, row := range rows {
		mv, ok := t.rows[string(row)]
		if !ok {
			miss = append(miss, i)
			continue
		}
		results[i] = mv.res
		if scores != nil {
			scores[i] = mv.score
		}
	}
	t.mu.RUnlock()
	if t.transient {
		if !empty {
			t.looked(v, kind, len(miss) < len(nodes))
		}
		v.p.rowsShared.Add(int64(len(nodes) - len(miss)))
	} else {
		v.p.rowsRemembered.Add(int64(len(nodes) - len(miss)))
		if len(miss) < len(nodes) {
			v.memo.hits.Add(1)
		}
	}
	if len(miss) == 0 {
		if !t.transient {
			t.keepBatch(v, nodes, results, scores)
		}
		return len(nodes), nil
	}
	var d int
	var keyedBy *hostabi.Layout
	var cerr *CallError
	if len(miss) == len(nodes) {
		d, keyedBy, cerr = v.callNodes(ctx, kind, pod, nodes, pc, results, scores)
	} else {
		d, keyedBy, cerr = v.callSubset(ctx, kind, pod, nodes, miss, pc, results, scores)
	}
	if cerr != nil {
		// The remembered nodes before the failed one keep their verdicts.
		return d, cerr
	}
	if keyedBy != l || !t.transient && (!v.remembers(kind, pod) || t.reads != v.podReads.Set().Gen) {
		// The guest read something else, or its instance's table has
		// other columns than the rows the memo is keyed by; or a call of
		// the version read what varies by pod, which the guest may have
		// kept for this call without reading it again; or a guest read a
		// label or annotation the key does not hold.
		return len(nodes), nil
	}
	var added int64
	t.mu.Lock()
	limit := maxMemoRows
	if t.transient {
		limit = maxCycleRows
	}
	for _, i := range miss {
		if t.full || len(t.rows) >= limit {
			t.full = true
			break
		}
		if !t.transient && !v.p.e.memoRoom(int64(len(rows[i])+memoEntryBytes)) {
			break
		}
		if r := results[i]; r.Code != abi.CodeError {
			mv := memoVerdict{res: r}
			if scores != nil {
				mv.score = scores[i]
			}
			if _, dup := t.rows[string(rows[i])]; !dup {
				added += int64(len(rows[i]) + len(r.Reason) + memoEntryBytes)
			}
			t.rows[string(rows[i])] = mv
		}
	}
	t.bytes += added
	if !t.transient {
		v.memo.bytes.Add(added)
		v.p.e.memoBytes.Add(added)
	}
	t.mu.Unlock()
	return len(nodes), nil
}
