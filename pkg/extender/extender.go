// Package extender serves WasmPolicy policies behind the kube-scheduler
// HTTP extender protocol (k8s.io/kube-scheduler/extender/v1), for clusters
// whose scheduler binary cannot be replaced. It runs the same plugin code as
// the in-process WasmPolicy: same args, engine, sources, reloads, limits,
// failure policies and metrics; only the transport differs.
package extender

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/schedcycle"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// Options configures the server.
type Options struct {
	// MaxRequestBytes bounds a request body (the pod plus, without
	// nodeCacheCapable, every node). Default 32 MiB.
	MaxRequestBytes int64
	// RequestTimeout bounds the handling of one request. Default 10s.
	RequestTimeout time.Duration
	// Parallelism is how many nodes are evaluated at once. Default 16.
	Parallelism int
}

// Server answers the filter and prioritize verbs.
type Server struct {
	plugin *wasmpolicy.WasmPolicy
	nodes  corelisters.NodeLister
	pods   cache.Indexer
	opts   Options
}

const podsByNode = "nodeName"

// New loads the policies and starts node and pod informers (for
// nodeCacheCapable requests and for the resources pods use on each node).
func New(ctx context.Context, client kubernetes.Interface, recorder framework.EventRecorder, args *config.WasmPolicyArgs, opts Options) (*Server, error) {
	if opts.Parallelism < 1 {
		opts.Parallelism = 16
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 32 << 20
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 10 * time.Second
	}
	plugin, err := wasmpolicy.NewWithArgs(ctx, args, wasmpolicy.NewClientHandle(client, recorder), wasmpolicy.WithUnservedPoints(Unserved))
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	nodeInf := factory.Core().V1().Nodes()
	podInf := factory.Core().V1().Pods().Informer()
	if err := podInf.AddIndexers(cache.Indexers{podsByNode: func(obj interface{}) ([]string, error) {
		if p, ok := obj.(*v1.Pod); ok && p.Spec.NodeName != "" && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	nodeInformer := nodeInf.Informer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodeInformer.HasSynced, podInf.HasSynced) {
		return nil, errors.New("node and pod informers did not sync")
	}
	return &Server{plugin: plugin, nodes: nodeInf.Lister(), pods: podInf.GetIndexer(), opts: opts}, nil
}

// Unserved are the extension points the extender protocol has no verb for
// (abi.ExtensionPoint.ExtenderVerb and Without),
// with why: a policy implementing them loads, its filter and score run,
// and its gates and patches do not (the load is logged and reported with
// a PolicyPointNotServed Event).
var Unserved = func() map[host.CallKind]string {
	out := map[host.CallKind]string{}
	for k := host.CallKind(0); k < host.NumCallKinds; k++ {
		if p := abi.Points[k]; p.ExtenderVerb == "" {
			out[k] = "the extender protocol has no verb that reaches " + p.Name + ", so " + p.Without + "; run the policy in kube-scheduler's WasmPolicy plugin for it"
		}
	}
	return out
}()

// Unserved lists each policy's extension points the extender cannot call.
func (s *Server) Unserved() []string { return s.plugin.Unserved() }

// Close stops the policies.
func (s *Server) Close() error { return s.plugin.Close() }

// Handler returns the HTTP handler for the filter and prioritize verbs.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/filter", s.serve(s.filter))
	mux.HandleFunc("/prioritize", s.serve(s.prioritize))
	return mux
}

func (s *Server) serve(verb func(context.Context, *extenderv1.ExtenderArgs) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
		defer cancel()
		var args extenderv1.ExtenderArgs
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes)).Decode(&args); err != nil {
			http.Error(w, "decoding ExtenderArgs: "+err.Error(), http.StatusBadRequest)
			return
		}
		if args.Pod == nil {
			http.Error(w, "ExtenderArgs has no pod", http.StatusBadRequest)
			return
		}
		res, err := verb(ctx, &args)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Extender request failed", "pod", klog.KObj(args.Pod), "path", r.URL.Path)
			if fr, ok := res.(*extenderv1.ExtenderFilterResult); ok {
				fr.Error = err.Error()
			} else {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	}
}

// snapshot is the scheduler's snapshot of the request's nodes (the node
// objects it carries, or with nodeCacheCapable the names looked up in the
// informer cache), each with the pods the informer knows on it, in the
// request's order.
func (s *Server) snapshot(args *extenderv1.ExtenderArgs) (framework.SharedLister, []fwk.NodeInfo, error) {
	var nodes []*v1.Node
	switch {
	case args.NodeNames != nil:
		for _, name := range *args.NodeNames {
			n, err := s.nodes.Get(name)
			if err != nil {
				return nil, nil, fmt.Errorf("node %q: %w", name, err)
			}
			nodes = append(nodes, n)
		}
	case args.Nodes != nil:
		for i := range args.Nodes.Items {
			nodes = append(nodes, &args.Nodes.Items[i])
		}
	}
	var pods []*v1.Pod
	for _, n := range nodes {
		objs, _ := s.pods.ByIndex(podsByNode, n.Name)
		for _, o := range objs {
			pods = append(pods, o.(*v1.Pod))
		}
	}
	lister, list := schedcycle.Snapshot(pods, nodes)
	return lister, list, nil
}

// framework is WasmPolicy alone at points, over the request's snapshot:
// the verbs run the scheduler's own framework, which applies a PreFilter
// result, a Skip and the score's normalization as it does in-process.
func (s *Server) framework(ctx context.Context, lister framework.SharedLister, points ...schedcycle.Point) (intree.Framework, error) {
	registry, profile := schedcycle.OnePlugin(wasmpolicy.Name, s.plugin, points...)
	return schedcycle.New(ctx, registry, profile, lister, frameworkruntime.WithParallelism(s.opts.Parallelism))
}

func (s *Server) filter(ctx context.Context, args *extenderv1.ExtenderArgs) (any, error) {
	res := &extenderv1.ExtenderFilterResult{FailedNodes: extenderv1.FailedNodesMap{}, FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{}}
	lister, infos, err := s.snapshot(args)
	if err != nil {
		return res, err
	}
	fw, err := s.framework(ctx, lister, schedcycle.PreFilter, schedcycle.Filter)
	if err != nil {
		return res, err
	}
	cycle := schedcycle.RunFilter(ctx, fw, intree.NewCycleState(), args.Pod, infos)
	if cycle.Err != nil {
		return res, cycle.Err.AsError()
	}
	var passed []string
	var passedNodes []v1.Node
	for i, ni := range infos {
		name := ni.Node().Name
		switch st := cycle.Nodes[i].Status; {
		case st.IsSuccess():
			passed = append(passed, name)
			passedNodes = append(passedNodes, *ni.Node())
		case st.Code() == fwk.UnschedulableAndUnresolvable:
			res.FailedAndUnresolvableNodes[name] = st.Message()
		default:
			res.FailedNodes[name] = st.Message()
		}
	}
	if args.NodeNames != nil {
		res.NodeNames = &passed
	} else {
		res.Nodes = &v1.NodeList{Items: passedNodes}
	}
	return res, nil
}

func (s *Server) prioritize(ctx context.Context, args *extenderv1.ExtenderArgs) (any, error) {
	lister, infos, err := s.snapshot(args)
	if err != nil {
		return nil, err
	}
	fw, err := s.framework(ctx, lister, schedcycle.PreScore, schedcycle.Score)
	if err != nil {
		return nil, err
	}
	totals, st := schedcycle.RunScore(ctx, fw, intree.NewCycleState(), args.Pod, infos)
	if !st.IsSuccess() {
		return nil, st.AsError()
	}
	// The plugin scores 0..MaxNodeScore (its weight in the tool's profile
	// is 1); extenders answer 0..MaxExtenderPriority.
	list := make(extenderv1.HostPriorityList, len(infos))
	for i, ni := range infos {
		list[i] = extenderv1.HostPriority{Host: ni.Node().Name, Score: totals[i] * extenderv1.MaxExtenderPriority / framework.MaxNodeScore}
	}
	return &list, nil
}
