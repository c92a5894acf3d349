package rollout

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
)

// Snapshot is the cluster at one point: its nodes, pods and namespaces.
type Snapshot struct {
	Nodes      []*v1.Node
	Pods       []*v1.Pod
	Namespaces []*v1.Namespace
	// ResourceVersion is what every list was read at ("" from files).
	ResourceVersion string
	TakenAt         time.Time
}

// Cache is the scheduler's view of the snapshot, which the frameworks read:
// the nodes with the pods bound to them. A pod bound to a node the
// snapshot lacks (deleted, its pods not yet) is left out, as the
// scheduler's cache leaves it out of the nodes it schedules on.
func (s *Snapshot) Cache() *cache.Snapshot {
	names := make(map[string]bool, len(s.Nodes))
	for _, n := range s.Nodes {
		names[n.Name] = true
	}
	var bound []*v1.Pod
	for _, p := range s.Pods {
		if p.Spec.NodeName != "" && names[p.Spec.NodeName] {
			bound = append(bound, p)
		}
	}
	return cache.NewSnapshot(bound, s.Nodes)
}

// Take reads a consistent snapshot: nodes first, then pods and namespaces
// at exactly the nodes' resourceVersion, in pages of 500, so that no pod is
// seen bound to a node the node list does not have. It only reads.
func Take(ctx context.Context, client kubernetes.Interface) (*Snapshot, error) {
	s := &Snapshot{TakenAt: time.Now()}
	// One list, not pages: its resourceVersion is the snapshot's.
	nl, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	rv := nl.ResourceVersion
	s.ResourceVersion = rv
	for i := range nl.Items {
		s.Nodes = append(s.Nodes, &nl.Items[i])
	}
	pods, err := list(ctx, rv, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return client.CoreV1().Pods("").List(ctx, o)
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods at resourceVersion %s: %w", rv, err)
	}
	for _, o := range pods {
		s.Pods = append(s.Pods, o.(*v1.Pod))
	}
	nss, err := list(ctx, rv, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return client.CoreV1().Namespaces().List(ctx, o)
	})
	if err != nil {
		return nil, fmt.Errorf("listing namespaces at resourceVersion %s: %w", rv, err)
	}
	for _, o := range nss {
		s.Namespaces = append(s.Namespaces, o.(*v1.Namespace))
	}
	return s, nil
}

// list reads every page of a list at exactly resourceVersion rv. The
// first page names the resourceVersion; the next ones only continue it
// (the apiserver refuses resourceVersionMatch beside a continue token,
// which already holds the resourceVersion).
func list(ctx context.Context, rv string, fn func(context.Context, metav1.ListOptions) (runtime.Object, error)) ([]runtime.Object, error) {
	opts := metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Limit: pageSize}
	var items []runtime.Object
	for {
		obj, err := fn(ctx, opts)
		if err != nil {
			return nil, err
		}
		page, err := meta.ExtractList(obj)
		if err != nil {
			return nil, err
		}
		items = append(items, page...)
		l, ok := obj.(metav1.ListInterface)
		if !ok || l.GetContinue() == "" {
			return items, nil
		}
		opts = metav1.ListOptions{Continue: l.GetContinue(), Limit: pageSize}
	}
}

// pageSize is how many objects one list request returns.
const pageSize = 500
