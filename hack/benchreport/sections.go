package main

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// targets writes the targets the project promises, each met, not met or not measured.
func (rep *report) targets() error {
	// Targets.
	c1000n, c1000t := rep.get("perf", "BenchmarkCycle/nodes=1000/native", "ns/op"), rep.get("perf", "BenchmarkCycle/nodes=1000/wasm-tinygo", "ns/op")
	inproc, extCache := rep.get("extender", "BenchmarkCycle/in-process/nodes=100", "ns/op"), rep.get("extender", "BenchmarkCycle/extender/nodeCacheCapable=true/nodes=100", "ns/op")
	extNoCache := rep.get("extender", "BenchmarkCycle/extender/nodeCacheCapable=false/nodes=100", "ns/op")
	warmT, warmG := rep.get("perf", "BenchmarkLoad/tinygo/warm-cache", "ms/load"), rep.get("perf", "BenchmarkLoad/go/warm-cache", "ms/load")
	instT := rep.get("perf", "BenchmarkInstanceMemory/tinygo", "KiB/instance")
	// measured values of 0 mean the benchmark did not run or failed.
	var missing bool
	need := func(vals ...float64) {
		missing = false
		for _, v := range vals {
			if v <= 0 {
				missing = true
			}
		}
	}
	met := func(ok bool) string {
		switch {
		case missing:
			return "not measured"
		case ok:
			return "**met**"
		}
		return "not met"
	}
	rep.w("### Targets\n\n| target | measured | result | command |\n|---|---|---|---|\n")
	for _, pt := range []struct{ bench, what string }{{"BenchmarkFilter", "team-isolation Filter"}, {"BenchmarkScore", "bin-packing Score"}} {
		nat := rep.get("perf", pt.bench+"/native", "ns/op")
		for _, g := range []struct {
			key, label string
			limit      float64
		}{{"tinygo", "TinyGo", 2}, {"go", "Go", 4}} {
			v := rep.get("perf", pt.bench+"/"+g.key+"/batch32", "ns/op")
			need(v, nat)
			rep.w("| %s %s per node ≤ %.0f× native | %s vs %s: %s | %s | `go test -bench %s ./test/perf/` |\n", g.label, pt.what, g.limit, ns(v), ns(nat), ratio(v, nat), met(v <= g.limit*nat), strings.TrimPrefix(pt.bench, "Benchmark"))
		}
	}
	for _, sh := range []struct {
		shape, what             string
		filterT, scoreT, goMult float64
	}{{"pools", "node pools", 1.0, 1.5, 2}, {"distinct", "all-distinct rows", 2, 3, 4}} {
		for _, m := range shapeModes[:2] {
			for _, pt := range []struct {
				key, label string
				limit      float64
			}{{"filter", "team-isolation Filter", sh.filterT}, {"score", "bin-packing Score", sh.scoreT}} {
				p := "BenchmarkShapes/" + sh.shape + "/" + pt.key + "/"
				nat, t, g := rep.get("perf", p+"native", "ns/op"), rep.get("perf", p+"tinygo"+m.suffix, "ns/op"), rep.get("perf", p+"go"+m.suffix, "ns/op")
				need(nat, t, g)
				rep.w("| %s, %s: TinyGo %s ≤ %.1f× native, Go ≤ %.0f× | TinyGo %s, Go %s vs %s: %s, %s | TinyGo %s, Go %s | `go test -bench Shapes ./test/perf/` |\n",
					sh.what, m.label, pt.label, pt.limit, sh.goMult, ns(t), ns(g), ns(nat), ratio(t, nat), ratio(g, nat), met(t <= pt.limit*nat), met(g <= sh.goMult*nat))
			}
		}
	}
	need(c1000t, c1000n)
	rep.w("| 1000-node cycle ≤ 1.2× native | %s vs %s: %s | %s | `go test -bench Cycle/nodes=1000 ./test/perf/` |\n", ns(c1000t), ns(c1000n), ratio(c1000t, c1000n), met(c1000t <= 1.2*c1000n))
	m200n, m200t, m200g := rep.get("perf", "BenchmarkManyPolicies/policies=200/native/cycle", "ns/op"), rep.get("perf", "BenchmarkManyPolicies/policies=200/wasm-tinygo/cycle", "ns/op"), rep.get("perf", "BenchmarkManyPolicies/policies=200/wasm-go/cycle", "ns/op")
	need(m200n, m200t, m200g)
	rep.w("| 200 policies' cycle: TinyGo ≤ 2×, Go ≤ 4× as many native plugins (default budget) | TinyGo %s, Go %s vs %s: %s, %s | TinyGo %s, Go %s | `go test -bench ManyPolicies ./test/perf/` |\n", ns(m200t), ns(m200g), ns(m200n), ratio(m200t, m200n), ratio(m200g, m200n), met(m200t <= 2*m200n), met(m200g <= 4*m200n))
	if rep.clusterErr == nil {
		for _, wl := range []string{"500Nodes", "5000Nodes"} {
			n, t := rep.cluster["Native/"+wl], rep.cluster["WasmTinyGo/"+wl]
			if n == nil || t == nil {
				continue
			}
			need(t.podsPerSec, n.podsPerSec, t.filterP99, n.filterP99)
			rep.w("| scheduler_perf pods/s ≥ 95%% of native (%s) | %.0f vs %.0f pods/s (medians of %d runs each): %.0f%% | %s | `make bench` (test/perf/cluster) |\n", wl, t.podsPerSec, n.podsPerSec, t.runs, 100*t.podsPerSec/n.podsPerSec, met(t.podsPerSec >= 0.95*n.podsPerSec))
			if wl == "5000Nodes" {
				pairs := pairRatios(filepath.Join(rep.root, "_output/bench/pairs"), "WasmTinyGo/"+wl, "Native/"+wl)
				need(float64(len(pairs)))
				measured := "no pairs"
				if len(pairs) > 0 {
					measured = fmt.Sprintf("%d pairs: median %.0f%%, spread %.0f%%-%.0f%% (%s)", len(pairs), 100*median(pairs), 100*slices.Min(pairs), 100*slices.Max(pairs), percents(pairs))
				}
				rep.w("| the same, Native and WasmTinyGo alternated (A/B pairs) | %s | %s | `make bench` (BENCH_PAIRS) |\n", measured, met(len(pairs) >= 5 && median(pairs) >= 0.95))
			} else {
				watch, tput := watchPairRatios(filepath.Join(rep.root, "_output/bench/pairs500"), "WasmTinyGo/"+wl, "Native/"+wl)
				need(float64(len(watch)))
				measured := "no pairs"
				if len(watch) > 0 {
					measured = fmt.Sprintf("%d pairs, pod watch: median %.0f%%, spread %.0f%%-%.0f%% (%s); scheduler_perf's throughput: median %.0f%%", len(watch), 100*median(watch), 100*slices.Min(watch), 100*slices.Max(watch), percents(watch), 100*median(tput))
				}
				rep.w("| the same, Native and WasmTinyGo alternated (A/B pairs, each run its own process, order swapped every pair) | %s | %s | `make bench` (BENCH_PAIRS_500) |\n", measured, met(len(watch) >= 9 && median(watch) >= 0.95))
			}
			rep.w("| Filter p99 ≤ 2× native (%s) | %.2f vs %.2f ms: %s | %s | same |\n", wl, t.filterP99, n.filterP99, ratio(t.filterP99, n.filterP99), met(t.filterP99 <= 2*n.filterP99))
			rep.w("| Score p99 ≤ 2× native (%s) | %.2f vs %.2f ms: %s | %s | same |\n", wl, t.scoreP99, n.scoreP99, ratio(t.scoreP99, n.scoreP99), met(t.scoreP99 <= 2*n.scoreP99))
		}
		// Pod-group cycles (GenericWorkload): each profile with WasmPolicy
		// against the default profile, alternated in pairs.
		for _, c := range []string{"GangScheduling", "BasicScheduling", "TopologyAwareScheduling"} {
			for _, p := range []string{"DefaultWasm", "PortsTinyGo"} {
				wl := "/500Nodes_225Groups"
				watch, _ := watchPairRatios(filepath.Join(rep.root, "_output/bench/pairspg"), c+"/"+p+wl, c+"/Default"+wl)
				need(float64(len(watch)))
				measured := "no pairs"
				if len(watch) > 0 {
					measured = fmt.Sprintf("%d pairs, pod watch: median %.0f%%, spread %.0f%%-%.0f%% (%s)", len(watch), 100*median(watch), 100*slices.Min(watch), 100*slices.Max(watch), percents(watch))
				}
				rep.w("| pod groups, %s, %s ≥ 90%% of the default profile's pods/s (500 nodes, GenericWorkload) | %s | %s | `make bench` (BENCH_PAIRS_PODGROUP) |\n", c, p, measured, met(len(watch) >= 5 && median(watch) >= 0.90))
			}
			// The floor any added plugin sets: the same two policies as
			// native plugins in the default profile. A reference, no target.
			wl := "/500Nodes_225Groups"
			if watch, _ := watchPairRatios(filepath.Join(rep.root, "_output/bench/pairspg"), c+"/DefaultNative"+wl, c+"/Default"+wl); len(watch) > 0 {
				rep.w("| reference: pod groups, %s, DefaultNative (the two policies as native plugins) against the default profile | %d pairs, pod watch: median %.0f%%, spread %.0f%%-%.0f%% (%s) | – | `make bench` (BENCH_PAIRS_PODGROUP) |\n", c, len(watch), 100*median(watch), 100*slices.Min(watch), 100*slices.Max(watch), percents(watch))
			}
		}
	} else {
		rep.w("| scheduler_perf targets | not measured: %v | – | `make bench` |\n", rep.clusterErr)
	}
	need(inproc, extCache, extNoCache)
	rep.w("| cycle ≥ 10× faster than the HTTP extender (100 nodes) | in-process %s; extender %s with nodeCacheCapable (%s), %s without (%s) | %s with nodeCacheCapable; %s without | `go test -bench Cycle ./pkg/extender/` |\n",
		ns(inproc), ns(extCache), ratio(extCache, inproc), ns(extNoCache), ratio(extNoCache, inproc), met(extCache >= 10*inproc), met(extNoCache >= 10*inproc))
	need(warmT, warmG)
	rep.w("| module load with a warm compilation cache ≤ 50 ms | TinyGo %.1f ms, Go %.1f ms | TinyGo %s, Go %s | `go test -bench Load ./test/perf/` |\n", warmT, warmG, met(warmT <= 50), met(warmG <= 50))
	need(instT)
	rep.w("| a TinyGo instance ≤ 512 KiB | %.0f KiB | %s | `go test -bench InstanceMemory ./test/perf/` |\n\n", instT, met(instT <= 512))
	return nil
}

// perCall writes the cost per node of each call path, next to native.
func (rep *report) perCall() {
	// Micro.
	rep.w("### Per call (ns per node; allocations per node)\n\n![per node](perf/per-node.svg)\n\n")
	rep.w("| policy | variant | time per node | vs native | allocs |\n|---|---|---|---|---|\n")
	for _, pt := range []struct{ bench, policy string }{{"BenchmarkFilter", "team-isolation (Filter)"}, {"BenchmarkScore", "bin-packing (Score)"}} {
		nat := rep.get("perf", pt.bench+"/native", "ns/op")
		for _, v := range []struct{ key, label string }{{"native", "native Go plugin"},
			{"tinygo/batch32", "TinyGo, 32 nodes per call (the plugin's way): node tables (ABI v2), fuel checks"}, {"tinygo/single", "TinyGo, one call per node"},
			{"tinygo-abi1/batch32", "TinyGo, 32 per call, host reads (ABI v1), fuel checks"}, {"tinygo-close-on-done/batch32", "TinyGo, 32 per call, node tables, close-on-done"},
			{"tinygo-abi1-close-on-done/batch32", "TinyGo, 32 per call, host reads, close-on-done: before issue 14"},
			{"go/batch32", "Go, 32 per call: node tables, fuel checks"}, {"go/single", "Go, one call per node"},
			{"go-abi1/batch32", "Go, 32 per call, host reads, fuel checks"}, {"go-close-on-done/batch32", "Go, 32 per call, node tables, close-on-done"},
			{"go-abi1-close-on-done/batch32", "Go, 32 per call, host reads, close-on-done: before issue 14"}} {
			r := rep.perf[pt.bench+"/"+v.key]
			if r == nil {
				continue
			}
			rep.w("| %s | %s | %s | %s | %.0f |\n", pt.policy, v.label, ns(r["ns/op"]), ratio(r["ns/op"], nat), r["allocs/op"])
		}
	}
	rep.w("\n")

}

// shapes writes what a policy costs per node on three cluster shapes, with
// verdicts reused (docs/abi.md §3.4) and without, next to native, and the
// targets of the reuse issue.
func (rep *report) shapes() {
	rep.w("### Verdict reuse: cost per node by cluster shape (ns per node, 1000 nodes, batches of 32)\n\n")
	rep.w("*realistic*: nodes as BenchmarkCycle builds them; *pools*: 1000 nodes in 20 pools that differ only in name; *distinct*: every node's row its own. Pods of one template take remembered verdicts; a pod of its own template is evaluated, each distinct row once; with reuse off every node is evaluated. `go test -bench Shapes ./test/perf/`.\n\n")
	rep.w("| shape | policy | native | TinyGo: one template / own template / off | Go: one template / own template / off |\n|---|---|---|---|---|\n")
	for _, shape := range shapeNames {
		for _, pt := range []struct{ key, label string }{{"filter", "team-isolation Filter"}, {"score", "bin-packing Score"}} {
			p := "BenchmarkShapes/" + shape + "/" + pt.key + "/"
			nat := rep.get("perf", p+"native", "ns/op")
			cells := []string{}
			for _, tc := range []string{"tinygo", "go"} {
				var parts []string
				for _, m := range shapeModes {
					v := rep.get("perf", p+tc+m.suffix, "ns/op")
					parts = append(parts, fmt.Sprintf("%s (%s)", ns(v), ratio(v, nat)))
				}
				cells = append(cells, strings.Join(parts, " / "))
			}
			rep.w("| %s | %s | %s | %s | %s |\n", shape, pt.label, ns(nat), cells[0], cells[1])
		}
	}
	rep.w("\n")
	if len(rep.batching) > 0 {
		rep.w("Opportunistic batching (kube-scheduler's KEP-5598, `make bench`: test/perf/cluster BenchmarkPerfSchedulingBatching, upstream's HostPortConflict and ResourceSaturation scenarios, every pod of one signature): pods placed from the previous pod's ranking, without and with WasmPolicy (team-isolation and bin-packing, TinyGo) in the default profile.\n\n| scenario | workload | default profile | with WasmPolicy |\n|---|---|---|---|\n")
		for _, k := range slices.Sorted(maps.Keys(rep.batching)) {
			c, w, _ := strings.Cut(k, "|")
			r := rep.batching[k]
			rep.w("| %s | %s | %s | %s |\n", c, w, r["Default"], r["DefaultWasm"])
		}
		rep.w("\n")
	}
}

// cycle writes whole scheduling cycles, and the extender beside them.
func (rep *report) cycle() {
	inproc, extCache := rep.get("extender", "BenchmarkCycle/in-process/nodes=100", "ns/op"), rep.get("extender", "BenchmarkCycle/extender/nodeCacheCapable=true/nodes=100", "ns/op")
	extNoCache := rep.get("extender", "BenchmarkCycle/extender/nodeCacheCapable=false/nodes=100", "ns/op")
	// Cycle.
	rep.w("### Scheduling cycle (PreFilter, Filter on every node, Score on the feasible third; parallelism 16)\n\n![cycle](perf/cycle.svg)\n\n")
	rep.w("| nodes | native plugins | WasmPolicy TinyGo | ratio | WasmPolicy Go | ratio |\n|---|---|---|---|---|---|\n")
	for _, n := range []int{100, 1000, 5000} {
		p := fmt.Sprintf("BenchmarkCycle/nodes=%d/", n)
		nat, t, g := rep.get("perf", p+"native", "ns/op"), rep.get("perf", p+"wasm-tinygo", "ns/op"), rep.get("perf", p+"wasm-go", "ns/op")
		rep.w("| %d | %s | %s | %s | %s | %s |\n", n, ns(nat), ns(t), ratio(t, nat), ns(g), ratio(g, nat))
	}
	rep.w("\nThe same two policies behind the HTTP extender, 100 nodes (`go test -bench Cycle ./pkg/extender/`): in-process %s, extender with `nodeCacheCapable` %s (%s), without %s (%s).\n\n", ns(inproc), ns(extCache), ratio(extCache, inproc), ns(extNoCache), ratio(extNoCache, inproc))

}

// cluster writes the scheduler_perf runs of SchedulingBasic-like workloads.
func (rep *report) clusterSection() {
	// Cluster.
	rep.w("### Cluster: scheduler_perf, SchedulingBasic-like (pods/s, extension point latency)\n\n")
	if nat := rep.cluster["Native/500Nodes"]; rep.clusterErr != nil || nat == nil {
		why := "no Native/500Nodes result"
		if rep.clusterErr != nil {
			why = rep.clusterErr.Error()
		}
		rep.w("Not measured in this run: %s.\n\n", why)
	} else {
		rep.w("Each value is the median of %d runs (pods/s is each run's average).\n\n", nat.runs)
		rep.w("![cluster](perf/cluster.svg)\n\n| workload | profile | pods/s | vs native | Filter p50 / p99 (ms) | Score p50 / p99 (ms) | attempt p50 / p99 (ms) |\n|---|---|---|---|---|---|---|\n")
		for _, wl := range []string{"500Nodes", "5000Nodes"} {
			nat := rep.cluster["Native/"+wl]
			for _, p := range []string{"Default", "Native", "WasmTinyGo", "WasmGo", "Extender"} {
				r := rep.cluster[p+"/"+wl]
				if r == nil {
					continue
				}
				vs := "–"
				if nat != nil && nat.podsPerSec > 0 {
					vs = fmt.Sprintf("%.0f%%", 100*r.podsPerSec/nat.podsPerSec)
				}
				rep.w("| %s | %s | %.0f | %s | %.2f / %.2f | %.2f / %.2f | %.1f / %.1f |\n", wl, p, r.podsPerSec, vs, r.filterP50, r.filterP99, r.scoreP50, r.scoreP99, r.attemptP50, r.attemptP99)
			}
		}
		rep.w("\nProfiles: *Default* = kube-scheduler's default plugins; *Native* = default + the native team-isolation and bin-packing plugins; *WasmTinyGo* / *WasmGo* = default + WasmPolicy running the same two policies; *Extender* = default + the same TinyGo policies behind the HTTP extender (nodeCacheCapable). 500 nodes: 500 initial pods, 1000 measured; 5000 nodes: 1000 initial, 1000 measured.\n\n")
	}

}

// portsPerNode writes what each port of a default plugin costs per node.
func (rep *report) portsPerNode() {
	// Ports, per node.
	rep.w("### Ports of the default plugins: cost per node\n\n")
	if ports, order, err := parseRuns(filepath.Join(rep.root, "_output/bench/ports.txt")); err != nil {
		rep.w("Not measured in this run: %v.\n\n", err)
	} else {
		rep.w("Each port's extension points for one scheduling cycle over the same generated 500-node cluster, per node, next to the upstream plugin (`go test -bench Ports ./test/ports/`; the plugin and extension points of each port: [plugins-wasm/ports](../plugins-wasm/ports)).\n\n")
		rep.w("| port | upstream | TinyGo (ratio) | Go (ratio) |\n|---|---|---|---|\n")
		for _, name := range order {
			port, ok := strings.CutSuffix(strings.TrimPrefix(name, "BenchmarkPorts/"), "/upstream")
			if !ok {
				continue
			}
			up := median(ports[name]["ns/node"])
			t, g := median(ports["BenchmarkPorts/"+port+"/tinygo"]["ns/node"]), median(ports["BenchmarkPorts/"+port+"/go"]["ns/node"])
			rep.w("| `%s` | %s | %s (%s) | %s (%s) |\n", port, ns(up), ns(t), ratio(t, up), ns(g), ratio(g, up))
		}
		rep.w("\n")
	}

}

// portsWorkloads writes upstream's scheduler_perf workloads run with the ports, and their checked placements.
func (rep *report) portsWorkloads() error {
	// Ports in upstream's scheduler_perf workloads.
	rep.w("### Ports in upstream scheduler_perf workloads (500 nodes)\n\n")
	if rep.clusterErr != nil {
		rep.w("Not measured in this run: %v.\n\n", rep.clusterErr)
	} else {
		records, err := parsePlacements(filepath.Join(rep.root, "_output/bench/cluster"))
		if err != nil {
			return err
		}
		rep.w("kube-scheduler's own test cases at their 500Nodes size (`BenchmarkPerfSchedulingPorts` in test/perf/cluster): the default profile, and the same profile with its ten Filter/Score plugins replaced by WasmPolicy running the ports. After every run the placement is read back and checked: every pod scheduled, no node over its resources, every required constraint held. Placement also shows how the preferred constraints came out: the largest skew of the ScheduleAnyway spread constraint, and the share of pods with a preferred pod-affinity partner in their domain. pods/s is the rate at which the measured pods were bound, from a pod watch opened before the run (the first to the last of them: scheduler_perf's own throughput needs runs of several seconds, and the Default SchedulingPodAntiAffinity runs take about two); medians of the runs.\n\n")
		rep.w("| test case | profile | pods/s | vs default | p50 (ms): PreFilter, Filter, PreScore, Score | attempt p50 / p99 (ms) | placement |\n|---|---|---|---|---|---|---|\n")
		for _, c := range []string{"SchedulingNodeAffinity", "TopologySpreading", "PreferredTopologySpreading", "SchedulingPodAntiAffinity", "SchedulingPreferredPodAffinity"} {
			podsPerSec := func(p string) float64 {
				var v []float64
				for _, r := range records[c+"/"+p+"/500Nodes"] {
					if r.RateError == "" {
						v = append(v, r.PodsPerSecond)
					}
				}
				return median(v)
			}
			def := podsPerSec("Default")
			for _, p := range []string{"Default", "PortsTinyGo", "PortsGo"} {
				recs := records[c+"/"+p+"/500Nodes"]
				r := rep.cluster[c+"/"+p+"/500Nodes"]
				if r == nil && len(recs) == 0 {
					continue
				}
				if r == nil {
					r = &clusterRow{}
				}
				vs := "–"
				if def > 0 {
					vs = fmt.Sprintf("%.0f%%", 100*podsPerSec(p)/def)
				}
				var pods, skew, met []float64
				held := 0
				for _, rec := range recs {
					if len(rec.Violations) == 0 {
						held++
					}
					pods = append(pods, float64(rec.Pods))
					if rec.SoftSkew >= 0 {
						skew = append(skew, float64(rec.SoftSkew))
					}
					if rec.PreferredAffinityMet >= 0 {
						met = append(met, 100*rec.PreferredAffinityMet)
					}
				}
				place := fmt.Sprintf("%.0f pods; held in %d of %d runs", median(pods), held, len(recs))
				switch {
				case len(recs) == 0:
					place = "not checked"
				case held < len(recs):
					place = fmt.Sprintf("%.0f pods; **failed in %d of %d runs** (placement-*.json in _output/bench/cluster)", median(pods), len(recs)-held, len(recs))
				}
				if len(skew) > 0 {
					place += fmt.Sprintf("; preferred skew %.0f", median(skew))
				}
				if len(met) > 0 {
					place += fmt.Sprintf("; %.0f%% with a preferred partner", median(met))
				}
				rep.w("| %s | %s | %.0f | %s | %.2f, %.2f, %.2f, %.2f | %.1f / %.1f | %s |\n", c, p, podsPerSec(p), vs, r.preFilterP50, r.filterP50, r.preScoreP50, r.scoreP50, r.attemptP50, r.attemptP99, place)
			}
		}
		rep.w("\n")
	}
	return nil
}

// memory writes memory, load and reload.
func (rep *report) memory() {
	warmT, warmG := rep.get("perf", "BenchmarkLoad/tinygo/warm-cache", "ms/load"), rep.get("perf", "BenchmarkLoad/go/warm-cache", "ms/load")
	// Memory, load, reload.
	rep.w("### Memory, load and reload\n\n| measurement | TinyGo | Go | command |\n|---|---|---|---|\n")
	rep.w("| memory per instance (linear + host heap) | %.0f KiB (%.0f + %.0f) | %.0f KiB (%.0f + %.0f) | `go test -bench InstanceMemory ./test/perf/` |\n",
		rep.get("perf", "BenchmarkInstanceMemory/tinygo", "KiB/instance"), rep.get("perf", "BenchmarkInstanceMemory/tinygo", "KiB-linear/instance"), rep.get("perf", "BenchmarkInstanceMemory/tinygo", "KiB-heap/instance"),
		rep.get("perf", "BenchmarkInstanceMemory/go", "KiB/instance"), rep.get("perf", "BenchmarkInstanceMemory/go", "KiB-linear/instance"), rep.get("perf", "BenchmarkInstanceMemory/go", "KiB-heap/instance"))
	rep.w("| compiled module (code + host heap; one per distinct module, shared) | %.1f MiB | %.1f MiB | same |\n", rep.get("perf", "BenchmarkInstanceMemory/tinygo", "MiB/module"), rep.get("perf", "BenchmarkInstanceMemory/go", "MiB/module"))
	rep.w("| a busy policy alone (its module + one instance per CPU) | %.1f MiB | %.1f MiB | same |\n", rep.get("perf", "BenchmarkInstanceMemory/tinygo", "MiB/policy-busy"), rep.get("perf", "BenchmarkInstanceMemory/go", "MiB/policy-busy"))
	rep.w("| module load, cold (empty compilation cache) | %.1f ms | %.0f ms | `go test -bench Load ./test/perf/` |\n", rep.get("perf", "BenchmarkLoad/tinygo/cold", "ms/load"), rep.get("perf", "BenchmarkLoad/go/cold", "ms/load"))
	rep.w("| module load, warm compilation cache | %.1f ms | %.1f ms | same |\n", warmT, warmG)
	rep.w("| ConfigMap update → new module serving (informer, in-process) | %.1f ms | – | `go test -bench Reload ./test/perf/` |\n\n", rep.get("perf", "BenchmarkReload", "ms/reload"))
}

// manyPolicies writes one plugin with many policies.
func (rep *report) manyPolicies() {
	// Many policies.
	rep.w("### Many policies\n\nOne plugin with n policies (copies of team-isolation and bin-packing, alternating, distinct configs) under the default memory budget (512Mi), next to n native plugins. Cycle: one scheduling cycle over 1000 nodes, as above, of a pod of a template met before (its verdicts remembered); first 3: the template's first three cycles, which evaluate every policy. Load: starting the plugin until every policy serves, cold (empty compilation cache) and warm; memory: what the budget charges after the load / growth of the process's resident set. `go test -bench ManyPolicies ./test/perf/`.\n\n")
	rep.w("| policies | native cycle / first 3 | TinyGo cycle / first 3 | TinyGo load cold / warm | TinyGo memory | Go cycle / first 3 | Go load cold / warm | Go memory |\n|---|---|---|---|---|---|---|---|\n")
	for _, n := range []int{1, 10, 50, 200} {
		p := fmt.Sprintf("BenchmarkManyPolicies/policies=%d/", n)
		nat, natFirst := rep.get("perf", p+"native/cycle", "ns/op"), rep.get("perf", p+"native/cycle", "ms/first-cycles")
		row := fmt.Sprintf("| %d | %s / %.1f ms |", n, ns(nat), natFirst)
		for _, tc := range []string{"wasm-tinygo", "wasm-go"} {
			c, first := rep.get("perf", p+tc+"/cycle", "ns/op"), rep.get("perf", p+tc+"/cycle", "ms/first-cycles")
			row += fmt.Sprintf(" %s (%s) / %.1f ms (%s) | %.0f / %.0f ms | %.1f / %.1f MiB |", ns(c), ratio(c, nat), first, ratio(first, natFirst),
				rep.get("perf", p+tc+"/load-cold", "ms/load"), rep.get("perf", p+tc+"/load-warm", "ms/load"),
				rep.get("perf", p+tc+"/load-cold", "MiB-charged"), rep.get("perf", p+tc+"/load-cold", "MiB-rss"))
		}
		rep.w("%s\n", row)
	}
	rep.w("\nWorst-case start, every module distinct (nothing shared, empty compilation cache; `go test -bench StartDistinctModules ./test/perf/`): 200 TinyGo policies %.1f s (%.0f MiB charged), 40 Go policies %.1f s (%.0f MiB charged).\n\n",
		rep.get("perf", "BenchmarkStartDistinctModules/tinygo/policies=200", "ms/load")/1000, rep.get("perf", "BenchmarkStartDistinctModules/tinygo/policies=200", "MiB-charged"),
		rep.get("perf", "BenchmarkStartDistinctModules/go/policies=40", "ms/load")/1000, rep.get("perf", "BenchmarkStartDistinctModules/go/policies=40", "MiB-charged"))
}

// scoped writes what policies out of a pod's scope cost.
func (rep *report) scoped() {
	// Scoped policies.
	base := rep.get("perf", "BenchmarkCycleScoped/nodes=1000/baseline", "ns/op")
	out, in := rep.get("perf", "BenchmarkCycleScoped/nodes=1000/out-of-scope", "ns/op"), rep.get("perf", "BenchmarkCycleScoped/nodes=1000/in-scope", "ns/op")
	rep.w("### Scoped policies\n\nA policy whose scope (namespaceSelector, podSelector, profiles; policy objects or args) does not take a pod is left out of that pod's cycle. One cycle over 1000 nodes with the two TinyGo policies (baseline), plus ten team-isolation copies whose podSelector does not take the pod, or does; `go test -bench CycleScoped ./test/perf/`.\n\n")
	rep.w("| cycle | time | vs baseline |\n|---|---|---|\n| baseline (2 policies) | %s | 1.00× |\n| + 10 policies out of scope | %s | %s |\n| + 10 policies in scope | %s | %s |\n\n", ns(base), ns(out), ratio(out, base), ns(in), ratio(in, base))
}

// gates writes PreEnqueue and PreBind per pod.
func (rep *report) gates() {
	// Gates and patches.
	rep.w("### Gates and patches (PreEnqueue, PreBind)\n\nCost per pod. PreEnqueue: freeze-window as a native PreEnqueue plugin and as a wasm policy behind WasmPolicy's PreEnqueue (scope, pod state, guest call), for a pod the window lets in and one it gates. PreBind: placement-recorder's zone label and policies annotation computed natively and by the wasm policy behind WasmPolicy (its prebind on the chosen node, the merge, the patch's JSON; both give the same bytes), the PATCH request left out (the same request either way). `go test -bench 'PreEnqueue|PreBind' ./test/perf/`.\n\n")
	rep.w("| per pod | native | TinyGo | Go |\n|---|---|---|---|\n")
	for _, r := range []struct{ label, prefix string }{{"PreEnqueue, pod let in", "BenchmarkPreEnqueue/pass/"}, {"PreEnqueue, pod gated", "BenchmarkPreEnqueue/gate/"}, {"PreBind patch", "BenchmarkPreBind/"}} {
		nat, t, g := rep.get("perf", r.prefix+"native", "ns/op"), rep.get("perf", r.prefix+"tinygo", "ns/op"), rep.get("perf", r.prefix+"go", "ns/op")
		rep.w("| %s | %s | %s (%s) | %s (%s) |\n", r.label, ns(nat), ns(t), ratio(t, nat), ns(g), ratio(g, nat))
	}
}
