package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// bench is one benchmark result the report reads: the file it comes from
// (perf or extender), the benchmark's name and the unit. optional ones
// (the call-path variants) are reported when a run has them.
type bench struct {
	file, name, unit string
	optional         bool
}

// benches is every benchmark result the report reads. A required one
// missing from the run fails the report, naming it, instead of printing a
// zero (a renamed benchmark, or one that failed); get refuses a name that
// is not listed here, so the list cannot fall behind the sections.
var benches = sync.OnceValue(func() []bench {
	var out []bench
	add := func(file, name string, units ...string) {
		for _, u := range units {
			out = append(out, bench{file: file, name: name, unit: u})
		}
	}
	for _, pt := range []string{"BenchmarkFilter", "BenchmarkScore"} {
		for _, v := range []string{"native", "tinygo/batch32", "tinygo/single", "go/batch32", "go/single"} {
			add("perf", pt+"/"+v, "ns/op", "allocs/op")
		}
		for _, v := range []string{"tinygo-abi1/batch32", "tinygo-close-on-done/batch32", "tinygo-abi1-close-on-done/batch32", "go-abi1/batch32", "go-close-on-done/batch32", "go-abi1-close-on-done/batch32"} {
			for _, u := range []string{"ns/op", "allocs/op"} {
				out = append(out, bench{file: "perf", name: pt + "/" + v, unit: u, optional: true})
			}
		}
	}
	for _, n := range []int{100, 1000, 5000} {
		for _, v := range []string{"native", "wasm-tinygo", "wasm-go"} {
			add("perf", fmt.Sprintf("BenchmarkCycle/nodes=%d/%s", n, v), "ns/op")
		}
	}
	add("extender", "BenchmarkCycle/in-process/nodes=100", "ns/op")
	add("extender", "BenchmarkCycle/extender/nodeCacheCapable=true/nodes=100", "ns/op")
	add("extender", "BenchmarkCycle/extender/nodeCacheCapable=false/nodes=100", "ns/op")
	for _, tc := range []string{"tinygo", "go"} {
		add("perf", "BenchmarkLoad/"+tc+"/cold", "ms/load")
		add("perf", "BenchmarkLoad/"+tc+"/warm-cache", "ms/load")
		add("perf", "BenchmarkInstanceMemory/"+tc, "KiB/instance", "KiB-linear/instance", "KiB-heap/instance", "MiB/module", "MiB/policy-busy")
	}
	add("perf", "BenchmarkReload", "ms/reload")
	for _, n := range []int{1, 10, 50, 200} {
		p := fmt.Sprintf("BenchmarkManyPolicies/policies=%d/", n)
		add("perf", p+"native/cycle", "ns/op", "ms/first-cycles")
		for _, tc := range []string{"wasm-tinygo", "wasm-go"} {
			add("perf", p+tc+"/cycle", "ns/op", "ms/first-cycles")
			add("perf", p+tc+"/load-cold", "ms/load", "MiB-charged", "MiB-rss")
			add("perf", p+tc+"/load-warm", "ms/load")
		}
	}
	add("perf", "BenchmarkStartDistinctModules/tinygo/policies=200", "ms/load", "MiB-charged")
	add("perf", "BenchmarkStartDistinctModules/go/policies=40", "ms/load", "MiB-charged")
	for _, v := range []string{"baseline", "out-of-scope", "in-scope"} {
		add("perf", "BenchmarkCycleScoped/nodes=1000/"+v, "ns/op")
	}
	for _, shape := range shapeNames {
		for _, pt := range []string{"filter", "score"} {
			add("perf", "BenchmarkShapes/"+shape+"/"+pt+"/native", "ns/op")
			for _, tc := range []string{"tinygo", "go"} {
				for _, mode := range shapeModes {
					add("perf", "BenchmarkShapes/"+shape+"/"+pt+"/"+tc+mode.suffix, "ns/op")
				}
			}
		}
	}
	for _, prefix := range []string{"BenchmarkPreEnqueue/pass/", "BenchmarkPreEnqueue/gate/", "BenchmarkPreBind/"} {
		for _, v := range []string{"native", "tinygo", "go"} {
			add("perf", prefix+v, "ns/op")
		}
	}
	return out
})

// shapeNames are BenchmarkShapes' clusters, and shapeModes its three ways
// of running a policy: verdicts reused (pods of one template, as a
// ReplicaSet's), every pod of its own template, reuse turned off.
var (
	shapeNames = []string{"realistic", "pools", "distinct"}
	shapeModes = []struct{ suffix, label string }{
		{"", "pods of one template"},
		{"-fresh", "each pod its own template"},
		{"-off", "verdictReuse: Disabled"},
	}
)

// report is one run's results and the text written from them.
type report struct {
	root       string
	cpu        string
	perf, ext  map[string]result
	cluster    map[string]*clusterRow
	clusterErr error
	// batching is each batching run's "placed from a hint of attempts",
	// by "<case>|<workload>" and profile (parseBatching).
	batching map[string]map[string]string
	b        strings.Builder
}

// newReport reads the run's benchmark files under root.
func newReport(root string) (*report, error) {
	rep := &report{root: root}
	var err error
	rep.perf, rep.cpu, err = parseBench(filepath.Join(root, "_output/bench/perf.txt"))
	if err != nil {
		return nil, fmt.Errorf("%w (run make bench)", err)
	}
	if rep.ext, _, err = parseBench(filepath.Join(root, "_output/bench/extender.txt")); err != nil {
		return nil, err
	}
	rep.cluster, rep.clusterErr = parseCluster(filepath.Join(root, "_output/bench/cluster"))
	rep.batching = parseBatching(filepath.Join(root, "_output/bench/cluster.txt"))
	return rep, nil
}

func (rep *report) file(name string) map[string]result {
	if name == "extender" {
		return rep.ext
	}
	return rep.perf
}

// parseBatching reads the "batching: <case>/<profile>/<workload>: N of M
// attempts placed from a hint" lines of the cluster benchmark's output;
// a run without them (or without the file) has none.
func parseBatching(path string) map[string]map[string]string {
	out := map[string]map[string]string{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "batching: ")
		if !ok {
			continue
		}
		name, counts, ok := strings.Cut(rest, ": ")
		parts := strings.Split(name, "/")
		if !ok || len(parts) != 3 {
			continue
		}
		var hints, attempts int
		if _, err := fmt.Sscanf(counts, "%d of %d", &hints, &attempts); err != nil {
			continue
		}
		k := parts[0] + "|" + parts[2]
		if out[k] == nil {
			out[k] = map[string]string{}
		}
		if prev := out[k][parts[1]]; prev != "" {
			out[k][parts[1]] = prev + "; "
		}
		out[k][parts[1]] += fmt.Sprintf("%d of %d", hints, attempts)
	}
	return out
}

// missing lists the required benchmark results the run lacks.
func (rep *report) missing() []string {
	var out []string
	for _, b := range benches() {
		if _, ok := rep.file(b.file)[b.name][b.unit]; !ok && !b.optional {
			out = append(out, fmt.Sprintf("%s %s (%s)", b.name, b.unit, b.file))
		}
	}
	return out
}

// w writes to the report.
func (rep *report) w(format string, a ...any) { fmt.Fprintf(&rep.b, format, a...) }

// get is one listed result of file ("perf" or "extender"); 0 when an
// optional one did not run.
func (rep *report) get(file, name, unit string) float64 {
	for _, b := range benches() {
		if b.file == file && b.name == name && b.unit == unit {
			return rep.file(file)[name][unit]
		}
	}
	panic(fmt.Sprintf("benchreport reads %s %s from %s, which its table (benches) does not list", name, unit, file))
}
