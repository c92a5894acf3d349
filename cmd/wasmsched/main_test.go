package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/casetable"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// run executes the CLI in-process and returns stdout and the error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func examples(name string) string {
	return filepath.Join("..", "..", "manifests", "examples", "cli", name)
}

// validated are the example policies TestValidate checks with both
// toolchains: a Filter, a Score, a PreEnqueue gate and a PreBind patcher,
// every kind of entry point validate reports on. Each example is loaded
// through the host by test/policies and the e2e suites; validating all
// twenty builds here took 139 s of make test's race stage for the same
// five checks.
var validated = []string{"team-isolation", "bin-packing", "freeze-window", "placement-recorder"}

func TestValidate(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		for _, name := range validated {
			t.Run(string(tc)+"/"+name, func(t *testing.T) {
				out, err := run(t, "validate", testguests.Policy(t, tc, name), "-o", "json")
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				var r ValidateReport
				if err := json.Unmarshal([]byte(out), &r); err != nil {
					t.Fatal(err)
				}
				if !r.Valid || r.ABIVersion != abi.Version || len(r.SHA256) != 64 || len(r.Checks) != 5 {
					t.Fatalf("report %+v", r)
				}
			})
		}
	}
	bad := map[string]string{
		"pathopen":      "outside the sandbox allow-list: wasi_snapshot_preview1.path_open",
		"abiv5":         "abi",
		"noentry":       "no entry point",
		"unknownimport": "outside the sandbox allow-list",
	}
	for fixture, want := range bad {
		t.Run("refuses "+fixture, func(t *testing.T) {
			out, err := run(t, "validate", filepath.Join("..", "..", "host", "testdata", fixture+".wasm"))
			if err == nil || !strings.Contains(out, "FAIL") || !strings.Contains(out, want) {
				t.Fatalf("err %v, output:\n%s\nwant a FAIL mentioning %q", err, out, want)
			}
		})
	}
	out, err := run(t, "validate", "main.go")
	if err == nil || !strings.Contains(out, "not a wasm module") {
		t.Fatalf("a Go file: err %v, output %s", err, out)
	}
}

// wasmsched test runs the example policies on the example nodes: every
// node's verdict and reason comes from the right policy, and scores are
// combined with the weights.
func TestTestCommand(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			out, err := run(t, "test",
				"--policy", testguests.Policy(t, tc, "team-isolation"),
				"--policy", testguests.Policy(t, tc, "maintenance-avoidance"),
				"--policy", testguests.Policy(t, tc, "bin-packing")+":2",
				"--config", "key=team", "--config", "", "--config", "cpu=1",
				"--pod", examples("pod.yaml"), "--nodes", examples("nodes.yaml"), "-o", "json")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var ex wasmpolicy.Explanation
			if err := json.Unmarshal([]byte(out), &ex); err != nil {
				t.Fatal(err)
			}
			got := map[string]wasmpolicy.NodeExplanation{}
			for _, n := range ex.Nodes {
				got[n.Node] = n
			}
			if ex.Pod != "payments/checkout" || len(got) != 5 {
				t.Fatalf("explanation %+v", ex)
			}
			// pay-1 runs a 2-CPU pod: bin-packing prefers it to the empty pay-3.
			if !got["pay-1"].Feasible || !got["pay-3"].Feasible || *got["pay-1"].Score <= *got["pay-3"].Score {
				t.Fatalf("pay-1 %+v, pay-3 %+v: want both feasible, pay-1 ahead", got["pay-1"], got["pay-3"])
			}
			for node, want := range map[string]string{
				"pay-2":    "WasmPolicy/maintenance-avoidance: node is in maintenance (maintenance.wasmsched.io/window=CHG-1042",
				"search-1": "WasmPolicy/team-isolation: team label mismatch",
				"shared-1": "WasmPolicy/team-isolation: node has no team label",
			} {
				if got[node].Feasible || !strings.Contains(got[node].Reason, want) {
					t.Errorf("%s: feasible %v, reason %q; want %q", node, got[node].Feasible, got[node].Reason, want)
				}
			}
			p := got["pay-1"].Policies
			if len(p) != 3 || p[2].Policy != "bin-packing" || p[2].RawScore == nil || p[2].Score == nil || p[0].FilterTime <= 0 || p[2].ScoreTime <= 0 {
				t.Fatalf("pay-1 policies %+v", p)
			}
			table, err := run(t, "test", "--policy", testguests.Policy(t, tc, "team-isolation"), "--pod", examples("pod.yaml"), "--nodes", examples("nodes.yaml"))
			if err != nil || !strings.Contains(table, "search-1") || !strings.Contains(table, "team label mismatch") {
				t.Fatalf("table output: %v\n%s", err, table)
			}
		})
	}
	if _, err := run(t, "test", "--policy", "missing.wasm", "--pod", examples("pod.yaml"), "--nodes", examples("nodes.yaml")); err == nil || !strings.Contains(err.Error(), "missing.wasm") {
		t.Fatalf("missing policy file: %v", err)
	}
}

func TestBench(t *testing.T) {
	out, err := run(t, "bench", testguests.Policy(t, testguests.TinyGo, "bin-packing"), "--nodes", "50", "--iterations", "2", "--config", "cpu=1", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var r BenchReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Nodes != 50 || len(r.Results) != 2 || r.Results[0].Measure != "Score per call" || r.Results[0].Calls != 100 || r.Results[0].P50 <= 0 || r.Results[0].P99 < r.Results[0].P50 {
		t.Fatalf("report %+v", r)
	}
	// bin-packing has a native twin for cpu=1,memory=1 (the default), not
	// for cpu=1: said so; with its config, its cycle is measured beside,
	// with the ratio.
	if n := r.Native; n.Plugin != "" || !strings.Contains(n.None, `the native BinPackingNative implements bin-packing with config "cpu=1,memory=1"; the policy runs with "cpu=1"`) {
		t.Fatalf("native reference for cpu=1: %+v", n)
	}
	out, err = run(t, "bench", testguests.Policy(t, testguests.TinyGo, "bin-packing"), "--nodes", "50", "--iterations", "2", "--config", "cpu=1,memory=1")
	if err != nil || !strings.Contains(out, "native BinPackingNative cycle") || !strings.Contains(out, "× the native BinPackingNative's") {
		t.Fatalf("bin-packing with its twin's config: %v\n%s", err, out)
	}
	// A policy that reads the pods on a node, declared: the real path (no
	// Error verdicts: every node has room for the team at max=100), and no
	// native twin, said so.
	capped := func(reads string) (BenchReport, string) {
		out, err := run(t, "bench", testguests.Policy(t, testguests.TinyGo, "team-pod-cap"), "--nodes", "30", "--iterations", "2", "--config", "key=team,max=100", "--reads", reads, "-o", "json")
		if err != nil {
			t.Fatalf("team-pod-cap with reads %q: %v\n%s", reads, err, out)
		}
		var r BenchReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r, out
	}
	if r, out := capped("NodePods"); r.Results[0].Errors != 0 || r.Native.Plugin != "" || !strings.Contains(r.Native.None, "team-pod-cap has no native twin") {
		t.Fatalf("team-pod-cap with NodePods declared:\n%s", out)
	}
	if r, out := capped(""); r.Results[0].Errors != r.Results[0].Calls || r.Results[0].FirstError != "declare NodePods in policies[].reads to use Node.Pods" {
		t.Fatalf("team-pod-cap without NodePods: want every team node's call an Error naming the declaration:\n%s", out)
	}
	if out, err = run(t, "bench", testguests.Policy(t, testguests.TinyGo, "team-pod-cap"), "--nodes", "3", "--iterations", "1", "--reads", "Bogus"); err == nil || !strings.Contains(err.Error(), `unknown read "Bogus": the reads are NodePods, WholeObjects, Cluster, Namespaces, Volumes`) {
		t.Fatalf("--reads Bogus: %v\n%s", err, out)
	}
}

func TestOutputFlag(t *testing.T) {
	if _, err := run(t, "validate", "x.wasm", "-o", "wide"); err == nil || !strings.Contains(err.Error(), "use table, json or yaml") {
		t.Fatalf("err = %v", err)
	}
}

// Load progress is printed once loading takes a report interval, and ends
// with the final counts; a quick load prints nothing.
func TestProgressPrinter(t *testing.T) {
	var out bytes.Buffer
	report := progressPrinter(&out)
	report(wasmpolicy.LoadProgress{Serving: 3, Elapsed: 200 * time.Millisecond})
	if out.Len() != 0 {
		t.Fatalf("a finished quick load printed %q", out.String())
	}
	report(wasmpolicy.LoadProgress{Serving: 37, Loading: 203, Elapsed: 2 * time.Second})
	report(wasmpolicy.LoadProgress{Serving: 239, Failed: 1, Elapsed: 3 * time.Second})
	want := "loading policies: 37 of 240 serving, 0 failed, 203 loading (2s)\nloading policies: 239 of 240 serving, 1 failed, 0 loading (3s)\n"
	if out.String() != want {
		t.Fatalf("printed %q, want %q", out.String(), want)
	}
}

// A policy is named after its file name made a DNS label, or by --name.
func TestPolicyName(t *testing.T) {
	for file, want := range map[string]string{
		"team_c.wasm": "team-c", "/x/Team.Isolation.wasm": "team-isolation", "_.wasm": "policy",
		"bin-packing.wasm.gz": "bin-packing-wasm", strings.Repeat("a", 70) + ".wasm": strings.Repeat("a", 63),
	} {
		if got := policyName(file); got != want {
			t.Errorf("policyName(%q) = %q, want %q", file, got, want)
		}
	}
}

// A module file whose name is no DNS label (team_c.wasm) loads under a
// name made from it, or under the name given with --name.
func TestTestCommandNames(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "team_c.wasm")
	if err := os.WriteFile(file, testguests.PolicyBytes(t, testguests.TinyGo, "team-isolation"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flags []string
		want  string
	}{{nil, "team-c"}, {[]string{"--name", "isolation"}, "isolation"}} {
		args := append([]string{"test", "--policy", file, "--config", "key=team", "--pod", examples("pod.yaml"), "--nodes", examples("nodes.yaml"), "-o", "json"}, c.flags...)
		out, err := run(t, args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var ex wasmpolicy.Explanation
		if err := json.Unmarshal([]byte(out), &ex); err != nil {
			t.Fatal(err)
		}
		if got := ex.Nodes[0].Policies[0].Policy; got != c.want {
			t.Fatalf("policy named %q, want %q", got, c.want)
		}
	}
}

// The conformance kit: team-isolation's case table passes for every build
// of it (Go SDK with both toolchains, C without a libc, hand-written WAT),
// with filter_nodes checked against filter on every case's pod and node.
func TestCasesConformance(t *testing.T) {
	cases := filepath.Join("..", "..", "plugins-wasm", "team-isolation", "testdata.json")
	modules := map[string]string{}
	for _, tc := range testguests.Toolchains {
		modules[string(tc)] = testguests.Policy(t, tc, "team-isolation")
	}
	for _, lang := range testguests.OtherLanguages {
		modules[lang] = testguests.OtherGuest(t, lang)
	}
	for build, module := range modules {
		t.Run(build, func(t *testing.T) {
			out, err := run(t, "test", "--cases", cases, module, "-o", "json")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var r casetable.Report
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			if len(r.Cases) != 5 || r.Failed() || len(r.Batches) != 1 || r.Batches[0] != "filter_nodes" {
				t.Fatalf("report %+v", r)
			}
		})
	}
	// A failing expectation is reported per case, with what was wanted.
	out, err := run(t, "test", "--cases", cases, "--config", "key=tenant", modules["c"])
	if err == nil || !strings.Contains(out, `FAIL: filter: got 0 Success, want 2 Unschedulable "team label mismatch"`) {
		t.Fatalf("with the wrong config: err %v, output:\n%s", err, out)
	}
}

// A case with several nodes reports each node's result on its own row: the
// node whose verdict misses its expectation fails, the others are ok.
func TestCasesReportPerNode(t *testing.T) {
	table := filepath.Join(t.TempDir(), "cases.json")
	const cases = `{"config": "key=team", "cases": [{"name": "three", "pod": {"Name": "p", "Labels": {"team": "a"}},
  "nodes": [{"Name": "na", "Labels": {"team": "a"}}, {"Name": "nb", "Labels": {"team": "b"}}, {"Name": "ns"}],
  "filters": {"na": {"code": 0}, "nb": {"code": 0}, "ns": {"code": 2}}}]}`
	if err := os.WriteFile(table, []byte(cases), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "test", "--cases", table, testguests.Policy(t, testguests.TinyGo, "team-isolation"))
	if err == nil {
		t.Fatalf("a wrong expectation on nb passed:\n%s", out)
	}
	results := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i, w := range f {
			if w == "na" || w == "nb" || w == "ns" {
				results[w] = strings.Join(f[i+1:], " ")
				break
			}
		}
	}
	if !strings.HasSuffix(results["na"], " ok") || !strings.HasSuffix(results["ns"], " ok") ||
		!strings.Contains(results["nb"], `FAIL: filter on nb: got 2 Unschedulable "team label mismatch", want 0 Success`) {
		t.Fatalf("per node results %q:\n%s", results, out)
	}
}

// A module whose filter_nodes disagrees with its filter fails, naming the
// node: with a case table, and in the default test path.
func TestBatchDisagreementNamesTheNode(t *testing.T) {
	dir := t.TempDir()
	module := filepath.Join("..", "..", "host", "testdata", "disagree.wasm")
	table := filepath.Join(dir, "cases.json")
	if err := os.WriteFile(table, []byte(`{"cases": [
		{"name": "first", "pod": {"Name": "a"}, "node": {"Name": "n1"}, "filter": {"code": 2, "reason": "no"}},
		{"name": "second", "pod": {"Name": "a"}, "node": {"Name": "n2"}, "filter": {"code": 2, "reason": "no"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "test", "--cases", table, module)
	if err == nil || !strings.Contains(out, `DISAGREE: pod of case "first" on node n2 of case "second": filter_nodes gives 0 Success, filter gives 2 Unschedulable "no"`) ||
		!strings.Contains(err.Error(), "2 of 2 cases passed") || !strings.Contains(err.Error(), "2 disagreements") {
		t.Fatalf("err %v, output:\n%s", err, out)
	}

	out, err = run(t, "test", "--policy", module, "--pod", examples("pod.yaml"), "--nodes", examples("nodes.yaml"))
	if err == nil || !strings.Contains(err.Error(), "batch and single calls disagree") || !strings.Contains(err.Error(), "policy disagree on node pay-2: batches give Pass, single calls give Unschedulable \"no\"") {
		t.Fatalf("default path: err %v, output:\n%s", err, out)
	}
	// The table printed is the scheduler's path: batches.
	if !strings.Contains(out, "pay-2") {
		t.Fatalf("no table:\n%s", out)
	}
}

// Pods, nodes and case tables are decoded strictly, as kubectl does: a
// misspelt field is an error naming it, not a silently different test.
func TestStrictDecoding(t *testing.T) {
	dir := t.TempDir()
	nodes := filepath.Join(dir, "nodes.yaml")
	table := filepath.Join(dir, "cases.json")
	if err := os.WriteFile(nodes, []byte("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus:\n  allocatble: {cpu: \"4\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(table, []byte(`{"cases": [{"name": "x", "pod": {"Name": "a"}, "node": {"Name": "n", "Allocatble": {}}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	module := testguests.Policy(t, testguests.TinyGo, "team-isolation")
	if _, err := run(t, "test", "--policy", module, "--pod", examples("pod.yaml"), "--nodes", nodes); err == nil || !strings.Contains(err.Error(), `unknown field "status.allocatble"`) {
		t.Errorf("nodes file: %v", err)
	}
	if _, err := run(t, "test", "--cases", table, module); err == nil || !strings.Contains(err.Error(), `unknown field "Allocatble"`) {
		t.Errorf("case table: %v", err)
	}
}

// The typed accessors for containers (own requests, ports), owner
// references, overhead, scheduling gates, nodeName and the node's
// conditions, images and addresses read the same through the host, built
// with both toolchains, as natively (the same table passes in
// plugins-wasm/testdata/fields).
func TestTypedFields(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			module, err := testguests.Build(tc, filepath.Join("plugins-wasm", "testdata", "fields"))
			if err != nil {
				t.Fatal(err)
			}
			out, err := run(t, "test", "--cases", filepath.Join("..", "..", "plugins-wasm", "testdata", "fields", "testdata.json"), module)
			if err != nil || !strings.Contains(out, "PASS: 4 of 4 cases passed") {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// A policy reads fields no typed accessor offers from the whole pod and
// node (Pod.Object, Node.Object), built with both toolchains; its case
// table gives the objects as JSON.
func TestWholeObjects(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			module, err := testguests.Build(tc, filepath.Join("plugins-wasm", "testdata", "whole-object"))
			if err != nil {
				t.Fatal(err)
			}
			out, err := run(t, "test", "--cases", filepath.Join("..", "..", "plugins-wasm", "testdata", "whole-object", "testdata.json"), module, "-o", "json")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var r casetable.Report
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			if len(r.Cases) != 3 || r.Failed() || r.Cases[0].Node != "g1" {
				t.Fatalf("report %+v", r)
			}
		})
	}
}

// A Go SDK policy whose args do not declare a read it makes fails closed:
// every verdict becomes an Error naming the read (never a pod cap that
// counts no pods), with both toolchains. The unlabelled pod reads no pods
// and passes.
func TestUndeclaredReadFailsClosed(t *testing.T) {
	cases := filepath.Join("..", "..", "plugins-wasm", "team-pod-cap", "testdata.json")
	for _, tc := range testguests.Toolchains {
		out, err := run(t, "test", "--cases", cases, "--reads", "", testguests.Policy(t, tc, "team-pod-cap"))
		if err == nil || !strings.Contains(out, `1 Error "declare NodePods in policies[].reads to use Node.Pods"`) || !strings.Contains(err.Error(), "1 of 5 cases passed") {
			t.Fatalf("%s: err %v, output:\n%s", tc, err, out)
		}
	}
	// The same for the cluster view: zone-spread without reads: [Cluster]
	// fails every labelled pod's node with the Error, never counts nothing.
	cases = filepath.Join("..", "..", "plugins-wasm", "zone-spread", "testdata.json")
	for _, tc := range testguests.Toolchains {
		out, err := run(t, "test", "--cases", cases, "--reads", "", testguests.Policy(t, tc, "zone-spread"))
		if err == nil || !strings.Contains(out, `1 Error "declare Cluster in policies[].reads to use Cluster.CountPods"`) || !strings.Contains(err.Error(), "1 of 11 cases passed") {
			t.Fatalf("%s: err %v, output:\n%s", tc, err, out)
		}
	}
}

// A policy that rejects a node when a read comes back empty (here: no
// kubelet version in Node.Object) rejects for its own reasons when the read
// is declared; undeclared, every node is the read's Error naming the
// declaration, and the policy's own rejection never replaces it: a verdict
// reached without the data does not count. Both toolchains.
func TestUndeclaredErrorOutlivesTheRejection(t *testing.T) {
	cases := filepath.Join("..", "..", "plugins-wasm", "testdata", "object-floor", "testdata.json")
	for _, tc := range testguests.Toolchains {
		module, err := testguests.Build(tc, filepath.Join("plugins-wasm", "testdata", "object-floor"))
		if err != nil {
			t.Fatal(err)
		}
		if out, err := run(t, "test", "--cases", cases, module); err != nil || !strings.Contains(out, "PASS: 4 of 4 cases passed") {
			t.Fatalf("%s, declared: %v\n%s", tc, err, out)
		}
		out, _ := run(t, "test", "--cases", cases, "--reads", "", module, "-o", "json")
		var r casetable.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, c := range r.Cases {
			if c.Filter != `1 Error "declare WholeObjects in policies[].reads to use Node.Object"` {
				t.Errorf("%s, undeclared, case %q: filter %s, want the read's Error", tc, c.Name, c.Filter)
			}
		}
		if len(r.Cases) != 4 || len(r.Disagreements) != 0 {
			t.Fatalf("%s: %d cases, batch and single calls disagree: %v", tc, len(r.Cases), r.Disagreements)
		}
	}
}

// An unknown read is refused, naming the valid ones, whether it comes from
// --reads or from a case table's "reads", before any case runs.
func TestUnknownReadsRefused(t *testing.T) {
	const want = `unknown read "%s": the reads are NodePods, WholeObjects, Cluster, Namespaces, Volumes`
	cases := filepath.Join("..", "..", "plugins-wasm", "team-pod-cap", "testdata.json")
	policy := testguests.Policy(t, testguests.TinyGo, "team-pod-cap")
	if out, err := run(t, "test", "--cases", cases, "--reads", "NodePods,Bogus", policy); err == nil || !strings.Contains(err.Error(), fmt.Sprintf(want, "Bogus")) {
		t.Errorf("--reads Bogus: err %v, output:\n%s", err, out)
	}
	b, err := os.ReadFile(cases)
	if err != nil {
		t.Fatal(err)
	}
	var table map[string]any
	if err := json.Unmarshal(b, &table); err != nil {
		t.Fatal(err)
	}
	table["reads"] = []string{"PersistentVolumeClaims"}
	bad := filepath.Join(t.TempDir(), "cases.json")
	if b, err = json.Marshal(table); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "test", "--cases", bad, policy); err == nil || !strings.Contains(err.Error(), fmt.Sprintf(want, "PersistentVolumeClaims")) {
		t.Errorf("a table reading PersistentVolumeClaims: err %v, output:\n%s", err, out)
	}
	if out, err := run(t, "test", "--policy", policy, "--reads", "Cluster,Cluster", "--pod", examples("pod.yaml"), "--nodes", examples("nodes.yaml")); err == nil || !strings.Contains(err.Error(), `policies[0].reads[1]: Duplicate value: "Cluster"`) {
		t.Errorf("--reads Cluster,Cluster: err %v, output:\n%s", err, out)
	}
}

// `wasmsched test --clock` sets what a policy's wall clock reads, with both
// toolchains; without it the guest reads the deterministic clock, which
// starts at 2022-01-01T00:00:00Z (docs/abi.md §1). A bad --clock names the
// flag and the format.
func TestClockFlag(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			module, err := testguests.Build(tc, filepath.Join("plugins-wasm", "testdata", "clock"))
			if err != nil {
				t.Fatal(err)
			}
			for clock, want := range map[string]string{"2026-11-23T22:30:00Z": "now=2026-11-23T22:30:00Z", "2026-11-24T01:00:00+02:00": "now=2026-11-23T23:00:00Z", "": "now=2022-01-01T00:00:00Z"} {
				args := []string{"test", "--policy", module, "--pod", examples("pod.yaml"), "--nodes", examples("nodes.yaml"), "-o", "json"}
				if clock != "" {
					args = append(args, "--clock", clock)
				}
				out, err := run(t, args...)
				if err != nil {
					t.Fatalf("--clock %q: %v\n%s", clock, err, out)
				}
				var ex wasmpolicy.Explanation
				if err := json.Unmarshal([]byte(out), &ex); err != nil {
					t.Fatal(err)
				}
				for _, n := range ex.Nodes {
					if n.Feasible || !strings.HasSuffix(n.Reason, want) {
						t.Fatalf("--clock %q: node %s: %+v, want a rejection ending %q", clock, n.Node, n, want)
					}
				}
			}
		})
	}
	_, err := run(t, "test", "--policy", testguests.Policy(t, testguests.TinyGo, "team-isolation"), "--pod", examples("pod.yaml"), "--nodes", examples("nodes.yaml"), "--clock", "tomorrow")
	if err == nil || !strings.Contains(err.Error(), `--clock "tomorrow": want an RFC 3339 time`) {
		t.Fatalf("bad --clock: %v", err)
	}
}

// Every repository path a command's help names (docs/abi.md,
// plugins-wasm/…) exists, so an author who follows the help finds it.
func TestHelpPathsExist(t *testing.T) {
	path := regexp.MustCompile(`\b(?:docs|plugins-wasm|manifests|guest-sdk|policytest|hack)/[A-Za-z0-9_./-]*[A-Za-z0-9_]`)
	var walk func(c *cobra.Command)
	seen := 0
	walk = func(c *cobra.Command) {
		text := c.Use + "\n" + c.Short + "\n" + c.Long + "\n" + c.Example + "\n" + c.Flags().FlagUsages()
		for _, p := range path.FindAllString(text, -1) {
			seen++
			if _, err := os.Stat(filepath.Join("..", "..", p)); err != nil {
				t.Errorf("%s --help names %s, which does not exist", c.CommandPath(), p)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
	if seen == 0 {
		t.Fatal("no help text names a path: the pattern is wrong")
	}
}
