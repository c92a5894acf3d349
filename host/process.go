package host

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Process is what every Engine in a process shares, because the process
// has it once: its CPUs and its Go heap. Everything else an engine uses
// (compiled modules, the memory budget, the caches of what policies read)
// is the engine's own, so two scheduler profiles, the extender and the
// CLI in one process do not see each other's state.
//
// Its lifetime is the process: NewEngine takes the one process-wide value
// (theProcess), made when the package is loaded.
type Process struct {
	// running holds a token for each guest call executing, at most one per
	// P (GOMAXPROCS when the process started). The scheduler calls a
	// policy from up to 16 goroutines at once; on 2 cores, 16 spinning
	// guests time-share the Ps in 10 ms slices, so a guest whose deadline
	// passed waited its turn to notice, and calls ended 17-65 ms late
	// (docs/security.md). With no more guests running than Ps, it notices
	// at once. Waiting for a token is not charged to the call: its
	// deadline starts when it runs. A pointer, so tests can change the
	// count between calls (setRunningTokens).
	running atomic.Pointer[chan struct{}]
	// gate is one more running token, for PreEnqueue calls only, taken
	// when every token of running is held. kube-scheduler calls PreEnqueue
	// with its scheduling queue locked, one pod at a time: had it waited
	// for a token behind the scheduling cycles' Filter calls, every pod
	// added or requeued meanwhile would have waited on the lock too. On a
	// loaded machine, with looping pods holding tokens for their whole
	// timeout, gates that found no token within their 10 ms let 3,119
	// pods wait and requeue in one run of 500 pods, which took 33 s
	// instead of 3.2 s (docs/security.md, "A gate has a CPU of its own").
	// The guest it runs shares a P with one other guest at most, on the
	// goroutine already running there.
	gate chan struct{}

	// measureMu is held exclusively while a module compiles and while the
	// first instance of a module is made, so that the code and heap they
	// add are measured without another load's allocations mixed in. Other
	// loads hold it shared while they allocate. Compilations are therefore
	// one at a time, each with a worker per CPU.
	measureMu sync.RWMutex
	// sources are the module sources held by loads in progress
	// (Policy.Load), counted once per buffer however many loads hold it:
	// loads waiting for their turn while a module is measured hold them,
	// and they are not the module's.
	sources struct {
		sync.Mutex
		held  map[*byte]int // loads holding each buffer
		bytes int64
	}
	// releases counts instances closed and modules freed. A measurement
	// during which one was released saw the heap shrink for another reason
	// than the module: it is used, but not kept for the next start.
	releases atomic.Int64
}

// newProcess returns a Process whose guests run on cpus Ps at most.
func newProcess(cpus int) *Process {
	pr := &Process{gate: make(chan struct{}, 1)}
	pr.setRunningTokens(cpus)
	return pr
}

// theProcess is this process's Process.
var theProcess = newProcess(max(1, runtime.GOMAXPROCS(0)))

// maxRunning is how many guest calls may run at once: one per token.
func (pr *Process) maxRunning() int { return cap(*pr.running.Load()) + cap(pr.gate) }

// setRunningTokens sets how many guest calls may run at once (tests change
// it between calls; a call releases the token it took).
func (pr *Process) setRunningTokens(n int) {
	ch := make(chan struct{}, n)
	pr.running.Store(&ch)
}
