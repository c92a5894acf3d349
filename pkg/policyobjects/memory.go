package policyobjects

import (
	"runtime/debug"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// releaseMemory returns the memory of closed policies to the operating
// system soon after they close, at most once per releaseEvery: the Go
// runtime otherwise keeps the freed heap (module bytes, the compiler's
// buffers) mapped for as long as it stays under its own goal, and a
// scheduler whose teams delete policies would keep the memory of the
// deleted ones (docs/architecture.md, RATIONALE: policy objects).
var releaseMemory = &memoryReleaser{every: 10 * time.Second, delay: time.Second}

type memoryReleaser struct {
	every, delay time.Duration
	mu           sync.Mutex
	pending      bool
	last         time.Time
}

// trigger schedules one release: delay from now, or releaseEvery after the
// last one, whichever is later; triggers until then share it.
func (r *memoryReleaser) trigger() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending {
		return
	}
	r.pending = true
	wait := max(r.delay, time.Until(r.last.Add(r.every)))
	time.AfterFunc(wait, func() {
		start := time.Now()
		debug.FreeOSMemory()
		r.mu.Lock()
		r.pending, r.last = false, time.Now()
		r.mu.Unlock()
		klog.V(2).InfoS("Returned the memory of closed policies to the operating system", "duration", time.Since(start))
	})
}
