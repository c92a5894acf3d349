package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/apis/config/validation"
	"github.com/wasmsched/wasmsched/pkg/casetable"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

type testOptions struct {
	policies []string
	configs  []string
	names    []string
	reads    []string
	objects  []string
	clock    string
	pod      string
	nodes    string
	cases    string
	single   bool
	timeout  time.Duration
}

func newTestCommand(g *globalOptions) *cobra.Command {
	o := &testOptions{}
	cmd := &cobra.Command{
		Use: `test --cases CASES.json MODULE.wasm
  wasmsched test --policy POLICY.wasm[:WEIGHT] --pod POD.yaml (--nodes NODES.yaml | --kubeconfig FILE)`,
		Short: "Run a policy's case table against its module, or run policies on a pod against nodes through the scheduler's own plugin code",
		Long: `With --cases, runs a case table (the testdata.json format, docs/abi.md §8) against
one compiled module through the scheduler's host: every case's expected
filter verdict, reason and score must hold. A module that exports
filter_nodes or score_nodes is also run through them, with every case's pod
on every case's node, and each batch verdict must equal the single call's:
a difference is reported with the pod's case and the node. The module runs
with the table's config (--config overrides it) and is named after its file
(--name overrides it). Exits 1 when a case fails.

Without --cases, runs one or more policies (repeat --policy; FILE:WEIGHT sets
a weight, --config gives each policy its config string, in the same order)
on the pod against every node, and prints each node's verdict and reason, raw
and normalized scores, and the time each call took. Policies are called the
way the scheduler calls them, in batches of 32 nodes where the module has
batch forms (a batch's time is shown on its first node); --single-calls
gives every node its own call. Where a module has batch forms, the other
path runs too, and any node where the two disagree is an error.

Nodes come from --nodes (YAML or JSON: Nodes and Pods, several documents or
a List; pods with spec.nodeName are placed on their node) or, with
--kubeconfig and no --nodes, from a read-only snapshot of the cluster.
--objects declares a policy's granted object reads (policies[].objects);
their objects are the --nodes file's documents of those kinds, or the
cluster's with --kubeconfig.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.cases != "" {
				if len(args) != 1 || len(o.policies) > 0 || o.pod != "" || o.nodes != "" {
					return fmt.Errorf("--cases takes the module as its one argument and no --policy, --pod or --nodes: wasmsched test --cases %s MODULE.wasm", o.cases)
				}
				if len(o.objects) > 0 {
					return fmt.Errorf("--cases: a case table declares its object reads itself (objects) and gives each case its objects: leave out --objects")
				}
				return o.runCases(cmd, g, args[0])
			}
			if len(args) > 0 {
				return fmt.Errorf("unexpected argument %q: give modules with --policy, or a case table with --cases", args[0])
			}
			if len(o.policies) == 0 || o.pod == "" {
				return fmt.Errorf("give --cases CASES.json MODULE.wasm, or --policy and --pod")
			}
			return o.run(cmd, g)
		},
	}
	cmd.Flags().StringVar(&o.cases, "cases", "", "a case table (testdata.json format) to run against the module given as argument")
	cmd.Flags().StringArrayVar(&o.policies, "policy", nil, "policy module, FILE or FILE:WEIGHT (repeatable)")
	cmd.Flags().StringArrayVar(&o.configs, "config", nil, "config string for the policy at the same position (repeatable); with --cases, replaces the table's config")
	cmd.Flags().StringArrayVar(&o.names, "name", nil, "name of the policy at the same position (repeatable; default: from its file name)")
	cmd.Flags().StringArrayVar(&o.reads, "reads", nil, "declared reads of the policy at the same position, comma-separated (NodePods, WholeObjects, Cluster, Namespaces, Volumes, Devices), as policies[].reads; with --cases, replaces the table's reads")
	cmd.Flags().StringArrayVar(&o.objects, "objects", nil, "granted object reads of the policy at the same position, as policies[].objects: APIVERSION/KIND=FIELD,FIELD, several separated by ';' (coordination.k8s.io/v1/Lease=spec.renewTime); the objects come from --nodes (documents of those kinds) or, with --kubeconfig, from the cluster")
	cmd.Flags().StringVar(&o.pod, "pod", "", "the pod to place (YAML or JSON)")
	cmd.Flags().StringVar(&o.nodes, "nodes", "", "nodes, and pods running on them (YAML or JSON)")
	cmd.Flags().BoolVar(&o.single, "single-calls", false, "give every node its own guest call instead of the scheduler's batches")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 100*time.Millisecond, "per-call timeout, as in the policy args")
	cmd.Flags().StringVar(&o.clock, "clock", "", "RFC 3339 time the policies' wall clock reads (default: the deterministic clock, 2022-01-01T00:00:00Z advancing 1 ms per read; a policy with realClock reads the real time)")
	return cmd
}

func (o *testOptions) run(cmd *cobra.Command, g *globalOptions) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if len(o.configs) > len(o.policies) {
		return fmt.Errorf("%d --config flags for %d --policy flags: give at most one config per policy, in the same order", len(o.configs), len(o.policies))
	}
	if len(o.names) > len(o.policies) {
		return fmt.Errorf("%d --name flags for %d --policy flags: give at most one name per policy, in the same order", len(o.names), len(o.policies))
	}
	if len(o.reads) > len(o.policies) {
		return fmt.Errorf("%d --reads flags for %d --policy flags: give at most one per policy, in the same order", len(o.reads), len(o.policies))
	}
	if len(o.objects) > len(o.policies) {
		return fmt.Errorf("%d --objects flags for %d --policy flags: give at most one per policy, in the same order", len(o.objects), len(o.policies))
	}
	// One instance per policy: calls are sequential, and a pool would spend
	// the first calls creating instances.
	args := &config.WasmPolicyArgs{MaxInstancesPerPolicy: 1, FilePollInterval: time.Hour, CompilationCacheDir: cacheDir()}
	seen := map[string]bool{}
	for i, spec := range o.policies {
		file, weight := spec, int32(1)
		if k := strings.LastIndex(spec, ":"); k > 0 {
			if w, err := strconv.Atoi(spec[k+1:]); err == nil {
				file, weight = spec[:k], int32(w)
			}
		}
		abs, err := filepath.Abs(file)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("--policy %s: %w", spec, err)
		}
		name := policyName(file)
		if i < len(o.names) {
			name = o.names[i]
		}
		for n, base := 2, name; seen[name]; n++ {
			name = fmt.Sprintf("%s-%d", base, n)
		}
		seen[name] = true
		p := configv1.DefaultPolicy(name, config.Source{File: abs})
		p.Weight, p.Timeout = weight, o.timeout
		if i < len(o.configs) {
			p.Config = o.configs[i]
		}
		if i < len(o.reads) {
			p.Reads = splitList(o.reads[i])
		}
		if i < len(o.objects) {
			if p.Objects, err = parseObjectReads(o.objects[i]); err != nil {
				return err
			}
		}
		args.Policies = append(args.Policies, p)
	}
	// Validated before anything is read: the grants here name each kind's
	// resource after the kind; with a cluster, discovery names it below.
	grants, err := testGrants(args.Policies, nil)
	if err != nil {
		return err
	}
	args.Objects = grants
	if errs := validation.ValidateWasmPolicyArgs(nil, args); len(errs) > 0 {
		return errs.ToAggregate()
	}
	pod, err := readPod(o.pod)
	if err != nil {
		return err
	}
	var nodes []*v1.Node
	var pods []*v1.Pod
	var others []*unstructured.Unstructured
	var handle wasmpolicyHandle
	var rc *rest.Config
	switch {
	case o.nodes != "":
		if nodes, pods, others, err = readObjectsAndOthers(o.nodes); err == nil {
			err = undeclaredKinds(o.nodes, others, args.Policies)
		}
	case g.kubeconfig != "" || os.Getenv("KUBECONFIG") != "":
		if rc, err = restConfigFor(g); err != nil {
			return err
		}
		client, cerr := kubernetes.NewForConfig(rc)
		if cerr != nil {
			return cerr
		}
		// Granted kinds are watched in the cluster, as the scheduler
		// watches them, read-only.
		handle = wasmpolicy.NewClientHandleWithConfig(client, rc, nil)
		nodes, pods, err = snapshot(ctx, client)
	default:
		return fmt.Errorf("give the nodes: --nodes FILE, or --kubeconfig FILE to read them from a cluster")
	}
	if err != nil {
		return err
	}
	if rc != nil && len(args.Objects) > 0 {
		if args.Objects, err = testGrants(args.Policies, rc); err != nil {
			return err
		}
		if errs := validation.ValidateWasmPolicyArgs(nil, args); len(errs) > 0 {
			return errs.ToAggregate()
		}
	}
	if len(nodes) == 0 {
		return fmt.Errorf("no nodes to test against")
	}
	clock, err := o.parseClock()
	if err != nil {
		return err
	}
	opts := []wasmpolicy.Option{wasmpolicy.WithClock(clock)}
	if o.nodes != "" {
		readers, err := fileObjectReaders(args.Policies, others)
		if err != nil {
			return err
		}
		opts = append(opts, wasmpolicy.WithObjectReaders(readers))
		dra, err := fileDRA(others)
		if err != nil {
			return fmt.Errorf("%s: %w", o.nodes, err)
		}
		opts = append(opts, wasmpolicy.WithDRA(dra))
	} else if handle != nil {
		opts = append(opts, wasmpolicy.WithReadOnlyObjects())
	}
	plugin, err := loadPlugin(ctx, args, handle, opts...)
	if err != nil {
		return err
	}
	defer plugin.Close()
	infos := intree.NodeInfos(nodes, pods)
	ex := plugin.ExplainWith(ctx, pod, infos, wasmpolicy.ExplainOptions{SingleCalls: o.single})
	var disagree []string
	if plugin.HasBatchForms() {
		other := plugin.ExplainWith(ctx, pod, infos, wasmpolicy.ExplainOptions{SingleCalls: !o.single})
		disagree = wasmpolicy.Disagreements(ex, other)
	}
	if err := print(cmd.OutOrStdout(), g.output, ex, func(tw *tabwriter.Writer) { explanationTable(tw, ex) }); err != nil {
		return err
	}
	if len(disagree) > 0 {
		return fmt.Errorf("batch and single calls disagree (docs/abi.md §3.1 requires the same verdicts):\n  %s", strings.Join(disagree, "\n  "))
	}
	return nil
}

// runCases runs a case table against one module (the conformance kit).
func (o *testOptions) runCases(cmd *cobra.Command, g *globalOptions, module string) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if len(o.configs) > 1 || len(o.names) > 1 || len(o.reads) > 1 {
		return fmt.Errorf("--cases tests one module: give at most one --config, --name and --reads")
	}
	table, err := casetest.Load(o.cases)
	if err != nil {
		return fmt.Errorf("--cases: %w", err)
	}
	if len(table.Cases) == 0 {
		return fmt.Errorf("--cases %s: the table has no cases", o.cases)
	}
	src, err := os.ReadFile(module)
	if err != nil {
		return err
	}
	name := policyName(module)
	if len(o.names) == 1 {
		name = o.names[0]
	}
	if len(o.configs) == 1 {
		table.Config = o.configs[0]
	}
	engine, err := host.NewEngine(host.EngineOptions{CacheDir: cacheDir()})
	if err != nil {
		return err
	}
	defer engine.Close()
	reads := table.Reads
	if len(o.reads) == 1 {
		// Non-nil even when empty: --reads "" declares no reads.
		reads = append([]string{}, splitList(o.reads[0])...)
	}
	clock, err := o.parseClock()
	if err != nil {
		return err
	}
	r, err := casetable.RunModule(ctx, engine, host.PolicySpec{Name: name, Timeout: o.timeout, MaxInstances: 1, Reads: reads, Clock: clock}, src, table)
	if err != nil {
		return fmt.Errorf("policy %q (%s): %w", name, module, err)
	}
	if err := print(cmd.OutOrStdout(), g.output, r, func(tw *tabwriter.Writer) { caseTable(tw, r) }); err != nil {
		return err
	}
	if r.Failed() {
		cmd.SilenceUsage = true
		return fmt.Errorf("policy %q (%s) fails the case table %s: %s", name, module, o.cases, r.Summary())
	}
	if g.output == "" || g.output == "table" {
		fmt.Fprintf(cmd.OutOrStdout(), "PASS: %s\n", r.Summary())
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// policyName makes a policy name (a DNS label) from a module's file name:
// team_c.wasm is policy team-c.
func policyName(file string) string {
	base := strings.ToLower(strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)))
	b := []byte(base)
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '-'
		}
	}
	name := strings.Trim(string(b), "-")
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	if name == "" {
		return "policy"
	}
	return name
}

// loadPlugin builds the WasmPolicy plugin and checks that every policy
// loaded: a tool must not silently run without one.
// parseClock reads --clock: zero when unset.
func (o *testOptions) parseClock() (time.Time, error) {
	if o.clock == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, o.clock)
	if err != nil {
		return time.Time{}, fmt.Errorf("--clock %q: want an RFC 3339 time such as 2026-11-23T22:30:00Z: %w", o.clock, err)
	}
	return t, nil
}

func loadPlugin(ctx context.Context, args *config.WasmPolicyArgs, h wasmpolicyHandle, opts ...wasmpolicy.Option) (*wasmpolicy.WasmPolicy, error) {
	// Wait for slow first compiles (a Go guest with a cold cache) instead of
	// the scheduler's startup bound; a failing module still returns at once.
	opts = append([]wasmpolicy.Option{wasmpolicy.WithInitialLoadTimeout(5 * time.Minute), wasmpolicy.WithLoadProgress(time.Second, progressPrinter(os.Stderr))}, opts...)
	p, err := wasmpolicy.NewWithArgs(ctx, args, h, opts...)
	if err != nil {
		return nil, err
	}
	if missing := p.Unloaded(); len(missing) > 0 {
		_ = p.Close()
		return nil, fmt.Errorf("policies without a loaded module: %s", strings.Join(missing, "; "))
	}
	return p, nil
}

// progressPrinter prints the policies' load progress to w once loading has
// taken a second (a few policies from a warm cache print nothing).
func progressPrinter(w io.Writer) func(wasmpolicy.LoadProgress) {
	printed := false
	return func(lp wasmpolicy.LoadProgress) {
		if lp.Loading == 0 && !printed {
			return
		}
		printed = true
		fmt.Fprintf(w, "loading policies: %d of %d serving, %d failed, %d loading (%s)\n", lp.Serving, lp.Total(), lp.Failed, lp.Loading, lp.Elapsed.Round(100*time.Millisecond))
	}
}

func explanationTable(tw *tabwriter.Writer, ex *wasmpolicy.Explanation) {
	row(tw, "NODE", "FEASIBLE", "SCORE", "POLICY", "VERDICT", "RAW", "NORMALIZED", "FILTER", "SCORE-TIME", "REASON")
	for _, n := range ex.Nodes {
		for i, p := range n.Policies {
			node, feasible, score := "", "", ""
			if i == 0 {
				node, feasible, score = n.Node, strconv.FormatBool(n.Feasible), optInt(n.Score)
			}
			policy := p.Policy
			if p.Mode == string(config.ModeAudit) {
				policy += " (audit)"
			}
			row(tw, node, feasible, score, policy, p.Verdict, optInt(p.RawScore), optInt(p.Score), dur(p.FilterTime), dur(p.ScoreTime), p.Reason)
		}
	}
	tw.Flush()
	for _, s := range ex.Policies {
		fmt.Fprintf(tw, "\nWasmPolicy/%s: cycle budget %s of %s used; circuit breaker %s (%d failed cycles); %d pod inputs quarantined", s.Policy, dur(s.BudgetSpent), s.Budget, s.Breaker, s.ConsecutiveFailures, s.Quarantined)
		if s.Stopped != "" {
			fmt.Fprintf(tw, "\n  stopped in this cycle: %s", s.Stopped)
		}
	}
	if len(ex.Policies) > 0 {
		fmt.Fprintln(tw)
	}
	if len(ex.OutOfScope) > 0 {
		fmt.Fprintf(tw, "\nNot applied to this pod (outside their scope): %s\n", strings.Join(ex.OutOfScope, ", "))
	}
	for _, g := range ex.Gates {
		fmt.Fprintf(tw, "\nPreEnqueue WasmPolicy/%s%s: %s", g.Policy, auditNote(g.Mode), g.Verdict)
		if g.Reason != "" {
			fmt.Fprintf(tw, ": %s", g.Reason)
		}
		if g.Recheck != "" {
			fmt.Fprintf(tw, " (checked again %s)", g.Recheck)
		}
	}
	if len(ex.Gates) > 0 {
		fmt.Fprintln(tw)
	}
	if ex.Error != "" {
		fmt.Fprintf(tw, "\nThe cycle failed: %s\n", ex.Error)
	}
	for _, m := range ex.PostFilter {
		fmt.Fprintf(tw, "\nPostFilter WasmPolicy/%s%s: %s", m.Policy, auditNote(m.Mode), m.Verdict)
		if m.Reason != "" {
			fmt.Fprintf(tw, ": %s", m.Reason)
		}
	}
	if len(ex.PostFilter) > 0 {
		fmt.Fprintln(tw)
	}
	switch len(ex.Best) {
	case 0:
	case 1:
		fmt.Fprintf(tw, "\nBest node: %s\n", ex.Best[0])
	default:
		fmt.Fprintf(tw, "\nBest nodes (tied; the scheduler picks one at random): %s\n", strings.Join(ex.Best, ", "))
	}
	for _, np := range ex.PreBind {
		for _, b := range np.Policies {
			fmt.Fprintf(tw, "\nPreBind on %s, WasmPolicy/%s%s: %s", np.Node, b.Policy, auditNote(b.Mode), b.Verdict)
			if b.Reason != "" {
				fmt.Fprintf(tw, ": %s", b.Reason)
			}
			if p := casetable.PatchString(b.Labels, b.Annotations); p != "" {
				fmt.Fprintf(tw, "; would write %s", p)
			}
			if b.Refused != "" {
				fmt.Fprintf(tw, "; refused: %s", b.Refused)
			}
		}
	}
	if len(ex.PreBind) > 0 {
		fmt.Fprintln(tw)
	}
}

func auditNote(mode string) string {
	if mode == string(config.ModeAudit) {
		return " (audit)"
	}
	return ""
}

// cacheDir is where compiled modules are cached between runs.
func cacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "wasmsched")
	}
	return ""
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
