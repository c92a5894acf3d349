package perf

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// nodeLeases holds one fresh kubelet Lease per node, as the scheduler's
// watch of kube-node-lease would: spec.renewTime is the declared field.
type nodeLeases map[string][]string

func (l nodeLeases) Get(ns, name string) ([]string, bool) {
	v, ok := l[name]
	return v, ok && ns == "kube-node-lease"
}

func (l nodeLeases) List(string, labels.Selector) ([]model.Object, error) { return nil, nil }
func (l nodeLeases) Gen() uint64                                          { return 1 }

// BenchmarkObjectRead is what a granted object read costs per node: the
// lease-freshness Filter (one object_get of one declared field, a time
// parse and a compare) over 1000 nodes in batches of 32, as the plugin
// calls it; every node's Lease is fresh, so every node is evaluated. native
// is the same logic in Go reading the same map. ns/op is per node.
func BenchmarkObjectRead(b *testing.B) {
	const n = 1000
	renew := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00")
	leases := nodeLeases{}
	nodes := make([]fwk.NodeInfo, n)
	for i := range nodes {
		name := fmt.Sprintf("node-%04d", i)
		leases[name] = []string{renew}
		ni := intree.NewNodeInfo()
		ni.SetNode(st.MakeNode().Name(name).Obj())
		nodes[i] = ni
	}
	pod := st.MakePod().Namespace("default").Name("p").UID("p").Obj()
	b.Run("native", func(b *testing.B) {
		b.ReportAllocs()
		rejected := 0
		for i := 0; i < b.N; i++ {
			f, ok := leases.Get("kube-node-lease", nodes[i%n].Node().Name)
			if !ok {
				continue
			}
			t, err := time.Parse(time.RFC3339Nano, f[0])
			if err != nil || time.Since(t) > 20*time.Second {
				rejected++
			}
		}
		if rejected > 0 {
			b.Fatalf("%d nodes rejected", rejected)
		}
	})
	ctx := context.Background()
	for _, tc := range testguests.Toolchains {
		p, v := loadSpec(b, host.InterruptFuel, host.PolicySpec{Name: "lease-freshness", Config: "maxAge=20s", Timeout: time.Second, MaxInstances: 1, RealClock: true},
			testguests.PolicyBytes(b, tc, "lease-freshness"))
		p.SetObjects([]host.ObjectReader{leases})
		b.Run(string(tc), func(b *testing.B) {
			b.ReportAllocs()
			ps, results := host.NewPodState(pod), make([]host.Result, 32)
			for i := 0; i < b.N; i += 32 {
				start := i % n
				batch := nodes[start:min(start+32, n)]
				pc := new(host.PolicyCycle)
				if _, err := v.CallNodes(ctx, host.CallFilter, ps, batch, pc, results[:len(batch)], nil); err != nil {
					b.Fatal(err)
				}
				for j, r := range results[:len(batch)] {
					if r.Code != 0 {
						b.Fatalf("node %d: %+v", start+j, r)
					}
				}
			}
		})
	}
}
