package wasmpolicy

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBatchGate: of the calls racing for one batch, one evaluates it and
// every other returns only once it is evaluated, also when the
// evaluation panics (the batch is then done, as with sync.Once).
func TestBatchGate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		panics bool
	}{{"evaluates", false}, {"panics", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var g batchGate
			var runs, finished atomic.Int32
			var early atomic.Int32 // calls that returned before the evaluation finished
			start := make(chan struct{})
			var wg sync.WaitGroup
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { _ = recover() }()
					<-start
					g.do(func() {
						runs.Add(1)
						time.Sleep(20 * time.Millisecond) // the others arrive while it runs
						finished.Store(1)
						if tc.panics {
							panic("guest call panicked")
						}
					})
					if finished.Load() == 0 {
						early.Add(1)
					}
				}()
			}
			close(start)
			wg.Wait()
			if runs.Load() != 1 {
				t.Errorf("the batch was evaluated %d times, want once", runs.Load())
			}
			if early.Load() != 0 {
				t.Errorf("%d calls returned before the batch was evaluated", early.Load())
			}
			g.do(func() { t.Error("a call after the batch was done evaluated it again") })
		})
	}
}
