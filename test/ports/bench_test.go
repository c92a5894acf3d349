package ports

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmsched/wasmsched/internal/testguests"
)

// benchNodes is the cluster size of BenchmarkPorts: enough nodes that the
// framework's per-cycle costs spread thin, as in a real cluster.
const benchNodes = 500

// BenchmarkPorts measures each port next to its upstream plugin: one
// scheduling cycle of the port's extension points (PreFilter, Filter on
// every node, PreScore, Score and NormalizeScore on the feasible ones, as
// runCycle does) over the same generated 500-node cluster and pods,
// reported per node. The wasm side runs inside WasmPolicy with the
// framework's parallelism as upstream does, so the ratio is what a profile
// pays for the port instead of the plugin.
func BenchmarkPorts(b *testing.B) {
	for _, p := range ports {
		r := rand.New(rand.NewPCG(uint64(len(p.module)), 7))
		generated, existing := generateNodes(r, benchNodes)
		snapshot, nodes := snapshotOf(generated, existing)
		objects := spreadObjects(r)
		pods := make([]*v1.Pod, 32)
		for i := range pods {
			pods[i] = generatePod(r, fmt.Sprintf("p%d", i), nodes)
		}
		variants := []struct{ name, module string }{{"upstream", ""}}
		for _, tc := range testguests.Toolchains {
			module, err := testguests.Build(tc, filepath.Join("plugins-wasm", "ports", p.module))
			if err != nil {
				b.Fatal(err)
			}
			variants = append(variants, struct{ name, module string }{string(tc), module})
		}
		for _, v := range variants {
			b.Run(p.String()+"/"+v.name, func(b *testing.B) {
				fw := newFramework(b, p, v.module, snapshot, objects)
				i := 0
				for b.Loop() {
					runCycle(b, fw, pods[i%len(pods)], nodes)
					i++
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchNodes), "ns/node")
			})
		}
	}
}
