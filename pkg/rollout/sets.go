package rollout

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"

	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/schedcycle"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// Set is one policy set run through the profile's framework: the
// scheduler's own plugins, in-tree and WasmPolicy, over the snapshot.
type Set struct {
	Framework intree.Framework
	// Plugin is the framework's WasmPolicy.
	Plugin *wasmpolicy.WasmPolicy
	// informers serve the set's plugins (Start starts them). Each set
	// has its own: plugins index informers under the profile's name
	// (DynamicResources), and both sets run the same profile.
	informers informers.SharedInformerFactory
}

// Env is what both sets share: the profile, the cluster and the snapshot.
type Env struct {
	// Profile is the profile of the scheduler's KubeSchedulerConfiguration,
	// defaulted (options.LoadConfigFromFile). It must enable WasmPolicy.
	Profile *schedconfig.KubeSchedulerProfile
	// Args are WasmPolicy's args as the tool runs them (its compilation
	// cache, its instance bound).
	Args *config.WasmPolicyArgs
	// Client reads ConfigMap sources and feeds Informers.
	Client kubernetes.Interface
	// KubeConfig is Client's config, which policy objects need; nil
	// without them.
	KubeConfig *rest.Config
	// Snapshot is the framework's view of nodes and pods.
	Snapshot *cache.Snapshot
}

// NewSet builds the profile's framework with WasmPolicy built from
// env.Args and opts. It returns the plugins of the profile this tool does
// not have (they are left out, and named in the report).
func NewSet(ctx context.Context, env Env, opts ...wasmpolicy.Option) (*Set, []string, error) {
	set := &Set{informers: informers.NewSharedInformerFactory(env.Client, 0)}
	factory := wasmpolicy.Factory(opts...)
	registry := plugins.NewInTreeRegistry()
	registry[wasmpolicy.Name] = func(ctx context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
		p, err := factory(ctx, env.Args, h)
		if err == nil {
			set.Plugin = p.(*wasmpolicy.WasmPolicy)
		}
		return p, err
	}
	profile, dropped := known(env.Profile, registry)
	// The managers the scheduler gives DynamicResources and the volume
	// limit plugins, built the way it builds them.
	var dra fwk.SharedDRAManager
	if feature.DefaultFeatureGate.Enabled(features.DynamicResourceAllocation) {
		f := set.informers
		claims := assumecache.NewAssumeCache(klog.FromContext(ctx), f.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
		opts := resourceslicetracker.Options{
			EnableDeviceTaintRules:   feature.DefaultFeatureGate.Enabled(features.DRADeviceTaintRules),
			EnableConsumableCapacity: feature.DefaultFeatureGate.Enabled(features.DRAConsumableCapacity),
			SliceInformer:            f.Resource().V1().ResourceSlices(),
			KubeClient:               env.Client,
		}
		if opts.EnableDeviceTaintRules {
			opts.TaintInformer = f.Resource().V1().DeviceTaintRules()
		}
		tracker, err := resourceslicetracker.StartTracker(ctx, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("resource slice tracker: %w", err)
		}
		dra = dynamicresources.NewDRAManager(ctx, claims, tracker, f)
	}
	csi := nodevolumelimits.NewCSIManager(set.informers.Storage().V1().CSINodes().Lister())
	fw, err := schedcycle.New(ctx, registry, profile, env.Snapshot,
		frameworkruntime.WithClientSet(env.Client),
		frameworkruntime.WithKubeConfig(env.KubeConfig),
		frameworkruntime.WithInformerFactory(set.informers),
		frameworkruntime.WithSharedDRAManager(dra),
		frameworkruntime.WithSharedCSIManager(csi),
	)
	if err != nil {
		return nil, nil, err
	}
	if set.Plugin == nil {
		_ = fw.Close()
		return nil, nil, fmt.Errorf("profile %s does not enable %s", env.Profile.SchedulerName, wasmpolicy.Name)
	}
	set.Framework = fw
	return set, dropped, nil
}

// Start starts the informers the set's plugins asked for and waits for
// their first list.
func (s *Set) Start(ctx context.Context) {
	s.informers.Start(ctx.Done())
	s.informers.WaitForCacheSync(ctx.Done())
}

// Close frees the set's plugins, WasmPolicy's modules included.
func (s *Set) Close() error { return s.Framework.Close() }

// known is profile without the plugins registry lacks (and their
// pluginConfig), and the names left out.
func known(profile *schedconfig.KubeSchedulerProfile, registry frameworkruntime.Registry) (*schedconfig.KubeSchedulerProfile, []string) {
	p := profile.DeepCopy()
	var dropped []string
	keep := func(ps *schedconfig.PluginSet) {
		ps.Enabled = slices.DeleteFunc(ps.Enabled, func(pl schedconfig.Plugin) bool {
			if _, ok := registry[pl.Name]; ok {
				return false
			}
			if !slices.Contains(dropped, pl.Name) {
				dropped = append(dropped, pl.Name)
			}
			return true
		})
	}
	if pl := p.Plugins; pl != nil {
		for _, ps := range []*schedconfig.PluginSet{&pl.PreEnqueue, &pl.QueueSort, &pl.PreFilter, &pl.Filter, &pl.PostFilter,
			&pl.PreScore, &pl.Score, &pl.Reserve, &pl.Permit, &pl.PreBind, &pl.Bind, &pl.PostBind, &pl.MultiPoint} {
			keep(ps)
		}
		// A profile needs one queue sort and one bind plugin; an
		// out-of-tree one is replaced by the default.
		if len(pl.QueueSort.Enabled) == 0 && !slices.ContainsFunc(pl.MultiPoint.Enabled, func(x schedconfig.Plugin) bool { return x.Name == "PrioritySort" }) {
			pl.QueueSort.Enabled = []schedconfig.Plugin{{Name: "PrioritySort"}}
		}
		if len(pl.Bind.Enabled) == 0 && !slices.ContainsFunc(pl.MultiPoint.Enabled, func(x schedconfig.Plugin) bool { return x.Name == "DefaultBinder" }) {
			pl.Bind.Enabled = []schedconfig.Plugin{{Name: "DefaultBinder"}}
		}
	}
	p.PluginConfig = slices.DeleteFunc(p.PluginConfig, func(pc schedconfig.PluginConfig) bool {
		_, ok := registry[pc.Name]
		return !ok
	})
	sort.Strings(dropped)
	return p, dropped
}
