// Package wasmpolicy is the WasmPolicy kube-scheduler framework plugin: one
// plugin that runs many wasm policies at PreFilter, Filter, PreScore, Score
// and NormalizeScore.
//
// Each scheduling cycle pins the module version of every policy at PreFilter,
// so a hot reload never mixes two versions in one cycle; the pod is prepared
// once per cycle (host.PodState) and node data is read lazily by the guest.
//
// The files follow the plugin's concerns: plugin.go (the type, options and
// lifecycle), module.go (what the plugin needs from the host), reload.go
// (module updates and requeueing), cycle.go (the per-cycle state), batch.go
// (batched guest calls), failure.go (verdicts, statuses and failurePolicy),
// one file per extension point, audit.go, explain.go and metrics.go.
package wasmpolicy

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/spread"
	"github.com/wasmsched/wasmsched/internal/verdict"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/apis/config/validation"
	"github.com/wasmsched/wasmsched/pkg/oci"
	"github.com/wasmsched/wasmsched/pkg/source"
)

// Name is the plugin's name in KubeSchedulerConfiguration.
const Name = verdict.Plugin

// stateKey is where a cycle's policy state lives in CycleState.
const stateKey fwk.StateKey = Name

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

// WasmPolicy runs wasm policies inside kube-scheduler.
type WasmPolicy struct {
	handle framework.Handle
	engine *host.Engine
	args   *config.WasmPolicyArgs
	cancel context.CancelFunc
	wg     sync.WaitGroup
	opts   options

	// static are the policies of the args, in their order.
	static []*policy
	// set is what new cycles run (policySet); it changes when policy
	// objects do. Cycles pin the set they start with.
	setMu sync.Mutex
	set   atomic.Pointer[policySet]
	// objects runs the policies of policy objects; nil unless the args
	// enable them.
	objects *objectPolicies
	// profile is the scheduler profile hosting this plugin ("" outside a
	// scheduler).
	profile string

	maxInstances int
	// started is when the plugin started loading its policies.
	started time.Time

	// index maps the snapshot's NodeInfos to their position in the node list
	// PreFilter receives. The list (and its NodeInfo objects) is stable until
	// nodes are added or removed, so it is rebuilt only then.
	index atomic.Pointer[nodeIndex]

	// clusterReads is set when some policy of the args declares the Cluster or
	// Namespaces read: only then does a cycle get a cluster view.
	clusterReads bool
	// nsLabels looks up namespace labels for scopes' namespace selectors
	// (nil without namespaces).
	nsLabels func(string) (map[string]string, bool)
	// namespaces lists namespaces for namespace_labels, count_pods'
	// namespaceSelector and scopes; nil outside a scheduler.
	namespaces corelisters.NamespaceLister
	// spread computes pod_list kind PodDefaultSpreadSelector; nil outside
	// a scheduler (the kind then has no rows).
	spread *spread.Listers
	// gates tracks the pods policies' preenqueue gated.
	gates *gateTracker
	// ociCache keeps modules pulled from registries (moduleCacheDir); nil:
	// none.
	ociCache *oci.Cache
}

// policy is one configured policy: its args, its module runtime and source,
// its metric series, and the pods it rejected.
type policy struct {
	cfg     config.Policy
	runtime policyRuntime
	source  source.Source
	m       *policyMetrics

	// rejected holds pods this policy kept from being scheduled, so a new
	// module version can send them back to the active queue at once instead
	// of leaving them until the unschedulable-pod timeout (5 min).
	mu       sync.Mutex
	rejected map[types.UID]*v1.Pod
	// sourceObject is the object the module was last read from (the
	// ConfigMap; nil for files): breaker Events are recorded on it. Under mu.
	sourceObject runtime.Object

	// settled is set once the policy's first load has ended, in a module or
	// in a failure: until then pods it would evaluate wait for it.
	settled atomic.Bool
	// loadError is why the last load failed (nil after a success): pods
	// that a policy without a module turns away are told why.
	loadError atomic.Pointer[string]

	// budget is each cycle's budget (cycleBudget, defaulted).
	budget time.Duration
	// scope is which pods the policy takes; nil: every pod.
	scope *scope
	// clusterReads: the policy declares the Cluster or Namespaces read, so
	// its cycles need a cluster view.
	clusterReads bool
	// lastFailure is the reason and message of the last failed load or
	// source read (nil after a success), for policy objects' status.
	lastFailure atomic.Pointer[loadFailure]
	// loaded, when set, is told after every load attempt (policy objects
	// update their status from it).
	loaded func(*policy)
	// stop ends the policy's source (policy objects that are replaced or
	// deleted); nil for the args' policies, whose sources end with the plugin.
	stop context.CancelFunc
	// breaker stops calling the policy while it fails on most pods;
	// quarantine stops calling it for the pods it failed on.
	breaker    *breaker
	quarantine *quarantine
	// refusalLogged is when a refused patch write was last logged
	// (monotonic nanoseconds since the plugin started): at most once a
	// minute, not once per pod.
	refusalLogged atomic.Int64
}

// loadFailure is why a policy's last load failed.
type loadFailure struct {
	// reason is the host's load reason (host.LoadError), or SourceError.
	reason, message string
}

// newPolicy builds a configured policy around its module runtime.
func (w *WasmPolicy) newPolicy(cfg config.Policy, rt policyRuntime, bc breakerConfig) *policy {
	p := &policy{cfg: cfg, runtime: rt, m: newPolicyMetrics(cfg.Name), budget: cfg.CycleBudget}
	// Validation compiled the selectors once already.
	p.scope, _ = compileScope(cfg.Scope)
	p.clusterReads = slices.Contains(cfg.Reads, string(fields.ScopeCluster)) || slices.Contains(cfg.Reads, string(fields.ScopeNamespaces))
	if p.budget == 0 {
		p.budget = configv1.DefaultCycleBudget(cfg.Timeout)
	}
	p.breaker = newBreaker(bc, func(from, to breakerState, why string, pod *v1.Pod) { w.breakerChanged(p, from, to, why, pod) })
	p.m.setBreaker(breakerClosed)
	p.quarantine = newQuarantine(func(pods map[string]*v1.Pod) {
		w.activate(klog.Background(), pods, "Requeued pods whose quarantine ended", "policy", p.cfg.Name)
	})
	p.m.setQuarantined(0)
	return p
}

// breakerConfigOf applies the defaults to unset (zero) breaker args.
func breakerConfigOf(cb config.CircuitBreaker) breakerConfig {
	bc := breakerConfig{threshold: int(cb.FailureThreshold), backoff: cb.Backoff, maxBackoff: cb.MaxBackoff}
	if bc.threshold == 0 {
		bc.threshold = int(configv1.DefaultFailureThreshold)
	}
	if bc.backoff == 0 {
		bc.backoff = configv1.DefaultBreakerBackoff
	}
	if bc.maxBackoff == 0 {
		bc.maxBackoff = max(configv1.DefaultBreakerMaxBackoff, bc.backoff)
	}
	return bc
}

func (p *policy) audit() bool { return p.cfg.Mode == config.ModeAudit }

func (p *policy) mode() config.Mode {
	if p.audit() {
		return config.ModeAudit
	}
	return config.ModeEnforce
}

var (
	_ framework.PreFilterPlugin   = &WasmPolicy{}
	_ framework.FilterPlugin      = &WasmPolicy{}
	_ framework.PostFilterPlugin  = &WasmPolicy{}
	_ framework.PreScorePlugin    = &WasmPolicy{}
	_ framework.ScorePlugin       = &WasmPolicy{}
	_ framework.ScoreExtensions   = &WasmPolicy{}
	_ framework.ReservePlugin     = &WasmPolicy{}
	_ framework.PreEnqueuePlugin  = &WasmPolicy{}
	_ framework.PreBindPlugin     = &WasmPolicy{}
	_ framework.EnqueueExtensions = &WasmPolicy{}
	_ interface{ Close() error }  = &WasmPolicy{}
)

// Name implements framework.Plugin.
func (w *WasmPolicy) Name() string { return Name }

// ArgsPath is the field path used for errors found by New, which does not
// know the pluginConfig index (cmd/kube-scheduler reports the exact index
// before the scheduler starts).
var ArgsPath = field.NewPath("pluginConfig").Key(Name).Child("args")

// DecodeArgs turns the plugin's args object into defaulted internal args.
func DecodeArgs(obj runtime.Object) (*config.WasmPolicyArgs, error) {
	switch a := obj.(type) {
	case *config.WasmPolicyArgs:
		return a, nil
	case *runtime.Unknown:
		// The args type was not registered in the binary's scheme (the plugin
		// is hosted by another scheduler build): decode, default and convert here.
		in := &configv1.WasmPolicyArgs{}
		if err := yaml.UnmarshalStrict(a.Raw, in); err != nil {
			return nil, fmt.Errorf("decoding %s args: %w", Name, err)
		}
		configv1.SetObjectDefaults_WasmPolicyArgs(in)
		out := &config.WasmPolicyArgs{}
		if err := configv1.Convert_v1_WasmPolicyArgs_To_config_WasmPolicyArgs(in, out, nil); err != nil {
			return nil, fmt.Errorf("converting %s args: %w", Name, err)
		}
		return out, nil
	case nil:
		return nil, fmt.Errorf("%s needs args: add a pluginConfig entry named %s with at least one policy", Name, Name)
	}
	return nil, fmt.Errorf("%s args have type %T, want WasmPolicyArgs", Name, obj)
}

// New is the plugin factory registered with the scheduler, with the default
// options.
func New(ctx context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
	return newPlugin(ctx, obj, h)
}

// Factory returns a plugin factory with options, for programs that host the
// plugin with other settings than the scheduler's defaults.
func Factory(opts ...Option) func(context.Context, runtime.Object, framework.Handle) (framework.Plugin, error) {
	return func(ctx context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
		return newPlugin(ctx, obj, h, opts...)
	}
}

func newPlugin(ctx context.Context, obj runtime.Object, h framework.Handle, opts ...Option) (framework.Plugin, error) {
	args, err := DecodeArgs(obj)
	if err != nil {
		return nil, err
	}
	if errs := validation.ValidateWasmPolicyArgs(ArgsPath, args); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return NewWithArgs(ctx, args, h, opts...)
}

// NewWithArgs builds the plugin from validated args. Tests and other hosts
// (the extender, the CLI) use it directly.
func NewWithArgs(ctx context.Context, args *config.WasmPolicyArgs, h framework.Handle, opts ...Option) (*WasmPolicy, error) {
	o := options{initialLoadTimeout: DefaultInitialLoadTimeout, progressEvery: 2 * time.Second, progress: logProgress(klog.FromContext(ctx))}
	if args.RetiredGrace > 0 {
		o.retiredGrace = args.RetiredGrace
	}
	for _, opt := range opts {
		opt(&o)
	}
	logger := klog.FromContext(ctx)
	engine, err := newEngine(logger, host.EngineOptions{CacheDir: args.CompilationCacheDir, MemoryBudget: args.MemoryBudget})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &WasmPolicy{handle: h, engine: engine, args: args, cancel: cancel, opts: o, maxInstances: int(args.MaxInstancesPerPolicy), started: time.Now()}
	if args.ModuleCacheDir != "" {
		if w.ociCache, err = oci.NewCache(args.ModuleCacheDir); err != nil {
			logger.Info("Module cache directory unusable; modules pulled from registries are kept in memory only, and a restart needs the registry", "dir", args.ModuleCacheDir, "err", err)
		}
	}
	w.gates = newGateTracker(func(pods map[string]*v1.Pod) {
		w.activate(logger, pods, "Rechecking pods whose gate asked for a delay")
	})
	if pn, ok := h.(interface{ ProfileName() string }); ok && h != nil {
		w.profile = pn.ProfileName()
	}
	registerMetrics()
	for _, pc := range args.Policies {
		p, err := w.buildPolicy(ctx, pc)
		if err != nil {
			_ = w.Close()
			return nil, err
		}
		w.static = append(w.static, p)
	}
	w.publish(nil)
	nsSelectors := args.PolicyObjects.Enabled
	for _, pc := range args.Policies {
		w.clusterReads = w.clusterReads || slices.Contains(pc.Reads, string(fields.ScopeCluster)) || slices.Contains(pc.Reads, string(fields.ScopeNamespaces))
		nsSelectors = nsSelectors || pc.Scope.NamespaceSelector != nil
	}
	if h != nil {
		if f := h.SharedInformerFactory(); f != nil {
			// Asked for here, in New, so that the scheduler starts these
			// informers with the others (as PodTopologySpread asks for its
			// listers in New).
			// Policy objects may declare any read, so the listers are
			// asked for whenever they are enabled.
			if w.clusterReads || nsSelectors {
				w.namespaces = f.Core().V1().Namespaces().Lister()
			}
			// A gated pod that is deleted leaves the gate tracker.
			if _, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: w.podDeleted}); err != nil {
				logger.Error(err, "Could not watch pod deletions; gated pods that are deleted stay tracked until the scheduler restarts")
			}
			if w.clusterReads || args.PolicyObjects.Enabled {
				w.spread = &spread.Listers{
					Services:               f.Core().V1().Services().Lister(),
					ReplicationControllers: f.Core().V1().ReplicationControllers().Lister(),
					ReplicaSets:            f.Apps().V1().ReplicaSets().Lister(),
					StatefulSets:           f.Apps().V1().StatefulSets().Lister(),
				}
			}
		}
	}
	w.nsLabels = w.namespaceLabels()
	if w.nsLabels == nil {
		w.nsLabels = o.nsLabels
	}
	if args.PolicyObjects.Enabled {
		objs, err := newObjectPolicies(w, args.PolicyObjects)
		if err != nil {
			_ = w.Close()
			return nil, err
		}
		w.objects = objs
	}
	w.start(ctx)
	return w, nil
}

// buildPolicy makes a policy of pc: its host policy and its source, not
// started.
func (w *WasmPolicy) buildPolicy(ctx context.Context, pc config.Policy) (*policy, error) {
	args := w.args
	hp, err := w.engine.NewPolicy(ctx, host.PolicySpec{
		Name:    pc.Name,
		Config:  pc.Config,
		Timeout: pc.Timeout,
		// Unset (args built in Go): the host's rule, which defaulting
		// applies too.
		PreEnqueueTimeout: pc.PreEnqueueTimeout,
		PatchPrefixes:     pc.PatchPrefixes,
		MemoryLimitBytes:  pc.MemoryLimit,
		MaxInstances:      int(args.MaxInstancesPerPolicy),
		RealClock:         pc.RealClock,
		Clock:             w.opts.clock,
		RealRandom:        pc.RealRandom,
		Reads:             pc.Reads,
		RetiredGrace:      w.opts.retiredGrace,
		Limits: host.CompileLimits{
			MaxFunctions: args.CompileLimits.MaxFunctions,
			MaxCodeBytes: args.CompileLimits.MaxCodeBytes,
			MaxLocals:    args.CompileLimits.MaxLocals,
		},
	})
	if err != nil {
		return nil, err
	}
	p := w.newPolicy(pc, hostRuntime{hp}, breakerConfigOf(args.CircuitBreaker))
	switch {
	case pc.Source.File != "":
		p.source = &source.File{Path: pc.Source.File, Interval: args.FilePollInterval}
	case pc.Source.ConfigMap != nil:
		if w.handle == nil || w.handle.ClientSet() == nil {
			_ = hp.Close(ctx)
			return nil, fmt.Errorf("policy %q: a configMap source needs a Kubernetes client", pc.Name)
		}
		cm := pc.Source.ConfigMap
		p.source = &source.ConfigMap{Client: w.handle.ClientSet(), Namespace: cm.Namespace, Name: cm.Name, Key: cm.Key}
	case pc.Source.OCI != nil:
		src, err := w.ociSource(pc)
		if err != nil {
			_ = hp.Close(ctx)
			return nil, err
		}
		p.source = src
	}
	return p, nil
}

// current is the policy set new cycles run.
func (w *WasmPolicy) current() *policySet { return w.set.Load() }

// publish makes the args' policies followed by objs the set new cycles run.
// The caller holds setMu when objs comes from the policy objects.
func (w *WasmPolicy) publish(objs []*policy) {
	all := make([]*policy, 0, len(w.static)+len(objs))
	all = append(append(all, w.static...), objs...)
	w.set.Store(newPolicySet(all))
}

// namespaceLabels looks up a namespace's labels for namespace selectors;
// nil when the plugin has no namespace lister.
func (w *WasmPolicy) namespaceLabels() func(string) (map[string]string, bool) {
	if w.namespaces == nil {
		return nil
	}
	return func(name string) (map[string]string, bool) {
		ns, err := w.namespaces.Get(name)
		if err != nil {
			return nil, false
		}
		return ns.Labels, true
	}
}

// clusterView is a cycle's cluster view (docs/abi.md §4.6) when a policy
// declared a read of it: the scheduler's snapshot. Outside a scheduler its
// Nodes stay nil until PreFilter or PreScore fills in the nodes the caller
// passed (viewNodes).
func (w *WasmPolicy) clusterView(policies []*policy) *host.ClusterView {
	if !slices.ContainsFunc(policies, func(p *policy) bool { return p.clusterReads }) {
		return nil
	}
	v := &host.ClusterView{}
	if w.handle != nil {
		if l := w.handle.SnapshotSharedLister(); l != nil {
			if all, err := l.NodeInfos().List(); err == nil {
				v.Nodes = all
			}
		}
	}
	v.NamespaceLabels = w.nsLabels
	if w.spread != nil {
		v.DefaultSpreadSelector = func(pod *v1.Pod) []metav1.LabelSelectorRequirement {
			return spread.Requirements(w.spread.DefaultSelector(pod))
		}
	}
	return v
}

// viewNodes gives a cluster view without a snapshot the node list of the
// first PreFilter or PreScore of its cycle.
func viewNodes(c *cycleData, nodes []fwk.NodeInfo) {
	if v := c.pod.Cluster; v != nil && v.Nodes == nil {
		v.Nodes = nodes
	}
}

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
		objectsLoaded = w.objects.start(ctx)
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
	for _, p := range w.static {
		p.breaker.stop()
		_ = p.runtime.Close(context.Background())
	}
	if w.objects != nil {
		w.objects.close()
	}
	if w.engine == nil {
		return nil
	}
	return w.engine.Close()
}
