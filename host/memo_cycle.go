package host

import (
	"unsafe"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host/internal/hostabi"
)

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
// cycle, so only reads outside the rows (reusable) and the real clock or
// random source stop it (time passes between a cycle's batches, as it does
// not within one call).
func (v *Version) sharesInCycle(kind CallKind, pod *PodState, pc *PolicyCycle) bool {
	return pc != nil && abi.Points[kind].JudgesNodes && pod != nil && v.reusable() &&
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
