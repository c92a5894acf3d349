package wasmpolicy

import (
	"context"
	goruntime "runtime"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/pkg/source"
)

// start runs every policy's source and waits (bounded) until each reported
// once, so the first scheduling cycles already run the policies.
func (w *WasmPolicy) start(ctx context.Context) {
	firsts := make([]chan struct{}, len(w.static))
	// At most four first loads per CPU at a time, in the configured order:
	// a source holds its module's bytes (megabytes for a Go guest) from
	// the read until the load ends, and loads compile one at a time, so
	// letting every source read at once only piles up bytes waiting
	// (200 Go policies: 400 MiB). One per CPU left the compiler idle
	// between loads (40 distinct Go modules: 17.6 s against 15.7 s with
	// four per CPU and 16.3 s with no limit). A source slow to report gives
	// its turn up after firstLoadTurn.
	turns := make(chan struct{}, 4*goruntime.GOMAXPROCS(0))
	for i := range w.static {
		firsts[i] = make(chan struct{})
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for i, p := range w.static {
			select {
			case turns <- struct{}{}:
			case <-ctx.Done():
				return
			}
			first := firsts[i]
			var firstOnce, turnOnce sync.Once
			endTurn := func() { turnOnce.Do(func() { <-turns }) }
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				t := time.AfterFunc(firstLoadTurn, endTurn)
				defer func() { t.Stop(); endTurn() }()
				p.source.Run(ctx, func(u source.Update) {
					w.apply(ctx, p, u)
					firstOnce.Do(func() { close(first); endTurn() })
				})
			}()
		}
	}()
	var objectsLoaded <-chan struct{}
	if w.objects != nil {
		// The objects that exist at start load before the scheduler
		// schedules, like the args' policies.
		objectsLoaded = w.objects.Start(ctx)
	}
	liveMu.Lock()
	live[w] = struct{}{}
	liveMu.Unlock()
	settled := make(chan struct{})
	go func() {
		for _, first := range firsts {
			select {
			case <-first:
			case <-ctx.Done():
				return
			}
		}
		if objectsLoaded != nil {
			select {
			case <-objectsLoaded:
			case <-ctx.Done():
				return
			}
		}
		close(settled)
	}()
	if w.opts.progress != nil {
		w.wg.Add(1)
		go w.reportProgress(ctx, settled)
	}
	select {
	case <-settled:
	case <-time.After(w.opts.initialLoadTimeout):
		for _, p := range w.static {
			if !p.settled.Load() {
				klog.FromContext(ctx).Info("Policy is still loading; pods it evaluates wait until it has loaded", "policy", p.cfg.Name, "source", p.source.String())
			}
		}
	}
}

func newEngine(logger klog.Logger, opts host.EngineOptions) (*host.Engine, error) {
	if opts.CacheDir != "" {
		e, err := host.NewEngine(opts)
		if err == nil {
			return e, nil
		}
		logger.Info("Compilation cache directory unusable; caching compiled policies in memory only", "dir", opts.CacheDir, "err", err)
		opts.CacheDir = ""
	}
	return host.NewEngine(opts)
}

// Close stops the sources and frees every policy's instances.
func (w *WasmPolicy) Close() error {
	liveMu.Lock()
	delete(live, w)
	liveMu.Unlock()
	w.cancel()
	w.gates.close()
	w.wg.Wait()
	w.last.Store(nil) // the last cycle's CycleState, with other plugins' data
	if w.objects != nil {
		w.objects.Close()
	}
	for _, p := range w.static {
		p.close()
	}
	if w.engine == nil {
		return nil
	}
	return w.engine.Close()
}

// close stops the policy's timers and frees its instances. A timer left
// running (a quarantine's, up to 5 minutes; an open breaker's, up to an
// hour) would call into a closed plugin and keep it, its engine and the
// snapshots it read in memory until it fired.
func (p *policy) close() {
	p.breaker.stop()
	p.quarantine.reset()
	p.objectsMu.Lock()
	release := p.release
	p.objectsClosed, p.release = true, nil
	p.objectsMu.Unlock()
	if release != nil {
		release()
	}
	_ = p.runtime.Close(context.Background())
}
