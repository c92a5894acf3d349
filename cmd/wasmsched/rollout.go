package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/apis/config/validation"
	"github.com/wasmsched/wasmsched/pkg/policyobjects"
	"github.com/wasmsched/wasmsched/pkg/rollout"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// exitCodeGate is the exit code of a report whose --fail-on gate holds;
// 1 stays an error (the report could not be made).
const exitCodeGate = 3

// gateError is a report that failed a --fail-on gate.
type gateError struct{ msgs []string }

func (e *gateError) Error() string { return strings.Join(e.msgs, "; ") }

type rolloutOptions struct {
	schedulerConfig string
	profile         string
	policy          string
	module          string
	config          string
	object          string
	snapshot        string
	teamLabel       string
	sample          int
	placementTime   time.Duration
	failOn          []string
}

func newRolloutCommand(g *globalOptions) *cobra.Command {
	o := &rolloutOptions{}
	cmd := &cobra.Command{
		Use:   "rollout-report --scheduler-config CONFIG.yaml --policy NAME (--module NEW.wasm | --config STRING | --object POLICY.yaml)",
		Short: "Before a policy version goes live: what it would reject, unblock and move in the cluster as it is now",
		Long: `Takes one consistent snapshot of the cluster's nodes, pods and namespaces
(read-only), loads the policy set of the scheduler's WasmPolicy pluginConfig
(and its policy objects, when policyObjects.enabled), builds the candidate set
(the same, with --policy's module and/or config replaced, or with the policy
of a SchedulingPolicy or ClusterSchedulingPolicy file, --object, in its place),
and runs the
profile's framework (the scheduler's in-tree plugins and WasmPolicy) with
each set to report:

  - running pods the candidate rejects on the node they run on,
    grouped by namespace, team (--team-label) and reason;
  - pending pods whose verdicts change: newly schedulable, newly stranded,
    more or fewer feasible nodes, other reasons;
  - where both sets would place the --sample most recently bound pods,
    and how far the score of the current choice moved;
  - the policy's guest time per node in each version.

--scheduler-config configmap:NAMESPACE/NAME[/KEY] reads the config from the
cluster's ConfigMap (the key config.yaml, or its only key), as the
manifests and the Helm chart deploy it. --snapshot reads nodes, pods and
namespaces from a file instead of a cluster (policies must then take their
modules from files).
--fail-on COUNT>N gates a pipeline: the report is printed, and the exit
code is 3 when a gate holds (1 when the report could not be made). The JSON
(-o json) is documented in docs/rollout.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, g)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.schedulerConfig, "scheduler-config", "", "the scheduler's KubeSchedulerConfiguration: a file, or configmap:NAMESPACE/NAME[/KEY] in the cluster")
	f.StringVar(&o.profile, "profile", "", "schedulerName of the profile (default: the first profile with WasmPolicy)")
	f.StringVar(&o.policy, "policy", "", "the policy the candidate replaces: its name in the args, or a policy object's (name, or namespace/name)")
	f.StringVar(&o.module, "module", "", "the candidate's module (.wasm); default: the current module")
	f.StringVar(&o.config, "config", "", "the candidate's config string; default: the current config")
	f.StringVar(&o.object, "object", "", "the candidate as a SchedulingPolicy or ClusterSchedulingPolicy file: its whole spec replaces the policy of its name (--policy defaults to it)")
	f.StringVar(&o.snapshot, "snapshot", "", "read nodes, pods and namespaces from this YAML or JSON file instead of the cluster")
	f.StringVar(&o.teamLabel, "team-label", "team", "the pod label that groups rejected pods by team (\"\": none)")
	f.IntVar(&o.sample, "sample", 100, "how many of the most recently bound pods to place again with both sets (-1: all)")
	f.DurationVar(&o.placementTime, "placement-time", 2*time.Minute, "bound on the placement phase; the report says when it stopped early (0: none)")
	f.StringArrayVar(&o.failOn, "fail-on", nil, "exit 3 when a count crosses a bound, e.g. rejected-running>0, newly-stranded>0, moved-placements>10% (repeatable)")
	_ = cmd.MarkFlagRequired("scheduler-config")
	return cmd
}

func (o *rolloutOptions) run(cmd *cobra.Command, g *globalOptions) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	configSet := cmd.Flags().Changed("config")
	var objectPolicy *config.Policy
	if o.object != "" {
		if o.module != "" || configSet {
			return errors.New("--object names the whole candidate: leave out --module and --config")
		}
		p, err := readPolicyObject(o.object, nil)
		if err != nil {
			return err
		}
		if o.policy == "" {
			o.policy = p.Name
		} else if o.policy != p.Name {
			return fmt.Errorf("--object %s is the policy %q, not --policy %q", o.object, p.Name, o.policy)
		}
		objectPolicy = &p
	}
	if o.policy == "" {
		return errors.New("--policy names the policy the candidate replaces")
	}
	if o.module == "" && !configSet && objectPolicy == nil {
		return errors.New("name the candidate: --module NEW.wasm, --config STRING, both, or --object POLICY.yaml")
	}
	var gates []rollout.Gate
	for _, s := range o.failOn {
		gt, err := rollout.ParseGate(s)
		if err != nil {
			return err
		}
		gates = append(gates, gt)
	}
	profile, args, err := o.loadProfile(ctx, g)
	if err != nil {
		return err
	}
	if objectPolicy != nil {
		// Checked again under the limits the scheduler's args grant a
		// namespaced object (policyObjects.tenants), as the scheduler
		// checks it.
		p, err := readPolicyObject(o.object, &args.PolicyObjects.Tenants)
		if err != nil {
			return err
		}
		objectPolicy = &p
	}
	var moduleSHA string
	if o.module != "" {
		b, err := os.ReadFile(o.module)
		if err != nil {
			return fmt.Errorf("--module: %w", err)
		}
		sum := sha256.Sum256(b)
		moduleSHA = hex.EncodeToString(sum[:])
		if o.module, err = filepath.Abs(o.module); err != nil {
			return err
		}
	}

	// The snapshot and the clients the plugins read through.
	var snap *rollout.Snapshot
	var client kubernetes.Interface
	var rc *rest.Config
	if o.snapshot != "" {
		if snap, client, err = fileSnapshot(o.snapshot); err != nil {
			return err
		}
		if args.PolicyObjects.Enabled {
			fmt.Fprintln(os.Stderr, "note: --snapshot: policy objects are not read (policyObjects.enabled is ignored without a cluster)")
			args.PolicyObjects.Enabled = false
		}
		for _, p := range args.Policies {
			if p.Source.File == "" && !(p.Name == o.policy && o.module != "") {
				return fmt.Errorf("policy %q takes its module from %s, which --snapshot cannot read: run against the cluster (--kubeconfig), or point the policy at a file", p.Name, describeSource(p.Source))
			}
		}
	} else {
		if rc, err = restConfigFor(g); err != nil {
			return err
		}
		if client, err = kubernetes.NewForConfig(rc); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "reading nodes, pods and namespaces…")
		if snap, err = rollout.Take(ctx, client); err != nil {
			return err
		}
	}
	snapshot := snap.Cache()
	env := rollout.Env{Profile: profile, Args: args, Client: client, KubeConfig: rc, Snapshot: snapshot}
	opts := []wasmpolicy.Option{wasmpolicy.WithReadOnlyObjects(), wasmpolicy.WithInitialLoadTimeout(5 * time.Minute),
		wasmpolicy.WithLoadProgress(time.Second, progressPrinter(os.Stderr))}
	cur, dropped, err := rollout.NewSet(ctx, env, opts...)
	if err != nil {
		return err
	}
	defer func() { _ = cur.Close() }()
	edit := func(p *config.Policy) {
		if p.Name != o.policy {
			return
		}
		if objectPolicy != nil {
			*p = *objectPolicy.DeepCopy()
			return
		}
		if o.module != "" {
			p.Source, p.SHA256 = config.Source{File: o.module}, moduleSHA
		}
		if configSet {
			p.Config = o.config
		}
	}
	cand, _, err := rollout.NewSet(ctx, env, append(opts, wasmpolicy.WithPolicyEdit(edit))...)
	if err != nil {
		return err
	}
	defer func() { _ = cand.Close() }()
	cur.Start(ctx)
	cand.Start(ctx)
	curCfg, ok := cur.Plugin.PolicyConfig(o.policy)
	if !ok {
		return fmt.Errorf("--policy %q: the profile %s runs no policy of that name; it runs %s", o.policy, profile.SchedulerName, strings.Join(cur.Plugin.Policies(), ", "))
	}
	for name, set := range map[string]*rollout.Set{"current": cur, "candidate": cand} {
		if missing := set.Plugin.Unloaded(); len(missing) > 0 {
			return fmt.Errorf("the %s set has policies without a loaded module: %s", name, strings.Join(missing, "; "))
		}
	}
	candCfg, _ := cand.Plugin.PolicyConfig(o.policy)
	in := rollout.Input{
		Policy:        o.policy,
		Current:       versionOf(cur.Plugin, curCfg),
		Candidate:     versionOf(cand.Plugin, candCfg),
		TeamLabel:     o.teamLabel,
		Sample:        o.sample,
		PlacementTime: o.placementTime,
		NotEvaluated:  dropped,
	}
	// Progress: a counter on a terminal; in a pipeline's log, a line per
	// large phase and then every 5 s.
	prog := newProgress("")
	lastPhase, lastLine := "", time.Time{}
	in.Progress = func(phase string, done, total int) {
		if prog.on {
			prog.label = phase
			prog.update(done, total)
			return
		}
		if total >= 1000 && (phase != lastPhase || time.Since(lastLine) >= 5*time.Second) {
			fmt.Fprintf(os.Stderr, "%s: %d/%d\n", phase, done, total)
			lastPhase, lastLine = phase, time.Now()
		}
	}
	report, err := rollout.Compute(klog.NewContext(ctx, klog.Background()), in, snap, snapshot, cur, cand)
	prog.done()
	if err != nil {
		return err
	}
	if err := print(cmd.OutOrStdout(), g.output, report, func(tw *tabwriter.Writer) { rolloutTable(tw, report) }); err != nil {
		return err
	}
	var failed []string
	for _, gt := range gates {
		if holds, what := gt.Holds(report); holds {
			failed = append(failed, what)
		}
	}
	if len(failed) > 0 {
		return &gateError{msgs: failed}
	}
	return nil
}

// loadProfile reads the scheduler's config: the profile and its WasmPolicy
// args, validated, set up for this tool (its compilation cache, two
// instances per policy for the framework's two filter workers).
func (o *rolloutOptions) loadProfile(ctx context.Context, g *globalOptions) (*schedconfig.KubeSchedulerProfile, *config.WasmPolicyArgs, error) {
	prof, args, err := wasmPolicyProfile(ctx, g, o.schedulerConfig, o.profile)
	if err != nil {
		return nil, nil, err
	}
	args = args.DeepCopy()
	args.CompilationCacheDir = cacheDir()
	args.MaxInstancesPerPolicy = 2
	return prof, args, nil
}

// wasmPolicyProfile reads a KubeSchedulerConfiguration (a file, or
// configmap:NAMESPACE/NAME[/KEY]) and returns the profile named profile
// ("": the first) with a WasmPolicy pluginConfig, and its args, decoded,
// defaulted and validated as the scheduler reads them.
func wasmPolicyProfile(ctx context.Context, g *globalOptions, configPath, profile string) (*schedconfig.KubeSchedulerProfile, *config.WasmPolicyArgs, error) {
	path := configPath
	if ref, ok := strings.CutPrefix(path, "configmap:"); ok {
		var err error
		if path, err = configFromConfigMap(ctx, g, ref); err != nil {
			return nil, nil, err
		}
		defer os.Remove(path)
	}
	cfg, err := options.LoadConfigFromFile(klog.Background(), path)
	if err != nil {
		return nil, nil, err
	}
	for i := range cfg.Profiles {
		prof := &cfg.Profiles[i]
		if profile != "" && prof.SchedulerName != profile {
			continue
		}
		for _, pc := range prof.PluginConfig {
			if pc.Name != wasmpolicy.Name {
				continue
			}
			args, err := wasmpolicy.DecodeArgs(pc.Args)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: profile %s: %w", configPath, prof.SchedulerName, err)
			}
			if errs := validation.ValidateWasmPolicyArgs(nil, args); len(errs) > 0 {
				return nil, nil, fmt.Errorf("%s: profile %s: %w", configPath, prof.SchedulerName, errs.ToAggregate())
			}
			return prof, args, nil
		}
	}
	if profile != "" {
		return nil, nil, fmt.Errorf("%s: no profile %q with a WasmPolicy pluginConfig", configPath, profile)
	}
	return nil, nil, fmt.Errorf("%s: no profile has a WasmPolicy pluginConfig", configPath)
}

// configFromConfigMap writes the KubeSchedulerConfiguration held by a
// ConfigMap (NAMESPACE/NAME[/KEY]) to a temporary file.
func configFromConfigMap(ctx context.Context, g *globalOptions, ref string) (string, error) {
	parts := strings.Split(ref, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return "", fmt.Errorf("--scheduler-config configmap:%s: want configmap:NAMESPACE/NAME or configmap:NAMESPACE/NAME/KEY", ref)
	}
	client, err := clientFor(g)
	if err != nil {
		return "", err
	}
	cm, err := client.CoreV1().ConfigMaps(parts[0]).Get(ctx, parts[1], metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("--scheduler-config: %w", err)
	}
	key := ""
	switch {
	case len(parts) == 3:
		key = parts[2]
	case cm.Data["config.yaml"] != "":
		key = "config.yaml"
	case len(cm.Data) == 1:
		for k := range cm.Data {
			key = k
		}
	default:
		return "", fmt.Errorf("--scheduler-config: ConfigMap %s/%s has no config.yaml and %d keys; name one: configmap:%s/%s/KEY", parts[0], parts[1], len(cm.Data), parts[0], parts[1])
	}
	data, ok := cm.Data[key]
	if !ok {
		return "", fmt.Errorf("--scheduler-config: ConfigMap %s/%s has no key %q", parts[0], parts[1], key)
	}
	f, err := os.CreateTemp("", "kube-scheduler-config-*.yaml")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// readPolicyObject reads a SchedulingPolicy or ClusterSchedulingPolicy
// file and returns the policy it runs, checked as the scheduler checks it.
func readPolicyObject(path string, tenants *config.Tenants) (config.Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return config.Policy{}, fmt.Errorf("--object: %w", err)
	}
	var m map[string]interface{}
	if err := yaml.Unmarshal(b, &m); err != nil {
		return config.Policy{}, fmt.Errorf("--object %s: %w", path, err)
	}
	p, err := policyobjects.PolicyOf(&unstructured.Unstructured{Object: m}, nil, tenants)
	if err != nil {
		return config.Policy{}, fmt.Errorf("--object %s: %w", path, err)
	}
	return p, nil
}

// fileSnapshot reads a snapshot from a file, and a fake client serving its
// nodes and namespaces to the plugins' informers.
func fileSnapshot(path string) (*rollout.Snapshot, kubernetes.Interface, error) {
	nodes, pods, err := readObjects(path)
	if err != nil {
		return nil, nil, err
	}
	s := &rollout.Snapshot{Nodes: nodes, Pods: pods, TakenAt: time.Now()}
	var objs []runtime.Object
	seen := map[string]bool{}
	for _, p := range pods {
		if p.Namespace == "" {
			p.Namespace = "default"
		}
		if p.Spec.SchedulerName == "" {
			p.Spec.SchedulerName = v1.DefaultSchedulerName
		}
		if p.UID == "" { // the scheduler's caches key pods by UID
			p.UID = types.UID("snapshot/" + p.Namespace + "/" + p.Name)
		}
		if !seen[p.Namespace] {
			seen[p.Namespace] = true
			ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}
			s.Namespaces = append(s.Namespaces, ns)
			objs = append(objs, ns)
		}
	}
	// The client serves the plugins' informers, which need no pods (the
	// frameworks read pods from the snapshot): a copy of every pod in the
	// fake client and in each set's informer would double the memory.
	for _, n := range nodes {
		objs = append(objs, n)
	}
	return s, fake.NewClientset(objs...), nil
}

func versionOf(w *wasmpolicy.WasmPolicy, p config.Policy) rollout.Version {
	mode := string(p.Mode)
	if mode == "" {
		mode = string(config.ModeEnforce)
	}
	return rollout.Version{SHA256: w.Serving(p.Name), Source: describeSource(p.Source), Config: p.Config, Mode: mode}
}

func describeSource(s config.Source) string {
	switch {
	case s.File != "":
		return "file " + s.File
	case s.ConfigMap != nil:
		return fmt.Sprintf("configMap %s/%s key %s", s.ConfigMap.Namespace, s.ConfigMap.Name, s.ConfigMap.Key)
	case s.OCI != nil:
		return "oci " + s.OCI.Ref
	}
	return "(none)"
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func rolloutTable(tw *tabwriter.Writer, r *rollout.Report) {
	fmt.Fprintf(tw, "Rollout report: policy %s in profile %s\n", r.Policy, r.Profile)
	for _, v := range []struct {
		name string
		v    rollout.Version
	}{{"current", r.Current}, {"candidate", r.Candidate}} {
		fmt.Fprintf(tw, "  %-9s  module %s  config %q  %s  (%s)\n", v.name, short(v.v.SHA256), v.v.Config, v.v.Mode, v.v.Source)
	}
	at := r.Snapshot.TakenAt
	if r.Snapshot.ResourceVersion != "" {
		at += ", resourceVersion " + r.Snapshot.ResourceVersion
	}
	fmt.Fprintf(tw, "Snapshot: %d nodes, %d running and %d pending pods of the profile (%s)\n", r.Snapshot.Nodes, r.Snapshot.RunningPods, r.Snapshot.PendingPods, at)
	if len(r.NotEvaluated) > 0 {
		fmt.Fprintf(tw, "Not evaluated (plugins this tool does not have): %s\n", strings.Join(r.NotEvaluated, ", "))
	}

	fmt.Fprintf(tw, "\nRunning pods the candidate rejects on their node: %d of %d", r.Summary.RejectedRunning, r.Snapshot.RunningPods)
	if r.Summary.RejectedRunningAlready > 0 {
		fmt.Fprintf(tw, " (%d rejected by the current version too)", r.Summary.RejectedRunningAlready)
	}
	fmt.Fprintln(tw)
	if len(r.RejectedRunning) > 0 {
		row(tw, "  PODS", "NAMESPACE", "TEAM", "REASON")
		for _, gr := range r.RejectedRunningGroups {
			row(tw, fmt.Sprintf("  %d", gr.Pods), gr.Namespace, orDash(gr.Team), gr.Reason)
		}
		fmt.Fprintln(tw)
		row(tw, "  NAMESPACE", "POD", "NODE", "TEAM", "NOW")
		for _, p := range r.RejectedRunning {
			row(tw, "  "+p.Namespace, p.Name, p.Node, orDash(p.Team), p.Current)
		}
	}

	fmt.Fprintf(tw, "\nPending pods whose verdicts change: %d of %d (%d newly schedulable, %d newly stranded)\n",
		r.Summary.ChangedPending, r.Snapshot.PendingPods, r.Summary.NewlySchedulable, r.Summary.NewlyStranded)
	if len(r.Pending) > 0 {
		row(tw, "  NAMESPACE", "POD", "TEAM", "CHANGE", "FEASIBLE NODES", "POLICY NOW", "POLICY CANDIDATE")
		for _, p := range r.Pending {
			row(tw, "  "+p.Namespace, p.Name, orDash(p.Team), p.Change, fmt.Sprintf("%d → %d", p.Current.FeasibleNodes, p.Candidate.FeasibleNodes),
				reasons(p.Current.PolicyRejects), reasons(p.Candidate.PolicyRejects))
		}
	}

	pl := r.Placements
	fmt.Fprintf(tw, "\nPlacements: %d of %d bound pods placed again, the most recent first; %d would move", pl.Sampled, pl.Eligible, pl.Moved)
	if pl.Truncated {
		fmt.Fprint(tw, " (stopped at --placement-time)")
	}
	fmt.Fprintln(tw)
	if pl.Moved > 0 {
		row(tw, "  NAMESPACE", "POD", "BOUND TO", "NOW (SCORE)", "CANDIDATE (SCORE)", "SCORE MOVED")
		for _, p := range pl.Pods {
			if p.Moved {
				row(tw, "  "+p.Namespace, p.Name, p.BoundNode, choice(p.Current), choice(p.Candidate), delta(p.ScoreDelta))
			}
		}
	}

	c := r.Cost
	fmt.Fprintf(tw, "\nCost of %s per node (guest time, verdict reuse included): filter %s now, %s candidate", r.Policy,
		nanos(c.Current.FilterNanosPerNode), nanos(c.Candidate.FilterNanosPerNode))
	if c.FilterRatio > 0 {
		fmt.Fprintf(tw, " (%.2f×)", c.FilterRatio)
	}
	if c.Current.ScoreCalls > 0 || c.Candidate.ScoreCalls > 0 {
		fmt.Fprintf(tw, "; score %s now, %s candidate", nanos(c.Current.ScoreNanosPerNode), nanos(c.Candidate.ScoreNanosPerNode))
	}
	took := "under a millisecond"
	if r.DurationSeconds > 0 {
		took = dur(time.Duration(r.DurationSeconds * float64(time.Second)))
	}
	fmt.Fprintf(tw, "\nThe report took %s (the snapshot not counted).\n", took)
}

func delta(d *int64) string {
	if d == nil {
		return "-"
	}
	return fmt.Sprintf("%+d", *d)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func reasons(rs []rollout.ReasonCount) string {
	if len(rs) == 0 {
		return "rejects no node"
	}
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%d: %s", r.Nodes, r.Reason))
	}
	return strings.Join(parts, "; ")
}

func choice(c rollout.Choice) string {
	switch len(c.Nodes) {
	case 0:
		return "(none feasible)"
	case 1:
		return fmt.Sprintf("%s (%d)", c.Nodes[0], c.Score)
	case 2, 3:
		return fmt.Sprintf("%s (%d, tied)", strings.Join(c.Nodes, " "), c.Score)
	}
	return fmt.Sprintf("%s and %d more (%d, tied)", strings.Join(c.Nodes[:2], " "), len(c.Nodes)-2, c.Score)
}

func nanos(ns float64) string {
	if ns == 0 {
		return "-"
	}
	return dur(time.Duration(ns))
}
