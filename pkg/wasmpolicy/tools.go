package wasmpolicy

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// clientHandle gives the plugin what it uses from a scheduler framework
// handle outside a scheduler: a client for ConfigMap sources and an event
// recorder. Other methods are not available.
type clientHandle struct {
	framework.Handle
	client   kubernetes.Interface
	recorder framework.EventRecorder
	config   *rest.Config
}

func (h clientHandle) ClientSet() kubernetes.Interface { return h.client }

func (h clientHandle) KubeConfig() *rest.Config { return h.config }

// ProfileName is "" outside a scheduler: no profile, so policies of every
// profile are loaded and each pod's schedulerName picks among them.
func (h clientHandle) ProfileName() string { return "" }

func (h clientHandle) EventRecorder() framework.EventRecorder { return h.recorder }

// SnapshotSharedLister is nil outside a scheduler: a policy's cluster view
// is then the node list the caller passes.
func (h clientHandle) SnapshotSharedLister() framework.SharedLister { return nil }

// SharedInformerFactory is nil outside a scheduler: there are no namespaces.
func (h clientHandle) SharedInformerFactory() informers.SharedInformerFactory { return nil }

// SharedDRAManager is nil outside a scheduler: a policy's Devices read is
// then what the caller's cluster view gives (a case table's).
func (h clientHandle) SharedDRAManager() framework.SharedDRAManager { return nil }

// Activate does nothing: there is no scheduling queue outside a scheduler.
func (h clientHandle) Activate(klog.Logger, map[string]*v1.Pod) {}

// NewClientHandle returns a framework handle for hosting the plugin outside
// kube-scheduler (the extender, the wasmsched CLI). client may be nil when
// every policy has a file source; recorder may be nil.
func NewClientHandle(client kubernetes.Interface, recorder framework.EventRecorder) framework.Handle {
	return clientHandle{client: client, recorder: recorder}
}

// NewClientHandleWithConfig is NewClientHandle with the client's config,
// which policy objects need (their informers use a dynamic client).
func NewClientHandleWithConfig(client kubernetes.Interface, cfg *rest.Config, recorder framework.EventRecorder) framework.Handle {
	return clientHandle{client: client, recorder: recorder, config: cfg}
}

// Unloaded lists the policies that have no module loaded, with their source.
func (w *WasmPolicy) Unloaded() []string {
	var out []string
	for _, p := range w.current().all {
		if p.runtime.Current() == nil {
			s := p.cfg.Name + " (" + p.source.String() + ")"
			if why := p.loadError.Load(); why != nil {
				s += ": " + *why
			}
			out = append(out, s)
		}
	}
	return out
}

// Policies names the policies new cycles run, in their order: the args'
// policies, then the serving policy objects.
func (w *WasmPolicy) Policies() []string {
	all := w.current().all
	out := make([]string, len(all))
	for i, p := range all {
		out[i] = p.cfg.Name
	}
	return out
}

// PolicyConfig returns the config a policy of the current set runs with
// (a copy), false if no policy has that name.
func (w *WasmPolicy) PolicyConfig(name string) (config.Policy, bool) {
	for _, p := range w.current().all {
		if p.cfg.Name == name {
			return *p.cfg.DeepCopy(), true
		}
	}
	return config.Policy{}, false
}

// Serving returns the sha256 of the module a policy serves, "" if none.
func (w *WasmPolicy) Serving(policy string) string {
	for _, p := range w.current().all {
		if p.cfg.Name == policy {
			if v := p.runtime.Current(); v != nil {
				return v.SHA256()
			}
		}
	}
	return ""
}

// MemoryUse reports the policies' memory budget and what is charged to it.
func (w *WasmPolicy) MemoryUse() host.MemoryUse { return w.engine.MemoryBudget() }

// HasBatchForms reports whether a policy's serving module exports
// filter_nodes or score_nodes, whose verdicts must equal the single forms'.
func (w *WasmPolicy) HasBatchForms() bool {
	for _, p := range w.current().all {
		if v := p.runtime.Current(); v != nil && (v.Exports().Has(host.CallFilterNodes) || v.Exports().Has(host.CallScoreNodes)) {
			return true
		}
	}
	return false
}

// Disagreements compares two explanations of one pod on the same nodes,
// taken through different call paths (batches and single calls), and names
// every node and policy whose verdict, reason or raw score differs.
func Disagreements(a, b *Explanation) []string {
	path := func(e *Explanation) string {
		if e.SingleCalls {
			return "single calls"
		}
		return "batches"
	}
	var out []string
	for j := range a.Nodes {
		if j >= len(b.Nodes) {
			break
		}
		for i, pa := range a.Nodes[j].Policies {
			if i >= len(b.Nodes[j].Policies) {
				break
			}
			pb := b.Nodes[j].Policies[i]
			if pa.Verdict != pb.Verdict || pa.Reason != pb.Reason || optString(pa.RawScore) != optString(pb.RawScore) {
				out = append(out, fmt.Sprintf("policy %s on node %s: %s give %s, %s give %s", pa.Policy, a.Nodes[j].Node,
					path(a), describe(pa), path(b), describe(pb)))
			}
		}
	}
	return out
}

func optString(p *int64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10)
}

func describe(v PolicyVerdict) string {
	s := v.Verdict
	if v.Reason != "" {
		s += " " + strconv.Quote(v.Reason)
	}
	if v.RawScore != nil {
		s += " (raw score " + optString(v.RawScore) + ")"
	}
	return s
}
