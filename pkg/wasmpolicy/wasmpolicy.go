// Package wasmpolicy is the WasmPolicy kube-scheduler framework plugin: one
// plugin that runs many wasm policies at PreFilter, Filter, PreScore, Score
// and NormalizeScore.
//
// Each scheduling cycle pins the module version of every policy at PreFilter,
// so a hot reload never mixes two versions in one cycle; the pod is prepared
// once per cycle (host.PodState) and node data is read lazily by the guest.
package wasmpolicy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/apis/config/validation"
)

// Name is the plugin's name in KubeSchedulerConfiguration.
const Name = "WasmPolicy"

// stateKey is where a cycle's policy state lives in CycleState.
const stateKey fwk.StateKey = Name

// InitialLoadTimeout bounds how long New waits for every policy's first
// module before letting the scheduler start. Policies still without a module
// apply their failurePolicy until one loads.
var InitialLoadTimeout = 10 * time.Second

// WasmPolicy runs wasm policies inside kube-scheduler.
type WasmPolicy struct {
	handle   framework.Handle
	engine   *host.Engine
	policies []*policy
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	maxInstances int

	// index maps the snapshot's NodeInfos to their position in the node list
	// PreFilter receives. The list (and its NodeInfo objects) is stable until
	// nodes are added or removed, so it is rebuilt only then.
	index atomic.Pointer[nodeIndex]
}

// BatchSize is how many nodes one batched guest call evaluates. A call has a
// fixed cost of about 1-2 µs (deadline, pool, wazero's call path); batching
// pays it once per BatchSize nodes. Small enough that the scheduler's early
// stop (percentageOfNodesToScore) wastes little work.
const BatchSize = 32

type nodeIndex struct {
	first fwk.NodeInfo
	n     int
	pos   map[fwk.NodeInfo]int
}

type policy struct {
	cfg    config.Policy
	host   *host.Policy
	source source.Source
	m      *policyMetrics

	// rejected holds pods this policy kept from being scheduled, so a new
	// module version can send them back to the active queue at once instead
	// of leaving them until the unschedulable-pod timeout (5 min).
	mu       sync.Mutex
	rejected map[types.UID]*v1.Pod
}

// maxRemembered bounds each policy's set of rejected pods.
const maxRemembered = 10000

func (p *policy) remember(pod *v1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rejected == nil {
		p.rejected = map[types.UID]*v1.Pod{}
	}
	if len(p.rejected) < maxRemembered {
		p.rejected[pod.UID] = pod
	}
}

func (p *policy) takeRejected() map[string]*v1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]*v1.Pod, len(p.rejected))
	for _, pod := range p.rejected {
		out[klog.KObj(pod).String()] = pod
	}
	p.rejected = nil
	return out
}

var (
	_ framework.PreFilterPlugin   = &WasmPolicy{}
	_ framework.FilterPlugin      = &WasmPolicy{}
	_ framework.PreScorePlugin    = &WasmPolicy{}
	_ framework.ScorePlugin       = &WasmPolicy{}
	_ framework.ScoreExtensions   = &WasmPolicy{}
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
		configv1.SetDefaults_WasmPolicyArgs(in)
		out := &config.WasmPolicyArgs{}
		configv1.Convert_v1_WasmPolicyArgs_To_config_WasmPolicyArgs(in, out)
		return out, nil
	case nil:
		return nil, fmt.Errorf("%s needs args: add a pluginConfig entry named %s with at least one policy", Name, Name)
	}
	return nil, fmt.Errorf("%s args have type %T, want WasmPolicyArgs", Name, obj)
}

// New is the plugin factory registered with the scheduler.
func New(ctx context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
	args, err := DecodeArgs(obj)
	if err != nil {
		return nil, err
	}
	if errs := validation.ValidateWasmPolicyArgs(ArgsPath, args); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return NewWithArgs(ctx, args, h)
}

// NewWithArgs builds the plugin from validated args. Tests and other hosts
// (the extender) use it directly.
func NewWithArgs(ctx context.Context, args *config.WasmPolicyArgs, h framework.Handle) (*WasmPolicy, error) {
	logger := klog.FromContext(ctx)
	engine, err := newEngine(logger, args.CompilationCacheDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &WasmPolicy{handle: h, engine: engine, cancel: cancel, maxInstances: int(args.MaxInstancesPerPolicy)}
	registerMetrics()
	for _, pc := range args.Policies {
		hp, err := engine.NewPolicy(ctx, host.PolicySpec{
			Name:             pc.Name,
			Config:           pc.Config,
			Timeout:          pc.Timeout,
			MemoryLimitBytes: pc.MemoryLimit,
			MaxInstances:     int(args.MaxInstancesPerPolicy),
			RealClock:        pc.RealClock,
			RealRandom:       pc.RealRandom,
		})
		if err != nil {
			_ = w.Close()
			return nil, err
		}
		p := &policy{cfg: pc, host: hp, m: newPolicyMetrics(pc.Name)}
		switch {
		case pc.Source.File != "":
			p.source = &source.File{Path: pc.Source.File, Interval: args.FilePollInterval}
		case pc.Source.ConfigMap != nil:
			if h == nil || h.ClientSet() == nil {
				_ = w.Close()
				return nil, fmt.Errorf("policy %q: a configMap source needs a Kubernetes client", pc.Name)
			}
			cm := pc.Source.ConfigMap
			p.source = &source.ConfigMap{Client: h.ClientSet(), Namespace: cm.Namespace, Name: cm.Name, Key: cm.Key}
		}
		w.policies = append(w.policies, p)
	}
	// Start every source; wait (bounded) until each reported once, so the
	// first scheduling cycles already run the policies.
	firsts := make([]chan struct{}, len(w.policies))
	for i, p := range w.policies {
		first := make(chan struct{})
		firsts[i] = first
		var once sync.Once
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			p.source.Run(ctx, func(u source.Update) {
				w.apply(ctx, p, u)
				once.Do(func() { close(first) })
			})
		}()
	}
	liveMu.Lock()
	live[w] = struct{}{}
	liveMu.Unlock()
	deadline := time.After(InitialLoadTimeout)
	for i, first := range firsts {
		select {
		case <-first:
		case <-deadline:
			logger.Info("Policy has no module yet; its failurePolicy applies until one loads", "policy", w.policies[i].cfg.Name, "source", w.policies[i].source.String(), "failurePolicy", w.policies[i].cfg.FailurePolicy)
		}
	}
	return w, nil
}

func newEngine(logger klog.Logger, dir string) (*host.Engine, error) {
	if dir != "" {
		e, err := host.NewEngine(host.EngineOptions{CacheDir: dir})
		if err == nil {
			return e, nil
		}
		logger.Info("Compilation cache directory unusable; caching compiled policies in memory only", "dir", dir, "err", err)
	}
	return host.NewEngine(host.EngineOptions{})
}

// apply loads new source content, keeping the last good version on failure.
func (w *WasmPolicy) apply(ctx context.Context, p *policy, u source.Update) {
	logger := klog.FromContext(ctx)
	serving := "none"
	if v := p.host.Current(); v != nil {
		serving = v.SHA256()
	}
	if u.Err != nil {
		logger.Error(u.Err, "Policy source unavailable; keeping the last good module", "policy", p.cfg.Name, "source", p.source.String(), "serving", serving)
		p.m.load("SourceError", 0)
		w.event(u.Object, v1.EventTypeWarning, "PolicySourceUnavailable", fmt.Sprintf("WasmPolicy/%s: %v; keeping module %s", p.cfg.Name, u.Err, short(serving)))
		return
	}
	start := time.Now()
	v, err := p.host.Load(ctx, u.Data, p.cfg.SHA256)
	if err != nil {
		reason := "Error"
		var le *host.LoadError
		if errors.As(err, &le) {
			reason = le.Reason
		}
		p.m.load(reason, time.Since(start))
		logger.Error(err, "Policy module rejected; keeping the last good module", "policy", p.cfg.Name, "source", p.source.String(), "reason", reason, "serving", serving)
		w.event(u.Object, v1.EventTypeWarning, "PolicyLoadFailed", fmt.Sprintf("WasmPolicy/%s: %s: %v; keeping module %s", p.cfg.Name, reason, unwrapLoad(err), short(serving)))
		return
	}
	if v.SHA256() == serving {
		return
	}
	p.m.load("Success", time.Since(start))
	p.m.setActive(v.SHA256(), serving)
	w.activate(logger, p)
	logger.Info("Policy module active", "policy", p.cfg.Name, "source", p.source.String(), "sha256", v.SHA256(), "previous", serving, "exports", v.Exports().String())
	w.event(u.Object, v1.EventTypeNormal, "PolicyLoaded", fmt.Sprintf("WasmPolicy/%s: module %s active (exports %s)", p.cfg.Name, short(v.SHA256()), v.Exports().String()))
}

// activate sends the pods the policy rejected back to the scheduling queue:
// the new module may admit them.
func (w *WasmPolicy) activate(logger klog.Logger, p *policy) {
	pods := p.takeRejected()
	if len(pods) == 0 || w.handle == nil {
		return
	}
	defer func() {
		// A framework built without a scheduling queue (tests, other hosts)
		// has no pod activator.
		if r := recover(); r != nil {
			logger.V(2).Info("No pod activator; rejected pods wait for their next retry", "policy", p.cfg.Name)
		}
	}()
	w.handle.Activate(logger, pods)
	logger.Info("Requeued pods rejected by the previous module", "policy", p.cfg.Name, "pods", len(pods))
}

func unwrapLoad(err error) error {
	var le *host.LoadError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func (w *WasmPolicy) event(obj runtime.Object, typ, reason, note string) {
	if obj == nil || w.handle == nil || w.handle.EventRecorder() == nil {
		return
	}
	w.handle.EventRecorder().Eventf(obj, nil, typ, reason, "LoadPolicy", note)
}

// Close stops the sources and frees every policy's instances.
func (w *WasmPolicy) Close() error {
	liveMu.Lock()
	delete(live, w)
	liveMu.Unlock()
	w.cancel()
	w.wg.Wait()
	for _, p := range w.policies {
		_ = p.host.Close(context.Background())
	}
	return w.engine.Close()
}

// cycle is the plugin's CycleState entry: the pod prepared once, and the
// module version each policy runs for this whole cycle.
type cycle struct {
	pod      *host.PodState
	versions []*host.Version
	blobs    [][]byte
	skipF    []bool
	skipS    []bool
	// rejectedBy marks the policies that rejected the pod on some node.
	rejectedBy []atomic.Bool

	// Filter batches over the node list given to PreFilter.
	nodes   []fwk.NodeInfo
	index   *nodeIndex
	filterB [][]chunk // per policy, per chunk

	// Score batches over the feasible nodes given to PreScore.
	scoreNodes []fwk.NodeInfo
	scorePos   map[fwk.NodeInfo]int
	scoreB     [][]chunk
	raw        [][]int64 // per policy, per feasible node
	mu         sync.Mutex
	rawExtra   []map[string]int64 // scores of nodes outside scoreNodes

	// audit holds the verdicts of policies in Audit mode (under mu).
	audit []*auditState
}

// chunk is one batched guest call's results.
type chunk struct {
	once    sync.Once
	results []host.Result
	scores  []int64
	done    int             // results[:done] are valid
	err     *host.CallError // failure while evaluating node done
}

// Clone implements fwk.StateData. The pinned versions, the pod and the batch
// results are shared: results are keyed by NodeInfo identity, and the
// preemption's cloned NodeInfos never match them, so they are evaluated anew.
func (c *cycle) Clone() fwk.StateData { return c }

func (w *WasmPolicy) cycleFor(state fwk.CycleState, pod *v1.Pod) *cycle {
	if state != nil {
		if d, err := state.Read(stateKey); err == nil {
			if c, ok := d.(*cycle); ok && c.pod.Pod.UID == pod.UID {
				return c
			}
		}
	}
	c := &cycle{
		pod:      host.NewPodState(pod),
		versions: make([]*host.Version, len(w.policies)),
		blobs:    make([][]byte, len(w.policies)),
		skipF:    make([]bool, len(w.policies)),
		skipS:    make([]bool, len(w.policies)),

		rejectedBy: make([]atomic.Bool, len(w.policies)),
	}
	for i, p := range w.policies {
		c.versions[i] = p.host.Current()
	}
	if state != nil {
		state.Write(stateKey, c)
	}
	return c
}

// position returns the node's index in the PreFilter list, or -1 when it is
// not there (a clone made by preemption or for nominated pods).
func (c *cycle) position(ni fwk.NodeInfo) int {
	if c.index != nil {
		if p, ok := c.index.pos[ni]; ok && p < len(c.nodes) && c.nodes[p] == ni {
			return p
		}
	}
	return -1
}

// indexFor returns the position index of the node list, rebuilding it when
// the list changed.
func (w *WasmPolicy) indexFor(nodes []fwk.NodeInfo) *nodeIndex {
	if len(nodes) == 0 {
		return nil
	}
	if idx := w.index.Load(); idx != nil && idx.n == len(nodes) && idx.first == nodes[0] && idx.pos[nodes[len(nodes)-1]] == len(nodes)-1 {
		return idx
	}
	idx := &nodeIndex{first: nodes[0], n: len(nodes), pos: make(map[fwk.NodeInfo]int, len(nodes))}
	for i, ni := range nodes {
		idx.pos[ni] = i
	}
	w.index.Store(idx)
	return idx
}

// batchResult returns policy i's batched verdict for the node at pos of list,
// evaluating its chunk on first use. ok is false when the node must be
// evaluated with a single call instead.
func batchResult(ctx context.Context, p *policy, v *host.Version, c *cycle, kind host.CallKind, chunks []chunk, list []fwk.NodeInfo, blob *[]byte, pos int) (res host.Result, score int64, cerr *host.CallError, ok bool) {
	ci := pos / BatchSize
	ch := &chunks[ci]
	start := ci * BatchSize
	ch.once.Do(func() {
		end := min(start+BatchSize, len(list))
		ch.results = make([]host.Result, end-start)
		if kind == host.CallScore {
			ch.scores = make([]int64, end-start)
		}
		t := time.Now()
		ch.done, ch.err = v.CallNodes(ctx, kind, c.pod, list[start:end], blob, ch.results, ch.scores)
		p.m.observe(kind, t)
	})
	k := pos - start
	switch {
	case k < ch.done && (ch.err == nil || kind != host.CallScore): // a failed score batch reports no scores
		if ch.scores != nil {
			score = ch.scores[k]
		}
		return ch.results[k], score, nil, true
	case k == ch.done && ch.err != nil:
		return host.Result{}, 0, ch.err, true
	}
	return host.Result{}, 0, nil, false
}

// reject builds the status for a policy rejecting one node, phrased like
// the in-tree plugins' reasons so the FailedScheduling event reads
// "3 node(s) rejected by WasmPolicy/<policy>: <reason>".
func reject(code fwk.Code, policy, reason string) *fwk.Status {
	return rejectWith("node(s) rejected by ", code, policy, reason)
}

// rejectPod builds the status for a policy rejecting the pod in PreFilter.
func rejectPod(policy, reason string) *fwk.Status {
	return rejectWith("rejected by ", fwk.UnschedulableAndUnresolvable, policy, reason)
}

func rejectWith(prefix string, code fwk.Code, policy, reason string) *fwk.Status {
	msg := prefix + Name + "/" + policy
	if reason != "" {
		msg += ": " + reason
	}
	return fwk.NewStatus(code, msg)
}

// failed applies a policy's failurePolicy to a failed call. It returns nil
// when the call is ignored.
func (p *policy) failed(point host.CallKind, why string) *fwk.Status {
	if p.audit() {
		p.m.ignoredCall(point)
		p.m.audited(point, "Failure")
		return nil
	}
	if p.cfg.FailurePolicy == config.FailurePolicyIgnore {
		p.m.ignoredCall(point)
		return nil
	}
	switch point {
	case host.CallFilter:
		return reject(fwk.UnschedulableAndUnresolvable, p.cfg.Name, why)
	case host.CallPreFilter:
		return rejectPod(p.cfg.Name, why)
	}
	// Score-side failures fail the pod's scheduling attempt, as an erroring
	// in-tree Score plugin does; the pod is retried.
	return rejectWith("", fwk.Error, p.cfg.Name, why)
}

func (p *policy) callFailed(ctx context.Context, point host.CallKind, err *host.CallError) *fwk.Status {
	p.m.evaluated(point, resultOfOutcome(err.Outcome))
	klog.FromContext(ctx).Error(err.Err, "Policy call failed", "policy", p.cfg.Name, "extensionPoint", point.String(), "outcome", err.Outcome.String(), "failurePolicy", p.cfg.FailurePolicy, "mode", p.mode())
	return p.failed(point, err.Error())
}

// policyError handles a guest that returned the Error status (or an invalid
// code, which the host turns into Error). The evaluation was already counted.
func (p *policy) policyError(ctx context.Context, point host.CallKind, reason string) *fwk.Status {
	klog.FromContext(ctx).Error(nil, "Policy returned an error", "policy", p.cfg.Name, "extensionPoint", point.String(), "reason", reason, "failurePolicy", p.cfg.FailurePolicy, "mode", p.mode())
	return p.failed(point, "policy error: "+reason)
}

// call runs one guest call and records its duration.
func (p *policy) call(ctx context.Context, v *host.Version, kind host.CallKind, c *cycle, i int, node fwk.NodeInfo, scores []int64) (int64, host.Result, *host.CallError) {
	start := time.Now()
	s, res, cerr := v.Call(ctx, kind, c.pod, node, &c.blobs[i], scores)
	p.m.observe(kind, start)
	return s, res, cerr
}

func (p *policy) audit() bool { return p.cfg.Mode == config.ModeAudit }

func (p *policy) mode() config.Mode {
	if p.audit() {
		return config.ModeAudit
	}
	return config.ModeEnforce
}

func notLoaded(p *policy) string {
	return "policy has no module loaded (" + p.source.String() + ")"
}

// PreFilter pins the module versions for the cycle and runs each policy's
// prefilter. A policy rejecting the pod here rejects it for every node.
func (w *WasmPolicy) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*framework.PreFilterResult, *fwk.Status) {
	c := w.cycleFor(state, pod)
	c.nodes, c.index = nodes, w.indexFor(nodes)
	c.filterB = make([][]chunk, len(w.policies))
	anyFilter := false
	for i, p := range w.policies {
		v := c.versions[i]
		if v == nil {
			if st := p.failed(host.CallPreFilter, notLoaded(p)); st != nil {
				return nil, st
			}
			c.skipF[i] = true
			continue
		}
		ex := v.Exports()
		if !ex.Has(host.CallFilter) {
			c.skipF[i] = true
		}
		if ex.Has(host.CallPreFilter) {
			_, res, cerr := p.call(ctx, v, host.CallPreFilter, c, i, nil, nil)
			if cerr != nil {
				if st := p.callFailed(ctx, host.CallPreFilter, cerr); st != nil {
					return nil, st
				}
				c.skipF[i] = true
				continue
			}
			p.m.evaluated(host.CallPreFilter, resultOf(res.Code))
			switch res.Code {
			case abi.CodeSuccess:
			case abi.CodeSkip:
				c.skipF[i] = true
			case abi.CodeUnschedulable, abi.CodeUnschedulableAndUnresolvable:
				if p.audit() {
					p.m.audited(host.CallPreFilter, resultName(res.Code))
					c.auditFor(i).rejectPod(res.Reason)
					c.skipF[i] = true
					continue
				}
				p.remember(pod)
				return nil, rejectPod(p.cfg.Name, res.Reason)
			default:
				if st := p.policyError(ctx, host.CallPreFilter, res.Reason); st != nil {
					return nil, st
				}
				c.skipF[i] = true
			}
		}
		if !c.skipF[i] {
			anyFilter = true
			if ex.Has(abi.FilterNodes) && c.index != nil {
				c.filterB[i] = make([]chunk, (len(nodes)+BatchSize-1)/BatchSize)
			}
		}
	}
	if !anyFilter {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// PreFilterExtensions implements framework.PreFilterPlugin; policies keep no
// per-pod state that AddPod/RemovePod would need to update.
func (w *WasmPolicy) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter runs each policy's filter in order and stops at the first rejection.
func (w *WasmPolicy) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	c := w.cycleFor(state, pod)
	pos := -2 // not looked up yet; -1: not in the PreFilter list
	for i, p := range w.policies {
		if c.skipF[i] {
			continue
		}
		v := c.versions[i]
		if v == nil {
			if st := p.failed(host.CallFilter, notLoaded(p)); st != nil {
				return st
			}
			continue
		}
		var res host.Result
		var cerr *host.CallError
		batched := false
		if c.filterB != nil && c.filterB[i] != nil {
			if pos == -2 {
				pos = c.position(nodeInfo)
			}
			if pos >= 0 {
				res, _, cerr, batched = batchResult(ctx, p, v, c, host.CallFilter, c.filterB[i], c.nodes, &c.blobs[i], pos)
			}
		}
		if !batched {
			_, res, cerr = p.call(ctx, v, host.CallFilter, c, i, nodeInfo, nil)
		}
		if cerr != nil {
			if st := p.callFailed(ctx, host.CallFilter, cerr); st != nil {
				return st
			}
			continue
		}
		p.m.evaluated(host.CallFilter, resultOf(res.Code))
		switch res.Code {
		case abi.CodeSuccess, abi.CodeSkip:
		case abi.CodeUnschedulable, abi.CodeUnschedulableAndUnresolvable:
			if p.audit() {
				p.m.audited(host.CallFilter, resultName(res.Code))
				c.auditFor(i).rejectNode(nodeInfo.Node().Name, res.Reason)
				continue
			}
			c.rejectedBy[i].Store(true)
			code := fwk.Unschedulable
			if res.Code == abi.CodeUnschedulableAndUnresolvable {
				code = fwk.UnschedulableAndUnresolvable
			}
			return reject(code, p.cfg.Name, res.Reason)
		default:
			if st := p.policyError(ctx, host.CallFilter, res.Reason); st != nil {
				return st
			}
		}
	}
	return nil
}

// PostFilter runs when no node fits. It cannot make the pod fit (that is
// preemption's job), but it remembers which policies rejected it, so that a
// new version of such a policy requeues the pod immediately.
func (w *WasmPolicy) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ framework.NodeToStatusReader) (*framework.PostFilterResult, *fwk.Status) {
	w.reportAudit(ctx, state, pod, "")
	if d, err := state.Read(stateKey); err == nil {
		if c, ok := d.(*cycle); ok {
			for i := range c.rejectedBy {
				if c.rejectedBy[i].Load() {
					w.policies[i].remember(pod)
				}
			}
		}
	}
	return nil, fwk.NewStatus(fwk.Unschedulable)
}

// PreScore runs each policy's prescore and skips Score when no policy scores.
func (w *WasmPolicy) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	c := w.cycleFor(state, pod)
	anyScore := false
	c.raw = make([][]int64, len(w.policies))
	c.rawExtra = make([]map[string]int64, len(w.policies))
	c.scoreB = make([][]chunk, len(w.policies))
	for i, p := range w.policies {
		v := c.versions[i]
		if v == nil || !v.Exports().Has(host.CallScore) || p.cfg.Weight == 0 {
			c.skipS[i] = true
			continue
		}
		if v.Exports().Has(host.CallPreScore) {
			_, res, cerr := p.call(ctx, v, host.CallPreScore, c, i, nil, nil)
			if cerr != nil {
				if st := p.callFailed(ctx, host.CallPreScore, cerr); st != nil {
					return st
				}
				c.skipS[i] = true
				continue
			}
			p.m.evaluated(host.CallPreScore, resultOf(res.Code))
			switch res.Code {
			case abi.CodeSuccess:
			case abi.CodeSkip:
				c.skipS[i] = true
				continue
			default:
				if st := p.policyError(ctx, host.CallPreScore, res.Reason); st != nil {
					return st
				}
				c.skipS[i] = true
				continue
			}
		}
		c.raw[i] = make([]int64, len(nodes))
		c.rawExtra[i] = map[string]int64{}
		if v.Exports().Has(abi.ScoreNodes) {
			c.scoreB[i] = make([]chunk, (len(nodes)+BatchSize-1)/BatchSize)
		}
		anyScore = true
	}
	if !anyScore {
		return fwk.NewStatus(fwk.Skip)
	}
	c.scoreNodes = nodes
	c.scorePos = make(map[fwk.NodeInfo]int, len(nodes))
	for i, ni := range nodes {
		c.scorePos[ni] = i
	}
	return nil
}

// Score collects each policy's raw score for the node; NormalizeScore turns
// them into the plugin's 0..100 score.
func (w *WasmPolicy) Score(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	c := w.cycleFor(state, pod)
	if c.raw == nil {
		return 0, nil
	}
	pos, indexed := c.scorePos[nodeInfo]
	for i, p := range w.policies {
		if c.skipS[i] {
			continue
		}
		var s int64
		var res host.Result
		var cerr *host.CallError
		batched := false
		if indexed && c.scoreB[i] != nil {
			res, s, cerr, batched = batchResult(ctx, p, c.versions[i], c, host.CallScore, c.scoreB[i], c.scoreNodes, &c.blobs[i], pos)
		}
		if !batched {
			s, res, cerr = p.call(ctx, c.versions[i], host.CallScore, c, i, nodeInfo, nil)
		}
		if cerr != nil {
			if st := p.callFailed(ctx, host.CallScore, cerr); st != nil {
				return 0, st
			}
			s = 0
		} else if p.m.evaluated(host.CallScore, resultOf(res.Code)); res.Code != abi.CodeSuccess {
			if st := p.policyError(ctx, host.CallScore, res.Reason); st != nil {
				return 0, st
			}
			s = 0
		}
		if indexed {
			c.raw[i][pos] = s // each position is written by one Score call only
		} else {
			c.mu.Lock()
			c.rawExtra[i][nodeInfo.Node().Name] = s
			c.mu.Unlock()
		}
	}
	return 0, nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (w *WasmPolicy) ScoreExtensions() framework.ScoreExtensions { return w }

// NormalizeScore normalizes each policy's scores (with the guest's
// normalize_score when it has one; otherwise they must already be 0..100)
// and combines them: sum(weight × score) / sum(weight).
func (w *WasmPolicy) NormalizeScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, scores framework.NodeScoreList) *fwk.Status {
	c := w.cycleFor(state, pod)
	total := make([]int64, len(scores))
	var weights int64
	for i, p := range w.policies {
		if c.raw == nil || c.skipS[i] {
			continue
		}
		vals := make([]int64, len(scores))
		for j := range scores {
			vals[j] = c.rawScore(i, j, scores[j].Name)
		}
		v := c.versions[i]
		if v.Exports().Has(host.CallNormalizeScore) {
			_, res, cerr := p.call(ctx, v, host.CallNormalizeScore, c, i, nil, vals)
			if cerr != nil {
				if st := p.callFailed(ctx, host.CallNormalizeScore, cerr); st != nil {
					return st
				}
				continue
			}
			if p.m.evaluated(host.CallNormalizeScore, resultOf(res.Code)); res.Code != abi.CodeSuccess {
				if st := p.policyError(ctx, host.CallNormalizeScore, res.Reason); st != nil {
					return st
				}
				continue
			}
		}
		bad := -1
		for j, s := range vals {
			if s < framework.MinNodeScore || s > framework.MaxNodeScore {
				bad = j
				break
			}
		}
		if bad >= 0 {
			p.m.evaluated(host.CallNormalizeScore, rError)
			klog.FromContext(ctx).Error(nil, "Policy score out of range", "policy", p.cfg.Name, "node", scores[bad].Name, "score", vals[bad], "min", framework.MinNodeScore, "max", framework.MaxNodeScore, "failurePolicy", p.cfg.FailurePolicy, "mode", p.mode())
			if st := p.failed(host.CallNormalizeScore, fmt.Sprintf("score out of range %d..%d (register a NormalizeScore function to rescale raw scores)", framework.MinNodeScore, framework.MaxNodeScore)); st != nil {
				return st
			}
			continue
		}
		if p.audit() {
			c.auditFor(i).setScores(scores, vals)
			continue
		}
		wgt := int64(p.cfg.Weight)
		weights += wgt
		for j, s := range vals {
			total[j] += wgt * s
		}
	}
	for j := range scores {
		if weights > 0 {
			scores[j].Score = total[j] / weights
		} else {
			scores[j].Score = 0
		}
	}
	return nil
}

// rawScore finds policy i's raw score for entry j (node name) of the score
// list, which the framework builds in the order of the nodes given to PreScore.
func (c *cycle) rawScore(i, j int, name string) int64 {
	if j < len(c.scoreNodes) && c.scoreNodes[j].Node().Name == name {
		return c.raw[i][j]
	}
	for k, ni := range c.scoreNodes {
		if ni.Node().Name == name {
			return c.raw[i][k]
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rawExtra[i][name]
}

// EventsToRegister implements framework.EnqueueExtensions: a pod a policy
// rejected may fit after a node is added or its labels, taints, annotations
// or allocatable change, or after a pod leaves a node.
func (w *WasmPolicy) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint | fwk.UpdateNodeAnnotation | fwk.UpdateNodeAllocatable}},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete | fwk.UpdatePodLabel | fwk.UpdatePodScaleDown}},
	}, nil
}
