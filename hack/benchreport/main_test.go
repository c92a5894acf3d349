package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeRun writes a run's perf.txt and extender.txt with every listed
// benchmark but those in skip, each unit a distinct value, and a
// docs/performance.md with the markers, under a new root.
func writeRun(t *testing.T, skip map[string]bool) string {
	t.Helper()
	root := t.TempDir()
	lines := map[string]map[string][]string{"perf": {}, "extender": {}}
	var order []string
	for i, b := range benches() {
		if skip[b.name] {
			continue
		}
		if _, ok := lines[b.file][b.name]; !ok {
			order = append(order, b.file+" "+b.name)
		}
		lines[b.file][b.name] = append(lines[b.file][b.name], fmt.Sprintf("%d %s", 100+i, b.unit))
	}
	files := map[string]*strings.Builder{"perf": {}, "extender": {}}
	for _, f := range files {
		f.WriteString("goos: linux\ncpu: Test CPU\n")
	}
	for _, k := range order {
		file, name, _ := strings.Cut(k, " ")
		fmt.Fprintf(files[file], "%s-2 \t 1000\t %s\n", name, strings.Join(lines[file][name], "\t "))
	}
	dir := filepath.Join(root, "_output/bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, f := range files {
		if err := os.WriteFile(filepath.Join(dir, name+".txt"), []byte(f.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeRolloutRun(t, filepath.Join(dir, "rollout"))
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "docs/performance.md"), []byte("# Performance\n\n"+beginMarker+"\nold\n"+endMarker+"\n\nafter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// The report reads every benchmark of its table, writes each into the
// document, and fails naming a required benchmark that is missing.
func TestReportNamesMissingBenchmarks(t *testing.T) {
	root := writeRun(t, nil)
	if err := run(root); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs/performance.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "Test CPU") || strings.Contains(string(doc), "\nold\n") || !strings.HasSuffix(string(doc), "after\n") {
		t.Errorf("document:\n%s", doc)
	}
	for _, svg := range []string{"per-node.svg", "cycle.svg"} {
		if _, err := os.Stat(filepath.Join(root, "docs/perf", svg)); err != nil {
			t.Error(err)
		}
	}

	root = writeRun(t, map[string]bool{"BenchmarkCycle/nodes=1000/wasm-tinygo": true, "BenchmarkCycle/extender/nodeCacheCapable=true/nodes=100": true})
	err = run(root)
	if err == nil || !strings.Contains(err.Error(), "BenchmarkCycle/nodes=1000/wasm-tinygo ns/op (perf)") || !strings.Contains(err.Error(), "nodeCacheCapable=true/nodes=100 ns/op (extender)") {
		t.Errorf("a run without two benchmarks: %v", err)
	}
	// An optional variant may be missing.
	var optional string
	for _, b := range benches() {
		if b.optional {
			optional = b.name
			break
		}
	}
	if err := run(writeRun(t, map[string]bool{optional: true})); err != nil {
		t.Errorf("a run without the optional %s: %v", optional, err)
	}
}

// The read table takes each read's median over the runs, subtracts the
// Filter alone, names each read's declaration, and needs the baseline.
func TestReadsSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reads.txt")
	out := "cpu: Test CPU  \n" +
		"BenchmarkReadCost/none-2 \t 6400\t 100.0 ns/op\nBenchmarkReadCost/none-2 \t 6400\t 300.0 ns/op\nBenchmarkReadCost/none-2 \t 6400\t 200.0 ns/op\n" +
		"BenchmarkReadCost/Node.Pods-2 \t 6400\t 50200 ns/op\nBenchmarkReadCost/Node.Label-2 \t 6400\t 203 ns/op\n" +
		"BenchmarkReadCost/Node.CountPodsWithLabel-2 \t 6400\t 1700 ns/op\n"
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	costs, cpu, err := parseReadCost(path)
	if err != nil || cpu != "Test CPU" || costs["none"] != 200 {
		t.Fatalf("parsed %v %q %v", costs, cpu, err)
	}
	s, err := readsSection(costs, cpu)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| `Node.Label` | — | per call | < 10 ns |", "| `Node.CountPodsWithLabel` | `NodePods` |", "| `Node.Pods` | `NodePods` | once per node generation | 50.00 µs |"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	delete(costs, "none")
	if _, err := readsSection(costs, cpu); err == nil {
		t.Error("no baseline: want an error")
	}
}

// A benchmark that ran several times (make bench repeats the per-node and
// cycle benchmarks whose single runs are noisy) is each unit's median over
// its lines, wherever the lines are in the file.
func TestRepeatedBenchmarksTakeTheMedian(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.txt")
	lines := "cpu: test\n" +
		"BenchmarkCycle/nodes=1000/native-2   \t 4000\t 300000 ns/op\t 10 B/op\n" +
		"BenchmarkCycle/nodes=1000/wasm-tinygo-2 \t 4000\t 330000 ns/op\n" +
		"PASS\n" +
		"BenchmarkCycle/nodes=1000/native-2   \t 4000\t 250000 ns/op\t 30 B/op\n" +
		"BenchmarkCycle/nodes=1000/native-2   \t 4000\t 260000 ns/op\t 20 B/op\n"
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	got, cpu, err := parseBench(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := got["BenchmarkCycle/nodes=1000/native"]; n["ns/op"] != 260000 || n["B/op"] != 20 || cpu != "test" {
		t.Errorf("native: %v (cpu %q), want the medians 260000 ns/op and 20 B/op", n, cpu)
	}
	if w := got["BenchmarkCycle/nodes=1000/wasm-tinygo"]; w["ns/op"] != 330000 {
		t.Errorf("a single run: %v", w)
	}
}

// The 500-node pairs are read per pair directory: the pod watch's rates
// from the runs' placement records and scheduler_perf's throughput from
// their data items; a pair missing a run, or whose rate could not be
// measured, is left out.
func TestWatchPairRatios(t *testing.T) {
	dir := t.TempDir()
	write := func(pair, file, body string) {
		t.Helper()
		d := filepath.Join(dir, pair)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(pair, profile string, watch, tput float64, rateErr string) {
		write(pair, "placement-"+profile+".json", fmt.Sprintf(`{"name":%q,"pods":1500,"podsPerSecond":%g,"rateError":%q}`, profile+"/500Nodes", watch, rateErr))
		write(pair, "BenchmarkPerfScheduling_"+profile+".json", fmt.Sprintf(`{"dataItems":[{"labels":{"Name":"BenchmarkPerfScheduling/%s/500Nodes/namespace-2","Metric":"SchedulingThroughput"},"data":{"Average":%g}}]}`, profile, tput))
	}
	run("1", "Native", 500, 400, "")
	run("1", "WasmTinyGo", 450, 440, "")
	run("2", "WasmTinyGo", 480, 300, "")
	run("2", "Native", 400, 600, "")
	run("10", "Native", 500, 500, "")
	run("10", "WasmTinyGo", 0, 500, "measuring pods/s: too few pods")
	run("3", "Native", 500, 500, "") // its WasmTinyGo run failed
	watch, tput := watchPairRatios(dir, "WasmTinyGo/500Nodes", "Native/500Nodes")
	if fmt.Sprint(watch) != "[0.9 1.2]" || fmt.Sprint(tput) != "[1.1 0.5]" {
		t.Errorf("watch %v, throughput %v; want [0.9 1.2] and [1.1 0.5]", watch, tput)
	}
}

// writeRolloutRun writes what make bench-rollout leaves in dir.
func writeRolloutRun(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	time := "\tUser time (seconds): 17.40\n\tSystem time (seconds): 0.91\n\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:11.90\n\tMaximum resident set size (kbytes): 785340\n"
	if err := os.WriteFile(filepath.Join(dir, "time.txt"), []byte(time), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), []byte(`{"durationSeconds": 9.66, "snapshot": {"nodes": 5000, "runningPods": 50000}, "summary": {"movedPlacements": 60}}`), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadRollout(t *testing.T) {
	dir := t.TempDir()
	writeRolloutRun(t, dir)
	r, err := readRollout(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.wallSeconds != 71.9 || r.userSeconds != 17.4 || r.sysSeconds != 0.91 || int(r.peakMiB) != 766 ||
		r.report.DurationSeconds != 9.66 || r.report.Snapshot.Nodes != 5000 || r.report.Snapshot.RunningPods != 50000 || r.report.Summary.MovedPlacements != 60 {
		t.Errorf("read %+v", r)
	}
	if err := os.WriteFile(filepath.Join(dir, "time.txt"), []byte("nothing"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readRollout(dir); err == nil {
		t.Error("a time.txt without figures was read")
	}
}
