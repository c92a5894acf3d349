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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
	"github.com/wasmsched/wasmsched/internal/kubemodel"
	"github.com/wasmsched/wasmsched/internal/spread"
	"github.com/wasmsched/wasmsched/internal/verdict"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/apis/config/validation"
	"github.com/wasmsched/wasmsched/pkg/oci"
	"github.com/wasmsched/wasmsched/pkg/policyobjects"
	"github.com/wasmsched/wasmsched/pkg/source"
)

// Name is the plugin's name in KubeSchedulerConfiguration.
const Name = verdict.Plugin

// stateKey is where a cycle's policy state lives in CycleState.
const stateKey fwk.StateKey = Name

// WasmPolicy runs wasm policies inside kube-scheduler.
type WasmPolicy struct {
	handle framework.Handle
	// reserveOnce asks once whether the profile runs WasmPolicy at
	// Reserve (atReserve), as pod-group cycles need.
	reserveOnce sync.Once
	reserveOK   bool
	engine      *host.Engine
	args        *config.WasmPolicyArgs
	// grants watch the kinds of objects the args grant (grants.go); nil
	// when they grant none.
	grants *objectGrants
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
	objects *policyobjects.Controller
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
	// last is the cycle cycleFor found last.
	last atomic.Pointer[lastCycle]

	// clusterReads is set when some policy of the args declares the
	// Cluster, Namespaces or Volumes read: only then does a cycle get a
	// cluster view.
	clusterReads bool
	// volumes are the listers volume_claims reads; nil outside a scheduler
	// or when no policy may declare Volumes.
	volumes host.VolumeLister
	// dra is what resource_claims reads (draOf).
	dra kubemodel.DRALister
	// nsLabels looks up namespace labels for scopes' namespace selectors
	// (nil without namespaces).
	nsLabels func(string) (map[string]string, bool)
	// namespaces lists namespaces for namespace_labels, count_pods'
	// namespaceSelector and scopes; nil outside a scheduler.
	namespaces corelisters.NamespaceLister
	// spread computes pod_list kind PodDefaultSpreadSelector; nil outside
	// a scheduler (the kind then has no rows).
	spread *spread.Listers
	// nodeCounts keeps count_pods' per-node counts across the profile's
	// cycles (host.NodeCountCache).
	nodeCounts *host.NodeCountCache
	// gates tracks the pods policies' preenqueue gated.
	gates *gateTracker
	// shares account each namespace's policies' time (tenancy.go).
	shares *tenantShares
	// waiting are the pods WasmPolicy made wait at Permit (permit.go).
	waiting waitingPods
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
	// counters are the policy's counts (reserve.go), nil for a policy
	// built outside the plugin's host.
	counters *host.Counters
	// objects are the watches of the kinds it declared (grants.go),
	// acquired at its first load; release ends them when it closes.
	objectsMu     sync.Mutex
	objects       []objectAccess
	release       func()
	objectsClosed bool
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
	// clusterReads: the policy declares the Cluster, Namespaces or Volumes
	// read, so its cycles need a cluster view.
	clusterReads bool
	// lastFailure is the reason and message of the last failed load or
	// source read (nil after a success), for policy objects' status.
	lastFailure atomic.Pointer[loadFailure]
	// loaded, when set, is told after every load attempt (policy objects
	// update their status from it).
	loaded func()
	// breaker stops calling the policy while it fails on most pods;
	// quarantine stops calling it for the pods it failed on.
	breaker    *breaker
	quarantine *quarantine
	// messages are the policy's status messages by reason (message);
	// messagesMu orders their replacements.
	messages   atomic.Pointer[[]messageEntry]
	messagesMu sync.Mutex
	// serial tells this policy from an earlier one of the same name (its
	// settings changed) in pod signatures (SignPod).
	serial uint64
	// canary is set for the canary of a policy object: it runs in Audit
	// beside its primary and compares their verdicts (canary.go).
	canary *canaryJudge
	// refusalLogged is when a refused patch write was last logged
	// (monotonic nanoseconds since the plugin started): at most once a
	// minute, not once per pod.
	refusalLogged atomic.Int64
}

// policySerial numbers the policies the process made (policy.serial).
var policySerial atomic.Uint64

// loadFailure is why a policy's last load failed.
type loadFailure struct {
	// reason is the host's load reason (host.LoadError), or SourceError.
	reason, message string
}

// newPolicy builds a configured policy around its module runtime.
func (w *WasmPolicy) newPolicy(cfg config.Policy, rt policyRuntime, bc breakerConfig) *policy {
	p := &policy{cfg: cfg, runtime: rt, m: newPolicyMetrics(cfg.Name), budget: cfg.CycleBudget, serial: policySerial.Add(1)}
	// Validation compiled the selectors once already.
	p.scope, _ = compileScope(cfg.Scope)
	p.clusterReads = readsCluster(cfg.Reads)
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
	_ framework.PostBindPlugin    = &WasmPolicy{}
	_ framework.PermitPlugin      = &WasmPolicy{}
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
	// The scheduler's own container: its memory limit must hold the
	// budget (tools that host the plugin call NewWithArgs).
	if why := FitContainer(klog.FromContext(ctx), args.MemoryBudget); why != "" {
		return nil, field.Invalid(ArgsPath.Child("memoryBudget"), resource.NewQuantity(args.MemoryBudget, resource.BinarySI).String(), why)
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
	if o.edit != nil {
		args = args.DeepCopy()
		for i := range args.Policies {
			o.edit(&args.Policies[i])
		}
	}
	logger := klog.FromContext(ctx)
	engine, err := newEngine(logger, host.EngineOptions{CacheDir: args.CompilationCacheDir, MemoryBudget: args.MemoryBudget, TenantMemoryBudget: args.PolicyObjects.Tenants.MemoryBudget})
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
	if w.grants, err = w.newObjectGrants(); err != nil {
		cancel()
		_ = engine.Close()
		return nil, err
	}
	w.gates = newGateTracker(func(pods map[string]*v1.Pod) {
		w.activate(logger, pods, "Rechecking pods whose gate asked for a delay")
	})
	w.shares = newTenantShares(&args.PolicyObjects.Tenants)
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
	nsSelectors, volumes, devices := args.PolicyObjects.Enabled, args.PolicyObjects.Enabled, args.PolicyObjects.Enabled
	for _, pc := range args.Policies {
		w.clusterReads = w.clusterReads || readsCluster(pc.Reads)
		nsSelectors = nsSelectors || pc.Scope.NamespaceSelector != nil
		volumes = volumes || slices.Contains(pc.Reads, string(fields.ScopeVolumes))
		devices = devices || slices.Contains(pc.Reads, string(fields.ScopeDevices))
	}
	if w.dra = o.dra; w.dra == nil {
		w.dra = draOf(h, devices)
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
				w.watchNamespaceLabels(logger, f.Core().V1().Namespaces().Informer())
			}
			// The informers kube-scheduler's VolumeBinding and VolumeZone
			// already run in the default profile.
			if volumes {
				w.volumes = volumeListers{
					claims:  f.Core().V1().PersistentVolumeClaims().Lister(),
					volumes: f.Core().V1().PersistentVolumes().Lister(),
					classes: f.Storage().V1().StorageClasses().Lister(),
				}
			}
			// A gated pod that is deleted leaves the gate tracker; a pod
			// deleted or finished gives back the counts it holds.
			if _, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: w.podDeleted, UpdateFunc: w.podFinished}); err != nil {
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
	w.nodeCounts = host.NewNodeCountCache()
	w.nsLabels = w.namespaceLabels()
	if w.nsLabels == nil {
		w.nsLabels = o.nsLabels
	}
	if args.PolicyObjects.Enabled {
		objs, err := w.newObjectController(args.PolicyObjects, args.Objects)
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
		PreEnqueueTimeout:  pc.PreEnqueueTimeout,
		PatchPrefixes:      pc.PatchPrefixes,
		MemoryLimitBytes:   pc.MemoryLimit,
		StackLimitBytes:    pc.StackLimit,
		MaxInstances:       int(args.MaxInstancesPerPolicy),
		RealClock:          pc.RealClock,
		Clock:              w.opts.clock,
		RealRandom:         pc.RealRandom,
		NoReuse:            pc.VerdictReuse == config.VerdictReuseDisabled,
		Reads:              pc.Reads,
		Tenant:             pc.Scope.Namespace,
		TenantMemoryBudget: w.tenantLimits(pc.Scope.Namespace).MemoryBudget,
		OnInstance:         w.instanceCharge(pc.Scope.Namespace),
		Counters:           w.countersFor(pc.Name),
		RetiredGrace:       w.opts.retiredGrace,
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
	p.counters = hp.Counters()
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
