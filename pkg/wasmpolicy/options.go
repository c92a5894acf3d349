package wasmpolicy

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// firstLoadTurn is how long a policy's source may hold one of the start's
// load turns before its first update.
const firstLoadTurn = 10 * time.Second

// DefaultInitialLoadTimeout is how long New waits, unless told otherwise
// (WithInitialLoadTimeout), for every policy's first module before letting
// the scheduler start.
const DefaultInitialLoadTimeout = 10 * time.Second

// options are the plugin's settings that are not part of its args: they
// belong to the program hosting the plugin (the scheduler, the CLI, tests).
type options struct {
	// objectReaders, when set, give each policy's declared objects in
	// place of the scheduler's watches (tools: case tables).
	objectReaders      func(policy string) []host.ObjectReader
	dra                kubemodel.DRALister
	clock              time.Time
	initialLoadTimeout time.Duration
	retiredGrace       time.Duration
	progress           func(LoadProgress)
	progressEvery      time.Duration
	// readOnlyObjects: policy objects are run but their status is never
	// written (tools that host the plugin).
	readOnlyObjects bool
	// nsLabels looks up namespace labels where there is no namespace
	// lister (tools).
	nsLabels func(string) (map[string]string, bool)
	// unserved are the extension points the host program never calls,
	// with why (WithUnservedPoints).
	unserved map[host.CallKind]string
	// edit changes each policy's config before it is built (WithPolicyEdit).
	edit func(*config.Policy)
}

// Option changes how a plugin is built. Options are values, not package
// variables, so two plugins in one process (tests, the CLI) never share them.
type Option func(*options)

// WithClock sets what every policy's wall clock reads (host.PolicySpec.Clock),
// for `wasmsched test --clock`; a policy with realClock keeps the real one.
func WithClock(t time.Time) Option {
	return func(o *options) { o.clock = t }
}

// WithInitialLoadTimeout bounds how long New waits for every policy's first
// module. Policies still without a module apply their failurePolicy until
// one loads. A CLI that must not schedule without its policies (wasmsched
// test) waits longer than the scheduler's default.
func WithInitialLoadTimeout(d time.Duration) Option {
	return func(o *options) { o.initialLoadTimeout = d }
}

// WithLoadProgress calls report with the policies' load progress every
// interval while New waits for the first loads, and once when they have
// all ended. The scheduler logs it; wasmsched prints it.
func WithLoadProgress(interval time.Duration, report func(LoadProgress)) Option {
	return func(o *options) { o.progress, o.progressEvery = report, interval }
}

// LoadProgress counts the policies by the state of their first load.
type LoadProgress struct {
	// Loading policies have not loaded a module yet: pods they evaluate
	// wait for them.
	Loading int
	// Serving policies have a module.
	Serving int
	// Failed policies could not load their first module: their
	// failurePolicy applies until one loads.
	Failed int
	// Elapsed is the time since the plugin started loading.
	Elapsed time.Duration
}

// Total is the number of policies.
func (l LoadProgress) Total() int { return l.Loading + l.Serving + l.Failed }

// LoadProgress reports how many policies are loading, serving or failed.
func (w *WasmPolicy) LoadProgress() LoadProgress {
	lp := LoadProgress{Elapsed: time.Since(w.started)}
	for _, p := range w.current().all {
		switch {
		case p.runtime.Current() != nil:
			lp.Serving++
		case p.settled.Load():
			lp.Failed++
		default:
			lp.Loading++
		}
	}
	return lp
}

// WithReadOnlyObjects runs policy objects (args policyObjects.enabled)
// without ever writing their status or taking the status lease: for tools
// (wasmsched explain) that load what the scheduler runs.
func WithReadOnlyObjects() Option {
	return func(o *options) { o.readOnlyObjects = true }
}

// WithNamespaceLabels gives a plugin hosted outside a scheduler (no
// informers) a way to read namespace labels, for scopes' namespace
// selectors and the Namespaces read: wasmsched explain reads them from the
// cluster.
func WithNamespaceLabels(lookup func(namespace string) (map[string]string, bool)) Option {
	return func(o *options) { o.nsLabels = lookup }
}

// WithUnservedPoints tells the plugin which extension points the program
// hosting it never calls, and why: a policy implementing one is loaded,
// and its load is logged and reported with the reason, so that its author
// knows that part of the policy does not run (the HTTP extender has no
// PreEnqueue and no PreBind).
func WithUnservedPoints(why map[host.CallKind]string) Option {
	return func(o *options) { o.unserved = why }
}

// Unserved lists, for each policy serving a module that implements an
// extension point of WithUnservedPoints, the point and why it is not
// called: "freeze-window: PreEnqueue (…)".
func (w *WasmPolicy) Unserved() []string {
	var out []string
	for _, p := range w.current().all {
		out = append(out, w.unservedOf(p)...)
	}
	return out
}

func (w *WasmPolicy) unservedOf(p *policy) []string {
	var out []string
	m := p.runtime.Current()
	if m == nil {
		return nil
	}
	for k := host.CallKind(0); k < host.NumCallKinds; k++ {
		if why, ok := w.opts.unserved[k]; ok && m.Exports().Has(k) {
			out = append(out, fmt.Sprintf("%s: %s is not called (%s)", p.cfg.Name, k, why))
		}
	}
	return out
}

// WithRetiredGrace sets how long a replaced module version stays callable
// for cycles that pinned it (host.PolicySpec.RetiredGrace).
func WithRetiredGrace(d time.Duration) Option {
	return func(o *options) { o.retiredGrace = d }
}

// reportProgress reports the load progress every interval until every
// policy's first load has ended, and then once more.
func (w *WasmPolicy) reportProgress(ctx context.Context, settled <-chan struct{}) {
	defer w.wg.Done()
	t := time.NewTicker(w.opts.progressEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-settled:
			w.opts.progress(w.LoadProgress())
			return
		case <-t.C:
			w.opts.progress(w.LoadProgress())
		}
	}
}

// logProgress is the scheduler's load progress report: a log line.
func logProgress(logger klog.Logger) func(LoadProgress) {
	return func(lp LoadProgress) {
		logger.Info("Loading policies", "serving", lp.Serving, "failed", lp.Failed, "loading", lp.Loading, "total", lp.Total(), "elapsed", lp.Elapsed.Round(time.Millisecond))
	}
}

// WithObjectReaders gives the policies' declared objects (policies[].objects)
// from readers, by policy name, instead of watches of the granted kinds:
// for tools that run policies on objects of their own (case tables).
func WithObjectReaders(readers func(policy string) []host.ObjectReader) Option {
	return func(o *options) { o.objectReaders = readers }
}

// WithDRA gives a plugin hosted outside a scheduler (no DRA manager) the
// DRA objects the Devices read sums up: wasmsched test reads them from
// its --nodes file.
func WithDRA(l kubemodel.DRALister) Option {
	return func(o *options) { o.dra = l }
}

// WithPolicyEdit changes the config of every policy the plugin builds, from
// its args or from a policy object, before it is built. wasmsched
// rollout-report builds a candidate set this way: the set the scheduler
// runs, with one policy's module or config replaced. edit sees a copy; the
// config it leaves must still pass the args' validation.
func WithPolicyEdit(edit func(*config.Policy)) Option {
	return func(o *options) { o.edit = edit }
}
